"""The features a segment is written in: what a person reads in a rule.

Caveats first: a tabular target's own columns (numeric, as the model takes them); an image target's brightness (mean
pixel), RMS contrast (the standard deviation of the grey image) and, in colour, each channel's share of the mean
intensity (Deepchecks' image properties). The true class is a feature of every target; the predicted class is not,
because a rule on both the true and the predicted class is an error by definition.

>>> import numpy as np
>>> from weakspot.data.dataset import Dataset
>>> f = features_of(Dataset(X=np.zeros((2, 1, 4, 4), np.float32), y=np.array([0, 1]), classes=["a", "b"]))
>>> f.names, f.values.shape
(['brightness', 'contrast'], (2, 2))
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import List

import numpy as np


@dataclass(frozen=True)
class Features:
    """Readable numeric features ``values`` ``(n, d)`` named ``names``, and each row's true class ``y`` of
    ``classes``."""

    values: np.ndarray
    names: List[str]
    y: np.ndarray
    classes: List[str]

    def matrix(self) -> np.ndarray:
        """The tree's input: the numeric features, then one indicator column per class."""
        onehot = (self.y[:, None] == np.arange(len(self.classes))[None, :]).astype(np.float64)
        return np.column_stack([self.values.astype(np.float64), onehot])


def image_properties(X: np.ndarray) -> "tuple[np.ndarray, List[str]]":
    """Brightness, RMS contrast and (3 channels) each channel's share of an ``(n, C, H, W)`` batch."""
    X = np.asarray(X, np.float64)
    grey = X.mean(axis=1)
    cols = [grey.mean(axis=(1, 2)), grey.std(axis=(1, 2))]
    names = ["brightness", "contrast"]
    if X.shape[1] == 3:
        means = X.mean(axis=(2, 3))
        share = means / np.maximum(means.sum(axis=1, keepdims=True), 1e-12)
        cols += [share[:, 0], share[:, 1], share[:, 2]]
        names += ["red_share", "green_share", "blue_share"]
    return np.column_stack(cols), names


def features_of(ds) -> Features:
    """The :class:`Features` of a :class:`~weakspot.data.dataset.Dataset` (tabular or images)."""
    X = np.asarray(ds.X)
    if X.ndim == 4:
        values, names = image_properties(X)
    else:
        values = X.reshape(len(X), -1).astype(np.float64)
        names = list(ds.feature_names or [f"x{i}" for i in range(values.shape[1])])
    return Features(values=values, names=names, y=np.asarray(ds.y, np.int64), classes=[str(c) for c in ds.classes])
