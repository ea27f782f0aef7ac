"""The audit's verdict for machines and pull requests, written by every `weakspot audit`: ``reports/junit.xml`` (one
test case per gate, per regression rule's metric and per method x target) and ``reports/summary.md`` (the verdict,
the failed conditions and the top confirmed weak spots, fit for a PR comment).

Caveats first:

* Both are built from the audit's comparison file (``<history.dir>/<audit_id>.comparison.json``: the rule rows of
  :mod:`ops.verdict.history` and the gate rows of :mod:`ops.verdict.gates`) and the findings tables dvc.yaml declares (the audit's
  manifest, :mod:`tasks.manifest`); nothing is recomputed.
* A method x target test case passes with what it found in its output (:func:`weakspot.report.view.control_verdict`:
  its confirmed weak spots, or that it checked its candidates and found none, or that they were not checked): a
  weak spot is the audit's finding, not the method's failure, and the JUnit failures are exactly the conditions that
  set exit code 3.
* JUnit has no "regressed": a regression is a failed test case of the suite ``regression rules``; a first audit has
  no rule rows.
"""

from __future__ import annotations

import math
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any, Dict, List, Optional

from ops.verdict.gates import confirmed_weak_spots, findings_tables
from weakspot.evidence import FDR
from weakspot.fmt import bound
from weakspot.io import write_text


def conditions(comparison: Dict[str, Any]) -> List[Dict[str, Any]]:
    """Every gate and every rule's metric as ``{condition, kind, passed, numbers}``, failures first."""
    rows = [dict(g) for g in comparison.get("gates", [])]
    for r in comparison.get("rows", []):
        change = r.get("change")
        nums = (
            f"before {r.get('before')!r}, after {r.get('after')!r}"
            + (
                f", change {change:+.4g}"
                if isinstance(change, (int, float)) and not isinstance(change, bool)
                else (f", new {change}" if change else "")
            )
            + (f" ({r['note']})" if r.get("note") else "")
        )
        rows.append(
            {
                "condition": f"{r['metric']} ({r['rule']})",
                "kind": "rule",
                "passed": not r.get("regression"),
                "numbers": nums,
            }
        )
    return sorted(rows, key=lambda r: bool(r["passed"]))


def method_cases(root: "str | Path" = ".") -> List[Dict[str, Any]]:
    """One row per method x target with a findings table the audit in ``root`` declares: ``{method, target, passed,
    text}``."""
    import pandas as pd

    from weakspot.report.view import control_verdict

    out = []
    for f in findings_tables(root):
        v = control_verdict(pd.read_parquet(f))
        out.append(
            {
                "method": f.stem,
                "target": f.parent.name,
                "passed": True,
                "text": v["text"] or "no findings",
            }
        )
    return out


def junit_xml(comparison: Dict[str, Any], methods: List[Dict[str, Any]]) -> str:
    """The JUnit XML of the audit: suites ``gates``, ``regression rules`` and ``methods``."""
    root = ET.Element("testsuites", name="weakspot audit")
    conds = conditions(comparison)
    suites = [
        ("gates", [c for c in conds if c["kind"] == "gate"]),
        ("regression rules", [c for c in conds if c["kind"] == "rule"]),
    ]
    total = fails = 0
    for name, rows in suites:
        s = ET.SubElement(
            root, "testsuite", name=name, tests=str(len(rows)), failures=str(sum(not r["passed"] for r in rows))
        )
        for r in rows:
            case = ET.SubElement(s, "testcase", classname=f"weakspot.{name.replace(' ', '_')}", name=r["condition"])
            if not r["passed"]:
                ET.SubElement(case, "failure", message=f"{r['condition']}: {r['numbers']}").text = r["numbers"]
            else:
                ET.SubElement(case, "system-out").text = r["numbers"]
        total, fails = total + len(rows), fails + sum(not r["passed"] for r in rows)
    stages = comparison.get("failures") or []
    if stages:  # an incomplete audit: every stage that failed or was not run is an error of its own
        s = ET.SubElement(root, "testsuite", name="stages", tests=str(len(stages)), errors=str(len(stages)))
        for f in stages:
            case = ET.SubElement(s, "testcase", classname="weakspot.stages", name=f["stage"])
            ET.SubElement(case, "error", message=f["error"].splitlines()[-1] if f["error"] else "failed").text = f[
                "error"
            ]
        root.set("errors", str(len(stages)))
        total += len(stages)
    s = ET.SubElement(
        root,
        "testsuite",
        name="methods",
        tests=str(len(methods)),
        failures="0",
    )
    for m in methods:
        case = ET.SubElement(s, "testcase", classname=f"weakspot.methods.{m['method']}", name=m["target"])
        ET.SubElement(case, "system-out").text = m["text"]
    root.set("tests", str(total + len(methods)))
    root.set("failures", str(fails))
    ET.indent(root)
    return '<?xml version="1.0" encoding="utf-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


def _lift(s: Dict[str, Any]) -> str:
    lo = s.get("lift_lo_adjusted", s["lift_lo"])
    return f"{s['lift']:.2f} (at least {bound(lo)})" if math.isfinite(lo) else f"{s['lift']:.2f}"


def _n(conds: List[Dict[str, Any]], kind: str, word: str) -> str:
    n = sum(c["kind"] == kind for c in conds)
    return f"{n} {word}{'' if n == 1 else 's'}"


def summary_markdown(
    comparison: Dict[str, Any],
    spots: List[Dict[str, Any]],
    methods: List[Dict[str, Any]],
    report_path: Optional[str] = None,
    top: int = 5,
) -> str:
    """The PR comment: the verdict, the failed conditions with their numbers and the top confirmed weak spots."""
    conds = conditions(comparison)
    bad = [c for c in conds if not c["passed"]]
    audit = comparison.get("audit") or {}
    verdict = "FAIL" if bad else "PASS"
    failed = comparison.get("failures") or []
    lines = []
    if failed:
        verdict = "INCOMPLETE" + (", FAIL" if bad else "")
        stopped = [f for f in failed if f["failed"]]
        lines += [
            f"## weakspot audit: {verdict}",
            "",
            f"{len(stopped)} stage(s) failed; {len(failed) - len(stopped)} stage(s) after them were not run. "
            "Every other target was audited.",
            "",
            "| stage | target | error |",
            "|---|---|---|",
        ]
        lines += [
            f"| `{f['stage']}` | {f['target'] or ''} | "
            + f.get("message", f["error"]).replace("|", "\\|").replace("\n", " ")
            + " |"
            for f in failed
        ]
        lines.append("")
    lines += [
        f"## weakspot audit: {verdict}" if not failed else "### Conditions",
        "",
        f"{len(conds) - len(bad)} of {len(conds)} conditions hold ({_n(conds, 'gate', 'gate')}, "
        f"{_n(conds, 'rule', 'regression check')}"
        + (f" against audit `{comparison['previous']}`" if comparison.get("previous") else ", first audit")
        + ").",
        "",
    ]
    if bad:
        lines += ["| failed condition | kind | numbers |", "|---|---|---|"]
        lines += [f"| `{c['condition']}` | {c['kind']} | {c['numbers']} |" for c in bad]
        lines.append("")
    if spots:
        lines += [
            f"Top confirmed weak spots of each kind ({len(spots)} in all, confirmed at "
            f"{FDR:.0%} false discovery rate over every candidate of their target; regions first, each ranked by "
            "the adjusted lower bound of the lift over the control):",
            "",
            "| target | method | weak spot | lift |",
            "|---|---|---|---|",
        ]
        from weakspot.methods import FINDS

        for kind, title in FINDS.items():
            mine = [s for s in spots if s.get("finds", "natural") == kind]
            lines += [
                f"| {s['target']} | {s['method']} | {s['weak_spot']} ({title}) | {_lift(s)} |" for s in mine[:top]
            ]
    else:
        lines.append(
            "No weak spot confirmed on held-out inputs against a control, after the correction for every "
            "candidate of the audit."
        )
    lines.append("")
    if report_path:
        lines.append(f"Report: `{report_path}`")
    lines.append(f"Audit `{audit.get('audit_id', '?')}`, git revision `{(audit.get('git_rev') or 'unknown')[:12]}`")
    return "\n".join(lines) + "\n"


def write_verdict_files(
    comparison: Dict[str, Any],
    out_dir: "str | Path" = "reports",
    root: "str | Path" = ".",
    report_path: Optional[str] = None,
) -> List[Path]:
    """Write ``junit.xml`` and ``summary.md`` into ``out_dir`` (atomically) for the audit in ``root`` (the
    repository); their paths."""
    methods = method_cases(root)
    spots = confirmed_weak_spots(root)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    write_text(out / "junit.xml", junit_xml(comparison, methods))
    write_text(out / "summary.md", summary_markdown(comparison, spots, methods, report_path))
    return [out / "junit.xml", out / "summary.md"]
