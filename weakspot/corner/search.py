"""The seed search of seeds/003 (Sec. 3, 4.3) and the comparison with FGSM (Sec. 4.5).

Caveats first:

* Hardness is the *logit margin* between the two largest class scores of the classifier on ``G(s)``,
  ``m(s) = f_(1)(G(s)) - f_(2)(G(s)) >= 0``, zero exactly on a decision boundary: the multi-class reading of the
  paper's ``|f(G(s))|``. Per seed the loss is ``alpha * m(s) + softplus(-D(G(s))) + w * relu(tau - log p(s))``:
  the discriminator term only when a discriminator is used (``softplus(-D) = -log sigmoid(D)`` is the paper's
  ``-D`` made to stop pulling once ``D`` says real, ours), and the realism hinge (ours) only pushes a seed whose
  latent log-density ``log p`` falls below the acceptance threshold ``tau`` back in (``w = 0`` is the paper's 2-D
  setup). ``alpha`` is 1 without a discriminator.
* All seeds are optimised together as one batch with Adam (Sec. 4.3: 50 steps, lr 0.001); seeds do not interact
  (the loss is a sum of per-seed terms and Adam is per coordinate). Gradients come from the classifier module
  (white box) via ``torch.autograd.grad`` only with respect to the seeds: the classifier's parameters are untouched.
* The FGSM comparison follows Sec. 4.5: for decoded seeds ``x = G(s)`` and the *predicted* class ``y_hat``,
  ``x_fgsm = clip(x + eps * sign(grad_x CE(f(x), y_hat)), 0, 1)`` and ``x_latent = G(s + eps * grad_s J / ||grad_s J||)``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, Optional

import numpy as np
import torch
import torch.nn.functional as F

from weakspot.corner.autoencoder import Generator
from weakspot.corner.realism import LatentDensity, manifold_distance, total_variation
from weakspot.errors import ConfigError
from weakspot.progress import Progress


@dataclass
class CornerSearch:
    """What the search did to every seed.

    Arrays are over seeds (first axis ``n``) unless said otherwise; ``path`` and ``margin_path`` have ``steps + 1``
    rows (row 0 = the initial seeds).
    """

    seeds: np.ndarray  # (n, d) initial standardised codes
    final: np.ndarray  # (n, d)
    path: np.ndarray  # (steps + 1, n, d)
    margin_path: np.ndarray  # (steps + 1, n) logit margin
    images_before: np.ndarray  # (n, C, H, W)
    images_after: np.ndarray
    margin_before: np.ndarray  # logit margin
    margin_after: np.ndarray
    prob_margin_before: np.ndarray  # p_top1 - p_top2
    prob_margin_after: np.ndarray
    pred_before: np.ndarray  # int64 top class
    pred_after: np.ndarray
    second_after: np.ndarray  # int64 runner-up class after the search
    confidence_after: np.ndarray  # p of pred_after
    log_density_before: np.ndarray
    log_density_after: np.ndarray
    disc_after: Optional[np.ndarray] = None  # discriminator logit, where used
    extras: Dict[str, Any] = field(default_factory=dict)

    @property
    def n(self) -> int:
        return len(self.seeds)


def _margins(logits: torch.Tensor):
    top = torch.topk(logits, 2, dim=1)
    return top.values[:, 0] - top.values[:, 1], top.indices


def _check_clf(clf: Any) -> None:
    if not (hasattr(clf, "module") and callable(getattr(clf, "logits", None))):
        raise ConfigError(
            "corner cases need a white-box classifier (weakspot.models.TorchClassifier with .module "
            f"and .logits); got {type(clf).__name__}"
        )


def _evaluate(clf: Any, g: Generator, s: torch.Tensor, batch: int = 1024):
    """Images, logits and probabilities of seeds ``s`` (no gradients)."""
    with torch.no_grad():
        xs, ls = [], []
        for i in range(0, len(s), batch):
            x = g.decode(s[i : i + batch])
            xs.append(x)
            ls.append(clf.logits(x).float())
        x = torch.cat(xs)
        lg = torch.cat(ls)
    return x, lg, torch.softmax(lg, dim=1)


def search_corner_cases(
    clf: Any,
    g: Generator,
    seeds: Any,
    *,
    steps: int = 50,
    lr: float = 0.001,
    density: Optional[LatentDensity] = None,
    realism_weight: float = 0.0,
    use_discriminator: bool = False,
    disc_alpha: float = 1.0,
    schedule: str = "constant",
    progress: Optional[Progress] = None,
) -> CornerSearch:
    """Optimise latent ``seeds`` ``(n, d)`` (standardised units) towards the classifier's decision boundary.

    Parameters
    ----------
    clf : weakspot.models.TorchClassifier
        White box: its ``logits`` are differentiated through the decoder.
    g : Generator
        From :func:`weakspot.corner.train_autoencoder`.
    seeds : array ``(n, d)``
    steps, lr : Adam steps and learning rate (Sec. 4.3: 50, 0.001).
    schedule : "constant" (the paper's) or "cosine"
        ``cosine`` anneals the step from ``lr`` to 0 over the steps, so that a seed that reached the boundary stops
        bouncing across it by ``lr`` (the margin is a V around the boundary and Adam's steps keep their size).
    density : LatentDensity, optional
        Needed for ``realism_weight > 0`` and for the reported log-densities.
    realism_weight : float
        Weight of the hinge ``relu(threshold - log p(s))``.
    use_discriminator, disc_alpha : bool, float
        Sec. 3's loss ``alpha * margin - D`` (as ``softplus(-D)``); needs ``g.discriminator``.
    """
    _check_clf(clf)
    if realism_weight > 0 and density is None:
        raise ConfigError("search_corner_cases: realism_weight > 0 needs a density (latent_density(...))")
    if use_discriminator and g.discriminator is None:
        raise ConfigError("search_corner_cases: use_discriminator needs a generator trained with a discriminator")
    dev = g.device
    s0 = torch.as_tensor(np.asarray(seeds, np.float32), device=dev)
    if s0.ndim != 2 or s0.shape[1] != g.latent_dim:
        raise ConfigError(f"search_corner_cases: seeds must be (n, {g.latent_dim}), got {tuple(s0.shape)}")
    was_training = clf.module.training
    clf.module.eval()
    alpha = float(disc_alpha) if use_discriminator else 1.0
    s = s0.clone().requires_grad_(True)
    if schedule not in ("constant", "cosine"):
        raise ConfigError(f"search_corner_cases: schedule must be 'constant' or 'cosine', got {schedule!r}")
    opt = torch.optim.Adam([s], lr=float(lr))
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=max(1, int(steps))) if schedule == "cosine" else None
    path = [s0.cpu().numpy().copy()]
    mpath = []
    try:
        for step in range(int(steps) + 1):
            x = g.decode(s)
            margin, _ = _margins(clf.logits(x).float())
            mpath.append(margin.detach().cpu().numpy())
            if step == int(steps):
                break
            loss = alpha * margin
            if use_discriminator:
                assert g.discriminator is not None  # checked on entry
                loss = loss + F.softplus(-g.discriminator(x))
            if realism_weight > 0:
                assert density is not None  # checked on entry
                loss = loss + float(realism_weight) * torch.relu(density.threshold - density.log_density_torch(s))
            (grad,) = torch.autograd.grad(loss.sum(), [s])
            opt.zero_grad(set_to_none=True)
            s.grad = grad
            opt.step()
            if sched is not None:
                sched.step()
            path.append(s.detach().cpu().numpy().copy())
            if progress is not None:
                progress("corner: seed search step", step + 1, int(steps))
    finally:
        clf.module.train(was_training)
    s1 = s.detach()
    xb, lb, pb = _evaluate(clf, g, s0)
    xa, la, pa = _evaluate(clf, g, s1)
    mb, ib = _margins(lb)
    ma, ia = _margins(la)
    ptb = torch.topk(pb, 2, dim=1).values
    pta = torch.topk(pa, 2, dim=1).values
    disc_after = None
    if g.discriminator is not None:
        with torch.no_grad():
            disc_after = g.discriminator(xa).cpu().numpy().astype(np.float64)
    ld_b = density.score(s0.cpu().numpy()) if density is not None else np.full(len(s0), np.nan)
    ld_a = density.score(s1.cpu().numpy()) if density is not None else np.full(len(s0), np.nan)
    return CornerSearch(
        seeds=s0.cpu().numpy(),
        final=s1.cpu().numpy(),
        path=np.stack(path),
        margin_path=np.stack(mpath),
        images_before=xb.cpu().numpy(),
        images_after=xa.cpu().numpy(),
        margin_before=mb.cpu().numpy().astype(np.float64),
        margin_after=ma.cpu().numpy().astype(np.float64),
        prob_margin_before=(ptb[:, 0] - ptb[:, 1]).cpu().numpy().astype(np.float64),
        prob_margin_after=(pta[:, 0] - pta[:, 1]).cpu().numpy().astype(np.float64),
        pred_before=ib[:, 0].cpu().numpy().astype(np.int64),
        pred_after=ia[:, 0].cpu().numpy().astype(np.int64),
        second_after=ia[:, 1].cpu().numpy().astype(np.int64),
        confidence_after=pta[:, 0].cpu().numpy().astype(np.float64),
        log_density_before=ld_b,
        log_density_after=ld_a,
        disc_after=disc_after,
    )


@dataclass
class FgsmComparison:
    """Sec. 4.5 on the same seeds: FGSM in pixel space against one latent step of the same size."""

    images: np.ndarray  # (n, C, H, W) x = G(s)
    fgsm: np.ndarray
    latent: np.ndarray
    pred: np.ndarray
    pred_fgsm: np.ndarray
    pred_latent: np.ndarray
    tv: np.ndarray
    tv_fgsm: np.ndarray
    tv_latent: np.ndarray
    manifold: np.ndarray  # ||x - G(E(x))|| (RMS per pixel)
    manifold_fgsm: np.ndarray
    manifold_latent: np.ndarray
    eps: float


def fgsm_vs_latent(clf: Any, g: Generator, seeds: Any, *, eps: float = 0.25) -> FgsmComparison:
    """FGSM (``eps`` in pixels) on ``G(s)`` against the latent step ``s + eps * grad/||grad||`` (Sec. 4.5)."""
    _check_clf(clf)
    dev = g.device
    s = torch.as_tensor(np.asarray(seeds, np.float32), device=dev).clone().requires_grad_(True)
    was_training = clf.module.training
    clf.module.eval()
    try:
        x = g.decode(s)
        logits = clf.logits(x).float()
        yhat = logits.argmax(1).detach()
        loss = F.cross_entropy(logits, yhat, reduction="sum")
        gx, gs = torch.autograd.grad(loss, [x, s])
    finally:
        clf.module.train(was_training)
    with torch.no_grad():
        x0 = x.detach()
        x_f = (x0 + eps * gx.sign()).clamp(0.0, 1.0)
        norm = gs.flatten(1).norm(dim=1).clamp_min(1e-12)
        x_l = g.decode(s.detach() + eps * gs / norm[:, None])
        p0 = clf.logits(x0).argmax(1)
        pf = clf.logits(x_f).argmax(1)
        pl = clf.logits(x_l).argmax(1)
    a, b, c = (t.cpu().numpy() for t in (x0, x_f, x_l))
    return FgsmComparison(
        images=a,
        fgsm=b,
        latent=c,
        pred=p0.cpu().numpy(),
        pred_fgsm=pf.cpu().numpy(),
        pred_latent=pl.cpu().numpy(),
        tv=total_variation(a),
        tv_fgsm=total_variation(b),
        tv_latent=total_variation(c),
        manifold=manifold_distance(g, a),
        manifold_fgsm=manifold_distance(g, b),
        manifold_latent=manifold_distance(g, c),
        eps=float(eps),
    )
