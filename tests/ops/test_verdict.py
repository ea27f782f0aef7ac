"""The verdict published as Prefect artifacts (ops.verdict.artifacts): its text, its table, and no-op outside a run."""

import json

from ops.verdict.artifacts import comparison_table, latest_comparison, publish_verdict, verdict_line, verdict_markdown

AUDIT = {
    "audit_id": "20260101T020000Z-abcdef12-12345678",
    "time": "2026-01-01T02:00:00+00:00",
    "git_rev": "abcdef1234567890",
    "git_dirty": False,
    "lock_sha256": "12345678",
    "file": "history/x.parquet",
}
ROWS = [
    {
        "metric": "train/phoneme:test_accuracy",
        "rule": "down > 0.01",
        "before": 0.8,
        "after": 0.7,
        "change": -0.1,
        "regression": True,
        "note": "",
    },
    {
        "metric": "corner/digits:pairs",
        "rule": "new",
        "before": [[1, 7]],
        "after": [[1, 7], [3, 8]],
        "change": [[3, 8]],
        "regression": True,
        "note": "",
    },
    {
        "metric": "gad/phoneme:sdr",
        "rule": "up > 0.2 (relative)",
        "before": 0.5,
        "after": 0.5,
        "change": 0.0,
        "regression": False,
        "note": "",
    },
    {
        "metric": "gad/phoneme:new",
        "rule": "up > 0.2",
        "before": None,
        "after": float("nan"),
        "change": None,
        "regression": False,
        "note": "new metric",
    },
]


def test_verdict_lines():
    assert verdict_line({"audit": AUDIT, "previous": None, "rows": []}).startswith("first audit")
    assert verdict_line({"audit": AUDIT, "previous": "P", "rows": ROWS[2:]}) == "no regressions since audit P"
    assert verdict_line({"audit": AUDIT, "previous": "P", "rows": ROWS}) == "2 regressions since audit P"
    assert verdict_line({"audit": AUDIT, "previous": "P", "rows": ROWS[:1]}) == "1 regression since audit P"


def test_markdown_names_the_regressions_report_and_audit(tmp_path):
    md = verdict_markdown({"audit": AUDIT, "previous": "P", "rows": ROWS}, str(tmp_path / "reports/index.html"))
    assert md.startswith("# weakspot audit: 2 regressions since audit P")
    assert "| `train/phoneme:test_accuracy` | 0.8 | 0.7 | -0.1 | down > 0.01 |" in md
    assert "new: [3, 8]" in md and "`gad/phoneme:new` (new metric)" in md
    assert str(tmp_path / "reports/index.html") in md and "file://" in md
    assert AUDIT["audit_id"] in md and "abcdef123456" in md


def test_table_rows_regressions_first_and_json_safe():
    rows = comparison_table({"audit": AUDIT, "previous": "P", "rows": ROWS[2:] + ROWS[:2]})
    assert [r["regression"] for r in rows] == [True, True, False, False]
    assert rows[1]["after"] == "[[1, 7], [3, 8]]" and rows[3]["after"] is None
    json.dumps(rows, allow_nan=False)


def test_publish_is_a_no_op_outside_a_flow_run_and_latest_reads_the_newest(tmp_path):
    assert publish_verdict({"audit": AUDIT, "previous": None, "rows": []}) is None
    assert latest_comparison(tmp_path) is None
    for i, a in enumerate(["20260101T020000Z-a-b", "20260102T020000Z-a-b", "20260102T020000Z-a-b~2"]):
        (tmp_path / f"{a}.comparison.json").write_text(
            json.dumps({"audit": {"audit_id": a}, "previous": None, "rows": [], "i": i})
        )
    assert latest_comparison(tmp_path)["i"] == 2
