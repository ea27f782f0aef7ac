"""Weak segments' report on a target: a :class:`~weakspot.segments.run.SegmentsResult` as metrics, a table, prose
and findings.

Caveats first: ``severity`` is the held-out lift (the segment's failure rate on the confirmation half over that of
the rest of the half); with no failure in the rest the lift counts half a failure there (the evidence sentence says
so). Every candidate is a finding; only confirmed ones (the adjusted lower bound of the lift above 1, after the
Benjamini-Hochberg correction over every candidate) are weak spots. The method beats its control on a target when at
least one segment is confirmed.
"""

from __future__ import annotations

import json
from typing import Any, Dict, List

import numpy as np

from weakspot.evidence import COLUMNS as EVIDENCE_COLUMNS
from weakspot.evidence import FDR
from weakspot.findings import to_png
from weakspot.fmt import fmt, rounded
from weakspot.methods import AuditTarget, MethodReport
from weakspot.result import StageResult
from weakspot.segments.config import SegmentsParams
from weakspot.segments.run import SegmentsResult

SEVERITY = (
    "lift: the segment's failure rate on held-out evaluation rows over that of the other rows of the same held-out half"
)
CONFIRMATION = " (held-out rows the error tree never saw; the control is the rest of that half)"
KEY_METRICS = ["error_rate", "n_candidates", "n_confirmed", "top_lift", "top_lift_lo"]


def metrics_of(result: SegmentsResult) -> Dict[str, Any]:
    top = result.confirmed[0].evidence if result.confirmed else None
    return {
        "n_eval": int(len(result.failed)),
        "n_search": int(len(result.search)),
        "n_confirm": int(len(result.confirm)),
        "error_rate": rounded(result.failed.mean()),
        "min_rows": int(result.min_rows),
        "n_candidates": len(result.segments),
        "n_confirmed": len(result.confirmed),
        "top_lift": rounded(top.lift) if top else None,
        "top_lift_lo": rounded(top.lift_lo) if top else None,
        "top_lift_lo_adjusted": rounded(top.lift_lo_adjusted) if top else None,
        "beat_control": bool(result.confirmed),
    }


def table_of(result: SegmentsResult) -> Any:
    import pandas as pd

    rows = []
    for s in result.segments:
        e = s.evidence
        rows.append(
            {
                "segment": s.text,
                "search_rows": s.search_rows,
                "search_failures": s.search_failures,
                "held_out_rows": e.n_confirm,
                "failures": e.failures,
                "expected_by_confidence": rounded(s.expected_failures, 1),
                "control_rows": e.n_control,
                "control_failures": e.control_failures,
                "lift": rounded(e.lift, 3),
                "lift_lo": rounded(e.lift_lo, 3),
                "lift_hi": rounded(e.lift_hi, 3),
                "p_value": float(f"{e.p_value:.3g}"),
                "p_adjusted": float(f"{e.p_adjusted:.3g}"),
                "lift_lo_adjusted": rounded(e.lift_lo_adjusted, 3),
                "confirmed": e.confirmed,
            }
        )
    cols = [
        "segment",
        "search_rows",
        "search_failures",
        "held_out_rows",
        "failures",
        "expected_by_confidence",
        "control_rows",
        "control_failures",
        "lift",
        "lift_lo",
        "lift_hi",
        "p_value",
        "p_adjusted",
        "lift_lo_adjusted",
        "confirmed",
    ]
    return pd.DataFrame(rows, columns=cols)


def _example(result: SegmentsResult, target: AuditTarget, i: int) -> Dict[str, Any]:
    ds = target.test
    out: Dict[str, Any] = {"example": "", "image": None}
    if result.image:
        out["image"] = to_png(np.asarray(ds.X[i]), scale=4)
    else:
        cats = result.features.categories
        out["example"] = json.dumps(
            {  # a missing value as null
                n: None if np.isnan(v) else cats[n][int(v)] if n in cats else rounded(v)
                for n, v in zip(result.features.names, result.features.values[i])
            }
        )
    return out


def findings_of(result: SegmentsResult, target: AuditTarget) -> Any:
    import pandas as pd

    classes = [str(c) for c in target.classes]
    rows: List[Dict[str, Any]] = []
    for s in result.segments:
        e = s.evidence
        if len(s.examples):  # a failing held-out row inside: its class, the model's answer and the row itself
            i = int(s.examples[0])
            shown = {
                "label": classes[int(result.features.y[i])],
                "prediction": classes[int(result.predicted[i])],
                "confidence": float(result.confidence[i]),
                **_example(result, target, i),
            }
        else:
            shown = {"label": "", "prediction": "", "confidence": float("nan")}
        rows.append(
            {
                "weak_spot": s.text,
                "kind": s.kind,
                "severity": float(np.nan_to_num(e.lift, nan=0.0)),
                "severity_meaning": SEVERITY,
                **shown,
                **e.columns(),
                "confirmation": e.sentence("rows", "in the rest of the half")
                + CONFIRMATION
                + f"; the model's confidences predict {fmt(s.expected_failures, 3)} failures inside ("
                + ("overconfident there)" if s.overconfident else "it knows it is unsure there)"),
            }
        )
    cols = [
        "weak_spot",
        "kind",
        "severity",
        "severity_meaning",
        "label",
        "prediction",
        "confidence",
        "example",
        "image",
        *EVIDENCE_COLUMNS,
        "confirmation",
    ]
    return pd.DataFrame(rows, columns=cols)


def summary_of(m: Dict[str, Any], result: SegmentsResult, params: SegmentsParams) -> List[str]:
    if result.note:
        return [f"No segment was searched on this target: {result.note}."]
    feats = ", ".join(result.features.names)
    first = (
        f"An error tree (depth at most {params.max_depth}, segments of at least {m['min_rows']} rows) was fit on "
        f"{m['n_search']} of the {m['n_eval']} evaluation rows, in {feats} (neither the true nor the "
        f"predicted class beside them); the model fails {fmt(100 * m['error_rate'])}% of the evaluation "
        f"rows. It proposed {m['n_candidates']} segment(s) that fail more often than the rows overall (each class's "
        "recall is the model's own table, beside the weak spots); each was measured on the other "
        f"{m['n_confirm']} rows against the rest of them, and confirmed at {fmt(100 * FDR)}% false discovery "
        f"rate over the {m['n_candidates']} tested (Benjamini-Hochberg)."
    )
    gone = result.features.missing
    if gone:
        first += (
            f" Missing values are kept: the tree also saw whether {', '.join(gone)} "
            f"{'is' if len(gone) == 1 else 'are'} missing, each column's missing rows were a candidate of their own "
            "('<column> is missing') where they failed more often on the search half, and a condition on a value "
            "(x <= 3, x = A) holds only for rows where it is observed."
        )
    if result.confirmed:
        s = result.confirmed[0]
        second = (
            f"{m['n_confirmed']} confirmed. The strongest: {s.text}: {s.evidence.sentence('rows')}; adjusted "
            f"lower bound {fmt(s.evidence.lift_lo_adjusted, 3)}."
        )
    else:
        second = (
            "No segment is confirmed: on held-out rows none failed more often than the rest after the "
            "correction: it found no weak spot on this target."
        )
    return [first, second]


def report(result: SegmentsResult, params: SegmentsParams, target: AuditTarget) -> MethodReport:
    """The section (metrics, the segments table, prose; the figure is :func:`weakspot.segments.figures.figures`')
    and the findings (every candidate, with its evidence)."""
    m = metrics_of(result)
    headline = []
    if result.confirmed:
        s = result.confirmed[0]
        e = s.evidence
        headline.append(
            f"Weak segment of {target.name}: {s.text} ({e.failures} of {e.n_confirm} held-out rows fail, "
            f"{e.control_failures} of {e.n_control} of the rest; lift {fmt(e.lift, 2)}, at least "
            f"{fmt(e.lift_lo_adjusted, 2)} after the correction for {e.family} candidates)."
        )
    items = [
        {
            "table": "segments",
            "caption": "Every candidate segment: what the error tree saw of it (search half) "
            "and its held-out evidence against the rest of the held-out half.",
        }
    ]
    figures = {"lift"} if result.segments else set()
    items += [
        {
            "figure": f,
            "caption": "Held-out lift of each candidate with its one-sided 95% bounds; right of "
            "the line (1 = no more failures than the rest) the confirmed ones.",
        }
        for f in figures
    ]
    section = StageResult(
        metrics=m,
        tables={"segments": table_of(result)},
        title=f"Weak segments ({target.name})",
        summary=summary_of(m, result, params),
        items=items,
        headline=headline,
        key_metrics=KEY_METRICS,
        sample=(
            f"all {m['n_eval']} test rows: the error tree searched {m['n_search']}, the other "
            f"{m['n_confirm']} confirmed (halves drawn with seed {params.seed})"
            if not result.note
            else f"{m['n_eval']} test rows, too few to search"
        ),
    )
    return MethodReport(section=section, findings=findings_of(result, target))
