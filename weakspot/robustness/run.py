"""The robustness curve of one white-box image target: clean accuracy and the accuracy under PGD (and AutoAttack) at
every eps of the grid, on a seeded sample of its held-out test inputs (never its training inputs).

Caveats first: an attack's accuracy is an upper bound on the model's robust accuracy at that eps (a stronger attack
can only lower it); PGD runs ``pgd_steps`` steps from one random start. The same inputs serve every eps, so the curve
is comparable along eps and between audits of the same data (same seed, same sample). AutoAttack runs where
``robustness.autoattack`` is on and at depth study; it draws nothing from PGD's random stream, so PGD's points (and the
findings) are the same at both depths.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

import numpy as np

from weakspot.data.dataset import image_range
from weakspot.device import resolve_device
from weakspot.errors import DataError
from weakspot.methods import AuditTarget
from weakspot.robustness.config import RobustnessParams, grid


@dataclass
class CurveResult:
    """The curve: ``eps`` (fractions of the data range) and ``eps_data`` (in the data's units), the share of the
    sample each attack leaves correct at each eps (``correct[attack]``: ``(len(eps), n)`` booleans); ``depth`` the
    depth that ran."""

    eps: List[float]
    eps_data: List[float]
    n: int
    clip: tuple
    correct: Dict[str, np.ndarray] = field(default_factory=dict)
    classes: List[str] = field(default_factory=list)
    y: Optional[np.ndarray] = None
    n_channels: int = 1
    depth: str = "audit"

    def accuracy(self, attack: str) -> np.ndarray:
        return self.correct[attack].mean(axis=1)


def autoattack_attacks(n_classes: int) -> tuple:
    """The APGD attacks AutoAttack runs: APGD-CE and APGD-DLR, APGD-CE alone on two classes (DLR needs a third logit).

    >>> autoattack_attacks(10), autoattack_attacks(2)
    (('apgd-ce', 'apgd-dlr'), ('apgd-ce',))
    """
    return ("apgd-ce", "apgd-dlr") if int(n_classes) >= 3 else ("apgd-ce",)


def _correct(module: Any, X: np.ndarray, y: np.ndarray, batch: int, device: Any) -> np.ndarray:
    import torch

    with torch.no_grad():
        pred = np.concatenate(
            [
                module(torch.as_tensor(X[i : i + batch], device=device)).argmax(1).cpu().numpy()
                for i in range(0, len(X), batch)
            ]
        )
    return pred == y


def run(target: AuditTarget, params: RobustnessParams, runtime: Any) -> CurveResult:
    """Clean accuracy, then PGD (and AutoAttack, where ``autoattack`` is on and at depth study) at every eps > 0 of the
    grid, on the same test inputs."""
    import torch

    from weakspot.adversarial.attacks import batched, pgd

    p, dev = params, resolve_device(runtime.device)
    module = getattr(target.model, "module", None)
    if module is None:
        raise DataError(f"{target.name}: the robustness curve needs a torch model answering logits")
    module = module.to(dev).eval()
    X, y = np.asarray(target.test.X, np.float32), np.asarray(target.test.y, np.int64)
    if X.ndim != 4 or not np.isfinite(X).all():
        raise DataError(f"{target.name}: the robustness curve needs finite images (n, c, h, w), got {X.shape}")
    keep = np.sort(np.random.default_rng(int(p.seed)).permutation(len(X))[: int(p.n_inputs)])
    X, y = X[keep], y[keep]
    clip = image_range(X)
    fracs = grid(p, X.shape[1])
    eps = [f * (clip[1] - clip[0]) for f in fracs]
    attacks = ["pgd"] + (["autoattack"] if p.runs_autoattack else [])
    res = CurveResult(
        fracs,
        eps,
        len(y),
        clip,
        {a: np.zeros((len(eps), len(y)), bool) for a in ["clean", *attacks]},
        [str(c) for c in target.classes],
        y,
        int(X.shape[1]),
        p.depth,
    )
    clean = _correct(module, X, y, p.batch_size, dev)
    res.correct["clean"][:] = clean
    gen = torch.Generator().manual_seed(int(p.seed))
    for i, e in enumerate(eps):
        if e == 0:
            for a in attacks:
                res.correct[a][i] = clean
            continue
        Xa = batched(
            pgd,
            module,
            X,
            y,
            batch_size=p.batch_size,
            device=dev,
            eps=e,
            steps=p.pgd_steps,
            step_size=2.5 * e / p.pgd_steps,
            clip=clip,
            generator=gen,
        )
        res.correct["pgd"][i] = _correct(module, Xa, y, p.batch_size, dev) & clean
        if p.runs_autoattack:
            from weakspot.adversarial.art_attacks import art_autoattack

            Xa = art_autoattack(
                module,
                X,
                y,
                eps=e,
                clip=clip,
                n_classes=len(target.classes),
                iters=p.autoattack_iters,
                attacks=autoattack_attacks(len(target.classes)),
                seed=p.seed,
                batch_size=p.batch_size,
                device=dev,
            )
            res.correct["autoattack"][i] = _correct(module, Xa, y, p.batch_size, dev) & clean
        if runtime.progress is not None:
            runtime.progress("robustness curve (eps)", i + 1, len(eps))
    return res
