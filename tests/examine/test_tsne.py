"""The t-SNE of rendered images: seeded, two-dimensional, and it separates images that differ."""

import numpy as np

from weakspot.examine.tsne import tsne


def test_tsne_is_seeded_and_two_dimensional():
    rng = np.random.default_rng(0)
    X = rng.integers(0, 255, (12, 6, 6, 3), dtype=np.uint8)
    a, b = tsne(X, 3), tsne(X, 3)
    assert a.shape == (12, 2) and np.array_equal(a, b)


def test_two_kinds_of_image_fall_apart():
    rng = np.random.default_rng(1)
    dark = rng.integers(0, 40, (10, 6, 6, 3), dtype=np.uint8)
    light = rng.integers(215, 255, (10, 6, 6, 3), dtype=np.uint8)
    Y = tsne(np.concatenate([dark, light]), 0)
    within = max(np.ptp(Y[:10], 0).max(), np.ptp(Y[10:], 0).max())
    between = np.linalg.norm(Y[:10].mean(0) - Y[10:].mean(0))
    assert between > within
