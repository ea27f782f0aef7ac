"""Gates: absolute conditions every audit must meet (params.yaml ``gates``), checked after every audit, the first one
too, beside the regression rules of :mod:`ops.verdict.history` (which need a previous audit).

    gates:
      fail: true                  # a failed gate exits 3, like a regression
      conditions:
        - {metric: "train/*:test_accuracy", op: ">=", value: 0.9}
        - {weak_spots: {max_lift: 3}}          # no confirmed weak spot with a lift above 3

Caveats first:

* A metric gate names metrics as history.rules do (``<stage>/<target>:<dotted.key>``, shell wildcards); every
  metric it matches must hold. A gate that matches no metric, or a value that is not a number, *fails* (a typo must
  not pass silently).
* A weak-spots gate reads the findings tables (``findings/<target>/<method>.parquet``) that dvc.yaml declares (the
  audit's manifest, :mod:`tasks.manifest`: a table of a removed target or method is no part of the audit): only
  findings confirmed on held-out inputs against their control (after the correction over every candidate of the
  audit) count, by their lift's point estimate.
* Each condition becomes one row ``{condition, kind, passed, numbers, ...}``: the report's conditions summary,
  ``junit.xml`` and ``summary.md`` (:mod:`ops.verdict.files`) read these rows from the audit's comparison file.
"""

from __future__ import annotations

import fnmatch
import math
import operator
from pathlib import Path
from typing import Any, Dict, List

from tasks.settings import GateParams, GatesParams

OPS = {">=": operator.ge, ">": operator.gt, "<=": operator.le, "<": operator.lt, "==": operator.eq, "!=": operator.ne}


def _number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _metric_gate(g: GateParams, metrics: Dict[str, Any]) -> Dict[str, Any]:
    cond = g.name or f"{g.metric} {g.op} {g.value:g}"
    names = sorted(m for m in metrics if fnmatch.fnmatchcase(m, g.metric))
    row = {"condition": cond, "kind": "gate", "metric": g.metric, "op": g.op, "threshold": g.value}
    if not names:
        return {**row, "passed": False, "numbers": f"no metric matches {g.metric!r}"}
    bad = [m for m in names if not _number(metrics[m]) or not OPS[g.op](float(metrics[m]), float(g.value))]
    shown = bad or names
    numbers = ", ".join(
        f"{m} = {metrics[m]:.6g}" if _number(metrics[m]) else f"{m} = {metrics[m]!r} (not a number)" for m in shown[:8]
    ) + (f" and {len(shown) - 8} more" if len(shown) > 8 else "")
    what = f"{len(bad)} of {len(names)} fail: " if bad else f"{len(names)} of {len(names)} hold: "
    return {**row, "passed": not bad, "numbers": what + numbers}


def findings_tables(root: "str | Path" = ".") -> List[Path]:
    """The audit's findings tables: ``root/findings/<target>/<method>.parquet`` where root/dvc.yaml declares it."""
    from tasks import paths
    from tasks.manifest import read_manifest

    return read_manifest(root).files(paths.FINDINGS, "*/*.parquet")


def confirmed_weak_spots(root: "str | Path" = ".") -> List[Dict[str, Any]]:
    """Every confirmed finding of the audit in ``root`` (the repository), each target's findings tables it declares
    (:func:`findings_tables`) corrected as one family (:func:`weakspot.findings.correct_by_target`): ``{target,
    method, weak_spot, kind, label, prediction, lift, lift_lo, lift_hi, lift_lo_adjusted, p_value, p_adjusted,
    family}``, ranked by :func:`weakspot.findings.rank_key`."""
    import pandas as pd

    from weakspot.findings import correct_by_target, rank_key
    from weakspot.methods import finds_of

    tables = {(f.parent.name, f): pd.read_parquet(f) for f in findings_tables(root)}
    tables = correct_by_target(
        {k: df for k, df in tables.items() if "confirmed" in df.columns and "lift" in df.columns}
    )
    out = []
    for (_, f), df in tables.items():
        for r in df[df["confirmed"].astype(bool)].to_dict("records"):
            out.append(
                {
                    "target": f.parent.name,
                    "method": f.stem,
                    "weak_spot": str(r.get("weak_spot", "")),
                    "kind": str(r.get("kind", "")),
                    "label": str(r.get("label") or ""),
                    "prediction": str(r.get("prediction") or ""),
                    "lift": float(r["lift"]),
                    "lift_lo": float(r.get("lift_lo", float("nan"))),
                    "lift_hi": float(r.get("lift_hi", float("nan"))),
                    "lift_lo_adjusted": float(r.get("lift_lo_adjusted", float("nan"))),
                    "p_value": float(r.get("p_value", float("nan"))),
                    "p_adjusted": float(r.get("p_adjusted", float("nan"))),
                    "family": int(r.get("family", 0)),
                    "finds": finds_of(f.stem),
                }
            )
    return sorted(out, key=lambda r: rank_key(r["kind"], r["lift_lo_adjusted"]))


def _weak_spot_gate(g: GateParams, spots: List[Dict[str, Any]]) -> Dict[str, Any]:
    w = g.weak_spots
    mine = [
        s for s in spots if fnmatch.fnmatchcase(s["method"], w.methods) and fnmatch.fnmatchcase(s["target"], w.targets)
    ]
    where = "" if (w.methods, w.targets) == ("*", "*") else f" ({w.methods} on {w.targets})"
    parts, ok = [], True
    if w.max_lift is not None:
        over = [s for s in mine if math.isfinite(s["lift"]) and s["lift"] > w.max_lift]
        ok = ok and not over
        top = max(mine, key=lambda s: s["lift"] if math.isfinite(s["lift"]) else math.inf) if mine else None
        parts.append(
            f"{len(over)} confirmed weak spot(s) with lift above {w.max_lift:g}"
            + (f"; highest {top['lift']:.3g} ({top['method']} on {top['target']}: {top['weak_spot']})" if top else "")
        )
    if w.max_count is not None:
        ok = ok and len(mine) <= w.max_count
        parts.append(f"{len(mine)} confirmed weak spot(s), at most {w.max_count} allowed")
    cond = g.name or (
        "weak spots"
        + where
        + ": "
        + ", ".join(
            x
            for x in (
                f"lift <= {w.max_lift:g}" if w.max_lift is not None else "",
                f"count <= {w.max_count}" if w.max_count is not None else "",
            )
            if x
        )
    )
    return {
        "condition": cond,
        "kind": "gate",
        "metric": "weak_spots",
        "op": "",
        "threshold": w.max_lift,
        "passed": bool(ok),
        "numbers": "; ".join(parts),
    }


def check_gates(gates: GatesParams, metrics: Dict[str, Any], root: "str | Path" = ".") -> List[Dict[str, Any]]:
    """One row per gate: ``{condition, kind: "gate", metric, op, threshold, passed, numbers}``; ``metrics``: the
    audit's (:func:`ops.verdict.history.snapshot`), ``root``: the repository whose findings a weak-spots gate reads."""
    spots = confirmed_weak_spots(root) if any(g.weak_spots for g in gates.conditions) else []
    return [
        _weak_spot_gate(g, spots) if g.weak_spots is not None else _metric_gate(g, metrics) for g in gates.conditions
    ]
