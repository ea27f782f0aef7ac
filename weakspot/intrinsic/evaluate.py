"""One model measured as seeds/002 measures it (Tables 1-3): psi on normalised and on softmax probabilities, per-class
psi, the worst neighbour of each input, and the accuracy under the reference attacks (FGSM, PGD-30, CW-30, a reduced
AutoAttack through IBM ART); and our PGD checked against ART's.

Caveats first:

* The module maps float32 inputs in the data's range ``clip`` to logits; it is used in eval mode and never changed.
* psi runs on every input given, the attacks on the first ``params.n_attack`` of them.
* Deterministic for the same seed on the CPU: the KL ascent and PGD's random starts come from seeded generators,
  ART's AutoAttack from a seeded, restored global state.
* The seconds each measurement took are recorded beside the numbers (they go to the report's timing table, never
  into the metrics).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Dict, Optional, Tuple

import numpy as np
import torch

from weakspot.adversarial import attacks as A
from weakspot.errors import ModelError
from weakspot.intrinsic.config import IntrinsicParams
from weakspot.intrinsic.psi import max_kl, psi, psi_per_class
from weakspot.progress import Progress

#: The attacks every model gets, in the order they run (AutoAttack, when enabled, runs after them).
ATTACK_KEYS = ("fgsm", "pgd30", "cw30")


@dataclass
class ModelEval:
    """Everything measured on one model.

    Attributes
    ----------
    name, label : str
        The model's name (``"none"`` = the audited one, else a defence) and what it is, in words.
    kl, kl_softmax : np.ndarray, shape (n,)
        Per input, the largest KL divergence in the eps-ball (normalised logits; softmax).
    x_worst : np.ndarray, shape (n, ...)
        The neighbour that reached ``kl``.
    psi, psi_softmax : float
        ``1 / mean(kl)`` and ``1 / mean(kl_softmax)``.
    psi_class : np.ndarray, shape (n_classes,)
        psi of each true class's inputs (nan for a class without inputs).
    acc : dict
        Accuracy on the attacked inputs: ``clean`` and one per attack that ran (``fgsm``, ``pgd30``, ``cw30``,
        ``autoattack``).
    n_attacked : int
        How many inputs the attacks ran on.
    pred, pred_worst, conf_worst : np.ndarray, shape (n,)
        The prediction at each input, at its worst neighbour, and the latter's probability.
    seconds : dict
        Wall-clock seconds of each measurement.
    """

    name: str
    label: str
    kl: np.ndarray
    kl_softmax: np.ndarray
    x_worst: np.ndarray
    psi: float
    psi_softmax: float
    psi_class: np.ndarray
    acc: Dict[str, float]
    n_attacked: int
    pred: np.ndarray
    pred_worst: np.ndarray
    conf_worst: np.ndarray
    seconds: Dict[str, float] = field(default_factory=dict)


def ascent_kwargs(params: IntrinsicParams, eps: float, clip: Tuple[float, float], device: Any) -> Dict[str, Any]:
    """The KL ascent's keyword arguments (:func:`weakspot.intrinsic.psi.max_kl`), the same for every model."""
    p = params
    return dict(
        eps=eps,
        steps=p.psi.steps,
        step_size=p.psi.step_size,
        restarts=p.psi.restarts,
        clip=clip,
        seed=p.seed,
        batch_size=int(p.batch_size),
        device=device,
        floor=p.psi.floor,
    )


def probabilities(module: torch.nn.Module, X: np.ndarray, device: Any, batch_size: int) -> np.ndarray:
    """Softmax probabilities of ``module`` on ``X`` (float64, no gradients, in batches)."""
    out = []
    module.eval()
    with torch.no_grad():
        for s in range(0, len(X), batch_size):
            out.append(torch.softmax(module(torch.as_tensor(X[s : s + batch_size], device=device)), 1).cpu().numpy())
    return np.concatenate(out).astype(np.float64)


def attack_accuracies(
    name: str,
    module: torch.nn.Module,
    X: np.ndarray,
    y: np.ndarray,
    n_classes: int,
    *,
    eps: float,
    clip: Tuple[float, float],
    params: IntrinsicParams,
    device: Any = "cpu",
    progress: Optional[Progress] = None,
) -> Tuple[Dict[str, float], Dict[str, float]]:
    """Accuracy on ``X`` under FGSM, PGD-``pgd_steps``, CW-``cw_steps`` (Sec. 5.1) and, when enabled, the reduced
    AutoAttack; ``(accuracies, seconds)`` keyed ``fgsm``, ``pgd30``, ``cw30``, ``autoattack`` (the keys keep the
    paper's 30 whatever the steps). Clean accuracy is the caller's.

    Raises
    ------
    ModelError
        An attack returned an input outside the eps-ball (a bug in the attack, never silently counted).
    """
    p = params
    bs = int(p.batch_size)
    acc: Dict[str, float] = {}
    sec: Dict[str, float] = {}

    def run(key: str, fn: Any, **kwargs: Any) -> None:
        t0 = time.perf_counter()
        xadv = A.batched(fn, module, X, y, batch_size=bs, device=device, **kwargs)
        if not np.all(np.abs(xadv - X) <= eps + 1e-5):
            raise ModelError(
                f"{name}: attack {key} left the eps-ball (eps {eps:.4g}; largest change "
                f"{float(np.abs(xadv - X).max()):.4g})"
            )
        acc[key] = float(np.mean(A.predict(module, xadv, device=device) == y))
        sec[key] = time.perf_counter() - t0
        if progress is not None:
            progress(f"{name}: attacks ({key})", list(ATTACK_KEYS).index(key) + 1, len(ATTACK_KEYS))

    gen = lambda k: torch.Generator().manual_seed(int(p.seed) * 1000 + k)  # noqa: E731
    run("fgsm", A.fgsm, eps=eps, clip=clip)
    run("pgd30", A.pgd, eps=eps, steps=p.pgd_steps, loss="ce", clip=clip, generator=gen(1))
    run("cw30", A.pgd, eps=eps, steps=p.cw_steps, loss="cw", clip=clip, generator=gen(2))
    if p.autoattack.enabled:
        from weakspot.adversarial.art_attacks import art_autoattack

        t0 = time.perf_counter()
        xadv = art_autoattack(
            module,
            X,
            y,
            eps=eps,
            clip=clip,
            n_classes=n_classes,
            iters=p.autoattack.iters,
            attacks=tuple(p.autoattack.attacks),
            seed=p.seed,
            batch_size=bs,
            device=device,
        )
        acc["autoattack"] = float(np.mean(A.predict(module, xadv, device=device) == y))
        sec["autoattack"] = time.perf_counter() - t0
    return acc, sec


def evaluate_model(
    name: str,
    label: str,
    module: torch.nn.Module,
    X: np.ndarray,
    y: np.ndarray,
    n_classes: int,
    *,
    eps: float,
    clip: Tuple[float, float],
    params: IntrinsicParams,
    device: Any = "cpu",
    kl_pool: Optional[Tuple[np.ndarray, np.ndarray]] = None,
    progress: Optional[Progress] = None,
) -> ModelEval:
    """psi (normalised and softmax) on ``X`` and the reference attacks on its first ``n_attack`` inputs.
    ``kl_pool``: (kl, x_worst) already computed on a pool that starts with ``X`` (reused, not recomputed)."""
    p = params
    bs = int(p.batch_size)
    sec: Dict[str, float] = {}
    module.eval()
    kw = ascent_kwargs(p, eps, clip, device)
    t = time.perf_counter()
    if kl_pool is not None:
        kl, xw = kl_pool[0][: len(X)], kl_pool[1][: len(X)]
    else:
        r = max_kl(module, X, normalisation="invariant", progress=progress, **kw)
        kl, xw = r.kl, r.x_worst
    sec["psi"] = time.perf_counter() - t
    t = time.perf_counter()
    kl_sm = max_kl(module, X, normalisation="softmax", **kw).kl
    sec["psi_softmax"] = time.perf_counter() - t
    pred = probabilities(module, X, device, bs).argmax(1)
    pw = probabilities(module, xw, device, bs)
    n = min(int(p.n_attack), len(X))
    acc: Dict[str, float] = {"clean": float(np.mean(pred[:n] == y[:n]))}
    attacked, attack_sec = attack_accuracies(
        name, module, X[:n], y[:n], n_classes, eps=eps, clip=clip, params=p, device=device, progress=progress
    )
    acc.update(attacked)
    sec.update(attack_sec)
    return ModelEval(
        name=name,
        label=label,
        kl=kl,
        kl_softmax=kl_sm,
        x_worst=xw,
        psi=psi(kl),
        psi_softmax=psi(kl_sm),
        psi_class=psi_per_class(kl, y, n_classes),
        acc=acc,
        n_attacked=n,
        pred=pred,
        pred_worst=pw.argmax(1),
        conf_worst=pw.max(1),
        seconds=sec,
    )


def pgd_vs_art(
    module: torch.nn.Module,
    X: np.ndarray,
    y: np.ndarray,
    n_classes: int,
    *,
    eps: float,
    clip: Tuple[float, float],
    steps: int,
    batch_size: int,
    device: Any = "cpu",
) -> Dict[str, float]:
    """Our PGD against IBM ART's on the same model and inputs, both deterministic (no random start): each one's
    accuracy and the largest difference between the attacked inputs."""
    from weakspot.adversarial.art_attacks import art_pgd

    ours = A.batched(
        A.pgd, module, X, y, batch_size=batch_size, device=device, eps=eps, steps=steps, random_start=False, clip=clip
    )
    theirs = art_pgd(
        module, X, y, eps=eps, steps=steps, clip=clip, n_classes=n_classes, batch_size=batch_size, device=device
    )
    return {
        "ours": float(np.mean(A.predict(module, ours, device=device) == y)),
        "art": float(np.mean(A.predict(module, theirs, device=device) == y)),
        "max_abs_diff": float(np.abs(ours - theirs).max()),
    }
