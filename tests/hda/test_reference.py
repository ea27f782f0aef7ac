"""weakspot.hda.reference: the reference CNN FID is computed on is trained on real data, independent of the audited
model, deterministic, and refuses inputs it cannot take."""

import numpy as np
import pytest

from weakspot.errors import DataError
from weakspot.hda.reference import train_reference


def _data(n=200, seed=0):
    g = np.random.default_rng(seed)
    X = g.random((n, 1, 8, 8)).astype(np.float32) * 0.2
    y = np.arange(n) % 2
    X[y == 1, :, :4] += 0.7  # class 1: a bright top half
    return X, y


def test_learns_a_planted_rule_and_is_deterministic():
    X, y = _data()
    a = train_reference(X[:150], y[:150], 2, width=4, train=150, epochs=8, seed=0, X_test=X[150:], y_test=y[150:])
    b = train_reference(X[:150], y[:150], 2, width=4, train=150, epochs=8, seed=0)
    assert a.test_accuracy > 0.9 and b.test_accuracy is None
    np.testing.assert_array_equal(a.features(X[:7]), b.features(X[:7]))
    assert a.features(X[:7]).shape == (7, 4 + 8 + 16 + 16)  # every block's channels
    assert "150 training inputs" in a.label and "test accuracy" in a.label


def test_refuses_what_is_not_an_image_of_at_least_8_pixels():
    with pytest.raises(DataError, match="8x8"):
        train_reference(np.zeros((10, 1, 4, 4), np.float32), np.zeros(10, int), 2)
    with pytest.raises(DataError, match="images"):
        train_reference(np.zeros((10, 64), np.float32), np.zeros(10, int), 2)
