"""The in-memory data set every stage works on.

Caveats first: ``y`` is always int64 codes ``0..k-1`` into ``classes``; images are float32 ``(n, C, H, W)`` scaled
to [0, 1]; tabular data is float64 ``(n, d)`` in its own units (nothing is standardised or rounded here: a user's
model fitted on float64 values sees exactly the values in the file).
A text (categorical) column of a table is held as its integer code ``0..m-1`` into ``categories[column]``; the
user's own model gets the text back (:mod:`weakspot.models.table`). A table's missing value is NaN (in a text column,
in place of the code), kept as it is (:mod:`weakspot.data.missing`). The constructor checks this and raises
:class:`~weakspot.errors.DataError` naming the field that is wrong.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple

import numpy as np

from weakspot.errors import DataError


@dataclass
class Dataset:
    """Features, integer labels, class names and where the data came from.

    Parameters
    ----------
    X : numpy.ndarray
        Images as float32 ``(n, C, H, W)`` in [0, 1]; tabular as float64 ``(n, d)`` (any other numeric dtype is
        converted: a table's float32 values are kept exactly, widened).
    y : numpy.ndarray
        int64 labels in ``0..len(classes)-1``, shape ``(n,)``.
    classes : list of str
        Class names; ``classes[i]`` is the name of label ``i``.
    feature_names : list of str or None
        Column names of tabular data (``None`` for images).
    image_shape : tuple (C, H, W) or None
        Set for images; ``X.shape[1:] == image_shape``.
    provenance : dict
        Source spec, file path(s) with sha256, and a one-line description.
    categories : dict of str to list of str
        The categorical columns of a table: ``categories[c][i]`` is the text whose code ``i`` column ``c`` holds.

    Examples
    --------
    >>> import numpy as np
    >>> ds = Dataset(X=np.zeros((4, 2), np.float32), y=np.array([0, 1, 0, 1]), classes=["a", "b"])
    >>> ds.n_classes, len(ds)
    (2, 4)
    """

    X: np.ndarray
    y: np.ndarray
    classes: List[str]
    feature_names: Optional[List[str]] = None
    image_shape: Optional[Tuple[int, ...]] = None  # (C, H, W): __post_init__ checks the length
    provenance: Dict[str, Any] = field(default_factory=dict)
    categories: Dict[str, List[str]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        X = np.asarray(self.X)
        y = np.asarray(self.y)
        if X.ndim < 2:
            raise DataError(f"Dataset.X must be (n, d) or (n, C, H, W), got shape {X.shape}")
        if not np.issubdtype(X.dtype, np.number):
            raise DataError(f"Dataset.X must be numeric, got dtype {X.dtype}")
        if y.ndim != 1 or y.shape[0] != X.shape[0]:
            raise DataError(f"Dataset.y must have shape ({X.shape[0]},) to match X {X.shape}, got {y.shape}")
        if y.size and not np.issubdtype(y.dtype, np.integer):
            if not (np.issubdtype(y.dtype, np.floating) and np.all(np.mod(y, 1) == 0)):
                raise DataError(f"Dataset.y must hold integer class codes, got dtype {y.dtype}")
        self.X = np.ascontiguousarray(X, dtype=np.float64 if X.ndim == 2 else np.float32)
        self.y = y.astype(np.int64, copy=False)
        self.classes = [str(c) for c in self.classes]
        k = len(self.classes)
        if k < 1:
            raise DataError("Dataset.classes is empty; give one name per class")
        if self.y.size and (self.y.min() < 0 or self.y.max() >= k):
            raise DataError(
                f"Dataset.y holds labels in [{self.y.min()}, {self.y.max()}] but there are {k} classes; "
                f"labels must be in 0..{k - 1}"
            )
        if self.image_shape is not None:
            self.image_shape = tuple(int(s) for s in self.image_shape)
            if len(self.image_shape) != 3 or self.X.shape[1:] != self.image_shape:
                raise DataError(
                    f"Dataset.image_shape {self.image_shape} must be (C, H, W) equal to X.shape[1:] = {self.X.shape[1:]}"
                )
        if self.feature_names is not None:
            self.feature_names = [str(f) for f in self.feature_names]
            if self.X.ndim != 2 or len(self.feature_names) != self.X.shape[1]:
                raise DataError(
                    f"Dataset.feature_names has {len(self.feature_names)} names for X of shape {self.X.shape}; "
                    "give one name per column of tabular (n, d) data"
                )
        self._check_categories()

    def _check_categories(self) -> None:
        self.categories = {str(c): [str(v) for v in vals] for c, vals in (self.categories or {}).items()}
        if not self.categories:
            return
        names = self.feature_names or []
        for col, vals in self.categories.items():
            if col not in names:
                raise DataError(f"Dataset.categories names column {col!r}, which is not a feature ({names[:10]})")
            codes = self.X[:, names.index(col)]
            codes = codes[~np.isnan(codes)]  # a missing value's code is NaN
            if len(codes) and (np.any(np.mod(codes, 1) != 0) or codes.min() < 0 or codes.max() >= len(vals)):
                raise DataError(
                    f"Dataset column {col!r} is categorical with {len(vals)} categories; it must hold "
                    f"codes 0..{len(vals) - 1}"
                )

    @property
    def categorical(self) -> List[int]:
        """Indices of the categorical columns (empty for images and all-numeric tables)."""
        return [i for i, c in enumerate(self.feature_names or []) if c in self.categories]

    @property
    def n_classes(self) -> int:
        """Number of classes, ``len(classes)``."""
        return len(self.classes)

    @property
    def is_image(self) -> bool:
        """True for image data ``(n, C, H, W)``."""
        return self.image_shape is not None

    @property
    def input_shape(self) -> Tuple[int, ...]:
        """Shape of one input, ``X.shape[1:]``."""
        return tuple(self.X.shape[1:])

    def __len__(self) -> int:
        return int(self.X.shape[0])

    def subset(self, idx: Any) -> "Dataset":
        """The rows ``idx`` (an index array or boolean mask) as a new Dataset with the same metadata."""
        idx = np.asarray(idx)
        return Dataset(
            X=self.X[idx],
            y=self.y[idx],
            classes=list(self.classes),
            feature_names=None if self.feature_names is None else list(self.feature_names),
            image_shape=self.image_shape,
            provenance=dict(self.provenance),
            categories={c: list(v) for c, v in self.categories.items()},
        )

    @property
    def label_name(self) -> str:
        """What a person calls the label: its column's name where the data named it (``provenance["label"]``), else
        ``"class"``; ``"<name> (the label)"`` where a feature has the same name."""
        name = str(self.provenance.get("label") or "class")
        return f"{name} (the label)" if name in (self.feature_names or []) else name

    def class_counts(self) -> Dict[str, int]:
        """Samples per class name."""
        counts = np.bincount(self.y, minlength=self.n_classes)
        return {c: int(n) for c, n in zip(self.classes, counts)}


def image_range(X: Any) -> Tuple[float, float]:
    """The range attacks and generators clip images to: [0, 1], wider where the data are."""
    X = np.asarray(X)
    return float(min(0.0, X.min())), float(max(1.0, X.max()))
