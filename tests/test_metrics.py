"""weakspot.metrics: ECE and the reliability table against analytic answers."""

from __future__ import annotations

import numpy as np
import pytest

from weakspot.errors import ConfigError, DataError
from weakspot.metrics import accuracy, expected_calibration_error, reliability_diagram, reliability_table


def _binary(conf, n, n_correct):
    """n predictions of class 0 with confidence conf, the first n_correct of them right."""
    p = np.tile([conf, 1 - conf], (n, 1))
    y = np.r_[np.zeros(n_correct, int), np.ones(n - n_correct, int)]
    return p, y


def test_perfectly_calibrated_exact_is_zero():
    # three confidence levels, each right exactly that share of the time
    parts = [_binary(0.6, 50, 30), _binary(0.8, 50, 40), _binary(0.92, 100, 92)]
    p = np.vstack([a for a, _ in parts])
    y = np.concatenate([b for _, b in parts])
    assert expected_calibration_error(p, y) == pytest.approx(0.0, abs=1e-12)


def test_perfectly_calibrated_sampled_is_near_zero():
    rng = np.random.default_rng(0)
    n, k = 200_000, 4
    logits = rng.normal(scale=2.0, size=(n, k))
    p = np.exp(logits) / np.exp(logits).sum(1, keepdims=True)
    y = (p.cumsum(1) < rng.random((n, 1))).sum(1)  # labels drawn from p itself: calibrated by construction
    assert expected_calibration_error(p, y) < 0.01
    assert expected_calibration_error(p, (y + 1) % k) > 0.3  # and the same p with shifted labels is not


def test_overconfident_equals_analytic_gap():
    p, y = _binary(0.9, 10, 6)  # 90% confident, 60% right
    assert expected_calibration_error(p, y) == pytest.approx(0.3)
    # two bins: 100 at conf 0.95 with acc 0.5 (gap .45) and 300 at conf 0.55 with acc 0.55 (gap 0)
    a, b = _binary(0.95, 100, 50), _binary(0.55, 300, 165)
    p, y = np.vstack([a[0], b[0]]), np.r_[a[1], b[1]]
    assert expected_calibration_error(p, y) == pytest.approx(0.25 * 0.45)
    # underconfidence counts too: conf 0.6, always right -> 0.4
    p, y = _binary(0.6, 20, 20)
    assert expected_calibration_error(p, y) == pytest.approx(0.4)


def test_reliability_table_bins_and_counts():
    a, b = _binary(0.95, 100, 50), _binary(0.55, 300, 165)
    p, y = np.vstack([a[0], b[0]]), np.r_[a[1], b[1]]
    t = reliability_table(p, y, n_bins=10)
    assert list(t.columns) == ["bin_lo", "bin_hi", "confidence", "accuracy", "count"]
    assert len(t) == 10 and t["count"].sum() == 400
    assert t.loc[9, "count"] == 100 and t.loc[9, "confidence"] == pytest.approx(0.95)
    assert t.loc[9, "accuracy"] == pytest.approx(0.5)
    assert t.loc[5, "count"] == 300 and t.loc[5, "accuracy"] == pytest.approx(0.55)
    assert t["accuracy"].isna().sum() == 8 and (t.loc[t["count"] == 0, "confidence"].isna()).all()
    ece_from_table = float(np.nansum(t["count"] * (t["accuracy"] - t["confidence"]).abs()) / 400)
    assert ece_from_table == pytest.approx(expected_calibration_error(p, y, n_bins=10))


def test_bins_are_right_closed():
    # a confidence exactly at 0.6 belongs to (0.5, 0.6], the bin whose upper edge it is
    p, y = _binary(0.6, 4, 4)
    t = reliability_table(p, y, n_bins=5)
    assert t["count"].tolist() == [0, 0, 4, 0, 0]


def test_accuracy_and_ece_bounds():
    rng = np.random.default_rng(1)
    p = rng.dirichlet(np.ones(3), size=500)
    y = rng.integers(0, 3, 500)
    assert accuracy(p, y) == pytest.approx(np.mean(p.argmax(1) == y))
    assert 0.0 <= expected_calibration_error(p, y) <= 1.0


def test_reliability_diagram_figure():
    p, y = _binary(0.9, 10, 6)
    fig = reliability_diagram(p, y, n_bins=10, title="demo")
    title = fig.axes[0].get_title()
    assert "demo" in title and "ECE = 0.3000" in title
    assert len(fig.axes) == 2
    # one accuracy bar, one red overconfidence gap bar on the upper axes, 10 count bars below
    assert len(fig.axes[0].patches) == 2 and len(fig.axes[1].patches) == 10
    assert [t.get_text() for t in fig.axes[0].texts] == ["10"]  # the bin's count


@pytest.mark.parametrize(
    "p, y, err",
    [
        (np.ones(3), np.zeros(3, int), DataError),
        (np.full((3, 2), 0.5), np.zeros(4, int), DataError),
        (np.full((3, 2), 0.5), np.array([0, 1, 2]), DataError),
        (np.array([[np.nan, 1.0]]), np.array([0]), DataError),
    ],
)
def test_bad_inputs(p, y, err):
    with pytest.raises(err):
        expected_calibration_error(p, y)


def test_bad_bins():
    with pytest.raises(ConfigError, match="n_bins"):
        expected_calibration_error(np.full((2, 2), 0.5), np.array([0, 1]), n_bins=0)


def test_reliability_bins_on_a_sub_interval_is_the_one_binning():
    from weakspot.gad.sdr import reliability
    from weakspot.metrics import reliability_bins

    edges, count, conf_sum, corr_sum = reliability_bins([0.5, 0.6, 0.61, 1.0], [1, 0, 1, 1], 5, lo=0.5)
    np.testing.assert_allclose(edges, [0.5, 0.6, 0.7, 0.8, 0.9, 1.0])
    assert count.tolist() == [2, 1, 0, 0, 1]  # bins are (lo, hi]; lo itself goes to the first bin
    assert corr_sum.tolist() == [1.0, 1.0, 0.0, 0.0, 1.0]
    r = reliability(np.array([0.5, 0.6, 0.61, 1.0]), np.array([1, 0, 1, 1]), bins=5)
    assert r["count"].tolist() == count.tolist() and np.isnan(r["accuracy"][2]) and r["accuracy"][0] == 0.5
    with pytest.raises(ConfigError, match="lo"):
        reliability_bins([0.5], [1], 5, lo=1.0)
