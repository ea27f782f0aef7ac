"""The t-SNE of rendered images: seeded, two-dimensional, and it separates images that differ."""

import numpy as np

from weakspot.examine.tsne import random_and_examined, tsne


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


def test_random_and_examined_images_side_by_side():
    from types import SimpleNamespace

    img = lambda v: np.full((2, 2, 3), v, np.uint8)  # noqa: E731
    r = SimpleNamespace(tail_images=[img(1), img(2), img(3)], tail_pred=[0, 1, 0], label=0)
    x = SimpleNamespace(tail_images=[img(9), img(8)], tail_pred=[2, 2], label=2)
    imgs, is_ex, wrong = random_and_examined(r, x, limit=2)
    assert imgs[:, 0, 0, 0].tolist() == [1, 2, 9, 8]
    assert is_ex.tolist() == [False, False, True, True] and wrong.tolist() == [False, True, False, False]
    imgs, is_ex, wrong = random_and_examined(r, x)
    assert len(imgs) == 5 and is_ex.sum() == 2 and wrong.tolist() == [False, True, False, False, False]
