"""Intrinsic robustness's figures (seeds/002): psi against the attacks' accuracy, Fig. 6's stability, psi per class,
the inputs with the most different neighbour, and the decision surfaces of Figs. 2-4.

Caveats first: figures are drawn on the Agg back end (:func:`weakspot.plotting.pyplot`) and returned open; the
caller saves and closes them. Nothing is measured here: every number comes from the
:class:`~weakspot.intrinsic.run.IntrinsicResult`.
"""

from __future__ import annotations

from typing import Any, Dict, List

import numpy as np

from weakspot.intrinsic.config import DEFENCE_TITLES, IntrinsicParams
from weakspot.intrinsic.evaluate import ModelEval
from weakspot.intrinsic.findings import worst_inputs
from weakspot.intrinsic.run import IntrinsicResult
from weakspot.intrinsic.surface import DIRECTION_LABELS, Surface
from weakspot.plotting import pairs_across, pyplot


def figures(result: IntrinsicResult, params: IntrinsicParams, target: Any) -> Dict[str, Any]:
    """``psi_vs_attacks`` and ``stability`` (the paper's comparisons: at depth study only), ``per_class``,
    ``worst_inputs`` and one ``surface_<j>`` per pictured input."""
    evals, classes, y = result.evals, result.classes, result.y
    out: Dict[str, Any] = {}
    if result.depth == "study":
        out["psi_vs_attacks"] = psi_vs_attacks_figure(evals, params)
        out["stability"] = stability_figure(result.stability)
    out["per_class"] = per_class_figure(evals, classes)
    out["worst_inputs"] = worst_inputs_figure(evals["none"], result.X, y, classes, params)
    for j, (i, per) in enumerate(result.surfaces.items()):
        out[f"surface_{j}"] = surface_figure(per, eps=result.eps, title=f"input {i} (true class {classes[int(y[i])]})")
    return out


def psi_vs_attacks_figure(evals: Dict[str, ModelEval], params: IntrinsicParams) -> Any:
    """psi (log scale) against accuracy under each attack, one point per model and attack."""
    plt = pyplot()
    p = params
    fig, ax = plt.subplots(figsize=(6.4, 4.6))
    keys = [
        ("clean", "clean", "o"),
        ("fgsm", "FGSM", "s"),
        ("pgd30", f"PGD-{p.pgd_steps}", "^"),
        ("cw30", f"CW-{p.cw_steps}", "v"),
        ("autoattack", "AutoAttack (ART)", "D"),
    ]
    for key, lab, mk in keys:
        pts = [(e.psi, e.acc[key]) for e in evals.values() if key in e.acc]
        if pts:
            xs, ys = zip(*pts)
            order = np.argsort(xs)
            ax.plot(np.array(xs)[order], np.array(ys)[order], marker=mk, label=lab, alpha=0.85)
    for n, e in evals.items():  # each model's psi: a dotted line, named above the plot
        ax.axvline(e.psi, color="grey", ls=":", lw=0.8)
        ax.text(e.psi, 1.05, n, rotation=60, fontsize=8, ha="left", va="bottom")
    ax.set_xscale("log")
    ax.set_xlabel("psi (normalised logits; log scale)")
    ax.set_ylabel("accuracy")
    ax.set_ylim(-0.03, 1.03)
    ax.legend(fontsize=8, loc="best")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    return fig


def stability_figure(stab: Any) -> Any:
    """Fig. 6: mean and spread of psi over random batches of each size, annotated with the relative spread."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(5.2, 3.4))
    if len(stab):
        ax.errorbar(stab["batch_size"], stab["psi_mean"], yerr=stab["psi_std"], marker="o", capsize=4)
        for b, r in zip(stab["batch_size"], stab["relative_std"]):
            ax.annotate(
                f"{r:.1%}",
                (b, float(stab.loc[stab["batch_size"] == b, "psi_mean"].iloc[0])),
                textcoords="offset points",
                xytext=(6, 6),
                fontsize=8,
            )
    ax.set_xlabel("inputs per batch")
    ax.set_ylabel("psi (mean +- std over batches)")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    return fig


def per_class_figure(evals: Dict[str, ModelEval], classes: List[str]) -> Any:
    """psi per true class (log scale) of the audited model and the min-max one (when it ran)."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(max(5.0, 0.55 * len(classes) + 2), 3.4))
    shown = [n for n in ("none", "minmax") if n in evals]
    w = 0.8 / len(shown)
    for j, n in enumerate(shown):
        ax.bar(np.arange(len(classes)) + j * w - 0.4 + w / 2, evals[n].psi_class, width=w, label=DEFENCE_TITLES[n])
    ax.set_xticks(np.arange(len(classes)))
    ax.set_xticklabels(classes, rotation=30, ha="right", fontsize=8)
    ax.set_yscale("log")
    ax.set_ylabel("psi of the class (log)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def worst_inputs_figure(e: ModelEval, X: np.ndarray, y: np.ndarray, classes: List[str], params: IntrinsicParams) -> Any:
    """The inputs with the largest KL divergence (top row) and their worst neighbours (bottom row), captioned with
    the predictions (red: wrong)."""
    columns = [
        (
            (X[i], f"true {classes[y[i]]}\npred {classes[e.pred[i]]}", e.pred[i] != y[i]),
            (
                e.x_worst[i],
                f"KL {e.kl[i]:.3f}\npred {classes[e.pred_worst[i]]} ({e.conf_worst[i]:.0%})",
                e.pred_worst[i] != y[i],
            ),
        )
        for i in worst_inputs(e, max(1, min(8, int(params.max_findings) or 8)))
    ]
    return pairs_across(columns, row_labels=("input", "worst neighbour"), width=1.5, fontsize=7)


def surface_figure(rows: Dict[str, List[Surface]], *, eps: float, title: str = "") -> Any:
    """Decision surfaces (Figs. 2-4): one row per model (label -> its surfaces), one column per y-axis direction;
    ``g`` as a heat map (red = wrong, blue = right, white = the boundary), the ``g = 0`` contour in black, the
    eps-square dashed."""
    plt = pyplot()
    from matplotlib.colors import TwoSlopeNorm

    labels = list(rows)
    ncol = max(len(v) for v in rows.values())
    fig, axes = plt.subplots(len(labels), ncol, figsize=(3.0 * ncol, 2.8 * len(labels)), squeeze=False)
    for r, lab in enumerate(labels):
        surfs = rows[lab]
        lim = max(float(np.abs(s.g).max()) for s in surfs) or 1.0
        norm = TwoSlopeNorm(vcenter=0.0, vmin=-lim, vmax=lim)
        for c, s in enumerate(surfs):
            ax = axes[r, c]
            im = ax.imshow(
                s.g, origin="lower", cmap="RdBu", norm=norm, aspect="auto", extent=(s.a[0], s.a[-1], s.b[0], s.b[-1])
            )
            if s.g.min() < 0 < s.g.max():
                ax.contour(s.a, s.b, s.g, levels=[0.0], colors="black", linewidths=1.2)
            ax.plot([-eps, eps, eps, -eps, -eps], [-eps, -eps, eps, eps, -eps], "k--", lw=0.8)
            ax.plot([0], [0], "k+", ms=8)
            if r == 0:
                ax.set_title(f"y: {DIRECTION_LABELS.get(s.direction, s.direction)}", fontsize=9)
            if c == 0:
                ax.set_ylabel(f"{lab}\ny-axis step", fontsize=9)
            if r == len(labels) - 1:
                ax.set_xlabel("x-axis: random direction", fontsize=8)
            ax.tick_params(labelsize=7)
        fig.colorbar(im, ax=axes[r, :].tolist(), shrink=0.85, label="g = z_true - max other")
    if title:
        fig.suptitle(title, fontsize=10)
    return fig
