"""Standardized Discovery Ratio, Eq. 1 of seeds/001, after each query; interval and reliability helpers.

Caveats first: SDR = (errors found) / (errors expected from the confidences), so SDR = 1 means errors turn up at the
rate the model's confidence predicts and SDR > 1 reveals overconfidence. Where every queried confidence is exactly 1
the expected count is 0 and SDR is undefined (NaN). Intervals are Student-t intervals of the mean over replicates.
"""

from __future__ import annotations

from typing import Tuple

import numpy as np

from weakspot.errors import DataError


def sdr_curve(errors: np.ndarray, confidence: np.ndarray) -> np.ndarray:
    """SDR after each query (Eq. 1): ``cumsum(errors) / cumsum(1 - confidence)`` along the last axis.

    Examples
    --------
    >>> sdr_curve(np.array([1, 0]), np.array([0.8, 0.7]))
    array([5., 2.])
    """
    e = np.asarray(errors, dtype=np.float64)
    c = np.asarray(confidence, dtype=np.float64)
    if e.shape != c.shape or e.ndim < 1:
        raise DataError(f"sdr_curve: errors and confidence must have one shape, got {e.shape} and {c.shape}")
    if not ((e == 0) | (e == 1)).all():
        raise DataError("sdr_curve: errors must be 0/1 (or bool)")
    if not (np.isfinite(c).all() and (c >= 0).all() and (c <= 1).all()):
        raise DataError("sdr_curve: confidences must lie in [0, 1]")
    expected = np.cumsum(1.0 - c, axis=-1)
    with np.errstate(divide="ignore", invalid="ignore"):
        out = np.cumsum(e, axis=-1) / expected
    return np.where(expected > 0, out, np.nan)


def sdr(errors: np.ndarray, confidence: np.ndarray) -> float:
    """SDR of one query set (Eq. 1)."""
    return float(sdr_curve(np.ravel(errors), np.ravel(confidence))[-1])


def mean_ci95(values: np.ndarray, axis: int = 0) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Mean and the two ends of its 95% Student-t interval along ``axis`` (NaNs ignored)."""
    from scipy import stats

    v = np.asarray(values, dtype=np.float64)
    n = np.sum(np.isfinite(v), axis=axis)
    mean = np.nanmean(v, axis=axis)
    sd = np.nanstd(v, axis=axis, ddof=1) if v.shape[axis] > 1 else np.zeros_like(mean)
    with np.errstate(invalid="ignore", divide="ignore"):
        half = stats.t.ppf(0.975, np.maximum(n - 1, 1)) * sd / np.sqrt(np.maximum(n, 1))
    half = np.where(n > 1, half, 0.0)
    return mean, mean - half, mean + half


def reliability(confidence: np.ndarray, correct: np.ndarray, *, bins: int = 10, lo: float = 0.5) -> dict:
    """Reliability-diagram data (Fig. 2): per confidence bin of ``[lo, 1]``, mean confidence, accuracy and count.

    The binning is :func:`weakspot.metrics.reliability_bins` (bins ``(edges[b], edges[b+1]]``); empty bins have NaN
    mean confidence and accuracy.
    """
    from weakspot.metrics import reliability_bins

    c = np.asarray(confidence, dtype=np.float64)
    k = np.asarray(correct, dtype=np.float64)
    if c.shape != k.shape or c.ndim != 1:
        raise DataError(f"reliability: confidence and correct must be 1-D of one length, got {c.shape}, {k.shape}")
    edges, count, conf_sum, corr_sum = reliability_bins(c, k, bins, lo=lo)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean_conf = np.where(count > 0, conf_sum / np.maximum(count, 1), np.nan)
        acc = np.where(count > 0, corr_sum / np.maximum(count, 1), np.nan)
    return {"edges": edges, "mean_confidence": mean_conf, "accuracy": acc, "count": count}
