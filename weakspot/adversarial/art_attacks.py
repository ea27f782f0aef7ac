"""Reference attacks from IBM's Adversarial Robustness Toolbox (ART; Nicolae et al. 2018, "Adversarial Robustness
Toolbox v1.0.0", arXiv:1807.01069), to check this library's own attacks against and to report AutoAttack.

Caveats first:

* ART is imported lazily, inside the functions: ``import weakspot`` never imports ``art``.
* :func:`art_autoattack` is a *reduced* AutoAttack (Croce & Hein 2020, "Reliable evaluation of adversarial robustness
  with an ensemble of diverse parameter-free attacks", ICML): by default it runs only APGD-CE then APGD-DLR
  (untargeted, L-inf, one random start each, ``iters`` iterations each), through ART's ``AutoAttack`` with an explicit
  attack list. The full standard AutoAttack (APGD-CE and APGD-DLR with 100 iterations and 5 restarts, APGD-T,
  FAB-T and Square with 5000 queries) is far too slow on a 2-core CPU. Report it as what it is, e.g.
  "AutoAttack (APGD-CE + APGD-DLR, 30 iterations, 1 restart)", never as AutoAttack.
* Deterministic: APGD draws its random starts from NumPy's global generator; :func:`art_autoattack` seeds NumPy and
  torch inside a saved-and-restored RNG state, so the same seed gives the same result and the caller's global RNG
  state is left as it was.
* The module is used in eval mode through ART's ``PyTorchClassifier`` (cross-entropy loss, no optimizer); ART moves it
  to the classifier's device.
"""

from __future__ import annotations

from typing import Any, Optional, Sequence, Tuple

import numpy as np
import torch

from weakspot.checks import check_clip, check_int, check_number
from weakspot.errors import ConfigError, DataError

Clip = Tuple[float, float]

AUTOATTACK_LOSSES = {"apgd-ce": "cross_entropy", "apgd-dlr": "difference_logits_ratio"}
"""The attacks :func:`art_autoattack` can run: ART's ``AutoProjectedGradientDescent`` with these loss types."""


def _device_type(device: Any) -> str:
    from weakspot.device import resolve_device

    dev = device if isinstance(device, torch.device) else resolve_device(str(device))
    return "gpu" if dev.type == "cuda" else "cpu"


def _check(X: Any, y: Any, eps: float, clip: Clip, n_classes: int, who: str) -> Tuple[np.ndarray, np.ndarray]:
    check_number(eps, "eps", who, low=0)
    check_clip(clip, who)
    check_int(n_classes, "n_classes", who, low=2)
    X = np.asarray(X, dtype=np.float32)
    y = np.asarray(y)
    if X.ndim < 2 or X.shape[0] == 0:
        raise DataError(f"{who}: inputs must be an array (n, ...) with n >= 1; got shape {X.shape}")
    if np.isnan(X).any():
        raise DataError(f"{who}: the inputs hold NaN ({int(np.isnan(X).sum())} values)")
    if not np.isfinite(X).all():
        raise DataError(f"{who}: the inputs hold infinite values")
    if y.shape != (X.shape[0],) or not np.issubdtype(y.dtype, np.integer):
        raise DataError(f"{who}: labels must be {X.shape[0]} integers (one per input); got {y.dtype} {y.shape}")
    if y.min() < 0 or y.max() >= n_classes:
        raise DataError(f"{who}: labels range over [{y.min()}, {y.max()}], outside [0, {n_classes})")
    return X, y.astype(np.int64)


def art_classifier(
    module: torch.nn.Module, *, input_shape: Sequence[int], n_classes: int, clip: Clip = (0.0, 1.0), device: Any = "cpu"
):
    """Wrap a logits module as ART's ``PyTorchClassifier`` (cross-entropy loss, no optimizer, ``clip_values=clip``).

    Parameters
    ----------
    module : torch.nn.Module
        Maps inputs (n, *input_shape) to logits (n, n_classes).
    input_shape : sequence of int
        One input's shape, without the batch axis (e.g. (3, 32, 32)).
    n_classes : int
    clip : (float, float), default (0, 1)
        The data's range.
    device : str or torch.device, default "cpu"
        ``auto|cpu|cuda``; ART's ``device_type`` is "gpu" for CUDA, else "cpu".

    Returns
    -------
    art.estimators.classification.PyTorchClassifier
    """
    from art.estimators.classification import PyTorchClassifier

    return PyTorchClassifier(
        model=module,
        loss=torch.nn.CrossEntropyLoss(),
        input_shape=tuple(int(s) for s in input_shape),
        nb_classes=int(n_classes),
        optimizer=None,
        clip_values=(float(clip[0]), float(clip[1])),
        device_type=_device_type(device),
    )


def art_pgd(
    module: torch.nn.Module,
    X: Any,
    y: Any,
    *,
    eps: float,
    steps: int = 30,
    step_size: Optional[float] = None,
    clip: Clip = (0.0, 1.0),
    n_classes: int,
    batch_size: int = 256,
    seed: int = 0,
    device: Any = "cpu",
) -> np.ndarray:
    """ART's PGD (``art.attacks.evasion.ProjectedGradientDescent``; Madry et al. 2018), L-inf, untargeted, on the
    cross-entropy of the true labels, with no random start (``num_random_init=0``).

    Without a random start it is deterministic and follows the same walk as
    ``weakspot.adversarial.attacks.pgd(..., random_start=False)`` with the same eps, steps and step size: ``steps``
    signed-gradient steps of ``step_size``, each clipped to ``clip`` and projected onto the eps-ball.

    Parameters
    ----------
    module : torch.nn.Module
        Maps inputs to logits.
    X : array (n, ...), float32
    y : array (n,) of int
        True labels.
    eps : float
        L-inf radius (> 0).
    steps : int, default 30
        The paper's PGD-30 (seeds/002 Sec. 5.1).
    step_size : float, optional
        Default ``2.5 * eps / steps`` (Madry et al.'s rule of thumb, as ``attacks.pgd``).
    clip : (float, float), default (0, 1)
    n_classes : int
    batch_size : int, default 256
    seed : int, default 0
        Unused by the attack itself (it draws nothing); the global RNGs are seeded and restored around it anyway.
    device : str or torch.device, default "cpu"

    Returns
    -------
    np.ndarray, float32, the shape of X
        The attacked inputs.
    """
    from art.attacks.evasion import ProjectedGradientDescent

    X, y = _check(X, y, eps, clip, n_classes, "art_pgd")
    check_int(steps, "steps", "art_pgd")
    alpha = 2.5 * eps / int(steps) if step_size is None else float(step_size)
    clf = art_classifier(module, input_shape=X.shape[1:], n_classes=n_classes, clip=clip, device=device)
    attack = ProjectedGradientDescent(
        clf,
        norm=np.inf,
        eps=float(eps),
        eps_step=alpha,
        max_iter=int(steps),
        targeted=False,
        num_random_init=0,
        batch_size=int(batch_size),
        verbose=False,
    )
    with _seeded(seed):
        out = attack.generate(x=X, y=y)
    return np.asarray(out, dtype=np.float32)


class _multiprocess_placeholder:
    """ART's ``AutoAttack.generate`` imports ``multiprocess`` unconditionally but uses it only when
    ``parallel_pool_size > 0`` (never here), and ART does not declare it as a dependency. When it is not installed, a
    placeholder module stands in for it inside the block (and is removed afterwards)."""

    def __enter__(self):
        import importlib.util
        import sys
        import types

        self._added = "multiprocess" not in sys.modules and importlib.util.find_spec("multiprocess") is None
        if self._added:
            sys.modules["multiprocess"] = types.ModuleType("multiprocess")
        return self

    def __exit__(self, *exc):
        import sys

        if self._added:
            sys.modules.pop("multiprocess", None)
        return False


class _seeded:
    """Seed NumPy's and torch's global generators inside the block; restore their states on the way out."""

    def __init__(self, seed: int):
        self.seed = int(seed)

    def __enter__(self):
        self._np_state = np.random.get_state()
        self._fork = torch.random.fork_rng(devices=[] if not torch.cuda.is_available() else None)
        self._fork.__enter__()
        np.random.seed(self.seed % (2**32))
        torch.manual_seed(self.seed)
        return self

    def __exit__(self, *exc):
        try:
            self._fork.__exit__(*exc)
        finally:
            np.random.set_state(self._np_state)
        return False


def art_autoattack(
    module: torch.nn.Module,
    X: Any,
    y: Any,
    *,
    eps: float,
    clip: Clip = (0.0, 1.0),
    n_classes: int,
    iters: int = 30,
    attacks: Sequence[str] = ("apgd-ce", "apgd-dlr"),
    seed: int = 0,
    batch_size: int = 256,
    device: Any = "cpu",
) -> np.ndarray:
    """A reduced AutoAttack as IBM ART provides it: ``art.attacks.evasion.AutoAttack`` over an explicit list of
    ``AutoProjectedGradientDescent`` attacks (Croce & Hein 2020).

    What runs, exactly: for each name in ``attacks``, in order, ART's APGD with ``norm=inf``, ``eps``,
    ``eps_step = 2 * eps`` (APGD's initial step size, Croce & Hein 2020 Sec. 3.2), ``max_iter = iters``,
    ``nb_random_init = 1`` (one uniform random start in the ball), untargeted, with loss ``"cross_entropy"``
    (APGD-CE) or ``"difference_logits_ratio"`` (APGD-DLR). Each attack runs only on the inputs that are still
    classified correctly; an input keeps the first perturbation that fools the model, else it stays clean. Not run:
    APGD-T, FAB-T, Square (5000 queries) and the 5 restarts of the standard version -- too slow on a 2-core CPU.
    Measured on a two-conv-layer CNN (16 and 32 channels, ~0.15 M parameters), 200 inputs of 3x32x32, iters=30, one
    torch thread: about 10 s when every input survives APGD-CE (both attacks run in full), about 3 s when APGD-CE
    fools every input (APGD-DLR is then skipped). ART's APGD costs about 1.5x a PGD step per iteration (it runs an
    extra forward pass for the loss).

    Parameters
    ----------
    module : torch.nn.Module
        Maps inputs to logits (n, n_classes).
    X : array (n, ...), float32
    y : array (n,) of int
        True labels.
    eps : float
        L-inf radius (> 0).
    clip : (float, float), default (0, 1)
    n_classes : int
        >= 3 when APGD-DLR runs (its loss uses the third-largest logit).
    iters : int, default 30
        APGD iterations per attack (the paper's attacks use 30, seeds/002 Sec. 5.1; AutoAttack's standard is 100).
    attacks : sequence of {"apgd-ce", "apgd-dlr"}, default ("apgd-ce", "apgd-dlr")
    seed : int, default 0
        Seeds NumPy's and torch's global generators for the run (their states are restored afterwards).
    batch_size : int, default 256
    device : str or torch.device, default "cpu"

    Returns
    -------
    np.ndarray, float32, the shape of X
        The attacked inputs.
    """
    from art.attacks.evasion import AutoAttack, AutoProjectedGradientDescent

    X, y = _check(X, y, eps, clip, n_classes, "art_autoattack")
    check_int(iters, "iters", "art_autoattack")
    names = [attacks] if isinstance(attacks, str) else list(attacks)
    bad = [a for a in names if a not in AUTOATTACK_LOSSES]
    if not names or bad:
        raise ConfigError(
            f"art_autoattack attacks = {attacks!r}: use a non-empty list of {', '.join(AUTOATTACK_LOSSES)}"
        )
    if "apgd-dlr" in names and n_classes < 3:
        raise ConfigError(
            f"art_autoattack: APGD-DLR needs n_classes >= 3 (it uses the third-largest logit); "
            f"got n_classes = {n_classes}"
        )
    clf = art_classifier(module, input_shape=X.shape[1:], n_classes=n_classes, clip=clip, device=device)
    with _seeded(seed), _multiprocess_placeholder():
        apgd = [
            AutoProjectedGradientDescent(
                clf,
                norm=np.inf,
                eps=float(eps),
                eps_step=2.0 * float(eps),
                max_iter=int(iters),
                targeted=False,
                nb_random_init=1,
                batch_size=int(batch_size),
                loss_type=AUTOATTACK_LOSSES[a],
                verbose=False,
            )
            for a in names
        ]
        aa = AutoAttack(
            clf,
            norm=np.inf,
            eps=float(eps),
            eps_step=2.0 * float(eps),
            attacks=apgd,
            batch_size=int(batch_size),
            targeted=False,
            parallel_pool_size=0,
        )
        out = aa.generate(x=X, y=y)
    return np.asarray(out, dtype=np.float32)
