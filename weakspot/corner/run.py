"""Corner cases (seeds/003) on one white-box image target: the generator, the seed search, realism, the judge's
controls and, at depth study, the paper's comparisons (FGSM against a latent step, the paper-lr rerun), as a
:class:`CornerResult` (no prose, no figures: :mod:`weakspot.corner.report` and
:mod:`weakspot.corner.figures` turn it into the report section).

Caveats first:

* White box: the classifier must be a :class:`weakspot.models.TorchClassifier`; its logits are differentiated through
  the decoder. It is never trained or changed here.
* The generator is trained on the target's *training* images only, without labels (the labels only colour the codes
  in the latent-plane figure and score the generator's reconstructions). It is one runtime call keyed on the pixels
  and the generator's params, not on the target, so targets on the same training images share it.
* A *corner case* is an optimised seed that is near the boundary -- top two probabilities within
  ``boundary_margin`` (probability units) -- and realistic: its latent log-density under the KDE of the training codes
  reaches the ``realism_quantile`` of the training codes' own (leave-one-out) log-densities, and, where the
  discriminator is used, ``D(G(s)) > 0`` (:func:`corner_flags`). The hardness the search minimises is the *logit*
  margin (top-1 minus top-2 logit).
* Deterministic: the same seed gives the same corner cases on the CPU, at both depths (the comparisons draw nothing
  at random and change nothing the corner cases or the judge's controls read).
"""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass, field
from typing import Any, Dict, Optional, Sequence, Tuple

import numpy as np

from weakspot.corner.autoencoder import Generator
from weakspot.corner.config import CornerParams
from weakspot.corner.controls import paper_lr_margins
from weakspot.corner.generator import check_generator, check_images, generator_bytes, generator_params
from weakspot.corner.realism import LatentDensity, latent_density, nearest_train_distance
from weakspot.data.parts import sample_rows
from weakspot.corner.search import CornerSearch, FgsmComparison, fgsm_vs_latent, search_corner_cases
from weakspot.device import resolve_device, single_thread
from weakspot.errors import ConfigError, DataError
from weakspot.methods import AuditTarget
from weakspot.progress import Progress


@dataclass
class CornerResult:
    """What a corner-case run found and measured on one target.

    Attributes
    ----------
    search : CornerSearch
        Every seed before and after the search (:func:`weakspot.corner.search.search_corner_cases`).
    comparison : FgsmComparison or None
        FGSM against one latent step on the same seeds (Sec. 4.5); None at depth audit.
    flags : dict of str -> bool array ``(n_seeds,)``
        :func:`corner_flags`: ``near``, ``kde_ok``, ``disc_ok``, ``realistic``, ``corner``, ``near_before``,
        ``realistic_before``.
    generator : Generator
        The generator the search ran through (the figures decode with it).
    density : LatentDensity
        The realism KDE of the training codes and its threshold.
    use_discriminator : bool
        Whether the discriminator took part in the search and the realism test.
    n_train : int
        Training images the generator learnt.
    accuracy_on_training_images, accuracy_on_reconstructions : float
        The model's accuracy on (up to 1000) training images and on the generator's reconstructions of them.
    nearest_train_before, nearest_train_after : array ``(n_seeds,)``
        RMS pixel distance of each decoded seed, before and after the search, to its nearest training image.
    seconds : dict of str -> float
        Wall-clock seconds per phase (never in the metrics).
    heldout : dict of str -> array, optional
        :func:`heldout_margins` of the evaluation rows the search never saw (``y``, ``pred``, ``margin``): what the
        class pairs are confirmed on.
    paper_lr : dict, optional
        :func:`weakspot.corner.controls.paper_lr_margins`: the search rerun at the paper's step on the first seeds
        (None at depth audit, or for ``paper_lr_seeds: 0``).
    controls : dict, optional
        :func:`judge_controls`: the independent judge's ``sets``, ``passed`` (per seed), ``yield``, the generator's
        ``gate`` and the ``judge``'s own numbers; None without held-out images.
    generator_info : dict
        ``pixels`` (the training images' digest, the generator's cache key) and ``training_seconds``.
    """

    search: CornerSearch
    comparison: Optional[FgsmComparison]
    flags: Dict[str, np.ndarray]
    generator: Generator
    density: LatentDensity
    use_discriminator: bool
    n_train: int
    accuracy_on_training_images: float
    accuracy_on_reconstructions: float
    nearest_train_before: np.ndarray
    nearest_train_after: np.ndarray
    seconds: Dict[str, float] = field(default_factory=dict)
    generator_info: Dict[str, Any] = field(default_factory=dict)
    heldout: Optional[Dict[str, np.ndarray]] = None
    paper_lr: Optional[Dict[str, Any]] = None
    controls: Optional[Dict[str, Any]] = None
    depth: str = "audit"

    @property
    def latent_dim(self) -> int:
        return self.generator.latent_dim


def check_training_data(X: Any, y: Any, classes: Sequence[str], clf: Any) -> Tuple[np.ndarray, np.ndarray]:
    """``(X, y)`` as float32 images and int64 labels; a DataError or ConfigError names what does not fit."""
    X = np.ascontiguousarray(check_images(X), np.float32)
    y = np.asarray(y).astype(np.int64)
    if len(y) != len(X):
        raise DataError(f"corner: {len(X)} training images but {len(y)} labels")
    if X.size and (X.min() < -1e-6 or X.max() > 1 + 1e-6):
        raise DataError(f"corner: images must be in [0, 1], got range [{X.min():.3g}, {X.max():.3g}]")
    if len(classes) != clf.n_classes:
        raise ConfigError(f"corner: {len(classes)} class names for a {clf.n_classes}-class model")
    return X, y


def run(target: AuditTarget, params: CornerParams, runtime: Any) -> CornerResult:
    """Corner cases of ``target.model``: the generator of its training images (a cached runtime call), then
    :func:`corner_cases`."""
    t0 = time.perf_counter()
    X, y = check_training_data(target.train.X, target.train.y, target.classes, target.model)
    keep = sample_rows(len(X), params.train_sample, params.seed)  # at real sizes the sample sets the cost
    X, y = X[keep], y[keep]
    gp = generator_params(params)
    pixels = hashlib.sha256(str(X.shape).encode() + X.tobytes()).hexdigest()
    gen = runtime.cached(
        generator_bytes,
        X,
        gp,
        runtime.device,
        key={"call": "generator"},  # one call of its kind; the runtime adds what the stage depends on
        label=f"generator for {target.name}'s training images",
        progress=runtime.progress,
    )
    g = Generator.from_bytes(gen["generator"], device=resolve_device(runtime.device))
    seconds = time.perf_counter() - t0
    result = corner_cases(target.model, X, y, g, params, progress=runtime.progress)
    result.seconds = {"generator": seconds, **result.seconds}
    result.generator_info = {"pixels": pixels, "training_seconds": gen["seconds"]}
    if target.test is not None and len(target.test):
        result.heldout = heldout_margins(target.model, target.test.X, target.test.y)
        if len(target.test) >= 10:
            t1 = time.perf_counter()
            with single_thread(g.device):
                result.controls = judge_controls(target.model, X, y, target.test.X, target.test.y, result, params)
            result.seconds["judge"] = time.perf_counter() - t1
    return result


def judge_controls(
    clf: Any, X: np.ndarray, y: np.ndarray, X_held: Any, y_held: Any, result: CornerResult, params: CornerParams
) -> Dict[str, Any]:
    """The independent judge (:func:`weakspot.corner.judge.fit_judge`, trained on ``X``, ``y``, calibrated on half
    the held-out images), its verdicts on the corner cases and the controls
    (:func:`weakspot.corner.controls.judged_sets`, the other half as the real images) and the generator's gate on
    every held-out image (:func:`weakspot.corner.controls.generator_gate`)."""
    from weakspot.corner.controls import generator_gate, judged_sets
    from weakspot.corner.judge import fit_judge, split_heldout

    Xh, yh = np.asarray(X_held, np.float32), np.asarray(y_held).astype(np.int64)
    judge = fit_judge(
        X,
        y,
        Xh,
        yh,
        clf.n_classes,
        train=params.reference_train,
        epochs=params.reference_epochs,
        max_steps=params.reference_max_steps,
        quantile=params.near_quantile,
        seed=params.seed,
    )
    _, control = split_heldout(len(Xh), params.seed)
    out = judged_sets(
        clf,
        result.generator,
        judge,
        result.search,
        result.flags["corner"],
        Xh[control],
        params.n_random,
        params.boundary_margin,
        params.seed,
    )
    out["gate"] = generator_gate(clf, judge, result.generator, Xh, yh, params.gate)
    out["judge"] = {
        "reference_accuracy": judge.accuracy,
        "reference_epochs": judge.epochs,
        "reference_train": int(min(params.reference_train, len(X))),
        "near_threshold": judge.near_threshold,
        "sharp_threshold": judge.sharp_threshold,
        "n_calibration": int(len(judge.calibration)),
        "near_quantile": float(params.near_quantile),
    }
    return out


def heldout_margins(clf: Any, X: Any, y: Any) -> Dict[str, np.ndarray]:
    """The true class, the prediction and the top-two probability margin of each held-out input."""
    p = np.asarray(clf.predict_proba(np.asarray(X, np.float32)), np.float64)
    if p.ndim != 2 or len(p) != len(y) or not np.isfinite(p).all():
        raise DataError(
            f"corner: the model's probabilities on the {len(y)} held-out inputs have shape {p.shape} (or "
            "are not finite)"
        )
    top2 = np.sort(p, axis=1)[:, -2:] if p.shape[1] > 1 else np.concatenate([np.zeros_like(p), p], 1)
    return {"y": np.asarray(y).astype(np.int64), "pred": p.argmax(1), "margin": top2[:, 1] - top2[:, 0]}


def draw_seeds(g: Generator, density: LatentDensity, params: CornerParams) -> np.ndarray:
    """``params.n_seeds`` starting codes: draws from the codes' KDE, or from a Gaussian fitted to the codes."""
    rng = np.random.default_rng([int(params.seed) % (2**32), 3])
    if params.seed_source == "kde":
        return density.sample(params.n_seeds, rng)
    mu = g.codes.mean(0)
    cov = np.atleast_2d(np.cov(g.codes, rowvar=False))
    return rng.multivariate_normal(mu, cov, size=params.n_seeds, method="cholesky").astype(np.float32)


def corner_cases(
    clf: Any, X: np.ndarray, y: np.ndarray, g: Generator, params: CornerParams, *, progress: Optional[Progress] = None
) -> CornerResult:
    """Search for corner cases of ``clf`` through generator ``g`` and measure them.

    Parameters
    ----------
    clf : weakspot.models.TorchClassifier
        The model under audit (white box), mapping float32 ``(n, C, H, W)`` images in [0, 1] to logits.
    X, y : arrays ``(n, C, H, W)`` float32 in [0, 1] and ``(n,)`` int64
        The training images and labels, as :func:`check_training_data` returns them.
    g : Generator
        Trained on ``X`` with these params (:func:`weakspot.corner.generator.train_generator`); the search runs on
        its device.
    params : CornerParams
        At depth audit (``params.depth``) without the paper's comparisons (``comparison`` and ``paper_lr`` None).
    progress : callable(what, done, total), optional
    """
    check_generator(g, X.shape[1:], params)
    use_disc = params.uses_discriminator(int(X.shape[1]))
    times: Dict[str, float] = {}
    with single_thread(g.device):  # measured: 2.6x faster than 2 threads on a loaded 2-core machine (scenes)
        t1 = time.perf_counter()
        dens = latent_density(g.codes, bandwidth=params.kde_bandwidth, quantile=params.realism_quantile)
        seeds = draw_seeds(g, dens, params)
        search = search_corner_cases(
            clf,
            g,
            seeds,
            steps=params.steps,
            lr=params.lr,
            density=dens,
            realism_weight=params.realism_weight,
            use_discriminator=use_disc,
            disc_alpha=params.disc_alpha,
            schedule=params.lr_schedule,
            progress=progress,
        )
        times["search"] = time.perf_counter() - t1
        t2 = time.perf_counter()
        comparison = fgsm_vs_latent(clf, g, seeds, eps=params.fgsm_eps) if params.comparisons else None
        after = nearest_train_distance(search.images_after, X)
        before = nearest_train_distance(search.images_before, X)
        # does the generator keep what the model needs? the model's accuracy on reconstructions of training images
        idx = np.random.default_rng([int(params.seed) % (2**32), 5]).permutation(len(X))[:1000]
        on_images = float(np.mean(clf.predict(X[idx]) == y[idx]))
        on_reconstructions = float(np.mean(clf.predict(g.reconstruct_np(X[idx])) == y[idx]))
        times["fgsm_and_distances" if params.comparisons else "distances"] = time.perf_counter() - t2
        paper = None
        if params.comparisons:
            t3 = time.perf_counter()
            paper = paper_lr_margins(clf, g, seeds, dens, params, use_disc)
            times["paper_lr"] = time.perf_counter() - t3
    return CornerResult(
        search=search,
        comparison=comparison,
        flags=corner_flags(search, dens, params, use_disc),
        generator=g,
        density=dens,
        use_discriminator=use_disc,
        n_train=len(X),
        accuracy_on_training_images=on_images,
        accuracy_on_reconstructions=on_reconstructions,
        nearest_train_before=before,
        nearest_train_after=after,
        seconds=times,
        paper_lr=paper,
        depth=params.depth,
    )


def corner_flags(
    search: CornerSearch, dens: LatentDensity, params: CornerParams, use_disc: bool
) -> Dict[str, np.ndarray]:
    """Per seed after the search: ``near`` (boundary), ``realistic`` (KDE, and discriminator where used), ``corner``."""
    near = search.prob_margin_after < params.boundary_margin
    kde_ok = search.log_density_after >= dens.threshold
    disc_ok = (search.disc_after > 0) if (use_disc and search.disc_after is not None) else np.ones_like(kde_ok)
    realistic = kde_ok & disc_ok
    return {
        "near": near,
        "kde_ok": kde_ok,
        "disc_ok": disc_ok,
        "realistic": realistic,
        "corner": near & realistic,
        "near_before": search.prob_margin_before < params.boundary_margin,
        "realistic_before": search.log_density_before >= dens.threshold,
    }
