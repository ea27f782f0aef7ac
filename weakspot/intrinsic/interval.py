"""How far psi moves by chance between two models measured on the same inputs: a paired bootstrap interval of the
change in psi (seeds/002's Table 3 compares distillation's psi with the undefended model's).

Caveats first: the interval is over the inputs only (resampled with replacement, the same draw for both models, so
an input that is hard for both counts once in each); the KL ascent's own randomness (one random start per input) is
not in it, nor the defended model's training seed, so it is narrower than the spread over retrained models. psi is
``1 / mean(kl)``, a ratio estimator: with a few inputs whose KL dominates the mean the percentile interval is
lopsided. Deterministic for the same seed.

Example
-------
>>> import numpy as np
>>> kl = np.random.default_rng(0).lognormal(0, 1, 300)
>>> change, lo, hi = psi_change_interval(kl, kl / 1.27, seed=0)
>>> round(change, 2), round(lo, 2), round(hi, 2)
(0.27, 0.27, 0.27)
"""

from __future__ import annotations

from typing import Any, Tuple

import numpy as np

from weakspot.errors import DataError

#: Bootstrap resamples and the interval's level (ours: the paper gives psi without an interval).
DRAWS = 2000
LEVEL = 0.95


def psi_change_interval(
    kl_base: Any, kl_other: Any, *, draws: int = DRAWS, level: float = LEVEL, seed: int = 0
) -> Tuple[float, float, float]:
    """The relative change of psi from ``kl_base``'s model to ``kl_other``'s, ``psi_other / psi_base - 1``, with its
    paired-bootstrap percentile interval at ``level``: ``(change, lo, hi)``.

    Parameters
    ----------
    kl_base, kl_other : arrays (n,)
        Per-input largest KL divergences of the two models on the same ``n`` inputs, in the same order.

    Raises
    ------
    DataError
        The two arrays differ in length, are empty, or a model's KLs are all 0 (psi infinite).
    """
    a, b = np.asarray(kl_base, np.float64), np.asarray(kl_other, np.float64)
    if a.shape != b.shape or a.ndim != 1 or len(a) == 0:
        raise DataError(
            f"psi_change_interval needs two 1-D KL arrays of the same inputs; got shapes {a.shape} and {b.shape}"
        )
    if not (a.sum() > 0 and b.sum() > 0):
        raise DataError("psi_change_interval: a model's KLs are all 0 (psi infinite), no change to compare")
    change = float(a.mean() / b.mean() - 1.0)  # psi_b / psi_a = mean(kl_a) / mean(kl_b)
    idx = np.random.default_rng([int(seed) % (2**32), 24]).integers(0, len(a), size=(int(draws), len(a)))
    sa, sb = a[idx].mean(1), b[idx].mean(1)
    ratios = sa[sb > 0] / sb[sb > 0] - 1.0
    tail = (1.0 - float(level)) / 2.0
    lo, hi = np.quantile(ratios, [tail, 1.0 - tail])
    return change, float(lo), float(hi)
