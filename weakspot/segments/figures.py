"""Weak segments' figure: each candidate's held-out lift with its 95% interval."""

from __future__ import annotations

from typing import Any, Dict

import numpy as np

from weakspot.methods import AuditTarget
from weakspot.plotting import pyplot
from weakspot.segments.config import SegmentsParams
from weakspot.segments.run import SegmentsResult


def lift_figure(result: SegmentsResult) -> Any:
    plt = pyplot()
    segs = result.segments
    fig, ax = plt.subplots(figsize=(7.5, 0.5 * len(segs) + 1.2))
    y = np.arange(len(segs))[::-1]
    for yi, s in zip(y, segs):
        e = s.evidence
        lo = max(float(np.nan_to_num(e.lift_lo, nan=0.05)), 0.05)  # a log axis: a lower end of 0 drawn at 0.05
        hi = e.lift_hi if np.isfinite(e.lift_hi) else max(e.lift * 3, 10.0)
        colour = "#c0392b" if e.confirmed else "#7f8c8d"
        ax.plot([lo, hi], [yi, yi], color=colour, lw=2)
        ax.plot([e.lift], [yi], "o", color=colour)
    ax.axvline(1.0, color="black", lw=0.8, ls="--")
    ax.set_yticks(y)
    ax.set_yticklabels([s.text if len(s.text) <= 60 else s.text[:57] + "..." for s in segs], fontsize=7)
    ax.set_xscale("log")
    ax.set_xlabel("held-out lift (failure rate inside / the rest's), one-sided 95% bounds")
    fig.tight_layout()
    return fig


def figures(result: SegmentsResult, params: SegmentsParams, target: AuditTarget) -> Dict[str, Any]:
    return {"lift": lift_figure(result)} if result.segments else {}
