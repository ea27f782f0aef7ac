"""FID (seeds/004 Table 2: the Fréchet Inception Distance between a method's AEs and the seeds they came from) on the
features of a reference network this stage trains (:mod:`weakspot.hda.reference`), never the audited model.

Caveats first: no Inception weights can be downloaded here, so FIDs compare methods within a target, never with the
paper's numbers. FID is biased upward with few samples: every FID says how many (seed, AE) pairs it rests on and
carries a 95% bootstrap interval, and a claim needs at least ``hda.fid.min_aes`` pairs (:meth:`FidEstimate.enough`).

Example
-------
>>> import numpy as np
>>> a = np.random.default_rng(0).normal(size=(4000, 2))
>>> round(frechet_distance(a, a + [2.0, 0.0]), 6)
4.0
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np


def frechet_distance(F1: np.ndarray, F2: np.ndarray) -> float:
    """FID between two feature sets (rows are samples): |m1 - m2|^2 + Tr(S1 + S2 - 2 (S1 S2)^(1/2)).

    With centred, scaled rows A and B (S1 = A'A, S2 = B'B), Tr (S1 S2)^(1/2) is the sum of the singular values of
    A B' (the nonzero eigenvalues of S1 S2 are the squared singular values of A B'): exact, and an SVD of at most
    ``min(n, d)`` rows a side instead of the matrix square root (:func:`scipy.linalg.sqrtm`) of a ``d x d``
    product, which is slow and needs regularising when there are fewer samples than features. NaN where either
    set has fewer than 2 rows.
    """
    F1, F2 = np.asarray(F1, np.float64), np.asarray(F2, np.float64)
    if len(F1) < 2 or len(F2) < 2:
        return float("nan")
    m1, m2 = F1.mean(0), F2.mean(0)
    A, B = (F1 - m1) / np.sqrt(len(F1) - 1), (F2 - m2) / np.sqrt(len(F2) - 1)
    if len(A) > A.shape[1]:  # more samples than features: the d x d triangle of A carries the same A'A
        A = np.linalg.qr(A, mode="r")
    if len(B) > B.shape[1]:
        B = np.linalg.qr(B, mode="r")
    nuclear = float(np.linalg.svd(A @ B.T, compute_uv=False).sum())
    return float(max(0.0, ((m1 - m2) ** 2).sum() + (A**2).sum() + (B**2).sum() - 2.0 * nuclear))


@dataclass
class FidEstimate:
    """A FID with what it rests on: ``n`` (seed, AE) pairs and a 95% bootstrap interval (NaN when not computed)."""

    value: float
    lo: float
    hi: float
    n: int

    def enough(self, min_aes: int) -> bool:
        """Whether a claim may rest on it: a finite value from at least ``min_aes`` pairs."""
        return bool(np.isfinite(self.value) and self.n >= int(min_aes))


NO_FID = FidEstimate(float("nan"), float("nan"), float("nan"), 0)


def paired_fid(
    featurize: Callable[[np.ndarray], np.ndarray],
    seeds: np.ndarray,
    cases: np.ndarray,
    *,
    bootstrap: int = 200,
    seed: int = 0,
) -> FidEstimate:
    """FID between test cases and the seeds they came from (row i of ``cases`` was made from row i of ``seeds``).

    Comparing AEs with *their own* seeds, not with every seed, keeps out which seeds yielded AEs (AEs come from the
    fragile seeds, themselves a different sample of the data). The interval is the estimate +- 1.96 standard
    deviations of ``bootstrap`` resamples of the pairs (clipped at 0): resampling repeats pairs, which biases FID
    upward, so the resamples' percentiles would not even contain the estimate, while their spread is sound. NaN
    with fewer than 2 pairs.
    """
    n = len(cases)
    if n < 2 or len(seeds) != n:
        return FidEstimate(float("nan"), float("nan"), float("nan"), int(n))
    Fs, Fc = featurize(np.asarray(seeds, np.float32)), featurize(np.asarray(cases, np.float32))
    value = frechet_distance(Fs, Fc)
    lo = hi = float("nan")
    if bootstrap > 0:
        g = np.random.default_rng(seed)
        draws = [frechet_distance(Fs[i], Fc[i]) for i in (g.integers(0, n, n) for _ in range(int(bootstrap)))]
        half = 1.96 * float(np.std(draws, ddof=1)) if len(draws) > 1 else 0.0
        lo, hi = max(0.0, value - half), value + half
    return FidEstimate(value, lo, hi, int(n))


def fid(featurize: Callable[[np.ndarray], np.ndarray], A: np.ndarray, B: np.ndarray) -> float:
    """FID between inputs ``A`` and ``B`` on ``featurize``'s features; NaN where either has fewer than 2 rows."""
    return frechet_distance(featurize(A), featurize(B)) if len(A) >= 2 and len(B) >= 2 else float("nan")
