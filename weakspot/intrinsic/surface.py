"""Decision surfaces (seeds/002 Sec. 3.1-3.3, Eq. 1-3, Figs. 2-4): the decision function
``g(x) = z_true(x) - max_{j != true} z_j(x)`` (Eq. 2: positive = correct, 0 = the decision boundary) over a 2-D plane
``x + a * d1 + b * d2`` through an input.

Caveats first:

* Directions are L-inf unit vectors (signs), so the axes are in the data's units and the threat model's eps-ball is
  the square ``|a|, |b| <= eps``: the x-axis ``d1`` is a random sign vector, the y-axis ``d2`` one of random, the
  FGSM direction ``sign(grad CE(x, y))``, the least-likely-class FGSM direction ``-sign(grad CE(x, y_ll))`` and the C&W
  direction ``sign(grad (max_{j != y} z_j - z_y))`` (Eq. 3; the paper's random direction is drawn from N(0, I), ours
  is its sign, so that every axis has the same L-inf length).
* Points off the data's range are *not* clipped: the surface pictures the function around the input (Eq. 1); the
  dashed square marks the eps-ball the attacks search.
* Deterministic: the random directions come from a CPU ``torch.Generator`` seeded by ``seed``.
* The figure of a set of surfaces is :func:`weakspot.intrinsic.figures.surface_figure`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, List, Sequence

import numpy as np
import torch

from weakspot.adversarial.attacks import cw_margin, input_grad
from weakspot.errors import ConfigError

#: The y-axis directions of Fig. 2 (a)-(d), in the paper's order.
DIRECTIONS = ("random", "fgsm", "ll_fgsm", "cw")
DIRECTION_LABELS = {
    "random": "random",
    "fgsm": "FGSM sign-gradient",
    "ll_fgsm": "least-likely FGSM",
    "cw": "C&W margin gradient",
}


@dataclass
class Surface:
    """``g`` on a ``grid x grid`` lattice: ``g[i, j]`` at ``x + a[j] * d1 + b[i] * d2``."""

    a: np.ndarray
    b: np.ndarray
    g: np.ndarray
    direction: str

    def boundary_distance(self) -> float:
        """How far along the y-axis direction (``a = 0``, either way) the decision boundary ``g = 0`` is first
        crossed, in the data's units: the arrows of Fig. 2 (inf when it is not crossed within the span)."""
        c = int(np.argmin(np.abs(self.a)))
        r = np.abs(self.b)[self.g[:, c] <= 0]
        return float(r.min()) if r.size else float("inf")


def direction(module: torch.nn.Module, x: torch.Tensor, y: int, kind: str, generator: torch.Generator) -> torch.Tensor:
    """The unit L-inf direction ``kind`` (one of :data:`DIRECTIONS`) at one input ``x`` (shape ``(1, ...)``)."""
    yt = torch.tensor([int(y)], device=x.device)
    if kind == "random":
        d = torch.randn(x.shape, generator=generator).to(x.device)
    elif kind == "fgsm":
        d = input_grad(module, x, yt, "ce")
    elif kind == "ll_fgsm":
        with torch.no_grad():
            ll = module(x).argmin(1)
        d = -input_grad(module, x, ll, "ce")
    elif kind == "cw":
        d = input_grad(module, x, yt, "cw")
    else:
        raise ConfigError(f"surface direction {kind!r} is not known; valid: {', '.join(DIRECTIONS)}")
    d = d.sign()
    if not bool(d.abs().sum() > 0):  # a flat gradient (saturated softmax): fall back to a random sign vector
        d = torch.randn(x.shape, generator=generator).to(x.device).sign()
    return d


def decision_surfaces(
    module: torch.nn.Module,
    x: np.ndarray,
    y: int,
    *,
    eps: float,
    grid: int = 41,
    span: float = 2.0,
    directions: Sequence[str] = DIRECTIONS,
    seed: int = 0,
    device: Any = "cpu",
    batch_size: int = 1024,
) -> List[Surface]:
    """The decision surfaces of one input ``x`` (shape ``(...)``, no batch axis) with true class ``y``: one per
    y-axis direction, all sharing the random x-axis direction; each axis spans ``[-span * eps, span * eps]``."""
    module.eval()
    gen = torch.Generator().manual_seed(int(seed))
    xt = torch.as_tensor(np.asarray(x, np.float32)[None], device=device)
    d1 = direction(module, xt, y, "random", gen)
    ticks = np.linspace(-span * eps, span * eps, int(grid)).astype(np.float32)
    A, B = np.meshgrid(ticks, ticks)
    a_t = torch.as_tensor(A.ravel(), device=device)
    b_t = torch.as_tensor(B.ravel(), device=device)
    out: List[Surface] = []
    for kind in directions:
        d2 = direction(module, xt, y, kind, gen)
        gs = []
        with torch.no_grad():
            for s in range(0, a_t.numel(), int(batch_size)):
                aa, bb = a_t[s : s + batch_size], b_t[s : s + batch_size]
                shape = (-1,) + (1,) * (xt.ndim - 1)
                pts = xt + aa.view(shape) * d1 + bb.view(shape) * d2
                yy = torch.full((pts.shape[0],), int(y), dtype=torch.int64, device=device)
                gs.append(cw_margin(module(pts), yy).cpu().numpy())
        out.append(Surface(a=ticks, b=ticks, g=np.concatenate(gs).reshape(A.shape).astype(np.float64), direction=kind))
    return out
