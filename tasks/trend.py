"""The report's trend figure: each watched metric over the recorded audits, from the comparison the verdict wrote
(``history/<audit>.comparison.json``'s ``since``: :func:`ops.verdict.history.since_last`)."""

from __future__ import annotations

from typing import Any, Dict


def _short(audit_id: str) -> str:
    """'20261122T225638Z-...' -> '11-22 22:56'."""
    t = audit_id.split("-", 1)[0]
    if len(t) >= 13 and t[8] == "T":
        return f"{t[4:6]}-{t[6:8]} {t[9:11]}:{t[11:13]}"
    return "now" if "not recorded" in audit_id else audit_id[:11]


def trend_figure(since: Dict[str, Any], max_panels: int = 12):
    """Small multiples: each watched metric over the recorded audits, the latest move marked red on a
    regression; None with fewer than two audits to draw."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    trend = since.get("trend") or {}
    if len(since.get("times") or []) < 2 or not trend:
        return None
    bad = {r["metric"] for r in since.get("rows", []) if r["regression"]}
    names = sorted(trend, key=lambda m: (m not in bad, m))[:max_panels]
    cols = min(4, len(names))
    rows = -(-len(names) // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(3.4 * cols, 2.3 * rows), squeeze=False)
    x = list(range(len(since["times"])))
    for ax, m in zip(axes.flat, names):
        ys = trend[m]
        pts = [(i, y) for i, y in zip(x, ys) if y is not None]
        ax.plot([p[0] for p in pts], [p[1] for p in pts], "o-", color="#1d2430", ms=3, lw=1.2)
        if m in bad and len(pts) >= 2:
            ax.plot([pts[-2][0], pts[-1][0]], [pts[-2][1], pts[-1][1]], "o-", color="#b4232c", ms=5, lw=2)
        stage, key = m.split(":", 1)
        ax.set_title(f"{stage}\n{key}", fontsize=8, color="#b4232c" if m in bad else "#1d2430")
        ax.tick_params(labelsize=7)
        ticks = x if len(x) <= 6 else x[:: max(1, -(-len(x) // 6))]
        ax.set_xticks(ticks, [_short(since["times"][i]) for i in ticks], fontsize=6, rotation=30)
        ax.grid(alpha=0.3)
    for ax in list(axes.flat)[len(names) :]:
        ax.axis("off")
    fig.supxlabel("audit (UTC time it ran)", fontsize=8)
    fig.tight_layout()
    return fig
