"""HDA's entry point on an image target: the weak spots and their evidence (``hda.depth: audit``), or the whole
protocol (RQ1-RQ4 of seeds/004, :mod:`weakspot.hda.protocol`) and the repaired model of RQ4 (``hda.depth: study``),
as an :class:`~weakspot.hda.result.HdaResult` (the report and the figures are :mod:`weakspot.hda.report` and
:mod:`weakspot.hda.figures`).

Caveats first: black-box at its core (the GA reads probabilities only); the gradient indicator, PGD, coverage,
Table 8 and the fine-tuning need a torch module answering logits and are skipped otherwise (a torch model that
answers probabilities gets their logs as logits). The adversarially trained model of RQ3 is the intrinsic method's
min-max model, through ``runtime`` with the ``intrinsic`` section's settings (the same cached training), trained at
depth study only. At depth audit only the VAE+KDE, the indicators, the seed selection and HDA's GA around the
selected and the random seeds run, drawing the same random numbers up to the GA as depth study does, so both give
the same seeds, test cases and weak spots. Timings are in the result's ``seconds``, never in the metrics.
"""

from __future__ import annotations

import time
from typing import Any, Optional, Sequence, Tuple

import numpy as np

from weakspot.data.dataset import image_range
from weakspot.device import resolve_device
from weakspot.errors import DataError
from weakspot.hda.config import HdaParams, radius_of
from weakspot.hda.density import train_density
from weakspot.hda.ooda import calibrate
from weakspot.hda.reference import train_reference
from weakspot.hda.generate import LogProbs, ProbaFn, classifier_proba, module_proba
from weakspot.hda.protocol import (
    Bench,
    Clock,
    Splits,
    rq1_distribution,
    rq1_draws,
    rq1_seeds,
    rq2_generators,
    rq3_adversarial_model,
    rq4_finetune,
)
from weakspot.hda.result import HdaResult
from weakspot.methods import AuditTarget
from weakspot.progress import Progress


def audit(
    module: Any,
    proba_fn: ProbaFn,
    data: Splits,
    classes: Sequence[str],
    p: HdaParams,
    *,
    radius: float,
    clip: Tuple[float, float],
    adversarial: Any = None,
    adversarial_label: str = "",
    device: Any = "cpu",
    progress: Optional[Progress] = None,
) -> HdaResult:
    """RQ1-RQ4 on one target's arrays (``p.depth`` study), or the weak spots' evidence only (audit).

    ``module`` is the audited torch module answering logits (None for a black box: RQ3, RQ4 and the white-box
    generators are skipped); ``proba_fn`` maps a batch of inputs to probabilities; ``adversarial`` is the
    adversarially trained torch module of RQ3 (``adversarial_label`` names it in the report; unused at depth audit).
    """
    t_all = time.perf_counter()
    clock = Clock()
    rng = np.random.default_rng(int(p.seed))
    study = p.comparisons
    X_train, y_train = data.train
    v = p.vae
    with clock("VAE and KDE"):
        dens = train_density(
            X_train,
            clip=clip,
            latent_dim=v.latent_dim,
            hidden=v.hidden,
            epochs=v.epochs,
            max_steps=v.max_steps,
            lr=v.lr,
            batch_size=v.batch_size,
            beta=v.beta,
            seed=p.seed,
            device=device,
            progress=progress,
        )
    ref = None
    if study:  # seeded by generators of its own (and torch.random.fork_rng): skipping it changes no stream below
        f = p.fid
        with clock("FID reference network"):
            ref = train_reference(
                X_train,
                y_train,
                len(classes),
                width=f.width,
                train=f.train,
                epochs=f.epochs,
                lr=f.lr,
                batch_size=f.batch_size,
                seed=p.seed,
                device=device,
                X_test=data.test[0],
                y_test=data.test[1],
                progress=progress,
            )
    validity = (
        calibrate(dens, data.val[0], quantile=p.ooda.quantile, samples=p.ooda.samples, seed=p.seed)
        if len(data.val[0]) >= 2
        else None
    )
    bench = Bench(module, proba_fn, dens, ref, p, radius, clip, device, progress, validity)
    if study:
        with clock("Table 3 and Fig. 3"):
            distribution = rq1_distribution(bench, X_train, y_train, data.test[0], len(classes), rng)
    else:  # its draw from rng without its work: the balls and the random seeds below are the study depth's
        distribution = rq1_draws(bench, X_train, rng)
    seeds = rq1_seeds(bench, data, rng, clock)
    generators = rq2_generators(bench, seeds, X_train, rng)
    adv = ft = None
    if bench.white and study:
        with clock("Table 8"):
            adv = rq3_adversarial_model(bench, seeds, generators, len(classes), adversarial, adversarial_label)
        if p.finetune.enabled and p.finetune.methods:
            with clock("Table 9 (fine-tuning)"):
                ft = rq4_finetune(bench, data, rng, len(classes))
    clock.seconds["total"] = round(time.perf_counter() - t_all, 2)
    return HdaResult(
        [str(c) for c in classes],
        float(radius),
        clip,
        distribution,
        seeds,
        generators,
        adv,
        ft,
        clock.seconds,
        depth=str(p.depth),
    )


def _splits(target: AuditTarget, p: HdaParams) -> Splits:
    from weakspot.data.parts import sample_rows

    arrays = {}
    for name, s in (("test", target.test), ("val", target.val), ("train", target.train)):
        X = np.asarray(s.X, np.float32)
        if not np.isfinite(X).all():
            raise DataError(f"{target.name}: the {name} inputs hold NaN or infinite values")
        arrays[name] = (X, np.asarray(s.y, np.int64))
    keep = sample_rows(len(arrays["train"][1]), p.train_sample, p.seed)  # at real sizes the sample sets the cost
    arrays["train"] = (arrays["train"][0][keep], arrays["train"][1][keep])
    if not len(arrays["val"][1]):  # a model weakspot did not train comes without validation rows: half the test
        (X, y), half = arrays["test"], np.random.default_rng(0).permutation(len(arrays["test"][1]))
        cut = len(half) // 2
        arrays["test"], arrays["val"] = (
            (X[np.sort(half[:cut])], y[np.sort(half[:cut])]),
            (X[np.sort(half[cut:])], y[np.sort(half[cut:])]),
        )
    (X_te, y_te), (X_va, y_va) = arrays["test"], arrays["val"]
    names = [f"test input {i}" for i in range(len(X_te))] + [f"validation input {i}" for i in range(len(X_va))]
    return Splits(
        arrays["train"],
        arrays["val"],
        arrays["test"],
        (np.concatenate([X_te, X_va]), np.concatenate([y_te, y_va])),
        names,
    )


def run(target: AuditTarget, params: HdaParams, runtime: Any) -> HdaResult:
    """HDA on ``target`` (white-box where its model is a torch module; at depth study the min-max model of RQ3 via
    ``runtime``)."""
    import torch

    p = params
    dev = resolve_device(runtime.device)
    data = _splits(target, p)
    X_tr = data.train[0]
    clip = image_range(X_tr)
    radius = radius_of(p, X_tr.shape[1] if X_tr.ndim == 4 else 1, clip)
    clf = target.model
    module = getattr(clf, "module", None)
    if module is not None and getattr(clf, "outputs", "logits") != "logits":  # probabilities: log p are its logits
        module = torch.nn.Sequential(module, LogProbs())
    if module is not None:
        module = module.to(dev).eval()
    proba_fn = module_proba(module) if module is not None else classifier_proba(clf, dev)
    adv, adv_label, adv_info = None, "", {}
    if p.comparisons and module is not None and p.adversarial_model and getattr(clf, "module", None) is not None:
        from weakspot.adversarial.defended import defended_models

        mods, info, eps = defended_models(target, ["minmax"], runtime.section("intrinsic"), runtime)
        adv, adv_info = mods["minmax"], info["minmax"]
        adv_label = f"the intrinsic stage's min-max model ({adv_info['label']}, eps {eps:.4g})"
    result = audit(
        module,
        proba_fn,
        data,
        target.classes,
        p,
        radius=radius,
        clip=clip,
        adversarial=adv,
        adversarial_label=adv_label,
        device=dev,
        progress=runtime.progress,
    )
    result.adversarial_info = adv_info
    return result
