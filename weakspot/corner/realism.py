"""Realism scores that do not depend on the classifier: a Gaussian KDE of the training codes, the distance to the
nearest training image, and the decoder's reconstruction error (distance to the data manifold).

Caveats first: the KDE is isotropic in the *standardised* latent space (each axis in units of the training codes'
standard deviation), bandwidth by Scott's rule ``n^(-1/(d+4))`` unless given; it is the same density as
``sklearn.neighbors.KernelDensity(kernel="gaussian", bandwidth=h)`` (the tests check this), computed in torch so
the search can differentiate it. The training codes' own scores are leave-one-out (a code does not vouch for itself),
and the acceptance threshold is their ``quantile`` (default 5%): 95% of real codes count as realistic. In more than a
few latent dimensions a KDE of a few thousand codes is a coarse density; read it as "near the codes of real data".
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Union

import numpy as np
import torch

from weakspot.errors import ConfigError, DataError


@dataclass
class LatentDensity:
    """A Gaussian KDE over standardised training codes, with a realism threshold.

    Attributes
    ----------
    codes : numpy.ndarray ``(n, d)``
    bandwidth : float
    threshold : float
        Log-density at or above which a code counts as realistic.
    train_scores : numpy.ndarray ``(n,)``
        Leave-one-out log-density of each training code.
    quantile : float
    """

    codes: np.ndarray
    bandwidth: float
    threshold: float
    train_scores: np.ndarray
    quantile: float

    def log_density_torch(self, z: torch.Tensor, *, exclude_self: bool = False) -> torch.Tensor:
        """Differentiable log-density of ``z`` ``(m, d)`` (float32, on ``z``'s device)."""
        c = torch.as_tensor(self.codes, dtype=z.dtype, device=z.device)
        return _kde(z, c, self.bandwidth, exclude_self=exclude_self)

    def score(self, z: Any, batch: int = 2048) -> np.ndarray:
        """Log-density of each row of ``z`` ``(m, d)`` (float64 array)."""
        z = torch.as_tensor(np.asarray(z, np.float64))
        c = torch.as_tensor(self.codes, dtype=torch.float64)
        with torch.no_grad():
            out = [_kde(z[i : i + batch], c, self.bandwidth) for i in range(0, len(z), batch)]
        return torch.cat(out).numpy() if out else np.zeros(0)

    def realistic(self, z: Any) -> np.ndarray:
        """Whether each code's log-density reaches :attr:`threshold`."""
        return self.score(z) >= self.threshold

    def sample(self, n: int, rng: np.random.Generator) -> np.ndarray:
        """``n`` draws from the KDE (a random training code plus Gaussian noise of the bandwidth's scale)."""
        idx = rng.integers(0, len(self.codes), size=n)
        return (self.codes[idx] + self.bandwidth * rng.standard_normal((n, self.codes.shape[1]))).astype(np.float32)


def _kde(z: torch.Tensor, c: torch.Tensor, h: float, *, exclude_self: bool = False) -> torch.Tensor:
    d = c.shape[1]
    sq = torch.cdist(z, c).pow(2) if z.shape[0] else z.new_zeros((0, c.shape[0]))
    logk = -sq / (2.0 * h * h)
    n = c.shape[0]
    if exclude_self:
        logk = logk - torch.diag(torch.full((n,), float("inf"), dtype=z.dtype, device=z.device))
        n = n - 1
    return torch.logsumexp(logk, dim=1) - math.log(n) - 0.5 * d * math.log(2.0 * math.pi * h * h)


def scott_bandwidth(n: int, d: int) -> float:
    """Scott's rule for standardised data: ``n^(-1/(d+4))``."""
    return float(n) ** (-1.0 / (d + 4))


def latent_density(codes: Any, *, bandwidth: Union[float, str] = "scott", quantile: float = 0.05) -> LatentDensity:
    """Fit the realism KDE on standardised training codes ``(n, d)``.

    Parameters
    ----------
    codes : array ``(n, d)``
        Training codes (standardised: :attr:`weakspot.corner.autoencoder.Generator.codes`).
    bandwidth : float or "scott"
    quantile : float in (0, 1)
        The threshold is this quantile of the training codes' leave-one-out log-densities.
    """
    c = np.asarray(codes, dtype=np.float64)
    if c.ndim != 2 or c.shape[0] < 3 or not np.isfinite(c).all():
        raise DataError(f"latent_density: codes must be a finite (n >= 3, d) array, got shape {c.shape}")
    if not 0 < quantile < 1:
        raise ConfigError(f"latent_density: quantile must be in (0, 1), got {quantile!r}")
    h = scott_bandwidth(*c.shape) if bandwidth == "scott" else float(bandwidth)
    if not h > 0:
        raise ConfigError(f"latent_density: bandwidth must be positive or 'scott', got {bandwidth!r}")
    ct = torch.as_tensor(c)
    with torch.no_grad():
        own = torch.cat([_kde_loo_rows(ct, i, min(i + 2048, len(c)), h) for i in range(0, len(c), 2048)]).numpy()
    return LatentDensity(
        codes=c.astype(np.float32),
        bandwidth=h,
        threshold=float(np.quantile(own, quantile)),
        train_scores=own,
        quantile=float(quantile),
    )


def _kde_loo_rows(c: torch.Tensor, lo: int, hi: int, h: float) -> torch.Tensor:
    z = c[lo:hi]
    logk = -torch.cdist(z, c).pow(2) / (2.0 * h * h)
    idx = torch.arange(lo, hi)
    logk[idx - lo, idx] = -float("inf")
    d = c.shape[1]
    return torch.logsumexp(logk, dim=1) - math.log(c.shape[0] - 1) - 0.5 * d * math.log(2.0 * math.pi * h * h)


def nearest_train_distance(x: np.ndarray, train: np.ndarray, batch: int = 512) -> np.ndarray:
    """Root-mean-square pixel distance from each image in ``x`` to its nearest training image."""
    a = torch.as_tensor(np.asarray(x, np.float32).reshape(len(x), -1))
    b = torch.as_tensor(np.asarray(train, np.float32).reshape(len(train), -1))
    with torch.no_grad():
        out = [torch.cdist(a[i : i + batch], b).min(dim=1).values for i in range(0, len(a), batch)]
    d = a.shape[1]
    return (torch.cat(out).numpy() / math.sqrt(d)).astype(np.float64) if out else np.zeros(0)


def total_variation(x: Any) -> np.ndarray:
    """Per-image total variation: mean absolute difference of horizontally and vertically neighbouring pixels."""
    x = np.asarray(x, dtype=np.float64)
    dh = np.abs(np.diff(x, axis=-1)).reshape(len(x), -1)
    dv = np.abs(np.diff(x, axis=-2)).reshape(len(x), -1)
    return np.concatenate([dh, dv], axis=1).mean(axis=1)


def manifold_distance(g: Any, x: np.ndarray) -> np.ndarray:
    """Distance to the data manifold: RMS pixel error of ``x`` against its reconstruction ``G(E(x))``."""
    x = np.asarray(x, np.float32)
    r = g.reconstruct_np(x)
    return np.sqrt(((x - r) ** 2).reshape(len(x), -1).mean(axis=1)).astype(np.float64)
