"""Reference attacks under an L-inf budget (seeds/002 Sec. 5.1): FGSM, PGD (cross-entropy) and CW (the C&W margin
loss under the same L-inf budget), batched on a torch module that maps inputs to logits.

Caveats first:

* White box: every attack differentiates the module's logits with respect to its input; the module is used in eval
  mode and never changed (its parameters get no gradient).
* Every perturbed input stays inside the eps-ball around its input *and* inside the data's range ``clip`` (the
  projection clips to both after every step).
* Deterministic: random starts are drawn from a ``torch.Generator`` seeded by ``seed`` on the CPU, so the same seed
  gives the same perturbations on any device.
* ``robust_accuracy`` counts an input that the model already gets wrong as a failure (accuracy on the attacked set,
  as Tables 1-3 report it).

Functions (the core, used by the defences' training loops too):

* :func:`fgsm` -- Goodfellow et al. 2015, "Explaining and harnessing adversarial examples", ICLR: one signed-gradient
  step of size eps on the cross-entropy (or, ``target`` given, a step *down* the loss of the target class: the
  least-likely-class FGSM of Kurakin et al. 2016, "Adversarial examples in the physical world").
* :func:`pgd` -- Madry et al. 2018, "Towards deep learning models resistant to adversarial attacks", ICLR: ``steps``
  signed-gradient steps of ``step_size`` from a uniform random start in the ball, projected after each step.
  ``loss="cw"`` maximises the negative C&W margin ``max_{j != y} z_j - z_y`` (Carlini & Wagner 2017, "Towards
  evaluating the robustness of neural networks", IEEE S&P, their f_6 with kappa = 0) instead of the cross-entropy:
  the paper's CW-30 is ``pgd(..., steps=30, loss="cw")``.
"""

from __future__ import annotations

from typing import Any, Callable, Optional, Tuple

import numpy as np
import torch
import torch.nn.functional as F

from weakspot.checks import check_clip, check_int, check_number
from weakspot.errors import ConfigError, DataError

Clip = Tuple[float, float]
LOSSES = ("ce", "cw")


def cw_margin(logits: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Per-row C&W margin ``z_y - max_{j != y} z_j`` (positive = correct; the decision function g of Eq. 2)."""
    z_y = logits.gather(1, y[:, None])[:, 0]
    other = logits.masked_fill(F.one_hot(y, logits.shape[1]).bool(), float("-inf"))
    return z_y - other.max(dim=1).values


def _loss(logits: torch.Tensor, y: torch.Tensor, loss: str) -> torch.Tensor:
    """Per-row loss that the attack *increases*."""
    if loss == "ce":
        return F.cross_entropy(logits, y, reduction="none")
    return -cw_margin(logits, y)


def project(x_adv: torch.Tensor, x: torch.Tensor, eps: float, clip: Clip) -> torch.Tensor:
    """``x_adv`` moved into the L-inf ball of radius ``eps`` around ``x``, then into the data's range ``clip``."""
    return torch.clamp(torch.minimum(torch.maximum(x_adv, x - eps), x + eps), clip[0], clip[1])


def input_grad(module: torch.nn.Module, x: torch.Tensor, y: torch.Tensor, loss: str = "ce") -> torch.Tensor:
    """Gradient of the summed per-row ``loss`` with respect to ``x`` (no parameter gradients are kept)."""
    x = x.detach().requires_grad_(True)
    with torch.enable_grad():
        out = _loss(module(x), y, loss).sum()
        (g,) = torch.autograd.grad(out, x)
    return g


def fgsm(
    module: torch.nn.Module,
    x: torch.Tensor,
    y: torch.Tensor,
    *,
    eps: float,
    clip: Clip = (0.0, 1.0),
    target: Optional[torch.Tensor] = None,
) -> torch.Tensor:
    """One signed-gradient step of size ``eps`` up the cross-entropy of ``y`` (or down that of ``target``)."""
    check_number(eps, "eps", "fgsm", low=0, low_open=False)
    check_clip(clip, "fgsm")
    if target is not None:
        step = -input_grad(module, x, target).sign()
    else:
        step = input_grad(module, x, y).sign()
    return project(x.detach() + eps * step, x.detach(), eps, clip).detach()


def pgd(
    module: torch.nn.Module,
    x: torch.Tensor,
    y: torch.Tensor,
    *,
    eps: float,
    steps: int = 30,
    step_size: Optional[float] = None,
    random_start: bool = True,
    loss: str = "ce",
    clip: Clip = (0.0, 1.0),
    generator: Optional[torch.Generator] = None,
    keep_best: bool = False,
) -> torch.Tensor:
    """Projected gradient ascent of ``loss`` in the L-inf ball of radius ``eps`` (clipped to ``clip``).

    ``step_size`` defaults to ``2.5 * eps / steps`` (Madry et al.'s rule of thumb, so the walk can cross the ball).
    ``keep_best``: return, per input, the iterate with the highest loss (default: the last one, as Madry et al.).
    """
    check_number(eps, "eps", "pgd", low=0, low_open=False)
    check_clip(clip, "pgd")
    check_int(steps, "steps", "pgd")
    if loss not in LOSSES:
        raise ConfigError(f"pgd: loss = {loss!r}: use one of {', '.join(LOSSES)}")
    alpha = 2.5 * eps / int(steps) if step_size is None else float(step_size)
    x = x.detach()
    if random_start:
        noise = torch.rand(x.shape, generator=generator, dtype=x.dtype).to(x.device)
        x_adv = project(x + (2 * noise - 1) * eps, x, eps, clip)
    else:
        x_adv = x.clone()
    best, best_loss = x_adv.clone(), None
    for _ in range(int(steps)):
        x_adv = x_adv.detach().requires_grad_(True)
        with torch.enable_grad():
            per_row = _loss(module(x_adv), y, loss)
            (g,) = torch.autograd.grad(per_row.sum(), x_adv)
        if keep_best:
            per_row = per_row.detach()
            if best_loss is None:
                best_loss = per_row.clone()
            better = per_row > best_loss
            best[better] = x_adv.detach()[better]
            best_loss = torch.where(better, per_row, best_loss)
        x_adv = project(x_adv.detach() + alpha * g.sign(), x, eps, clip)
    if keep_best:
        assert best_loss is not None  # steps >= 1 (checked): the first step set it
        with torch.no_grad():
            last = _loss(module(x_adv), y, loss)
        better = last > best_loss
        best[better] = x_adv[better]
        return best.detach()
    return x_adv.detach()


def batched(
    fn: Callable[..., torch.Tensor],
    module: torch.nn.Module,
    X: Any,
    y: Any,
    *,
    batch_size: int = 256,
    device: Any = "cpu",
    **kwargs: Any,
) -> np.ndarray:
    """Run an attack ``fn(module, xb, yb, **kwargs)`` over numpy arrays in batches; returns the attacked inputs as a
    float32 array. A ``generator`` in ``kwargs`` is shared by the batches (deterministic for a given batch size)."""
    X = np.asarray(X, np.float32)
    y = np.asarray(y)
    if X.shape[0] != y.shape[0]:
        raise DataError(f"attack: {X.shape[0]} inputs but {y.shape[0]} labels")
    if not np.isfinite(X).all():
        raise DataError("attack: the inputs hold NaN or infinite values")
    module.eval()
    out = np.empty_like(X)
    for s in range(0, len(X), int(batch_size)):
        xb = torch.as_tensor(X[s : s + batch_size], device=device)
        yb = torch.as_tensor(y[s : s + batch_size], dtype=torch.int64, device=device)
        out[s : s + batch_size] = fn(module, xb, yb, **kwargs).cpu().numpy()
    return out


def predict(module: torch.nn.Module, X: np.ndarray, *, batch_size: int = 512, device: Any = "cpu") -> np.ndarray:
    """Arg-max class of each input (no gradients)."""
    module.eval()
    preds = []
    with torch.no_grad():
        for s in range(0, len(X), int(batch_size)):
            preds.append(
                module(torch.as_tensor(np.asarray(X[s : s + batch_size], np.float32), device=device))
                .argmax(1)
                .cpu()
                .numpy()
            )
    return np.concatenate(preds) if preds else np.zeros(0, np.int64)
