"""weakspot.fmt: prose that states a metric formats the stored value, so the two never disagree in the last digit."""

from weakspot.fmt import rounded, stored


def test_stored_prose_agrees_with_the_metric_where_the_raw_value_would_not():
    raw = 0.0027253  # stored to 6 decimals as 0.002725, which is "0.00272" at 3 significant digits
    assert f"{raw:.3g}" == "0.00273"
    assert f"{stored(raw, 6):.3g}" == f"{rounded(raw, 6):.3g}" == "0.00272"


def test_stored_keeps_a_value_that_is_not_finite():
    assert stored(float("inf")) == float("inf")
    assert stored(float("nan")) != stored(float("nan"))
