"""HDA's figures of one target, drawn from an :class:`~weakspot.hda.result.HdaResult`: the global distribution with
the seeds (``landscape``), the most natural AEs (``aes``), the GA's progress (``ga_curve``, Fig. 5) and, at
``hda.depth: study``, the local robustness against the indicators (``indicators``, Fig. 4) and decoded latent samples
(``samples``, Fig. 3).

Caveats first: figures are drawn on matplotlib's Agg back end (:func:`weakspot.plotting.pyplot`) and returned open;
the caller saves and closes them. Nothing here runs the model: the seeds' predictions are the ones ``run`` recorded.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional

import numpy as np

from weakspot.hda.config import HdaParams
from weakspot.hda.result import HdaResult, Landscape
from weakspot.plotting import pairs_across, pyplot, show_image


def figures(result: HdaResult, params: HdaParams, target: Any = None) -> Dict[str, Any]:
    """Every figure of the report section, by the name its items use (Figs. 3 and 4 at depth study only: their local
    robustness and decoded samples are the study's)."""
    s, g, d = result.seeds, result.generators, result.distribution
    out = {
        "landscape": landscape_figure(s.landscape, s.selected, s.random),
        "aes": aes_figure(result),
        "ga_curve": curve_figure(g.results[("hda", "selected")].extra.get("curve", [])),
    }
    if result.study:
        assert d.samples_kde is not None and d.samples_uniform is not None  # rq1_distribution sets them
        out["indicators"] = indicators_figure(
            s.log10_p[s.balls], s.gradient[s.balls] if s.gradient is not None else None, s.separation[s.balls]
        )
        out["samples"] = samples_figure(d.samples_kde[:8], d.samples_uniform[:8])
    return out


def landscape_figure(land: Landscape, sel: np.ndarray, rnd: np.ndarray) -> Any:
    """The KDE's log density on the training codes' first two principal components, HDA's seeds and random ones."""
    plt = pyplot()
    dz, cand = land.log_density, land.candidates
    fig, ax = plt.subplots(figsize=(6.0, 4.6))
    cs = ax.contourf(land.gx, land.gy, np.maximum(dz, np.percentile(dz, 5)), levels=20, cmap="viridis")
    fig.colorbar(cs, ax=ax, label="log density (relative)")
    ax.scatter(cand[rnd, 0], cand[rnd, 1], s=22, facecolors="none", edgecolors="white", label="random seeds")
    ax.scatter(cand[sel, 0], cand[sel, 1], s=26, c="red", marker="*", label="HDA seeds")
    ax.set_xlabel("latent PC 1")
    ax.set_ylabel("latent PC 2")
    ax.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    return fig


def natural_aes(result: HdaResult, most: int = 12) -> List[int]:
    """Indices into HDA's test cases on the selected seeds: per class, the AEs of the highest SSIM to their seed,
    one per seed, up to ``most // classes`` seeds a class (at least 1) and ``most`` in all."""
    e, res = result.generators.evals[("hda", "selected")], result.generators.results[("hda", "selected")]
    y = result.seeds.y[result.seeds.selected]
    per_class = max(1, most // max(1, len(result.classes)))
    picks: List[int] = []
    ssim = e.ssim_cases
    assert e.ae_mask is not None and ssim is not None  # evaluate_cases sets every array
    for c in range(len(result.classes)):
        cand = [j for j in np.where(e.ae_mask)[0] if y[res.seed_index[j]] == c]
        seen = set()
        for j in sorted(cand, key=lambda j: -ssim[j]):
            if res.seed_index[j] not in seen:
                picks.append(j)
                seen.add(res.seed_index[j])
            if len(seen) >= per_class:
                break
    return picks[:most]


def aes_figure(result: HdaResult) -> Any:
    """The most natural AEs (:func:`natural_aes`): each seed (top: true class, the model's prediction, its relative
    log density) over its AE (bottom: the prediction and its confidence, SSIM to the seed)."""
    s, classes = result.seeds, result.classes
    e, res = result.generators.evals[("hda", "selected")], result.generators.results[("hda", "selected")]
    X, y = s.X[s.selected], s.y[s.selected]
    columns = []
    for j in natural_aes(result):
        assert e.pred is not None and e.conf is not None and e.ssim_cases is not None  # evaluate_cases sets them
        i = res.seed_index[j]
        seed_cap = (
            f"{classes[y[i]]}: {classes[int(s.selected_proba[i].argmax())]}\n"
            f"density {s.log_density[s.selected[i]]:+.2f}"
        )
        ae_cap = f"-> {classes[int(e.pred[j])]} ({e.conf[j]:.0%})\nSSIM {e.ssim_cases[j]:.3f}"
        columns.append(((X[i], seed_cap, False), (res.X_cases[j], ae_cap, True)))
    return pairs_across(columns, row_labels=("seed", "HDA AE"), empty="no AEs found")


def curve_figure(curve: List[Dict[str, float]]) -> Any:
    """Fig. 5: the GA's AE proportion, share of seeds in the second step, best prediction loss and perceptual term."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6.0, 3.4))
    if curve:
        g = [c["generation"] for c in curve]
        ax.plot(g, [c["ae_prop"] for c in curve], label="AE proportion")
        ax.plot(g, [c["stage2"] for c in curve], label="seeds in step 2", ls="--")
        ax.set_ylim(-0.02, 1.02)
        ax2 = ax.twinx()
        ax2.plot(g, [c["best_J"] for c in curve], color="crimson", alpha=0.7, label="best prediction loss")
        ax2.set_ylabel("prediction loss of the best", color="crimson")
        ax3 = ax.twinx()
        ax3.spines["right"].set_position(("outward", 48))
        ax3.plot(g, [c["best_Q"] for c in curve], color="navy", alpha=0.6, ls=":", label="best perceptual term")
        ax3.set_ylabel("perceptual term of the best", color="navy")
    ax.set_xlabel("generation")
    ax.set_ylabel("share")
    ax.legend(fontsize=8, loc="lower left")
    fig.tight_layout()
    return fig


def indicators_figure(log10p: np.ndarray, grad: Optional[np.ndarray], sep: np.ndarray) -> Any:
    """Fig. 4: the estimated local robustness of the balls against each indicator (log10)."""
    plt = pyplot()
    n = 2 if grad is not None else 1
    fig, axes = plt.subplots(1, n, figsize=(4.2 * n, 3.4), squeeze=False)
    pairs = ([("gradient indicator (log10)", grad)] if grad is not None else []) + [
        ("separation distance (log10)", sep)
    ]
    for ax, (lab, v) in zip(axes[0], pairs):
        ax.scatter(np.log10(v + 1e-30), log10p, s=8, alpha=0.6)
        ax.set_xlabel(lab)
        ax.set_ylabel("log10 P(misclassified in the ball)")
        ax.grid(alpha=0.3)
    fig.tight_layout()
    return fig


def samples_figure(kde: np.ndarray, uni: np.ndarray) -> Any:
    """Fig. 3: decoded samples of the KDE (top row) and of a uniform latent box (bottom row)."""
    plt = pyplot()
    n = max(1, len(kde))
    fig, axes = plt.subplots(2, n, figsize=(1.1 * n + 0.4, 2.5), squeeze=False)
    for r, imgs in enumerate((kde, uni)):
        for c in range(n):
            ax = axes[r, c]
            ax.set_xticks([])
            ax.set_yticks([])
            if c < len(imgs):
                show_image(ax, imgs[c], frame=True)
    axes[0, 0].set_ylabel("KDE", fontsize=8)
    axes[1, 0].set_ylabel("uniform", fontsize=8)
    fig.tight_layout()
    return fig
