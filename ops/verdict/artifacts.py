"""The audit's verdict in the Prefect UI: a markdown artifact (``weakspot-verdict``: one line, the regressed metrics,
where the report is, which audit) and a table artifact (``weakspot-comparison``: every watched metric, before and
after) on the current flow run, built from the comparison `weakspot audit` writes next to each audit in the history
store (``<history.dir>/<audit_id>.comparison.json``, see :mod:`ops.verdict.history`).

Outside a flow or task run :func:`publish_verdict` does nothing (it returns ``None``), so any code may call it.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, Dict, List, Optional

VERDICT_KEY = "weakspot-verdict"
TABLE_KEY = "weakspot-comparison"


def latest_comparison(history_dir: "str | Path" = "history") -> Optional[Dict[str, Any]]:
    """The newest audit's comparison (``{"audit", "previous", "rows"}``) in the history store, or None when there is
    none yet. Audit ids begin with the audit's UTC time, so the last name is the newest."""
    files = sorted(Path(history_dir).glob("*.comparison.json"))
    return json.loads(files[-1].read_text()) if files else None


def verdict_line(comparison: Dict[str, Any]) -> str:
    """``"2 regressions since audit X"``, ``"no regressions since audit X"`` or ``"first audit"``, then
    ``"; 1 failed gate"`` when gates (params.yaml ``gates``) failed."""
    prev = comparison.get("previous")
    gates = len(failed_gates(comparison))
    tail = f"; {gates} failed gate{'s' if gates != 1 else ''}" if gates else ""
    if not prev:
        return "first audit: nothing to compare with yet" + tail
    n = sum(1 for r in comparison.get("rows", []) if r.get("regression"))
    if n == 0:
        return f"no regressions since audit {prev}" + tail
    return f"{n} regression{'s' if n != 1 else ''} since audit {prev}" + tail


def failed_gates(comparison: Dict[str, Any]) -> List[Dict[str, Any]]:
    return [g for g in comparison.get("gates", []) if not g.get("passed", True)]


def failure_message(comparison: Optional[Dict[str, Any]], report_path: str, summary_path: str) -> str:
    """The nightly run's Failed message when the audit exited 3 (what `weakspot serve --notify` posts): the verdict
    line, each regressed metric and failed gate with its numbers, where the report and ``summary.md`` are."""
    if comparison is None:
        return f"weakspot audit FAILED (exit 3): see the audit output. Report: {report_path}"
    bad = [f"{r['metric']} {_show(r['before'])} -> {_show(r['after'])} ({r['rule']})" for r in regressed(comparison)]
    bad += [f"gate {g['condition']}: {g['numbers']}" for g in failed_gates(comparison)]
    return (
        f"weakspot audit FAILED: {verdict_line(comparison)}: {'; '.join(bad) or 'see the audit output'}. "
        f"Report: {report_path} ; summary: {summary_path}"
    )


def regressed(comparison: Dict[str, Any]) -> List[Dict[str, Any]]:
    return [r for r in comparison.get("rows", []) if r.get("regression")]


def _show(v: Any) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return "NaN" if math.isnan(v) else f"{v:.6g}"
    return json.dumps(v) if not isinstance(v, str) else v


def _change(v: Any) -> str:
    if isinstance(v, list):
        return "new: " + ", ".join(json.dumps(x) for x in v)
    return f"{v:+.4g}" if isinstance(v, (int, float)) and not isinstance(v, bool) else _show(v)


def verdict_markdown(comparison: Dict[str, Any], report_path: "str | None" = None) -> str:
    audit = comparison.get("audit") or {}
    bad = regressed(comparison)
    lines = [f"# weakspot audit: {verdict_line(comparison)}", ""]
    if bad:
        lines += ["| regressed metric | before | after | change | rule |", "|---|---|---|---|---|"]
        lines += [
            f"| `{r['metric']}` | {_show(r['before'])} | {_show(r['after'])} | {_change(r['change'])} | {r['rule']} |"
            for r in bad
        ]
        lines.append("")
    notes = [r for r in comparison.get("rows", []) if not r.get("regression") and r.get("note")]
    if notes:
        lines.append("Not compared: " + ", ".join(f"`{r['metric']}` ({r['note']})" for r in notes))
        lines.append("")
    n = len(comparison.get("rows", []))
    if comparison.get("previous"):
        lines.append(f"{n} watched metric{'s' if n != 1 else ''} compared (history.rules in params.yaml).")
    if report_path:
        p = Path(report_path).resolve()
        lines.append(f"Report: [{p}]({p.as_uri()}) (on the machine that ran the audit)")
    rev = audit.get("git_rev") or "unknown"
    lines.append(
        f"Audit: `{audit.get('audit_id', '?')}`, git revision `{rev[:12]}`"
        + (" (with uncommitted changes)" if audit.get("git_dirty") else "")
        + (f", previous audit `{comparison['previous']}`" if comparison.get("previous") else "")
    )
    if audit.get("file"):
        lines.append(f"History: `{audit['file']}`")
    return "\n".join(lines) + "\n"


def comparison_table(comparison: Dict[str, Any]) -> List[Dict[str, Any]]:
    """One row per watched metric, regressions first; lists (new class pairs) shown as JSON text."""
    rows = sorted(comparison.get("rows", []), key=lambda r: not r.get("regression"))
    return [
        {
            "metric": r["metric"],
            "regression": bool(r.get("regression")),
            "before": _cell(r.get("before")),
            "after": _cell(r.get("after")),
            "change": _cell(r.get("change")),
            "rule": r.get("rule", ""),
            "note": r.get("note", ""),
        }
        for r in rows
    ]


def _cell(v: Any) -> Any:
    if isinstance(v, float) and not math.isfinite(v):
        return None
    return v if v is None or isinstance(v, (int, float, str, bool)) else json.dumps(v)


def _in_run() -> bool:
    try:
        from prefect.context import FlowRunContext, TaskRunContext
    except ImportError:
        return False
    return FlowRunContext.get() is not None or TaskRunContext.get() is not None


def publish_verdict(comparison: Optional[Dict[str, Any]], report_path: "str | None" = None) -> Optional[Dict[str, Any]]:
    """Create the verdict's markdown and table artifacts on the current flow run; returns their ids
    (``{"markdown": id, "table": id}``), or None outside a flow run or without a comparison."""
    if comparison is None or not _in_run():
        return None
    from prefect.artifacts import create_markdown_artifact, create_table_artifact

    line = verdict_line(comparison)
    md = create_markdown_artifact(
        verdict_markdown(comparison, report_path), key=VERDICT_KEY, description=f"weakspot audit verdict: {line}"
    )
    table = comparison_table(comparison)
    tid = None
    if table:  # the first audit compares nothing
        tid = create_table_artifact(table, key=TABLE_KEY, description=f"weakspot audit vs the previous: {line}")
    return {"markdown": md, "table": tid}
