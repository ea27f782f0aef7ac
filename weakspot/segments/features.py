"""The features a segment is written in: what a person reads in a rule.

Caveats first: a tabular target's own columns (numeric in their units, a categorical column as its categories: the
tree splits on one indicator per category, so a rule reads "country = FR", never a code range; a column with missing
values also as the indicator of its missingness, so a rule can read "income is missing", while a condition on its
value holds only where it is observed); an image target's brightness (mean
pixel), RMS contrast (the standard deviation of the grey image) and, in colour, each channel's share of the mean
intensity (Deepchecks' image properties): what is known before the label and before the model answers. Neither class
is a feature beside them: "class 0 and a > 1" is where the model predicts 1, so its class-0 rows fail by
construction (label noise included), and "predicted 0 and a > 1" is, where the label follows the features, the set
of the model's errors itself; a tree on either finds "weak spots" on a model whose only errors are noise. The true
class stands alone as its own candidate (:mod:`weakspot.segments.run`).

>>> import numpy as np
>>> from weakspot.data.dataset import Dataset
>>> f = features_of(Dataset(X=np.zeros((2, 1, 4, 4), np.float32), y=np.array([0, 1]), classes=["a", "b"]))
>>> f.names, f.values.shape
(['brightness', 'contrast'], (2, 2))
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, List

import numpy as np

from weakspot.rules import Column


@dataclass(frozen=True)
class Features:
    """Readable numeric features ``values`` ``(n, d)`` named ``names``, and each row's true class ``y`` of
    ``classes`` (never a column of :meth:`matrix`)."""

    values: np.ndarray
    names: List[str]
    y: np.ndarray
    classes: List[str]
    categories: Dict[str, List[str]] = field(default_factory=dict)  # a categorical column's texts by code

    @property
    def missing(self) -> List[str]:
        """The features with at least one missing value (NaN), in column order."""
        gone = np.isnan(self.values).any(axis=0) if self.values.size else np.zeros(len(self.names), bool)
        return [n for n, g in zip(self.names, gone) if g]

    def columns(self) -> List[Column]:
        """What each column of :meth:`matrix` is: the numeric features, then one indicator per category of each
        categorical feature, then one indicator of missingness per feature with missing values."""
        cols = [Column("num", n) for n in self.names if n not in self.categories]
        for name, texts in self.categories.items():
            cols += [Column("cat", name, code=i, n=len(texts)) for i in range(len(texts))]
        return cols + [Column("missing", n) for n in self.missing]

    def matrix(self) -> np.ndarray:
        """The tree's input, column by column as :meth:`columns` says (a numeric feature's missing value stays NaN,
        which scikit-learn's tree sends down one side of a split; a category's indicator is 0 there)."""
        out = []
        for col in self.columns():
            x = self.values[:, self.names.index(col.name)]
            if col.kind == "num":
                out.append(x.astype(np.float64))
            elif col.kind == "missing":
                out.append(np.isnan(x).astype(np.float64))
            else:
                out.append((x == col.code).astype(np.float64))
        return np.column_stack(out) if out else np.zeros((len(self.y), 0))


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
    categories = {}
    if X.ndim == 4:
        values, names = image_properties(X)
    else:
        values = X.reshape(len(X), -1).astype(np.float64)
        names = list(ds.feature_names or [f"x{i}" for i in range(values.shape[1])])
        categories = dict(getattr(ds, "categories", None) or {})
    return Features(
        values=values,
        names=names,
        y=np.asarray(ds.y, np.int64),
        classes=[str(c) for c in ds.classes],
        categories=categories,
    )
