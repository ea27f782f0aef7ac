"""Corner cases (seeds/003) on one image target: generator, seed search, realism, FGSM comparison, report.

Caveats first:

* White box: the classifier must be a :class:`weakspot.models.TorchClassifier`; its logits are differentiated through
  the decoder. It is never trained or changed here.
* The generator is trained on the target's *training* images only, without labels; the labels ``train_y`` only
  colour the codes in the latent-plane figure.
* A *corner case* is an optimised seed that is near the boundary -- top two probabilities within
  ``boundary_margin`` (probability units) -- and realistic: its latent log-density under the KDE of the training codes
  reaches the ``realism_quantile`` of the training codes' own (leave-one-out) log-densities, and, where the
  discriminator is used, ``D(G(s)) > 0``. The *realistic yield* is their share of all seeds. The hardness the search
  minimises, and the ``margin_before`` / ``margin_after`` metrics, are *logit* margins (top-1 minus top-2 logit).
* Where the paper's numbers are a CPU burden they are scaled down (:mod:`weakspot.corner.config` says where).
* Deterministic: the same seed gives the same corner cases on the CPU.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

import numpy as np

from weakspot.corner.autoencoder import Generator, train_autoencoder
from weakspot.corner.config import CornerParams
from weakspot.corner.realism import LatentDensity, latent_density, nearest_train_distance
from weakspot.corner.search import CornerSearch, FgsmComparison, fgsm_vs_latent, search_corner_cases
from weakspot.errors import ConfigError, DataError
from weakspot.progress import Progress
from weakspot.result import StageResult

SEVERITY_PAIR = ("number of realistic corner cases (optimised seeds with top-two probabilities within {bm} and a "
                 "latent density above the realism threshold) whose two top classes are this pair")
SEVERITY_INPUT = "1 - (p_top1 - p_top2) after the search: 1 = exactly on the decision boundary"


def _seeds(g: Generator, dens: LatentDensity, params: CornerParams) -> np.ndarray:
    rng = np.random.default_rng([int(params.seed) % (2**32), 3])
    if params.seed_source == "kde":
        return dens.sample(params.n_seeds, rng)
    mu = g.codes.mean(0)
    cov = np.atleast_2d(np.cov(g.codes, rowvar=False))
    return rng.multivariate_normal(mu, cov, size=params.n_seeds, method="cholesky").astype(np.float32)


def run_corner(clf: Any, train_X: np.ndarray, train_y: np.ndarray, classes: Sequence[str],
               params: Union[CornerParams, Dict[str, Any], None] = None, *, device: Any = "cpu",
               generator: Optional[Generator] = None,
               progress: Optional[Progress] = None) -> Tuple[StageResult, Any]:
    """Generate corner cases of ``clf`` and return the report section and the findings.

    Parameters
    ----------
    clf : weakspot.models.TorchClassifier
        The model under audit (white box), mapping float32 ``(n, C, H, W)`` images in [0, 1] to logits.
    train_X : array ``(n, C, H, W)`` float in [0, 1]
        The target's training images (the generator learns them, without labels).
    train_y : array ``(n,)`` int
        Their class codes (only to colour the latent-plane figure).
    classes : list of str
        Class names, indexed by class code.
    params : CornerParams or dict
    device : "cpu", "cuda" or torch.device
        Where the generator and the search run (the classifier's own device is used for the classifier).
    generator : Generator, optional
        A generator already trained on ``train_X`` with these params (:func:`train_generator`); trained here if not
        given. The pipeline trains it once per data set and shares it between the targets on that data.
    progress : callable(what, done, total), optional

    Returns
    -------
    (StageResult, pandas.DataFrame)
        The section (metrics as in :func:`metrics_of`) and the findings in :mod:`weakspot.findings`'s shape.
    """
    import pandas as pd

    from weakspot.device import resolve_device, single_thread

    params = params if isinstance(params, CornerParams) else CornerParams(**(params or {}))
    X = np.asarray(train_X)
    y = np.asarray(train_y).astype(np.int64)
    if X.ndim != 4 or X.shape[1] not in (1, 3):
        raise DataError(f"corner cases need images (n, C, H, W) with C = 1 or 3, got shape {X.shape}")
    if len(y) != len(X):
        raise DataError(f"corner: {len(X)} training images but {len(y)} labels")
    if X.size and (X.min() < -1e-6 or X.max() > 1 + 1e-6):
        raise DataError(f"corner: images must be in [0, 1], got range [{X.min():.3g}, {X.max():.3g}]")
    classes = [str(c) for c in classes]
    if len(classes) != clf.n_classes:
        raise ConfigError(f"corner: {len(classes)} class names for a {clf.n_classes}-class model")
    dev = resolve_device(device) if isinstance(device, str) else device
    C = int(X.shape[1])
    latent = params.resolved_latent_dim(C)
    use_disc = params.uses_discriminator(C)
    times: Dict[str, float] = {}
    t0 = time.perf_counter()
    with single_thread(dev):  # measured: 2.6x faster than 2 threads on a loaded 2-core machine (scenes)
        if generator is None:
            g = train_generator(X, params, device=dev, progress=progress)
        else:
            g = generator
            if tuple(g.ae.in_shape) != tuple(X.shape[1:]) or g.latent_dim != latent or \
                    (g.discriminator is not None) != use_disc:
                raise ConfigError(f"corner: the given generator (images {tuple(g.ae.in_shape)}, latent "
                                  f"{g.latent_dim}, discriminator {g.discriminator is not None}) does not match the "
                                  f"data {tuple(X.shape[1:])} and params (latent {latent}, discriminator {use_disc})")
        times["generator"] = time.perf_counter() - t0
        t1 = time.perf_counter()
        dens = latent_density(g.codes, bandwidth=params.kde_bandwidth, quantile=params.realism_quantile)
        seeds = _seeds(g, dens, params)
        search = search_corner_cases(
            clf, g, seeds, steps=params.steps, lr=params.lr, density=dens, realism_weight=params.realism_weight,
            use_discriminator=use_disc, disc_alpha=params.disc_alpha, schedule=params.lr_schedule,
            progress=progress)
        times["search"] = time.perf_counter() - t1
        t2 = time.perf_counter()
        comparison = fgsm_vs_latent(clf, g, seeds, eps=params.fgsm_eps)
        search.extras["nearest_train"] = nearest_train_distance(search.images_after, X)
        search.extras["nearest_train_before"] = nearest_train_distance(search.images_before, X)
        times["fgsm_and_distances"] = time.perf_counter() - t2
        t3 = time.perf_counter()
        flags = corner_flags(search, dens, params, use_disc)
        result = result_of(clf, g, dens, search, comparison, flags, X, y, classes, params, use_disc, times)
        findings = findings_of(search, flags, classes, params)
        times["report"] = time.perf_counter() - t3
    times["total"] = time.perf_counter() - t0
    # timings go to a table, not the metrics: metrics are byte-identical across reruns
    result.tables["seconds"] = pd.DataFrame({"phase": list(times), "seconds": [round(v, 2) for v in times.values()]})
    result.items.append({"table": "seconds", "caption": "Wall-clock seconds per phase of this run (the generator's "
                         "phase is 0 when a cached generator of the same data and params was reused)."})
    return result, findings


def train_generator(train_X: np.ndarray, params: Union[CornerParams, Dict[str, Any], None] = None, *,
                    device: Any = "cpu", progress: Optional[Progress] = None) -> Generator:
    """The generator (autoencoder, and discriminator where used) of ``params`` on training images ``(n, C, H, W)``.

    Depends on the images and the generator's params only (not on any classifier): one per data set."""
    params = params if isinstance(params, CornerParams) else CornerParams(**(params or {}))
    X = np.asarray(train_X)
    if X.ndim != 4 or X.shape[1] not in (1, 3):
        raise DataError(f"corner cases need images (n, C, H, W) with C = 1 or 3, got shape {X.shape}")
    C = int(X.shape[1])
    return train_autoencoder(
        X, latent_dim=params.resolved_latent_dim(C), channels=params.channels, hidden=params.hidden,
        epochs=params.epochs, lr=params.lr_ae, batch_size=params.batch_size, seed=params.seed,
        max_steps=params.max_ae_steps, discriminator=params.uses_discriminator(C), disc_epochs=params.disc_epochs,
        disc_widen=params.disc_widen, device=device, progress=progress)


GENERATOR_KEYS = ("seed", "latent_dim", "channels", "hidden", "epochs", "max_ae_steps", "lr_ae", "batch_size",
                  "discriminator", "disc_epochs", "disc_widen")
"""The params the generator depends on (its cache key, with the training images)."""


def corner_flags(search: CornerSearch, dens: LatentDensity, params: CornerParams, use_disc: bool) -> Dict[str, np.ndarray]:
    """Per seed after the search: ``near`` (boundary), ``realistic`` (KDE, and discriminator where used), ``corner``."""
    near = search.prob_margin_after < params.boundary_margin
    kde_ok = search.log_density_after >= dens.threshold
    disc_ok = (search.disc_after > 0) if (use_disc and search.disc_after is not None) else np.ones_like(kde_ok)
    realistic = kde_ok & disc_ok
    return {"near": near, "kde_ok": kde_ok, "disc_ok": disc_ok, "realistic": realistic, "corner": near & realistic,
            "near_before": search.prob_margin_before < params.boundary_margin,
            "realistic_before": search.log_density_before >= dens.threshold}


def _pairs(search: CornerSearch, mask: np.ndarray) -> List[Tuple[int, int, int]]:
    cnt = Counter()
    for i in np.flatnonzero(mask):
        a, b = sorted((int(search.pred_after[i]), int(search.second_after[i])))
        cnt[(a, b)] += 1
    return sorted(((a, b, c) for (a, b), c in cnt.items()), key=lambda t: (-t[2], t[0], t[1]))


def metrics_of(search: CornerSearch, comparison: FgsmComparison, flags: Dict[str, np.ndarray], classes: List[str],
               g: Generator, dens: LatentDensity, use_disc: bool, latent: int) -> Dict[str, Any]:
    """The stage's metrics: the required keys first, then details."""
    n = search.n
    pairs = _pairs(search, flags["corner"])
    mb, ma = float(np.median(search.margin_before)), float(np.median(search.margin_after))
    m = {
        "n_seeds": int(n),
        "margin_before": mb,
        "margin_after": ma,
        "realistic_yield": float(flags["corner"].mean()) if n else 0.0,
        "tv_corner": float(np.mean(comparison.tv_latent)),
        "tv_fgsm": float(np.mean(comparison.tv_fgsm)),
        "top_class_pairs": [[classes[a], classes[b], int(c)] for a, b, c in pairs[:5]],
        # details
        "margin_reduction": float(mb / ma) if ma > 0 else float("inf"),
        "prob_margin_before": float(np.median(search.prob_margin_before)),
        "prob_margin_after": float(np.median(search.prob_margin_after)),
        "near_boundary_share": float(flags["near"].mean()),
        "near_boundary_share_before": float(flags["near_before"].mean()),
        "realistic_share": float(flags["realistic"].mean()),
        "realistic_share_before": float(flags["realistic_before"].mean()),
        "n_corner_cases": int(flags["corner"].sum()),
        "class_changed_share": float(np.mean(search.pred_after != search.pred_before)),
        "latent_dim": int(latent),
        "discriminator": bool(use_disc),
        "kde_bandwidth": float(dens.bandwidth),
        "kde_threshold": float(dens.threshold),
        "seed_move_median": float(np.median(np.linalg.norm(search.final - search.seeds, axis=1))),
        "autoencoder_mse": float(g.history["loss"][-1]),
        "autoencoder_r2": float(g.history.get("r2", float("nan"))),
        "autoencoder_epochs": int(g.history.get("epochs", len(g.history["loss"]))),
        "tv_decoded": float(np.mean(comparison.tv)),
        "manifold_decoded": float(np.mean(comparison.manifold)),
        "manifold_corner": float(np.mean(comparison.manifold_latent)),
        "manifold_fgsm": float(np.mean(comparison.manifold_fgsm)),
        "flip_rate_fgsm": float(np.mean(comparison.pred_fgsm != comparison.pred)),
        "flip_rate_latent": float(np.mean(comparison.pred_latent != comparison.pred)),
        "nearest_train_rms_before": float(np.median(search.extras["nearest_train_before"])),
        "nearest_train_rms_after": float(np.median(search.extras["nearest_train"])),
    }
    if use_disc:
        m["disc_accuracy"] = float(g.history.get("disc_accuracy", float("nan")))
        m["disc_real_share"] = float(flags["disc_ok"].mean())
    return m


def tables_of(search: CornerSearch, comparison: FgsmComparison, flags: Dict[str, np.ndarray], classes: List[str],
              params: CornerParams, use_disc: bool) -> Dict[str, Any]:
    import pandas as pd

    n = max(search.n, 1)
    rows = [("seeds", search.n, search.n)]
    rows.append((f"near the boundary before the search (p1 - p2 < {params.boundary_margin})",
                 int(flags["near_before"].sum()), int(flags["realistic_before"].sum())))
    rows.append((f"near the boundary after (p1 - p2 < {params.boundary_margin})", int(flags["near"].sum()), None))
    rows.append(("realistic after: latent density >= threshold", int(flags["kde_ok"].sum()), None))
    if use_disc:
        rows.append(("realistic after: discriminator D(G(s)) > 0", int(flags["disc_ok"].sum()), None))
    rows.append(("realistic corner cases (near and realistic)", int(flags["corner"].sum()), None))
    yield_t = pd.DataFrame({"what": [r[0] for r in rows], "count": [r[1] for r in rows],
                            "share": [r[1] / n for r in rows]})
    pairs = _pairs(search, flags["corner"])
    pair_t = pd.DataFrame([{"class_a": classes[a], "class_b": classes[b], "corner_cases": c} for a, b, c in pairs],
                          columns=["class_a", "class_b", "corner_cases"])
    comp = pd.DataFrame({
        "images": ["decoded seeds G(s)", f"FGSM, eps = {comparison.eps} (pixels)",
                   f"latent step, eps = {comparison.eps} (standardised latent units)"],
        "total_variation": [comparison.tv.mean(), comparison.tv_fgsm.mean(), comparison.tv_latent.mean()],
        "distance_to_manifold": [comparison.manifold.mean(), comparison.manifold_fgsm.mean(),
                                 comparison.manifold_latent.mean()],
        "prediction_changed": [0.0, np.mean(comparison.pred_fgsm != comparison.pred),
                               np.mean(comparison.pred_latent != comparison.pred)],
    })
    mp = search.margin_path
    curve = pd.DataFrame({"step": np.arange(len(mp)), "margin_median": np.median(mp, axis=1),
                          "margin_q25": np.quantile(mp, 0.25, axis=1), "margin_q75": np.quantile(mp, 0.75, axis=1)})
    return {"yield": yield_t, "class_pairs": pair_t, "fgsm_comparison": comp, "margin_curve": curve}


def settings_table(params: CornerParams, latent: int, use_disc: bool, n_train: int, ae_epochs: int) -> Any:
    """What ran next to the paper's setting, one row per setting the paper gives (Sec. 4.1-4.5)."""
    import pandas as pd

    from weakspot.corner.config import PAPER_SETTINGS

    rows = []
    for key, (paper, where) in PAPER_SETTINGS.items():
        ran = getattr(params, key)
        rows.append({"setting": key, "ran": str(ran), "paper": f"{paper} ({where})", "differs": ran != paper})
    rows.append({"setting": "latent_dim", "ran": str(latent), "paper": "2 for MNIST (Sec. 4.1)", "differs": latent != 2})
    rows.append({"setting": "discriminator", "ran": str(use_disc), "paper": "not needed for 2-D MNIST (Sec. 4.1, 4.3)",
                 "differs": bool(use_disc)})
    rows.append({"setting": "autoencoder training", "ran": f"{ae_epochs} epochs on {n_train} training images",
                 "paper": "MNIST training set (epochs not given)", "differs": True})
    rows.append({"setting": "n_seeds", "ran": str(params.n_seeds), "paper": "not given (a handful shown)", "differs": False})
    return pd.DataFrame(rows, columns=["setting", "ran", "paper", "differs"])


def findings_of(search: CornerSearch, flags: Dict[str, np.ndarray], classes: List[str], params: CornerParams) -> Any:
    """Findings: one ``class_pair`` row per confused pair (most corner cases first, at most ``max_pairs``), then the
    ``input`` rows, the realistic corner cases closest to the boundary (at most ``max_findings``)."""
    import pandas as pd

    from weakspot.findings import to_png

    corner = np.flatnonzero(flags["corner"])
    pm = search.prob_margin_after
    rows: List[Dict[str, Any]] = []
    for a, b, c in _pairs(search, flags["corner"])[: params.max_pairs]:
        members = [i for i in corner if sorted((int(search.pred_after[i]), int(search.second_after[i]))) == [a, b]]
        best = min(members, key=lambda i: (pm[i], i))
        before = Counter(int(search.pred_before[i]) for i in members).most_common(1)[0][0]
        after = Counter(int(search.pred_after[i]) for i in members).most_common(1)[0][0]
        rows.append({
            "weak_spot": f"realistic inputs between classes {classes[a]} and {classes[b]}", "kind": "class_pair",
            "severity": float(c), "severity_meaning": SEVERITY_PAIR.format(bm=params.boundary_margin),
            "label": None, "prediction": classes[after],  # generated inputs have no true class
            "confidence": float(np.mean(search.confidence_after[members])),
            "example": json.dumps({"corner cases": int(c), "most seeds started as": classes[before],
                                   "mean p1 - p2": round(float(np.mean(pm[members])), 4)}),
            "image": to_png(search.images_after[best]),
        })
    for i in sorted(corner, key=lambda i: (pm[i], i))[: params.max_findings]:
        a, b = sorted((int(search.pred_after[i]), int(search.second_after[i])))
        rows.append({
            "weak_spot": f"realistic input between classes {classes[a]} and {classes[b]}", "kind": "input",
            "severity": float(1.0 - pm[i]), "severity_meaning": SEVERITY_INPUT,
            "label": None, "prediction": classes[int(search.pred_after[i])],
            "confidence": float(search.confidence_after[i]),
            "example": json.dumps({"seed started as": classes[int(search.pred_before[i])],
                                   "runner-up": classes[int(search.second_after[i])],
                                   "p1 - p2": round(float(pm[i]), 4)}),
            "image": to_png(search.images_after[i]),
        })
    cols = ["weak_spot", "kind", "severity", "severity_meaning", "label", "prediction", "confidence", "example", "image"]
    return pd.DataFrame(rows, columns=cols)


# --------------------------------------------------------------------------------------------------- figures


def _show(ax, img: np.ndarray) -> None:
    a = np.clip(np.asarray(img), 0, 1)
    if a.shape[0] == 1:
        ax.imshow(a[0], cmap="gray", vmin=0, vmax=1, interpolation="nearest")
    else:
        ax.imshow(np.moveaxis(a, 0, -1), interpolation="nearest")
    ax.set_xticks([])
    ax.set_yticks([])


def _path_seeds(search: CornerSearch, flags: Dict[str, np.ndarray], k: int) -> List[int]:
    corner = [int(i) for i in np.flatnonzero(flags["corner"])]
    drop = search.margin_before - search.margin_after
    corner.sort(key=lambda i: (-drop[i], i))
    rest = [int(i) for i in np.argsort(-drop, kind="stable") if i not in set(corner)]
    return (corner + rest)[:k]


def figures_of(clf: Any, g: Generator, search: CornerSearch, comparison: FgsmComparison,
               flags: Dict[str, np.ndarray], X: np.ndarray, y: np.ndarray, classes: List[str],
               params: CornerParams) -> Dict[str, Any]:
    from matplotlib.figure import Figure

    figs: Dict[str, Any] = {}
    # the generator's quality: training images over their reconstructions
    k = min(10, len(X))
    idx = np.random.default_rng(int(params.seed)).choice(len(X), size=k, replace=False)
    rec = g.reconstruct_np(X[idx])
    fig = Figure(figsize=(1.0 * k + 0.4, 2.4))
    axes = fig.subplots(2, k, squeeze=False)
    for c in range(k):
        _show(axes[0, c], X[idx[c]])
        _show(axes[1, c], rec[c])
    axes[0, 0].set_ylabel("training", fontsize=7)
    axes[1, 0].set_ylabel("G(E(x))", fontsize=7)
    fig.suptitle("The generator: training images (top) and their reconstructions (bottom)", fontsize=8)
    fig.tight_layout()
    figs["reconstructions"] = fig
    # Fig. 4-5: optimisation paths
    chosen = _path_seeds(search, flags, params.n_paths)
    steps = search.path.shape[0] - 1
    snaps = sorted(set(np.linspace(0, steps, 6).round().astype(int).tolist()))
    fig = Figure(figsize=(1.3 * len(snaps) + 0.5, 1.45 * len(chosen) + 0.4))
    axes = fig.subplots(len(chosen), len(snaps), squeeze=False)
    for r, i in enumerate(chosen):
        imgs = g.decode_np(np.stack([search.path[t, i] for t in snaps]))
        p = clf.predict_proba(imgs)
        for c, t in enumerate(snaps):
            ax = axes[r, c]
            _show(ax, imgs[c])
            top = np.argsort(-p[c])[:2]
            ax.set_title(f"step {t}: {classes[top[0]]}/{classes[top[1]]}\nmargin {search.margin_path[t, i]:.2g}",
                         fontsize=6)
    fig.suptitle("Optimisation paths of seeds (predicted top-1/top-2 class, logit margin)", fontsize=8)
    fig.tight_layout()
    figs["optimisation_paths"] = fig

    # Fig. 6: latent plane
    codes = g.codes
    d = codes.shape[1]
    if d == 2:
        proj = np.eye(2, dtype=np.float64)
        centre = np.zeros(2)
        xlabel, ylabel = "latent 1 (standardised)", "latent 2 (standardised)"
    else:
        centre = codes.mean(0)
        _, _, vt = np.linalg.svd(codes - centre, full_matrices=False)
        proj = vt[:2].T
        xlabel, ylabel = "PC 1 of the codes", "PC 2 of the codes"
    fig = Figure(figsize=(6.5, 5.5))
    ax = fig.subplots()
    pc = (codes - centre) @ proj
    cmap = "tab10" if len(classes) <= 10 else "tab20"
    if d == 2:  # the classifier's regions on the decoded plane
        lo, hi = pc.min(0) - 0.5, pc.max(0) + 0.5
        gx, gy = np.meshgrid(np.linspace(lo[0], hi[0], 120), np.linspace(lo[1], hi[1], 120))
        grid = np.stack([gx.ravel(), gy.ravel()], 1).astype(np.float32)
        region = clf.predict_proba(g.decode_np(grid)).argmax(1).reshape(gx.shape)
        ax.imshow(region, origin="lower", extent=(lo[0], hi[0], lo[1], hi[1]), cmap=cmap, alpha=0.18,
                  vmin=0, vmax=max(len(classes) - 1, 1) if len(classes) <= 10 else None, aspect="auto",
                  interpolation="nearest")
    sc = ax.scatter(pc[:, 0], pc[:, 1], c=y, cmap=cmap, s=4, alpha=0.6, vmin=0, vmax=max(len(classes) - 1, 1))
    paths = (search.path - centre) @ proj  # (steps + 1, n, 2)
    for i in range(search.n):
        ax.plot(paths[:, i, 0], paths[:, i, 1], color="k", lw=0.6, alpha=0.6)
    corner = flags["corner"]
    ax.scatter(paths[0, :, 0], paths[0, :, 1], s=10, facecolors="none", edgecolors="k", lw=0.5, label="seed (start)")
    ax.scatter(paths[-1, ~corner, 0], paths[-1, ~corner, 1], s=10, marker="x", color="0.3", lw=0.7,
               label="optimised seed")
    ax.scatter(paths[-1, corner, 0], paths[-1, corner, 1], s=16, marker="x", color="red", lw=1.0,
               label="realistic corner case")
    handles = sc.legend_elements(num=None)[0]
    present = [classes[int(v)] for v in np.unique(y)][: len(handles)]
    leg1 = ax.legend(handles, present, fontsize=6, title="class (real codes)", title_fontsize=6,
                     loc="upper right", markerscale=0.8)
    ax.add_artist(leg1)
    ax.legend(fontsize=6, loc="lower left")
    ax.set(xlabel=xlabel, ylabel=ylabel,
           title="Real codes (coloured by class) and seed trajectories" + (" (PCA projection)" if d > 2 else ""))
    figs["latent_plane"] = fig

    # Fig. 7: FGSM against the latent step
    k = min(8, len(comparison.images))
    fig = Figure(figsize=(1.25 * k + 0.8, 4.3))
    axes = fig.subplots(3, k, squeeze=False)
    names = ["G(s)", f"FGSM eps={comparison.eps}", f"latent step {comparison.eps}"]
    for r, (imgs, preds) in enumerate(((comparison.images, comparison.pred), (comparison.fgsm, comparison.pred_fgsm),
                                       (comparison.latent, comparison.pred_latent))):
        for c in range(k):
            _show(axes[r, c], imgs[c])
            axes[r, c].set_title(classes[int(preds[c])], fontsize=7)
        axes[r, 0].set_ylabel(names[r], fontsize=7)
    fig.suptitle("FGSM on decoded seeds (middle) against one latent step of the same size (bottom); title = prediction",
                 fontsize=8)
    fig.tight_layout()
    figs["fgsm_vs_latent"] = fig

    # margin over the steps
    fig = Figure(figsize=(5.5, 3.5))
    ax = fig.subplots()
    mp = np.maximum(search.margin_path, 1e-6)
    t = np.arange(len(mp))
    ax.fill_between(t, np.quantile(mp, 0.25, axis=1), np.quantile(mp, 0.75, axis=1), alpha=0.3, label="25-75%")
    ax.plot(t, np.median(mp, axis=1), lw=2, label="median")
    ax.set_yscale("log")
    ax.set(xlabel="Adam step", ylabel="logit margin (top-1 - top-2)", title="Hardness over the search")
    ax.legend(fontsize=7)
    fig.tight_layout()
    figs["margin_curve"] = fig
    return figs


def result_of(clf: Any, g: Generator, dens: LatentDensity, search: CornerSearch, comparison: FgsmComparison,
              flags: Dict[str, np.ndarray], X: np.ndarray, y: np.ndarray, classes: List[str], params: CornerParams,
              use_disc: bool, times: Dict[str, float]) -> StageResult:
    latent = g.latent_dim
    m = metrics_of(search, comparison, flags, classes, g, dens, use_disc, latent)
    # does the generator keep what the model needs? the model's accuracy on reconstructions of training images
    idx = np.random.default_rng([int(params.seed) % (2**32), 5]).permutation(len(X))[:1000]
    m["model_accuracy_on_training_images"] = float(np.mean(clf.predict(X[idx]) == y[idx]))
    m["model_accuracy_on_reconstructions"] = float(np.mean(clf.predict(g.reconstruct_np(X[idx])) == y[idx]))
    poor = m["model_accuracy_on_reconstructions"] < 0.5 * m["model_accuracy_on_training_images"]
    tables = tables_of(search, comparison, flags, classes, params, use_disc)
    tables["settings"] = settings_table(params, latent, use_disc, len(X), m["autoencoder_epochs"])
    differ = [r for r in tables["settings"].to_dict("records") if r["differs"]]
    figures = figures_of(clf, g, search, comparison, flags, X, y, classes, params)
    pairs = ", ".join(f"{a}/{b} ({c})" for a, b, c in m["top_class_pairs"]) or "none"
    disc_txt = (f" and a discriminator (training accuracy {m.get('disc_accuracy', float('nan')):.2f}; Sec. 3's "
                f"loss alpha * margin - D with alpha = {params.disc_alpha})" if use_disc else
                " and no discriminator (as in the paper's 2-D MNIST setup, Sec. 4.1)")
    summary = [
        "Corner cases (Platon, Avrin & Chan-Hon-Tong, seeds/003) are whole generated inputs, not perturbations of real "
        "ones, that look like the data yet sit on the classifier's decision boundary: whatever their true class, the "
        "model cannot be handling them well. A convolutional autoencoder (4 convolutions each side, Sec. 4.2) learns "
        f"the training images without labels; its decoder G maps a {latent}-D code to an image. Random seeds drawn "
        f"from the training codes' distribution are optimised with Adam ({params.steps} steps, lr {params.lr}"
        f"{', annealed to 0 on a cosine' if params.lr_schedule == 'cosine' else ''}; the paper: 50 steps, lr 0.001) "
        "to minimise the logit margin between the two most likely classes of G(s), the classifier's "
        f"gradients flowing through the decoder (white box), with a realism hinge on the latent density{disc_txt}.",
        f"Over {m['n_seeds']} seeds the median logit margin went from {m['margin_before']:.3g} to "
        f"{m['margin_after']:.3g} in {params.steps} Adam steps (x{m['margin_reduction']:.3g}; the paper reports "
        "two orders of magnitude in 50 steps). "
        f"{m['near_boundary_share']:.0%} of the optimised seeds ended with their top two probabilities within "
        f"{params.boundary_margin} (before: {m['near_boundary_share_before']:.0%}); {m['realistic_share']:.0%} stayed "
        f"realistic (latent log-density under a Gaussian KDE of the training codes at or above the "
        f"{params.realism_quantile:.0%} quantile of the training codes' own{', and D(G(s)) > 0' if use_disc else ''}). "
        f"Realistic yield: {m['realistic_yield']:.1%} ({m['n_corner_cases']} corner cases). Most confused class pairs: "
        f"{pairs}. The seeds moved {m['seed_move_median']:.3g} standardised latent units (median; the paper, Sec. "
        "4.4, notes that its seeds moved only marginally).",
        f"Noise (Sec. 4.5): FGSM at eps = {params.fgsm_eps} on decoded seeds gives images with mean total variation "
        f"{m['tv_fgsm']:.3f} and distance to the data manifold (RMS of x - G(E(x))) {m['manifold_fgsm']:.3f}, against "
        f"{m['tv_corner']:.3f} and {m['manifold_corner']:.3f} for one latent step of the same length (decoded seeds "
        f"themselves: {m['tv_decoded']:.3f}, {m['manifold_decoded']:.3f}); FGSM changed the prediction of "
        f"{m['flip_rate_fgsm']:.0%} of the seeds, the latent step of {m['flip_rate_latent']:.0%}.",
        "Caveats: realism is judged by the generator's own view of the data (a KDE of its codes"
        + (", a discriminator of its decodings" if use_disc else "")
        + "), not by a person, and a 2-D code of the training images is a coarse model of them; decoded images are "
        "smoother than real ones. Corner cases carry no true label, so they show where the model is undecided on "
        "data-like inputs, not errors.",
        *([f"The generator is poor on these data: the model recognises {m['model_accuracy_on_reconstructions']:.0%} "
           "of its reconstructions of training images as their class, against "
           f"{m['model_accuracy_on_training_images']:.0%} of the images themselves. Its decodings "
           "are blurred averages (see the reconstructions figure), so the corner cases below are inputs on which the "
           "model is undecided within the generator's blurred image space, and 'realistic' means only 'like the "
           "generator's decodings of training images', not like a real input. A stronger generator (more epochs, "
           "a larger code: profiles/paper.yaml) is needed before these say anything about real inputs."]
          if poor else []),
        "Settings that differ from the paper's: " + "; ".join(f"{r['setting']} {r['ran']} (paper: {r['paper']})"
                                                              for r in differ) + "."
        + (" Why the step differs: the paper does not say in which units of its latent space lr 0.001 is taken; "
           "here the code is standardised (one unit = the training codes' spread), where 50 steps of 0.001 move a seed "
           "at most 0.05 units, and on digits the median margin fell only x1.5 (benchmarks/bench_corner.py --lr 0.001 "
           "--lr_schedule constant). The annealed step lets a seed that reached the boundary settle on it instead of "
           "bouncing across it." if params.lr != 0.001 or params.lr_schedule != "constant" else ""),
    ]
    items = [
        {"table": "settings", "caption": "What ran against the paper's settings (Sec. 4.1-4.5)."},
        {"figure": "reconstructions", "caption": f"The generator ({latent}-D code, {m['autoencoder_epochs']} epochs): "
         f"training images and their reconstructions. The model recognises "
         f"{m['model_accuracy_on_reconstructions']:.0%} of the reconstructions as their class "
         f"({m['model_accuracy_on_training_images']:.0%} of the images); they explain {m['autoencoder_r2']:.0%} of "
         "the images' variance around the mean image."},
        {"table": "yield", "caption": "Yield: how many seeds end near the decision boundary, how many stay realistic, and the realistic corner cases (both)."},
        {"figure": "optimisation_paths", "caption": "Fig. 4-5: decoded images along the optimisation of a few seeds (realistic corner cases first), with the top two classes and the logit margin."},
        {"figure": "latent_plane", "caption": "Fig. 6: codes of the training images coloured by class" + (", the classifier's decision regions on the decoded plane in the background," if latent == 2 else " (projected on their first two principal components),") + " and the seeds' trajectories (start: circle, end: cross; red: realistic corner case)."},
        {"figure": "margin_curve", "caption": "Median and interquartile logit margin of the seeds over the Adam steps (log scale)."},
        {"table": "class_pairs", "caption": "Class pairs the realistic corner cases sit between."},
        {"figure": "fgsm_vs_latent", "caption": f"Fig. 7: decoded seeds (top), FGSM at eps = {params.fgsm_eps} (middle) and one latent step of the same length (bottom), with the model's predictions."},
        {"table": "fgsm_comparison", "caption": "Sec. 4.5: total variation (mean absolute difference of neighbouring pixels) and distance to the data manifold (RMS reconstruction error through the autoencoder) of decoded seeds, FGSM images and latent-step images, and how often each changed the prediction."},
    ]
    headline = [
        f"Corner cases: {m['realistic_yield']:.1%} of {m['n_seeds']} latent seeds became realistic inputs on the "
        f"decision boundary (median logit margin {m['margin_before']:.3g} -> {m['margin_after']:.3g} in "
        f"{params.steps} Adam steps); top pairs: "
        f"{pairs}; FGSM images are noisier (TV {m['tv_fgsm']:.3f} vs {m['tv_corner']:.3f})."
        + (f" Caveat: the model recognises only {m['model_accuracy_on_reconstructions']:.0%} of the generator's "
           "reconstructions as their class, so these are blurred, not realistic, inputs." if poor else "")
    ]
    return StageResult(metrics=m, tables=tables, figures=figures, title="Corner cases: generated inputs on the decision boundary",
                       summary=summary, items=items, headline=headline,
                       key_metrics=["margin_before", "margin_after", "margin_reduction", "realistic_yield",
                                    "n_corner_cases", "tv_corner", "tv_fgsm", "model_accuracy_on_reconstructions"]
                       ).check()
