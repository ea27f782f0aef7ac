"""The generalized adversarial attack, Algorithm 2 of seeds/001 (Sec. IV-B), batched over all instances.

Caveats first:

* Algorithm 2 ascends the training loss ``J(theta, x_adv, c)`` of the pseudo-model with ``c = conf(M_P(x))``. Read
  literally (``c`` the pseudo-model's own output at ``x``) the gradient is zero at the first step, so -- as in FGSM,
  which the paper cites -- ``c`` is taken as the black box's *hard* prediction: the MSE to that label grows exactly
  when the pseudo-confidence of the predicted class falls. Its sign is taken on the pre-sigmoid logit, which has the
  same sign wherever the MSE gradient is defined and does not vanish when the sigmoid saturates.
* The step is ``epsilon`` times each feature's scale (``feature_scale="range"``: the evaluation data's range, so one
  scalar epsilon suits features in different units; ``"raw"``: epsilon in the data's own units, the paper's literal
  reading). With sign steps the distance is quantised to whole steps, so after the flip the last step is bisected
  ``refine_iters`` times (one black-box call each, over all flipped instances at once); the returned point is always
  on the flipped side.
* Columns in ``fixed`` (a table's categorical columns, held as codes) never move: a category is not a quantity
  one can step along, so the partner keeps the instance's categories. A missing value (NaN) never moves either: the
  partner's cell stays missing, so the black box answers on it as on the instance, and the pseudo-model's gradient
  there is zero (:mod:`weakspot.gad.extract`).
* The loop stops at ``max_steps``; instances the black box never flips keep their last point, ``flipped`` is False for
  them and their distance is a lower bound (censored).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Sequence

import numpy as np

from weakspot.errors import ConfigError, DataError
from weakspot.progress import Progress


@dataclass
class AttackResult:
    """Adversarial partners of each instance and how they were reached."""

    x_adv: np.ndarray  # (n, d), on the flipped side of the black box's boundary where flipped
    steps: np.ndarray  # (n,) signed-gradient steps taken (max_steps where never flipped)
    flipped: np.ndarray  # (n,) bool: the black box's prediction changed
    original_prediction: np.ndarray  # (n,) black box's argmax at x

    @property
    def never_flipped(self) -> np.ndarray:
        return ~self.flipped


def gad_attack(
    black_box,
    pseudo_model,
    X: np.ndarray,
    *,
    class_index: int = 1,
    step_size: float = 0.002,
    max_steps: int = 1000,
    scale: Optional[np.ndarray] = None,
    refine_iters: int = 8,
    device: str = "auto",
    progress: Optional[Progress] = None,
    fixed: Sequence[int] = (),
) -> AttackResult:
    """Algorithm 2 for every row of ``X`` at once: signed-gradient steps on the pseudo-model until the black box flips.

    Parameters
    ----------
    black_box : Classifier (weakspot.models; e.g. SklearnClassifier)
        Called once per step on the still-unflipped rows only.
    pseudo_model : torch.nn.Module
        With ``.logit(x)``, the logit of the black box's confidence for ``class_index`` (from Algorithm 1).
    X : ndarray (n, d)
        Instances to turn adversarial.
    step_size : float
        Epsilon of Algorithm 2 (the paper gives none; ours: 0.002 of each feature's scale).
    max_steps : int
        Step cap (the paper's loop has none; ours: 1000).
    scale : ndarray (d,), optional
        Per-feature step unit (default ones: epsilon in raw units).
    refine_iters : int
        Bisection iterations on the final step (0: plain Algorithm 2).
    fixed : sequence of int
        Columns that never move (categorical codes).
    """
    import torch

    from weakspot.device import resolve_device
    from weakspot.device import single_thread

    X = np.asarray(X, dtype=np.float64)
    if X.ndim != 2:
        raise DataError(f"gad_attack: X must be (n, d), got shape {X.shape}")
    if np.isinf(X).any():
        raise DataError("gad_attack: X holds infinite values (a missing value, NaN, is kept and never moves)")
    if step_size <= 0 or max_steps < 1:
        raise ConfigError(f"gad_attack: step_size={step_size} must be > 0 and max_steps={max_steps} >= 1")
    n, d = X.shape
    scale = np.ones(d) if scale is None else np.asarray(scale, dtype=np.float64)
    if scale.shape != (d,) or not (scale > 0).all():
        raise ConfigError(f"gad_attack: scale must be ({d},) and positive, got shape {scale.shape}")
    dev = resolve_device(device)
    model = pseudo_model.to(dev)
    step_vec = step_size * scale
    step_vec[list(fixed)] = 0.0

    pred0 = black_box.predict_proba(X).argmax(axis=1)
    # +1: push the class-of-interest logit down (instance predicted as the class of interest), -1: push it up
    direction = np.where(pred0 == class_index, 1.0, -1.0)
    x_adv = X.copy()
    steps = np.full(n, max_steps, dtype=np.int64)
    flipped = np.zeros(n, dtype=bool)
    last_step = np.zeros_like(X)
    active = np.arange(n)
    for k in range(1, max_steps + 1):
        with single_thread(dev):
            xa = torch.as_tensor(x_adv[active], dtype=torch.float32, device=dev).requires_grad_(True)
            (grad,) = torch.autograd.grad(model.logit(xa).sum(), xa)
        g = np.nan_to_num(grad.cpu().numpy().astype(np.float64), nan=0.0, posinf=0.0, neginf=0.0)
        delta = -direction[active, None] * np.sign(g) * step_vec
        delta[np.isnan(x_adv[active])] = 0.0  # a missing cell stays missing (NaN + 0)
        x_adv[active] += delta
        last_step[active] = delta
        now = black_box.predict_proba(x_adv[active]).argmax(axis=1) != pred0[active]
        done = active[now]
        steps[done] = k
        flipped[done] = True
        active = active[~now]
        if progress is not None and (k % 25 == 0 or len(active) == 0):
            progress("attack: flipped", int(flipped.sum()), n)
        if len(active) == 0:
            break

    if refine_iters > 0 and flipped.any():
        idx = np.flatnonzero(flipped)
        hi_pt = x_adv[idx].copy()  # flipped side
        lo_pt = hi_pt - last_step[idx]  # unflipped side
        for _ in range(refine_iters):
            mid = 0.5 * (lo_pt + hi_pt)
            flips = black_box.predict_proba(mid).argmax(axis=1) != pred0[idx]
            hi_pt[flips] = mid[flips]
            lo_pt[~flips] = mid[~flips]
        x_adv[idx] = hi_pt
    return AttackResult(x_adv=x_adv, steps=steps, flipped=flipped, original_prediction=pred0)


def attack_distances(
    black_box,
    pseudo_model,
    X: np.ndarray,
    *,
    split,
    params,
    class_index: int,
    scale: np.ndarray,
    device: str = "auto",
    progress: Optional[Progress] = None,
) -> "tuple[AttackResult, np.ndarray]":
    """:func:`gad_attack` on the rows ``X`` with ``params``' settings, the split's categorical columns held, and each
    row's MAE to its partner over the columns that moved (Eq. 3 in units of ``scale``; over the row's observed ones
    where some are missing)."""
    from weakspot.gad.distance import mae

    held = split.categorical
    att = gad_attack(
        black_box,
        pseudo_model,
        X,
        class_index=class_index,
        step_size=params.step_size,
        max_steps=params.max_steps,
        scale=scale,
        refine_iters=params.refine_iters,
        device=device,
        progress=progress,
        fixed=held,
    )
    moved = np.setdiff1d(np.arange(X.shape[1]), held)
    return att, mae(X[:, moved], att.x_adv[:, moved], scale=np.asarray(scale)[moved])
