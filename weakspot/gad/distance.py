"""Mean absolute error between an instance and its adversarial partner, Eq. 3 of seeds/001.

Caveat first: with ``scale`` given, each feature's difference is divided by its scale before averaging (MAE in units
of the feature ranges); without it this is Eq. 3 exactly, in the data's own units. A cell missing (NaN) in either row
is left out: the mean is over the row's observed features (0 where it has none; GAD's attack never moves a missing
cell).
"""

from __future__ import annotations

from typing import Optional

import numpy as np

from weakspot.errors import DataError


def mae(a: np.ndarray, b: np.ndarray, *, scale: Optional[np.ndarray] = None) -> np.ndarray:
    """Row-wise MAE(a, b) = (1/M) sum_i |a_i - b_i| (Eq. 3), optionally with each feature divided by ``scale``.

    Examples
    --------
    >>> mae(np.array([[0.0, 0.0]]), np.array([[1.0, -3.0]]))
    array([2.])
    >>> mae(np.array([[0.0, np.nan]]), np.array([[1.0, np.nan]]))  # over the observed feature only
    array([1.])
    """
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    if a.shape != b.shape or a.ndim != 2:
        raise DataError(f"mae: a and b must both be (n, d) of one shape, got {a.shape} and {b.shape}")
    diff = np.abs(a - b)
    if scale is not None:
        scale = np.asarray(scale, dtype=np.float64)
        if scale.shape != (a.shape[1],) or not (scale > 0).all():
            raise DataError(f"mae: scale must be positive with shape ({a.shape[1]},), got {scale.shape}")
        diff = diff / scale
    observed = ~np.isnan(diff)
    if observed.all():
        return diff.mean(axis=1)
    return np.where(observed, diff, 0.0).sum(axis=1) / np.maximum(observed.sum(axis=1), 1)
