"""LOESS fit of adversarial distance on confidence and the Generalized Adversarial Distance, Eq. 2 of seeds/001.

Caveats first: ``F`` is statsmodels' ``lowess`` (Cleveland 1979 / Cleveland & Devlin 1988) of MAE -- or of log-MAE,
"to facilitate better curve fitting" (Sec. IV-A; Table I says which per data set) -- on the black box's confidence,
fitted on the evaluation set itself (GAD is unsupervised: no label is used). GAD is the residual, so it is in log
units when ``log=True``. The span ``frac`` is ours (the paper gives none; 2/3 is Cleveland's default).
"""

from __future__ import annotations

from typing import Optional

import numpy as np

from weakspot.errors import DataError


def loess_fit(x: np.ndarray, y: np.ndarray, *, frac: float = 2.0 / 3.0, iterations: int = 0) -> np.ndarray:
    """Fitted values of a LOESS regression of ``y`` on ``x`` at every ``x`` (statsmodels ``lowess``)."""
    from statsmodels.nonparametric.smoothers_lowess import lowess

    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    if x.ndim != 1 or x.shape != y.shape:
        raise DataError(f"loess_fit: x and y must be 1-D of equal length, got {x.shape} and {y.shape}")
    if len(x) < 3:
        raise DataError(f"loess_fit: needs at least 3 points, got {len(x)}")
    if not (np.isfinite(x).all() and np.isfinite(y).all()):
        raise DataError("loess_fit: x and y must be finite")
    if not 0 < frac <= 1:
        raise DataError(f"loess_fit: frac = {frac}; must be in (0, 1]")
    fitted = lowess(y, x, frac=frac, it=iterations, return_sorted=False)
    if not np.isfinite(fitted).all():  # all x tied within a window: fall back to the mean there
        fitted = np.where(np.isfinite(fitted), fitted, y.mean())
    return fitted


def gad_scores(
    confidence: np.ndarray,
    distance: np.ndarray,
    *,
    log: bool = True,
    frac: float = 2.0 / 3.0,
    iterations: int = 0,
    flipped: Optional[np.ndarray] = None,
) -> np.ndarray:
    """GAD(x) = MAE(x, A(M, x)) - F(p_x) (Eq. 2), with F a LOESS of (log-)MAE on confidence over the given set.

    Low (negative) GAD: the black box flips with less perturbation than its confidence leads one to expect, which
    is where Algorithm 3 queries first. With ``flipped`` given, F is fitted on the flipped instances only (a
    never-flipped instance's distance is only a lower bound) and the never-flipped instances get GAD = +inf
    (queried last).
    """
    confidence = np.asarray(confidence, dtype=np.float64)
    distance = np.asarray(distance, dtype=np.float64)
    if (distance < 0).any():
        raise DataError("gad_scores: distances must be >= 0")
    target = np.log(np.maximum(distance, 1e-12)) if log else distance
    if flipped is None or np.all(flipped):
        return target - loess_fit(confidence, target, frac=frac, iterations=iterations)
    flipped = np.asarray(flipped, dtype=bool)
    if flipped.shape != distance.shape:
        raise DataError(f"gad_scores: flipped must have shape {distance.shape}, got {flipped.shape}")
    out = np.full(distance.shape, np.inf)
    if flipped.sum() < 3:
        out[flipped] = target[flipped]
        return out
    c, t = confidence[flipped], target[flipped]
    fitted = loess_fit(c, t, frac=frac, iterations=iterations)
    out[flipped] = t - fitted
    return out
