"""Deterministic, stratified train/validation/test splits.

Caveat first: stratification is per class by largest remainders, so each class's share of each split is within one
sample of ``fraction * class size``; the split sizes overall can therefore differ from ``fraction * n`` by up to
the number of classes. A class with a single sample goes to ``train``.
"""

from __future__ import annotations

from typing import Dict, Sequence, Union

import numpy as np

from weakspot.errors import ConfigError, DataError

SPLIT_NAMES = ("train", "val", "test")


def _check_fractions(fractions: Sequence[float]) -> np.ndarray:
    try:
        f = np.asarray([float(v) for v in fractions], dtype=np.float64)
    except (TypeError, ValueError):
        raise ConfigError(f"fractions must be three numbers (train, val, test), got {fractions!r}") from None
    if f.shape != (3,):
        raise ConfigError(f"fractions must be three numbers (train, val, test), got {len(f)}: {list(f)}")
    if not np.all(np.isfinite(f)) or np.any(f <= 0) or abs(f.sum() - 1.0) > 1e-6:
        raise ConfigError(
            f"fractions must be three positive numbers summing to 1 (train, val, test), got {list(f)} (sum {f.sum():g})"
        )
    return f


def split_counts(n: int, fractions: Union[Sequence[float], np.ndarray]) -> np.ndarray:
    """Split ``n`` items into counts proportional to ``fractions`` by largest remainders (ties: earlier split)."""
    f = np.asarray(fractions, dtype=np.float64)
    ideal = n * f
    counts = np.floor(ideal).astype(np.int64)
    short = int(n - counts.sum())
    if short > 0:
        order = np.argsort(-(ideal - counts), kind="stable")
        counts[order[:short]] += 1
    return counts


def split_dataset(y: np.ndarray, *, fractions: Sequence[float] = (0.7, 0.15, 0.15), seed: int) -> Dict[str, np.ndarray]:
    """Stratified, seeded split of sample indices into train, validation and test.

    Parameters
    ----------
    y : numpy.ndarray
        Integer (or any hashable-valued) labels, shape ``(n,)``.
    fractions : three floats, default (0.7, 0.15, 0.15)
        Shares of train, val and test; positive and summing to 1. The 70/15/15 default is this project's choice
        (the papers use their data sets' fixed splits, e.g. seeds/001 Sec. V-A).
    seed : int
        Seed of the permutation; the same ``y`` and seed give the same split.

    Returns
    -------
    dict
        ``{"train", "val", "test"}`` -> sorted int64 index arrays; disjoint and together covering ``0..n-1``.

    Examples
    --------
    >>> import numpy as np
    >>> parts = split_dataset(np.array([0] * 10 + [1] * 10), seed=0)
    >>> [len(parts[k]) for k in ("train", "val", "test")]
    [14, 4, 2]
    """
    f = _check_fractions(fractions)
    y = np.asarray(y)
    if y.ndim != 1:
        raise DataError(f"y must be a 1-D label array, got shape {y.shape}")
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
        raise ConfigError(f"seed must be an integer, got {seed!r}")
    rng = np.random.default_rng(int(seed))
    _, codes = np.unique(y, return_inverse=True)
    codes = codes.reshape(-1)
    # One permutation of everything, then a stable sort by class: each class's indices end up in random order.
    perm = rng.permutation(y.shape[0])
    by_class = perm[np.argsort(codes[perm], kind="stable")]
    class_sizes = np.bincount(codes) if codes.size else np.zeros(0, dtype=np.int64)
    starts = np.concatenate([[0], np.cumsum(class_sizes)[:-1]]) if class_sizes.size else np.zeros(0, dtype=np.int64)
    # counts[c, s]: samples of class c going to split s
    counts = (
        np.stack([split_counts(int(n), f) for n in class_sizes]) if class_sizes.size else np.zeros((0, 3), np.int64)
    )
    bounds = starts[:, None] + np.concatenate(
        [np.zeros((len(class_sizes), 1), np.int64), np.cumsum(counts, axis=1)], axis=1
    )
    # position of each element of by_class within its class block -> which split it falls in
    pos_class = np.repeat(np.arange(len(class_sizes)), class_sizes)
    split_of = np.zeros(y.shape[0], dtype=np.int64)
    positions = np.arange(y.shape[0])
    for s in (1, 2):
        split_of += positions >= bounds[pos_class, s]
    out = {}
    for s, name in enumerate(SPLIT_NAMES):
        out[name] = np.sort(by_class[split_of == s]).astype(np.int64)
    return out
