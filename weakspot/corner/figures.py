"""Corner cases' figures on a target: the generator's reconstructions, the optimisation paths (Fig. 4-5), the latent
plane (Fig. 6), FGSM against the latent step (Fig. 7) and the margin over the search.

Caveats first: the figures decode codes through the result's generator and ask the target's model for its
predictions (on the generator's device, one CPU thread, as the search ran); they draw what the run measured and
measure nothing the report relies on. Figures are returned open; the caller saves and closes them.
"""

from __future__ import annotations

from typing import Any, Dict, List

import numpy as np

from weakspot.corner.autoencoder import Generator
from weakspot.corner.config import CornerParams
from weakspot.corner.run import CornerResult
from weakspot.corner.search import CornerSearch, FgsmComparison
from weakspot.device import single_thread
from weakspot.methods import AuditTarget
from weakspot.plotting import pyplot, show_image


def figures(result: CornerResult, params: CornerParams, target: AuditTarget) -> Dict[str, Any]:
    """``{name: Figure}``: ``reconstructions``, ``optimisation_paths``, ``latent_plane``, ``fgsm_vs_latent`` (depth
    study only), ``margin_curve`` (the names the report's items refer to)."""
    clf, g, search = target.model, result.generator, result.search
    from weakspot.data.parts import sample_rows

    keep = sample_rows(len(target.train.X), params.train_sample, params.seed)  # the images the generator fitted
    X = np.ascontiguousarray(np.asarray(target.train.X)[keep], np.float32)
    y = np.asarray(target.train.y)[keep].astype(np.int64)
    classes = [str(c) for c in target.classes]
    with single_thread(g.device):
        out = {
            "reconstructions": reconstructions_figure(g, X, params.seed),
            "optimisation_paths": paths_figure(
                clf, g, search, path_seeds(search, result.flags, params.n_paths), classes
            ),
            "latent_plane": latent_plane_figure(clf, g, search, result.flags["corner"], y, classes),
        }
        if result.comparison is not None:  # the paper's comparison: depth study
            out["fgsm_vs_latent"] = fgsm_figure(result.comparison, classes)
        out["margin_curve"] = margin_figure(search)
        return out


def _show(ax: Any, image: Any, title: str = "", **title_kw: Any) -> None:
    """:func:`weakspot.plotting.show_image`, pixels drawn as squares (the input as the model sees it, not smoothed)."""
    show_image(ax, image, title, **title_kw)
    ax.images[-1].set_interpolation("nearest")


def _row_label(ax: Any, text: str) -> None:
    """A label left of an image row (``show_image`` hides the axes, and with them a y label)."""
    ax.text(-0.06, 0.5, text, transform=ax.transAxes, rotation=90, ha="right", va="center", fontsize=7)


def reconstructions_figure(g: Generator, X: np.ndarray, seed: int) -> Any:
    """The generator's quality: up to 10 training images (drawn with ``seed``) over their reconstructions."""
    k = min(10, len(X))
    idx = np.random.default_rng(int(seed)).choice(len(X), size=k, replace=False)
    rec = g.reconstruct_np(X[idx])
    fig, axes = pyplot().subplots(2, k, figsize=(1.0 * k + 0.4, 2.4), squeeze=False)
    for c in range(k):
        _show(axes[0, c], X[idx[c]])
        _show(axes[1, c], rec[c])
    _row_label(axes[0, 0], "training")
    _row_label(axes[1, 0], "G(E(x))")
    fig.suptitle("The generator: training images (top) and their reconstructions (bottom)", fontsize=8)
    fig.tight_layout()
    return fig


def path_seeds(search: CornerSearch, flags: Dict[str, np.ndarray], k: int) -> List[int]:
    """The ``k`` seeds whose paths are shown: realistic corner cases first, each group by the largest margin drop."""
    corner = [int(i) for i in np.flatnonzero(flags["corner"])]
    drop = search.margin_before - search.margin_after
    corner.sort(key=lambda i: (-drop[i], i))
    rest = [int(i) for i in np.argsort(-drop, kind="stable") if i not in set(corner)]
    return (corner + rest)[:k]


def paths_figure(clf: Any, g: Generator, search: CornerSearch, chosen: List[int], classes: List[str]) -> Any:
    """Fig. 4-5: decoded images at six steps of each ``chosen`` seed's path, with the top two classes and margin."""
    steps = search.path.shape[0] - 1
    snaps = sorted(set(np.linspace(0, steps, 6).round().astype(int).tolist()))
    fig, axes = pyplot().subplots(
        len(chosen), len(snaps), figsize=(1.3 * len(snaps) + 0.5, 1.45 * len(chosen) + 0.4), squeeze=False
    )
    for r, i in enumerate(chosen):
        imgs = g.decode_np(np.stack([search.path[t, i] for t in snaps]))
        p = clf.predict_proba(imgs)
        for c, t in enumerate(snaps):
            top = np.argsort(-p[c])[:2]
            _show(
                axes[r, c],
                imgs[c],
                f"step {t}: {classes[top[0]]}/{classes[top[1]]}\nmargin {search.margin_path[t, i]:.2g}",
                fontsize=6,
            )
    fig.suptitle("Optimisation paths of seeds (predicted top-1/top-2 class, logit margin)", fontsize=8)
    fig.tight_layout()
    return fig


def _plane(codes: np.ndarray):
    """Centre, projection ``(d, 2)`` and axis labels of the latent plane: the code itself when 2-D, else its PCA."""
    if codes.shape[1] == 2:
        return np.zeros(2), np.eye(2, dtype=np.float64), "latent 1 (standardised)", "latent 2 (standardised)"
    centre = codes.mean(0)
    _, _, vt = np.linalg.svd(codes - centre, full_matrices=False)
    return centre, vt[:2].T, "PC 1 of the codes", "PC 2 of the codes"


def latent_plane_figure(
    clf: Any, g: Generator, search: CornerSearch, corner: np.ndarray, y: np.ndarray, classes: List[str]
) -> Any:
    """Fig. 6: the training codes coloured by class, the seeds' trajectories and, for a 2-D code, the classifier's
    decision regions on the decoded plane."""
    codes = g.codes
    d = codes.shape[1]
    centre, proj, xlabel, ylabel = _plane(codes)
    fig, ax = pyplot().subplots(figsize=(6.5, 5.5))
    pc = (codes - centre) @ proj
    cmap = "tab10" if len(classes) <= 10 else "tab20"
    if d == 2:  # the classifier's regions on the decoded plane
        lo, hi = pc.min(0) - 0.5, pc.max(0) + 0.5
        gx, gy = np.meshgrid(np.linspace(lo[0], hi[0], 120), np.linspace(lo[1], hi[1], 120))
        grid = np.stack([gx.ravel(), gy.ravel()], 1).astype(np.float32)
        region = clf.predict_proba(g.decode_np(grid)).argmax(1).reshape(gx.shape)
        ax.imshow(
            region,
            origin="lower",
            extent=(lo[0], hi[0], lo[1], hi[1]),
            cmap=cmap,
            alpha=0.18,
            vmin=0,
            vmax=max(len(classes) - 1, 1) if len(classes) <= 10 else None,
            aspect="auto",
            interpolation="nearest",
        )
    sc = ax.scatter(pc[:, 0], pc[:, 1], c=y, cmap=cmap, s=4, alpha=0.6, vmin=0, vmax=max(len(classes) - 1, 1))
    paths = (search.path - centre) @ proj  # (steps + 1, n, 2)
    for i in range(search.n):
        ax.plot(paths[:, i, 0], paths[:, i, 1], color="k", lw=0.6, alpha=0.6)
    ax.scatter(paths[0, :, 0], paths[0, :, 1], s=10, facecolors="none", edgecolors="k", lw=0.5, label="seed (start)")
    ax.scatter(
        paths[-1, ~corner, 0], paths[-1, ~corner, 1], s=10, marker="x", color="0.3", lw=0.7, label="optimised seed"
    )
    ax.scatter(
        paths[-1, corner, 0], paths[-1, corner, 1], s=16, marker="x", color="red", lw=1.0, label="realistic corner case"
    )
    handles = sc.legend_elements(num=None)[0]
    present = [classes[int(v)] for v in np.unique(y)][: len(handles)]
    leg1 = ax.legend(
        handles, present, fontsize=6, title="class (real codes)", title_fontsize=6, loc="upper right", markerscale=0.8
    )
    ax.add_artist(leg1)
    ax.legend(fontsize=6, loc="lower left")
    ax.set(
        xlabel=xlabel,
        ylabel=ylabel,
        title="Real codes (coloured by class) and seed trajectories" + (" (PCA projection)" if d > 2 else ""),
    )
    return fig


def fgsm_figure(comparison: FgsmComparison, classes: List[str]) -> Any:
    """Fig. 7: up to 8 decoded seeds, their FGSM images and their latent-step images, titled by the prediction."""
    k = min(8, len(comparison.images))
    fig, axes = pyplot().subplots(3, k, figsize=(1.25 * k + 0.8, 4.3), squeeze=False)
    names = ["G(s)", f"FGSM eps={comparison.eps}", f"latent step {comparison.eps}"]
    for r, (imgs, preds) in enumerate(
        (
            (comparison.images, comparison.pred),
            (comparison.fgsm, comparison.pred_fgsm),
            (comparison.latent, comparison.pred_latent),
        )
    ):
        for c in range(k):
            _show(axes[r, c], imgs[c], classes[int(preds[c])], fontsize=7)
        _row_label(axes[r, 0], names[r])
    fig.suptitle(
        "FGSM on decoded seeds (middle) against one latent step of the same size (bottom); title = prediction",
        fontsize=8,
    )
    fig.tight_layout()
    return fig


def margin_figure(search: CornerSearch) -> Any:
    """The seeds' median and interquartile logit margin over the Adam steps (log scale)."""
    fig, ax = pyplot().subplots(figsize=(5.5, 3.5))
    mp = np.maximum(search.margin_path, 1e-6)
    t = np.arange(len(mp))
    ax.fill_between(t, np.quantile(mp, 0.25, axis=1), np.quantile(mp, 0.75, axis=1), alpha=0.3, label="25-75%")
    ax.plot(t, np.median(mp, axis=1), lw=2, label="median")
    ax.set_yscale("log")
    ax.set(xlabel="Adam step", ylabel="logit margin (top-1 - top-2)", title="Hardness over the search")
    ax.legend(fontsize=7)
    fig.tight_layout()
    return fig
