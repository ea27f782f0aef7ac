"""ops.verdict.history: the store of past audits, and the comparison that flags regressions by params.yaml's rules."""

import json

import pandas as pd
import pytest
from conftest import declare

from ops.verdict.history import SCHEMA, audits, compare, format_comparison, load, record, snapshot
from tasks.settings import HistoryParams

#: The planted audit's outputs, as its dvc.yaml declares them (every reader reads only those: tasks/manifest.py).
DECLARED = ("metrics/train/digits.json", "plots/train/digits", "metrics/corner/digits.json", "metrics/gad/phoneme.json")


def _metrics(root, acc, pairs, sdr=1.0):
    if not (root / "dvc.yaml").is_file():
        declare(root, *DECLARED)
    (root / "metrics/train").mkdir(parents=True, exist_ok=True)
    (root / "metrics/corner").mkdir(parents=True, exist_ok=True)
    (root / "metrics/gad").mkdir(parents=True, exist_ok=True)
    (root / "metrics/train/digits.json").write_text(json.dumps({"test_accuracy": acc, "n_test": 268}))
    (root / "metrics/corner/digits.json").write_text(json.dumps({"top_class_pairs": pairs}))
    (root / "metrics/gad/phoneme.json").write_text(json.dumps({"phoneme": {"sdr": sdr, "per_seed": [1, 2]}}))


RULES = HistoryParams.model_validate(
    {
        "rules": [
            {"metric": "train/*:test_accuracy", "worse": "down", "tolerance": 0.01},
            {"metric": "gad/*:*.sdr", "worse": "up", "tolerance": 0.2, "relative": True},
            {"metric": "corner/*:top_class_pairs", "worse": "new"},
        ]
    }
).rules


def test_snapshot_flattens_every_metric_file_by_stage_target_and_key(tmp_path):
    _metrics(tmp_path, 0.99, [["3", "9", 50]])
    s = snapshot(tmp_path)
    assert s["train/digits:test_accuracy"] == 0.99 and s["gad/phoneme:phoneme.sdr"] == 1.0
    assert s["corner/digits:top_class_pairs"] == [["3", "9", 50]]


def test_snapshot_reads_every_detail_from_the_results_file_beside_a_headline(tmp_path):
    _metrics(tmp_path, 0.99, [["3", "9", 50]])
    (tmp_path / "plots/train/digits").mkdir(parents=True)
    (tmp_path / "plots/train/digits/results.json").write_text(
        json.dumps({"test_accuracy": 0.99, "n_test": 268, "per_class_test_accuracy": {"8": 0.91}})
    )
    s = snapshot(tmp_path)
    assert s["train/digits:per_class_test_accuracy.8"] == 0.91 and s["train/digits:test_accuracy"] == 0.99
    assert s["gad/phoneme:phoneme.sdr"] == 1.0  # a stage without a results file: its metrics file


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
    assert rows["train/digits:test_accuracy"]["regression"] and rows["train/digits:test_accuracy"][
        "change"
    ] == pytest.approx(-0.05)
    assert rows["gad/phoneme:phoneme.sdr"]["regression"]
    assert rows["corner/digits:top_class_pairs"]["regression"] and rows["corner/digits:top_class_pairs"]["change"] == [
        ["4", "6"]
    ]
    text = format_comparison(list(rows.values()), files[0].stem, files[1].stem)
    assert "3 regression(s)" in text and "REGRESSION: train/digits:test_accuracy" in text
    # within tolerance, or the better way: no regression
    calm = compare(
        {"train/d:test_accuracy": 0.99, "gad/p:x.sdr": 1.0}, {"train/d:test_accuracy": 0.985, "gad/p:x.sdr": 0.5}, RULES
    )
    assert not any(r["regression"] for r in calm)


def test_a_metric_missing_on_one_side_is_reported_not_flagged():
    rows = compare({"train/a:test_accuracy": 0.9}, {"train/b:test_accuracy": 0.5}, RULES)
    notes = {r["metric"]: r["note"] for r in rows}
    assert notes == {"train/a:test_accuracy": "missing in the new audit", "train/b:test_accuracy": "new metric"}
    assert not any(r["regression"] for r in rows)


def test_a_rule_can_exclude_what_its_pattern_also_matches():
    rules = HistoryParams.model_validate(
        {"rules": [{"metric": "gad/*:*.sdr.gad", "exclude": "*.per_seed.*", "worse": "up", "tolerance": 0.2}]}
    ).rules
    before = {"gad/p:p.sdr.gad": 1.0, "gad/p:p.per_seed.0.sdr.gad": 1.0}
    after = {"gad/p:p.sdr.gad": 1.1, "gad/p:p.per_seed.0.sdr.gad": 9.0}
    assert [(r["metric"], r["regression"]) for r in compare(before, after, rules)] == [("gad/p:p.sdr.gad", False)]


def test_since_last_compares_the_recorded_audit_with_the_one_before_and_draws_the_trend(tmp_path):
    import time

    from ops.verdict.history import since_last
    from tasks.trend import trend_figure
    from weakspot.report.html import render_report

    _metrics(tmp_path, 0.99, [["3", "9", 50]])
    record(tmp_path, "history")
    time.sleep(1.1)
    _metrics(tmp_path, 0.90, [["3", "9", 50], ["4", "9", 20]])
    record(tmp_path, "history")
    since = since_last(tmp_path, "history", RULES)
    assert since["recorded"] and since["n_audits"] == 2 and since["previous"] == audits(tmp_path)[0].stem
    bad = {r["metric"] for r in since["rows"] if r["regression"]}
    assert bad == {"train/digits:test_accuracy", "corner/digits:top_class_pairs"}
    assert since["trend"]["train/digits:test_accuracy"] == [0.99, 0.90]
    assert trend_figure(since) is not None
    page = render_report([], figures={}, tables={}, metrics={}, since=since)
    assert "Since the last audit" in page and "2 regressions among" in page and page.count("REGRESSION") >= 2

    # metrics from a run the history did not record (dvc repro by hand): compared with the latest recorded audit
    _metrics(tmp_path, 0.95, [["3", "9", 50], ["4", "9", 20]])
    since = since_last(tmp_path, "history", RULES)
    assert not since["recorded"] and since["previous"] == audits(tmp_path)[-1].stem
    assert since["times"][-1] == "this run (not recorded)" and since["trend"]["train/digits:test_accuracy"][-1] == 0.95
    assert not any(r["regression"] for r in since["rows"])  # 0.90 -> 0.95 is better


def test_an_empty_history_says_so_in_the_report(tmp_path):
    from ops.verdict.history import since_last
    from weakspot.report.html import render_report

    _metrics(tmp_path, 0.99, [])
    since = since_last(tmp_path, "history", RULES)
    assert since["n_audits"] == 0 and not since["rows"]
    assert "no audit recorded yet" in render_report([], figures={}, tables={}, metrics={}, since=since)


def test_each_audit_keeps_its_params_and_lock_and_is_found_by_id_prefix_or_last(tmp_path):
    from weakspot.errors import DataError
    from ops.verdict.history import find_audit

    (tmp_path / "params.yaml").write_text("device: cpu\n")
    (tmp_path / "dvc.lock").write_text("schema: '2.0'\nstages: {}\n")
    _metrics(tmp_path, 0.99, [])
    rec = record(tmp_path, "history")
    found = find_audit(tmp_path, "history", rec["audit_id"][:10])
    assert found["audit_id"] == rec["audit_id"] and found["lock_sha256"] == rec["lock_sha256"]
    assert open(found["params"]).read() == "device: cpu\n" and "stages" in open(found["lock"]).read()
    assert find_audit(tmp_path, "history", "last")["audit_id"] == rec["audit_id"]
    with pytest.raises(DataError, match="not found.*recent audits"):
        find_audit(tmp_path, "history", "1999")


def test_a_stage_dvc_yaml_no_longer_declares_is_in_no_snapshot_comparison_or_trend(tmp_path):
    """A target removed from params.yaml: its metrics file may still be on disk (DVC leaves the outputs of stages
    that are gone), but it is no part of today's audit, and a past audit's value of it is no "missing" metric."""
    import time

    from ops.verdict.history import since_last

    _metrics(tmp_path, 0.99, [])
    declare(tmp_path, "metrics/train/gone.json")
    (tmp_path / "metrics/train/gone.json").write_text(json.dumps({"test_accuracy": 0.5}))
    assert snapshot(tmp_path)["train/gone:test_accuracy"] == 0.5
    record(tmp_path, "history")
    time.sleep(1.1)  # audit ids are to the second
    (tmp_path / "dvc.yaml").unlink()
    _metrics(tmp_path, 0.99, [])  # dvc.yaml regenerated without the stage; its file left on disk
    assert "train/gone:test_accuracy" not in snapshot(tmp_path)
    record(tmp_path, "history")
    since = since_last(tmp_path, "history", RULES)
    assert since["recorded"] and since["previous"] == audits(tmp_path)[0].stem
    named = {r["metric"] for r in since["rows"]} | set(since["trend"])
    assert "train/digits:test_accuracy" in named and not any("gone" in m for m in named), named
