"""weakspot.findings: every finding carries the evidence columns, unchecked ones say so and are never confirmed."""

import pandas as pd
import pytest

from weakspot.errors import DataError
from weakspot.evidence import COLUMNS, compare
from weakspot.findings import UNCHECKED, normalise

ROW = {
    "weak_spot": "a",
    "kind": "x",
    "severity": 1.0,
    "severity_meaning": "m",
    "label": "",
    "prediction": "",
    "confidence": 0.5,
}


def test_a_method_that_checks_some_rows_and_not_others_gets_the_evidence_columns_on_every_row():
    ev = compare(failures=20, n_confirm=30, control_failures=4, n_control=30)
    out = normalise(pd.DataFrame([ROW, {**ROW, "weak_spot": "b", **ev.columns(), "confirmation": "held out"}]))
    assert set(COLUMNS) | {"confirmation"} <= set(out.columns)
    unchecked, checked = out.iloc[0], out.iloc[1]
    assert (
        unchecked["n_confirm"] == 0
        and not unchecked["confirmed"]
        and unchecked["confirmation"] == UNCHECKED["confirmation"]
    )
    assert checked["confirmed"] and checked["lift"] == pytest.approx(5.0) and checked["confirmation"] == "held out"
    assert out["n_confirm"].dtype == "int64" and out["confirmed"].dtype == bool


def test_a_nan_severity_is_refused():
    with pytest.raises(DataError, match="NaN severity"):
        normalise(pd.DataFrame([{**ROW, "severity": float("nan")}]))


def test_a_lift_interval_never_rounds_onto_1():
    from weakspot.fmt import interval

    assert interval(1.3, 5.83) == "1.30-5.83"
    assert interval(1.001, 2.5) == "1.001-2.50"  # two decimals would read 1.00: a confirmed lift would look unconfirmed
    assert interval(0.999, 1.0) == "0.999-1.00"
    assert interval(0.45, float("inf")) == "0.45-inf"


def test_the_evidence_sentence_says_when_too_few_inputs_fall_inside():
    from weakspot.evidence import MIN_CONFIRM, compare

    ev = compare(1, 1, 0, 1)
    assert not ev.confirmed and "too few inside to confirm" in ev.sentence() and str(MIN_CONFIRM) in ev.sentence()
    ok = compare(38, 50, 6, 50)
    assert ok.confirmed and ok.sentence().startswith(
        "38 of 50 held-out inputs fail inside, 6 of 50 in the control: lift"
    )
