"""weakspot.history: the store of past audits, and the comparison that flags regressions by params.yaml's rules."""

import json

import pandas as pd
import pytest

from weakspot.config import HistoryParams
from weakspot.history import SCHEMA, audits, compare, format_comparison, load, record, snapshot


def _metrics(root, acc, pairs, sdr=1.0):
    (root / "metrics/train").mkdir(parents=True, exist_ok=True)
    (root / "metrics/corner").mkdir(parents=True, exist_ok=True)
    (root / "metrics/gad").mkdir(parents=True, exist_ok=True)
    (root / "metrics/train/digits.json").write_text(json.dumps({"test_accuracy": acc, "n_test": 268}))
    (root / "metrics/corner/digits.json").write_text(json.dumps({"top_class_pairs": pairs}))
    (root / "metrics/gad/phoneme.json").write_text(json.dumps({"phoneme": {"sdr": sdr, "per_seed": [1, 2]}}))


RULES = HistoryParams.model_validate({"rules": [
    {"metric": "train/*:test_accuracy", "worse": "down", "tolerance": 0.01},
    {"metric": "gad/*:*.sdr", "worse": "up", "tolerance": 0.2, "relative": True},
    {"metric": "corner/*:top_class_pairs", "worse": "new"}]}).rules


def test_snapshot_flattens_every_metric_file_by_stage_target_and_key(tmp_path):
    _metrics(tmp_path, 0.99, [["3", "9", 50]])
    s = snapshot(tmp_path)
    assert s["train/digits:test_accuracy"] == 0.99 and s["gad/phoneme:phoneme.sdr"] == 1.0
    assert s["corner/digits:top_class_pairs"] == [["3", "9", 50]]


def test_a_planted_regression_is_flagged_and_small_moves_are_not(tmp_path):
    _metrics(tmp_path, 0.99, [["3", "9", 50]], sdr=1.0)
    first = record(tmp_path, "history")
    df = pd.read_parquet(first["file"])
    assert list(df.columns) == list(SCHEMA) and (df["audit_id"] == first["audit_id"]).all()
    # the target replaced by a weaker model: accuracy -5 points, SDR +50%, a new class pair; counts of a known pair
    # changing (50 -> 40) is not a new pair
    _metrics(tmp_path, 0.94, [["3", "9", 40], ["4", "6", 21]], sdr=1.5)
    import time

    time.sleep(1.1)  # audit ids are to the second
    second = record(tmp_path, "history")
    files = audits(tmp_path, "history")
    assert [f.stem for f in files] == [first["audit_id"], second["audit_id"]]
    rows = {r["metric"]: r for r in compare(load(files[0]), load(files[1]), RULES)}
    assert rows["train/digits:test_accuracy"]["regression"] and rows["train/digits:test_accuracy"]["change"] == \
        pytest.approx(-0.05)
    assert rows["gad/phoneme:phoneme.sdr"]["regression"]
    assert rows["corner/digits:top_class_pairs"]["regression"] and \
        rows["corner/digits:top_class_pairs"]["change"] == [["4", "6"]]
    text = format_comparison(list(rows.values()), files[0].stem, files[1].stem)
    assert "3 regression(s)" in text and "REGRESSION: train/digits:test_accuracy" in text
    # within tolerance, or the better way: no regression
    calm = compare({"train/d:test_accuracy": 0.99, "gad/p:x.sdr": 1.0}, {"train/d:test_accuracy": 0.985,
                                                                          "gad/p:x.sdr": 0.5}, RULES)
    assert not any(r["regression"] for r in calm)


def test_a_metric_missing_on_one_side_is_reported_not_flagged():
    rows = compare({"train/a:test_accuracy": 0.9}, {"train/b:test_accuracy": 0.5}, RULES)
    notes = {r["metric"]: r["note"] for r in rows}
    assert notes == {"train/a:test_accuracy": "missing in the new audit", "train/b:test_accuracy": "new metric"}
    assert not any(r["regression"] for r in rows)


def test_audit_exits_3_on_a_regression_and_0_otherwise(tmp_path, monkeypatch):
    from weakspot import cli

    monkeypatch.chdir(tmp_path)
    (tmp_path / "params.yaml").write_text(json.dumps({"history": {"dir": "history", "rules": [
        {"metric": "train/*:test_accuracy", "worse": "down", "tolerance": 0.01}]}}))
    _metrics(tmp_path, 0.99, [])
    assert cli._record_and_compare() == 0  # the first audit: nothing to compare with
    import time

    time.sleep(1.1)
    _metrics(tmp_path, 0.99, [])
    assert cli._record_and_compare() == 0
    time.sleep(1.1)
    _metrics(tmp_path, 0.90, [])
    assert cli._record_and_compare() == 3
    comps = sorted((tmp_path / "history").glob("*.comparison.json"))
    assert len(comps) == 3 and json.loads(comps[-1].read_text())["rows"][0]["regression"] is True
