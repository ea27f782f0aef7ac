"""ops.verdict.gates and ops.verdict.files: absolute conditions checked after every audit (the first one too), and the
verdict written for CI (junit.xml) and a pull request (summary.md), on planted metrics and findings."""

import json
import xml.etree.ElementTree as ET

import pandas as pd
import pytest
from conftest import declare

import tasks.settings  # noqa: F401  (registers the gates section)
from ops.verdict.gates import check_gates, confirmed_weak_spots
from tasks.settings import GatesParams
from weakspot.errors import ConfigError

METRICS = {"train/digits:test_accuracy": 0.95, "train/scenes:test_accuracy": 0.72, "gad/phoneme:name": "x"}


def _gates(*conds, fail=True):
    return GatesParams.model_validate({"fail": fail, "conditions": list(conds)})


def _findings(root, target, method, lifts, confirmed, declared=True):
    """A findings table planted in ``root/findings``, declared by ``root/dvc.yaml`` unless not ``declared``."""
    if declared:
        declare(root, f"findings/{target}/{method}.parquet")
    root = root / "findings"
    (root / target).mkdir(parents=True, exist_ok=True)
    pd.DataFrame(
        {
            "weak_spot": [f"spot {i}" for i in range(len(lifts))],
            "lift": lifts,
            "lift_lo": [v / 2 for v in lifts],
            "lift_hi": [v * 2 for v in lifts],
            "confirmed": confirmed,
            "lift_lo_adjusted": [v / 2 for v in lifts],
            "n_confirm": [10] * len(lifts),
        }
    ).to_parquet(root / target / f"{method}.parquet")


def test_metric_gates_hold_fail_and_never_pass_silently():
    rows = check_gates(
        _gates(
            {"metric": "train/*:test_accuracy", "op": ">=", "value": 0.7},
            {"metric": "train/*:test_accuracy", "op": ">=", "value": 0.9},
            {"metric": "train/typo:test_accuracy", "op": ">", "value": 0},
            {"metric": "gad/phoneme:name", "op": "==", "value": 1, "name": "named"},
        ),
        METRICS,
    )
    assert [r["passed"] for r in rows] == [True, False, False, False]
    assert rows[0]["numbers"].startswith("2 of 2 hold")
    assert rows[1]["numbers"] == "1 of 2 fail: train/scenes:test_accuracy = 0.72"  # the numbers that failed
    assert "no metric matches" in rows[2]["numbers"] and "not a number" in rows[3]["numbers"]
    assert rows[3]["condition"] == "named" and rows[1]["condition"] == "train/*:test_accuracy >= 0.9"


def test_weak_spot_gates_count_only_confirmed_findings(tmp_path):
    _findings(tmp_path, "digits", "corner", [4.0, 9.0], [True, False])  # lift 9 is not confirmed: it never counts
    _findings(tmp_path, "scenes", "hda", [2.5], [True])
    # a table of a stage dvc.yaml no longer declares (a removed target) is no part of the audit
    _findings(tmp_path, "removed", "corner", [50.0], [True], declared=False)
    spots = confirmed_weak_spots(tmp_path)
    assert [(s["target"], s["method"], s["lift"]) for s in spots] == [("digits", "corner", 4.0), ("scenes", "hda", 2.5)]
    rows = check_gates(
        _gates(
            {"weak_spots": {"max_lift": 3}},
            {"weak_spots": {"max_lift": 5}},
            {"weak_spots": {"max_lift": 3, "methods": "hda"}},
            {"weak_spots": {"max_count": 1}},
        ),
        {},
        tmp_path,
    )
    assert [r["passed"] for r in rows] == [False, True, True, False]
    assert "1 confirmed weak spot(s) with lift above 3" in rows[0]["numbers"] and "highest 4" in rows[0]["numbers"]
    assert "2 confirmed weak spot(s), at most 1 allowed" == rows[3]["numbers"]


@pytest.mark.parametrize(
    "bad, match",
    [
        ({"metric": "a:b", "op": ">="}, "needs metric, op and value"),
        ({"metric": "a:b", "op": "=>", "value": 1}, "op"),
        ({"weak_spots": {}}, "max_lift or max_count"),
        ({"weak_spots": {"max_lift": 2}, "metric": "a:b"}, "not both"),
    ],
)
def test_malformed_gates_are_named(tmp_path, bad, match):
    from weakspot.config import check_params

    (tmp_path / "params.yaml").write_text(json.dumps({"gates": {"conditions": [bad]}}))
    with pytest.raises(ConfigError, match=match):
        check_params(tmp_path / "params.yaml")


def _audit_once(tmp_path, gate_value):
    from ops.engine.audit import record_and_compare

    (tmp_path / "params.yaml").write_text(
        json.dumps(
            {
                "history": {
                    "dir": "history",
                    "rules": [{"metric": "train/*:test_accuracy", "worse": "down", "tolerance": 0.01}],
                },
                "gates": {
                    "conditions": [
                        {"metric": "train/digits:test_accuracy", "op": ">=", "value": gate_value},
                        {"weak_spots": {"max_lift": 10}},
                    ]
                },
            }
        )
    )
    (tmp_path / "metrics/train").mkdir(parents=True, exist_ok=True)
    (tmp_path / "metrics/train/digits.json").write_text(json.dumps({"test_accuracy": 0.95}))
    (tmp_path / "dvc.yaml").unlink(missing_ok=True)
    declare(tmp_path, "metrics/train/digits.json")
    _findings(tmp_path, "digits", "corner", [4.0], [True])
    _findings(tmp_path, "removed", "corner", [4.0], [True], declared=False)  # not in junit.xml nor summary.md
    return record_and_compare()


def test_the_first_audit_fails_on_a_gate_and_says_so_in_junit_and_summary(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert _audit_once(tmp_path, 0.99) == 3  # the first audit: no regression possible, the gate fails it
    junit = ET.parse(tmp_path / "reports/junit.xml").getroot()
    assert junit.get("tests") == "3" and junit.get("failures") == "1"  # 2 gates + corner on digits
    fail = junit.find(".//testcase/failure")
    assert "train/digits:test_accuracy = 0.95" in fail.get("message")
    assert fail.get("message").startswith("train/digits:test_accuracy >= 0.99")
    summary = (tmp_path / "reports/summary.md").read_text()
    assert summary.startswith("## weakspot audit: FAIL") and "`train/digits:test_accuracy >= 0.99`" in summary
    assert "| digits | corner | spot 0 (fails on natural inputs) | 4.00 (at least 2.00) |" in summary, summary
    assert "first audit" in summary
    assert "removed" not in summary and "removed" not in ET.tostring(junit, encoding="unicode")  # not declared
    comp = json.loads(sorted((tmp_path / "history").glob("*.comparison.json"))[-1].read_text())
    assert [g["passed"] for g in comp["gates"]] == [False, True]
    import time

    time.sleep(1.1)  # audit ids are to the second
    assert _audit_once(tmp_path, 0.9) == 0  # the gate relaxed: the audit passes, the rule compared too
    summary = (tmp_path / "reports/summary.md").read_text()
    assert summary.startswith("## weakspot audit: PASS") and "3 of 3 conditions hold" in summary
    junit = ET.parse(tmp_path / "reports/junit.xml").getroot()
    assert junit.get("tests") == "4" and junit.get("failures") == "0"  # + the regression rule's metric


def test_gates_fail_false_reports_without_failing_the_audit(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "params.yaml").write_text(
        json.dumps(
            {
                "gates": {
                    "fail": False,
                    "conditions": [{"metric": "train/digits:test_accuracy", "op": ">=", "value": 0.99}],
                }
            }
        )
    )
    (tmp_path / "metrics/train").mkdir(parents=True)
    (tmp_path / "metrics/train/digits.json").write_text(json.dumps({"test_accuracy": 0.95}))
    declare(tmp_path, "metrics/train/digits.json")
    from ops.engine.audit import record_and_compare

    assert record_and_compare() == 0
    assert (tmp_path / "reports/summary.md").read_text().startswith("## weakspot audit: FAIL")


def test_a_method_that_found_no_weak_spot_passes_in_junit_with_its_words():
    """Issue 47: finding nothing on a good model was a skipped 'not trusted' case; it is the answer."""
    import pandas as pd

    from ops.verdict.files import junit_xml
    from weakspot.report.view import control_verdict

    clear = control_verdict(pd.DataFrame({"n_confirm": [30, 40], "confirmed": [False, False], "family": [2, 2]}))
    assert clear["kind"] == "clear" and clear["text"].startswith("Found no weak spot: none of the 2 candidate(s)")
    methods = [
        {"method": "segments", "target": "digits", "passed": True, "text": clear["text"]},
        {"method": "gad", "target": "phoneme", "passed": True, "text": "Found 1 weak spot(s)"},
    ]
    root = ET.fromstring(junit_xml({"gates": [], "rows": []}, methods))
    assert root.get("failures") == "0" and root.get("tests") == "2" and not root.findall(".//skipped")
    out = root.find("testsuite[@name='methods']/testcase[@name='digits']/system-out")
    assert out is not None and out.text.startswith("Found no weak spot")
