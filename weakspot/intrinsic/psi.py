"""The robustness score psi of seeds/002 (Yu et al. 2019, "Interpreting and Evaluating Neural Network Robustness",
IJCAI): the inverse of the mean, over inputs, of the largest KL divergence between the model's prediction on an input
and on any point of the L-inf eps-ball around it (Sec. 4.1, Eq. 4), with the predictions taken from scale-invariant
normalised logits (Sec. 4.2, Eq. 5) so that rescaling the logit layer does not change the score (Sec. 5.4, Table 4).

Caveats first:

* The largest KL is *estimated* by gradient ascent (Sec. 4.1: "we use the gradient ascent algorithm to directly
  optimize the KL-divergence"); the estimate is a lower bound on the true maximum, so psi is an upper bound on the
  true score. More steps and restarts can only lower psi.
* The ascent never starts at the input itself: the KL divergence ``KL(p(x) || p(x'))`` is at its minimum (0) at
  ``x' = x``, where its gradient is zero, so a walk started there never moves. Every restart starts from a uniform
  random point of the ball (as Madry et al.'s PGD does).
* The invariant normalisation maps the most negative logit to probability *exactly* 0 when its magnitude is the
  row's largest (``z / max|z| = -1``, then ``+ 1 = 0``). A perturbed input whose prediction puts an exact 0 where the
  clean prediction did not has an infinite KL; :func:`kl` clamps probabilities at :data:`TINY` (1e-12), which caps
  such a term at ``p_j * log(p_j / 1e-12)`` (about ``27.6 * p_j``). The paper does not say how it handles this.
* ``floor`` (the ``intrinsic.psi.floor`` param, 1e-3 in the pipeline) replaces 1e-12 as that clamp: measured on the
  pipeline's digits and scenes models, the most negative logit has the largest magnitude on 97-100% of *clean* inputs,
  so the ascent nearly always finds a neighbour where the clean top class gets probability 0, and with a 1e-12 clamp
  every such input scores about ``p_top * 27.6`` whatever the model: psi then measures the float format, not the
  model. A floor of 1e-3 (1% of the uniform probability for 10 classes) bounds a term at ``p_j * log(p_j / 1e-3)``.
* psi is on the paper's scale: ``1 / mean KL`` (Tables 1-4 report e.g. 93.8 for LeNet on MNIST); larger is more
  robust. It depends on eps, the normalisation and the data, so compare scores only under the same settings.
* Deterministic: the random starts are drawn from a CPU ``torch.Generator`` seeded by ``seed``, in batch order, so the
  same (seed, batch_size) give the same numbers on any device.

Table 4's "*100" and "/100" reparameterisation is :func:`weakspot.models.rescale.scaled_last_layer`; here too,
:func:`eps_sharpness` (Keskar et al. 2017, "On large-batch training for deep
learning: generalization gap and sharp minima", ICLR, moved to input space as Sec. 5.4 does).

Example
-------
>>> import numpy as np, torch
>>> torch.manual_seed(0)  # doctest: +ELLIPSIS
<torch._C.Generator object at ...>
>>> net = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 3))
>>> X = np.random.default_rng(0).uniform(0.2, 0.8, (16, 4)).astype(np.float32)
>>> res = max_kl(net, X, eps=0.1, steps=10)
>>> res.kl.shape, bool((res.kl >= 0).all()), bool(np.abs(res.x_worst - X).max() <= 0.1 + 1e-6)
((16,), True, True)
>>> psi(res.kl) > 0
True
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Dict, Optional, Tuple

import numpy as np
import torch
import torch.nn.functional as F

from weakspot.checks import check_clip, check_int, check_number
from weakspot.errors import ConfigError, DataError, ModelError
from weakspot.adversarial.attacks import project, pgd
from weakspot.progress import Progress

Clip = Tuple[float, float]

TINY = 1e-12
"""Probabilities are clamped at this value inside :func:`kl` (a KL term is never infinite)."""


# --------------------------------------------------------------------------------------------------- normalisations
def invariant_probs(logits: torch.Tensor) -> torch.Tensor:
    """The scale-invariant normalisation of Sec. 4.2, Eq. 5: per row ``c = z / max|z| + 1``, then ``c / sum(c)``.

    ``z / max|z|`` lies in [-1, 1] and does not change when the logits are multiplied by any positive factor; ``+ 1``
    moves it into [0, 2]; the sum-normalisation makes a probability vector. A row of all-zero logits gives the
    uniform distribution. Differentiable.

    Parameters
    ----------
    logits : torch.Tensor, shape (n, k)

    Returns
    -------
    torch.Tensor, shape (n, k)
        Rows that sum to 1. The most negative logit of a row gets probability exactly 0 when its magnitude is the
        row's largest (see the module's caveats).
    """
    m = logits.abs().amax(dim=1, keepdim=True)
    z = torch.where(m > 0, logits / m.clamp_min(torch.finfo(logits.dtype).tiny), torch.zeros_like(logits))
    c = z + 1.0
    return c / c.sum(dim=1, keepdim=True)


def softmax_probs(logits: torch.Tensor) -> torch.Tensor:
    """Plain softmax over the last axis (the un-normalised score of Table 4, which rescaling changes)."""
    return torch.softmax(logits, dim=1)


NORMALISATIONS: Dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "invariant": invariant_probs,
    "softmax": softmax_probs,
}
"""Registry of logits -> probabilities maps; ``"invariant"`` is the paper's (Sec. 4.2, Eq. 5)."""


def _normalisation(name: str) -> Callable[[torch.Tensor], torch.Tensor]:
    try:
        return NORMALISATIONS[name]
    except (KeyError, TypeError):
        raise ConfigError(f"psi normalisation {name!r} is not known; use one of {', '.join(NORMALISATIONS)}") from None


def kl(p: torch.Tensor, q: torch.Tensor, floor: float = TINY) -> torch.Tensor:
    """Per-row ``KL(p || q) = sum_j p_j (log p_j - log q_j)``, with both clamped at ``floor`` (default :data:`TINY`)
    inside the logs.

    A zero ``p_j`` contributes 0; a zero ``q_j`` under a positive ``p_j`` contributes ``p_j log(p_j / TINY)`` instead
    of infinity. Differentiable in both arguments.
    """
    return (p * (torch.log(p.clamp_min(floor)) - torch.log(q.clamp_min(floor)))).sum(dim=1)


# ---------------------------------------------------------------------------------------------------------- max KL
@dataclass(frozen=True)
class MaxKL:
    """What :func:`max_kl` found, and the settings it ran with.

    Attributes
    ----------
    kl : np.ndarray, shape (n,), float64
        Per input, the largest ``KL(p(x) || p(x'))`` over every iterate of every restart (>= 0).
    x_worst : np.ndarray, shape (n, ...), float32
        The ``x'`` that achieved it (inside the eps-ball and ``clip``).
    eps, steps, step_size, restarts, normalisation, clip, seed
        The settings used (``step_size`` resolved from its default).
    """

    kl: np.ndarray
    x_worst: np.ndarray
    eps: float
    steps: int
    step_size: float
    restarts: int
    normalisation: str
    clip: Clip
    seed: int

    @property
    def psi(self) -> float:
        """:func:`psi` of :attr:`kl`."""
        return psi(self.kl)


def _step_size(step_size: Any, eps: float, steps: int, who: str) -> float:
    if step_size is None:
        return 2.5 * eps / steps  # Madry et al. 2018's rule of thumb: the walk can cross the ball
    return check_number(step_size, "step_size", who, low=0)


def _check_inputs(X: Any, clip: Clip, who: str) -> np.ndarray:
    X = np.asarray(X, dtype=np.float32)
    if X.ndim < 2 or X.shape[0] == 0:
        raise DataError(f"{who}: inputs must be an array (n, ...) with n >= 1 and a feature axis; got shape {X.shape}")
    if np.isnan(X).any():
        raise DataError(f"{who}: the inputs hold NaN ({int(np.isnan(X).sum())} values)")
    if not np.isfinite(X).all():
        raise DataError(f"{who}: the inputs hold infinite values")
    tol = 1e-5 * (clip[1] - clip[0])
    if X.min() < clip[0] - tol or X.max() > clip[1] + tol:
        raise DataError(
            f"{who}: the inputs range over [{X.min():.4g}, {X.max():.4g}], outside clip = {clip}; "
            "pass the data's range as clip"
        )
    return np.clip(X, clip[0], clip[1])


def _device(device: Any) -> torch.device:
    if isinstance(device, torch.device):
        return device
    from weakspot.device import resolve_device

    return resolve_device(str(device))


def _logits(module: torch.nn.Module, x: torch.Tensor, who: str) -> torch.Tensor:
    z = module(x)
    if not isinstance(z, torch.Tensor) or z.ndim != 2 or z.shape[0] != x.shape[0]:
        shape = tuple(z.shape) if isinstance(z, torch.Tensor) else type(z).__name__
        raise ModelError(
            f"{who}: the module must return logits of shape (n, k) = ({x.shape[0]}, k) for {x.shape[0]} "
            f"inputs; it returned {shape}"
        )
    return z


def _view(mask: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    return mask.view(-1, *([1] * (like.ndim - 1)))


def max_kl(
    module: torch.nn.Module,
    X: Any,
    *,
    eps: float,
    steps: int = 20,
    step_size: Optional[float] = None,
    restarts: int = 1,
    normalisation: str = "invariant",
    clip: Clip = (0.0, 1.0),
    seed: int = 0,
    batch_size: int = 256,
    device: Any = "cpu",
    progress: Optional[Progress] = None,
    floor: float = TINY,
) -> MaxKL:
    """Largest ``KL(p(x) || p(x'))`` over the L-inf ball ``||x' - x||_inf <= eps`` (within ``clip``), per input.

    Sec. 4.1, Eq. 4 of Yu et al. 2019, by gradient ascent on the KL with ``p(x)`` held fixed: L-inf steepest ascent
    (signed-gradient) steps of ``step_size``, each followed by a projection onto the eps-ball intersected with
    ``clip``. Each restart starts from a uniform random point of the ball (a start at ``x`` itself would never move:
    the KL's gradient is zero there). The answer per input is the largest KL over every iterate of every restart,
    the random start and the last step included.

    Parameters
    ----------
    module : torch.nn.Module
        Maps a batch of inputs to logits (n, k); already on ``device``. Used in eval mode (its mode is restored
        afterwards); its parameters get no gradient.
    X : array (n, ...), float32
        Inputs inside ``clip``.
    eps : float
        L-inf radius, in the data's units (> 0). The paper uses its attacks' budgets (e.g. 0.3 on MNIST, 8/255 on
        CIFAR10, Sec. 5.1); there is no default.
    steps : int, default 20
        Ascent steps per restart (the paper does not give its number; 20 is this library's CPU default).
    step_size : float, optional
        Default ``2.5 * eps / steps`` (Madry et al. 2018's rule of thumb, so that a walk can cross the ball).
    restarts : int, default 1
        Random starts per input.
    normalisation : {"invariant", "softmax"}, default "invariant"
        How logits become probabilities: the paper's scale-invariant Eq. 5, or plain softmax (Table 4's
        un-normalised score).
    clip : (float, float), default (0, 1)
        The data's range; every ``x'`` stays in it.
    seed : int, default 0
        Seeds the CPU ``torch.Generator`` of the random starts (same seed and batch_size -> same result).
    batch_size : int, default 256
        Rows per forward pass, restarts included: each pass holds ``max(1, batch_size // restarts)`` inputs with all
        their restarts.
    device : str or torch.device, default "cpu"
        ``auto|cpu|cuda``.
    progress : callable, optional
        ``progress("max KL", inputs_done, n)`` after each batch (:data:`weakspot.progress.Progress`).

    Returns
    -------
    MaxKL
        ``kl`` (n,) float64, ``x_worst`` (n, ...) float32 and the settings.

    Raises
    ------
    ConfigError
        eps not finite and > 0, steps or restarts < 1, bad step_size, clip or normalisation.
    DataError
        X empty, holding NaN or infinities, or outside ``clip``.
    ModelError
        The module's output is not (n, k), or holds NaN or infinities.
    """
    who = "max_kl"
    eps = check_number(eps, "eps", who, low=0)
    steps = check_int(steps, "steps", who)
    restarts = check_int(restarts, "restarts", who)
    batch_size = check_int(batch_size, "batch_size", who)
    clip = check_clip(clip, who)
    alpha = _step_size(step_size, eps, steps, who)
    norm = _normalisation(normalisation)
    X = _check_inputs(X, clip, who)
    dev = _device(device)
    gen = torch.Generator(device="cpu").manual_seed(int(seed))

    floor = check_number(floor, "floor", who, low=0, high=1, high_open=True)
    n = X.shape[0]
    kl_out = np.empty(n, dtype=np.float64)
    x_out = np.empty_like(X)
    was_training = module.training
    module.eval()
    try:
        chunk = max(1, batch_size // restarts)  # inputs per pass: every restart of a chunk runs in one batch
        for s in range(0, n, chunk):
            x = torch.as_tensor(X[s : s + chunk], device=dev)
            m = x.shape[0]
            with torch.no_grad():
                z = _logits(module, x, who)
                if not torch.isfinite(z).all():
                    raise ModelError(f"{who}: the module's logits hold NaN or infinite values on inputs {s}..")
                p = norm(z).repeat(restarts, 1)  # restart-major rows: row r * m + i is restart r of input i
            x0 = x.repeat(restarts, *([1] * (x.ndim - 1)))
            noise = torch.cat([torch.rand(x.shape, generator=gen, dtype=x.dtype) for _ in range(restarts)]).to(dev)
            x_adv = project(x0 + (2 * noise - 1) * eps, x0, eps, clip)
            best_kl = torch.full((x0.shape[0],), -1.0, dtype=p.dtype, device=dev)
            best_x = x0.clone()
            for it in range(steps + 1):  # steps + 1 iterates: the random start, then one per step
                last = it == steps
                x_adv = x_adv.detach().requires_grad_(not last)
                with torch.no_grad() if last else torch.enable_grad():
                    cur = kl(p, norm(_logits(module, x_adv, who)), floor)
                    if not last:
                        (g,) = torch.autograd.grad(cur.sum(), x_adv)
                cur = cur.detach()
                better = cur > best_kl
                best_kl = torch.where(better, cur, best_kl)
                best_x = torch.where(_view(better, x0), x_adv.detach(), best_x)
                if not last:
                    x_adv = project(x_adv.detach() + alpha * g.sign(), x0, eps, clip)
            if not torch.isfinite(best_kl).all():
                raise ModelError(f"{who}: the module's logits went NaN or infinite inside the eps-ball (inputs {s}..)")
            r_best = best_kl.view(restarts, m).argmax(dim=0)  # the first restart among equals
            rows = r_best * m + torch.arange(m, device=dev)
            kl_out[s : s + m] = best_kl[rows].clamp_min(0.0).double().cpu().numpy()  # KL >= 0; float error aside
            x_out[s : s + m] = best_x[rows].cpu().numpy()
            if progress is not None:
                progress("max KL", s + m, n)
    finally:
        module.train(was_training)
    return MaxKL(
        kl=kl_out,
        x_worst=x_out,
        eps=eps,
        steps=steps,
        step_size=alpha,
        restarts=restarts,
        normalisation=normalisation,
        clip=clip,
        seed=int(seed),
    )


# -------------------------------------------------------------------------------------------------------------- psi
def _check_kl(kl_values: Any, who: str) -> np.ndarray:
    k = np.asarray(kl_values, dtype=np.float64)
    if k.ndim != 1 or k.size == 0:
        raise DataError(f"{who}: kl must be a non-empty 1-D array of per-input KL divergences; got shape {k.shape}")
    if np.isnan(k).any():
        raise DataError(f"{who}: kl holds NaN ({int(np.isnan(k).sum())} values)")
    if (k < 0).any():
        raise DataError(f"{who}: kl holds negative values (min {k.min():.4g}); a KL divergence is >= 0")
    return k


def psi(kl_values: Any) -> float:
    """The robustness score of Sec. 4.1: ``1 / mean(kl)`` over the inputs (the paper's scale: e.g. 93.8 for LeNet on
    MNIST, Table 1). Larger is more robust; ``inf`` when every KL is 0, 0.0 when one is infinite.

    Parameters
    ----------
    kl_values : array (n,)
        Per-input largest KL divergences (:attr:`MaxKL.kl`), >= 0.

    Raises
    ------
    DataError
        Empty, not 1-D, NaN or negative values.
    """
    m = float(_check_kl(kl_values, "psi").mean())
    return float("inf") if m == 0.0 else 1.0 / m


def psi_per_class(kl_values: Any, labels: Any, n_classes: int) -> np.ndarray:
    """psi of each class's inputs: ``1 / mean(kl[labels == c])`` for c in ``range(n_classes)``.

    Returns
    -------
    np.ndarray, shape (n_classes,), float64
        nan for a class with no inputs, inf for one whose KLs are all 0.

    Raises
    ------
    ConfigError
        n_classes < 1.
    DataError
        kl as in :func:`psi`; labels not integers in ``[0, n_classes)`` or not one per KL.
    """
    n_classes = check_int(n_classes, "n_classes", "psi_per_class")
    k = _check_kl(kl_values, "psi_per_class")
    lab = np.asarray(labels)
    if lab.shape != k.shape:
        raise DataError(f"psi_per_class: {k.shape[0]} KL values but labels of shape {lab.shape}")
    if not np.issubdtype(lab.dtype, np.integer):
        if not (np.issubdtype(lab.dtype, np.floating) and np.all(lab == np.round(lab))):
            raise DataError(f"psi_per_class: labels must be integers; got dtype {lab.dtype}")
        lab = lab.astype(np.int64)
    if lab.min() < 0 or lab.max() >= n_classes:
        raise DataError(f"psi_per_class: labels range over [{lab.min()}, {lab.max()}], outside [0, {n_classes})")
    counts = np.bincount(lab, minlength=n_classes).astype(np.float64)
    sums = np.bincount(lab, weights=k, minlength=n_classes)
    with np.errstate(divide="ignore", invalid="ignore"):
        out = counts / sums  # = 1 / mean; 0/0 -> nan (empty class), c/0 -> inf (all KLs 0)
    out[counts == 0] = np.nan
    return out


# ---------------------------------------------------------------------------------------------- reparameterisation
def eps_sharpness(
    module: torch.nn.Module,
    X: Any,
    y: Any,
    *,
    eps: float,
    steps: int = 20,
    step_size: Optional[float] = None,
    clip: Clip = (0.0, 1.0),
    seed: int = 0,
    batch_size: int = 256,
    device: Any = "cpu",
) -> float:
    """Keskar et al. 2017's eps-sharpness moved to input space, as Sec. 5.4 (Table 4) of Yu et al. 2019 does.

    With ``L(X)`` the mean cross-entropy over the inputs::

        sharpness = (max_{X' : ||x'_i - x_i||_inf <= eps, x'_i in clip} L(X') - L(X)) / (1 + L(X)) * 100

    The max (separable over inputs) is estimated per input by PGD on the cross-entropy
    (:func:`weakspot.adversarial.attacks.pgd` with a random start and ``keep_best=True``); the input itself also
    counts as a candidate, so the result is >= 0. Rescaling the logit layer changes this number (Table 4), unlike psi
    with the invariant normalisation.

    Parameters
    ----------
    module : torch.nn.Module
        Maps inputs to logits (n, k); already on ``device``.
    X : array (n, ...), float32
        Inputs inside ``clip``.
    y : array (n,) of int
        Their labels.
    eps : float
        L-inf radius (> 0).
    steps : int, default 20
        PGD steps (the paper does not give Table 4's; 20 is this library's CPU default).
    step_size : float, optional
        Default ``2.5 * eps / steps`` (Madry et al. 2018).
    clip : (float, float), default (0, 1)
    seed : int, default 0
        Seeds the PGD random starts.
    batch_size : int, default 256
    device : str or torch.device, default "cpu"

    Returns
    -------
    float
        The sharpness, in percent of ``1 + L(X)``.
    """
    who = "eps_sharpness"
    eps = check_number(eps, "eps", who, low=0)
    steps = check_int(steps, "steps", who)
    batch_size = check_int(batch_size, "batch_size", who)
    clip = check_clip(clip, who)
    alpha = _step_size(step_size, eps, steps, who)
    X = _check_inputs(X, clip, who)
    y = np.asarray(y)
    if y.shape != (X.shape[0],) or not np.issubdtype(y.dtype, np.integer):
        raise DataError(f"{who}: labels must be {X.shape[0]} integers (one per input); got {y.dtype} {y.shape}")
    dev = _device(device)
    gen = torch.Generator(device="cpu").manual_seed(int(seed))
    n = X.shape[0]
    clean_sum, worst_sum = 0.0, 0.0
    was_training = module.training
    module.eval()
    try:
        for s in range(0, n, batch_size):
            x = torch.as_tensor(X[s : s + batch_size], device=dev)
            yb = torch.as_tensor(y[s : s + batch_size], dtype=torch.int64, device=dev)
            with torch.no_grad():
                z = _logits(module, x, who)
            if yb.min() < 0 or yb.max() >= z.shape[1]:
                raise DataError(
                    f"{who}: labels range over [{int(yb.min())}, {int(yb.max())}], outside the "
                    f"module's {z.shape[1]} classes"
                )
            x_adv = pgd(
                module,
                x,
                yb,
                eps=eps,
                steps=steps,
                step_size=alpha,
                random_start=True,
                loss="ce",
                clip=clip,
                generator=gen,
                keep_best=True,
            )
            with torch.no_grad():
                clean = F.cross_entropy(z.double(), yb, reduction="none")
                worst = F.cross_entropy(module(x_adv).double(), yb, reduction="none")
            clean_sum += float(clean.sum())
            worst_sum += float(torch.maximum(worst, clean).sum())
    finally:
        module.train(was_training)
    L, L_max = clean_sum / n, worst_sum / n
    if not (np.isfinite(L) and np.isfinite(L_max)):
        raise ModelError(
            f"{who}: the cross-entropy is not finite (clean {L}, worst {L_max}); check the module's logits"
        )
    return (L_max - L) / (1.0 + L) * 100.0
