"""What GAD audits on: a target's training and test splits (:class:`Split`), and the paper's biased splits.

Caveats first:

* Labels are the target's class codes ``0..k-1`` (never re-coded); the class of interest is given to
  :func:`weakspot.gad.protocol.run_target` as ``class_index``.
* The biased splits themselves (rules, presets, the random draws) live in :mod:`weakspot.data.bias`; the data in
  :mod:`weakspot.data.sources` (``keel:phoneme``: nasal 0 / oral 1; ``keel:yeast1``: negative 0 / positive = NUC 1;
  ``sklearn:breast_cancer``: malignant 0 / benign 1). This module only packs them into a :class:`Split`.
* Features are the data set's float64 values; a missing value is NaN (kept as the model takes it).

Example
-------
>>> split = make_preset_split("phoneme", seed=0)          # doctest: +SKIP
>>> split.X_train.shape, split.X_test.shape, split.classes  # doctest: +SKIP
((2707, 5), (2000, 5), ['nasal', 'oral'])
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence

import numpy as np
import pandas as pd

from weakspot.data.bias import BIAS_PRESETS, BiasRule, biased_split_indices
from weakspot.errors import ConfigError


@dataclass
class Split:
    """A target's training and test split, as GAD sees it.

    Parameters
    ----------
    name : str
        The target's name (keys the metrics).
    X_train, y_train, X_test, y_test : numpy arrays
        Features ``(n, d)`` in their own units and labels: the target's class codes ``0..k-1``.
    feature_names : list of str
    log_mae : bool
        LOESS on log-MAE (Table I "LOESS": Phoneme, Pang04) or on MAE (Yeast).
    description : str
    info : dict
        How the split was made (e.g. :func:`weakspot.data.biased_split_indices`'s ``info``).
    classes : list of str, optional
        Class names by code (for findings); empty: codes are shown.
    categories : dict of str to list of str, optional
        The categorical columns (held as codes) and their texts: the design draws them from observed rows, the
        attack holds them fixed, the findings name them by text.
    X_unlabelled : numpy array, optional
        Rows without labels (the target's ``unlabelled`` part): the to-label list ranks these instead of the test rows.
    """

    name: str
    X_train: np.ndarray
    y_train: np.ndarray
    X_test: np.ndarray
    y_test: np.ndarray
    feature_names: List[str]
    log_mae: bool = True
    description: str = ""
    info: Dict[str, Any] = field(default_factory=dict)
    classes: List[str] = field(default_factory=list)
    categories: Dict[str, List[str]] = field(default_factory=dict)
    X_unlabelled: Optional[np.ndarray] = None  # production rows without labels (data.unlabelled), ranked to label

    @property
    def categorical(self) -> List[int]:
        """Indices of the categorical columns."""
        return [j for j, c in enumerate(self.feature_names) if c in self.categories]

    def one_hot(self, X: np.ndarray) -> np.ndarray:
        """``X`` with each categorical column replaced by one indicator per category (what distance-based searches
        compare: a code's size means nothing); a column with missing values in ``X`` has them as its observed mean
        (a category's indicators 0) and is followed by the indicator of its missingness."""
        cols = []
        for j, c in enumerate(self.feature_names):
            x = X[:, [j]]
            gone = np.isnan(x)
            if c in self.categories:
                cols.append((x == np.arange(len(self.categories[c]))[None, :]).astype(X.dtype))
            else:
                cols.append(np.where(gone, np.nanmean(x) if not gone.all() else 0.0, x) if gone.any() else x)
            if gone.any():
                cols.append(gone.astype(X.dtype))
        return np.hstack(cols) if cols else X

    def text_of(self, j: int, value: Any) -> Any:
        """Column ``j``'s value as a person reads it: a category's text, else the number; None where missing."""
        name = self.feature_names[j]
        if value is None or np.isnan(float(value)):
            return None
        return self.categories[name][int(round(float(value)))] if name in self.categories else float(value)

    def class_name(self, code: Any) -> str:
        """The name of class ``code`` (the code itself as text when the names are unknown)."""
        c = int(code)
        return str(self.classes[c]) if 0 <= c < len(self.classes) else str(c)


def biased_split(
    X: pd.DataFrame,
    y: Any,
    *,
    class_of_interest: Any = 1,
    rules: Sequence[BiasRule] = (),
    n_train: Optional[int] = None,
    n_test: Optional[int] = None,
    seed: int = 0,
    name: str = "data",
    log_mae: bool = True,
    description: str = "",
    classes: Optional[List[str]] = None,
) -> Split:
    """:func:`weakspot.data.biased_split_indices` packed into a :class:`Split` (labels as given, not re-coded)."""
    train, test, info = biased_split_indices(
        X, y, class_of_interest=class_of_interest, rules=rules, n_train=n_train, n_test=n_test, seed=seed, name=name
    )
    arr = X.to_numpy(dtype=np.float64)
    y = np.asarray(y)
    return Split(
        name=name,
        X_train=arr[train],
        y_train=y[train],
        X_test=arr[test],
        y_test=y[test],
        feature_names=[str(c) for c in X.columns],
        log_mae=log_mae,
        description=description,
        info=info,
        classes=list(classes or []),
    )


def make_preset_split(name: str, *, seed: int = 0, root: Any = None, **overrides: Any) -> Split:
    """The paper's biased split of a built-in data set (:data:`weakspot.data.BIAS_PRESETS`), labels as class codes.

    Loads the preset's source with :func:`weakspot.data.load_source` (``root``: folder of the KEEL files, default the
    repository's copy), keeps its features and applies its bias and sizes (``info["preset"]`` names it); keyword
    overrides (``features``, ``class_of_interest``, ``rules``, ``n_train``, ``n_test``, ``log_mae``, ``description``)
    win where not None.
    """
    from weakspot.data import load_source

    if name not in BIAS_PRESETS:
        raise ConfigError(f"unknown bias preset {name!r}; valid names: {', '.join(sorted(BIAS_PRESETS))}")
    p = BIAS_PRESETS[name]
    ds = load_source(p.source, root=root)
    X = pd.DataFrame(ds.X, columns=ds.feature_names)
    features = overrides.pop("features", None) or p.features
    if features is not None:
        missing = [f for f in features if f not in X.columns]
        if missing:
            raise ConfigError(f"{name}: feature(s) {missing} not found; columns: {', '.join(map(str, X.columns))}")
        X = X[list(features)]
    kw: Dict[str, Any] = dict(
        class_of_interest=p.class_of_interest,
        rules=p.rules,
        n_train=p.n_train,
        n_test=p.n_test,
        log_mae=p.log_mae,
        description=p.description,
    )
    kw.update({k: v for k, v in overrides.items() if v is not None})
    split = biased_split(X, ds.y, seed=seed, name=name, classes=list(ds.classes), **kw)
    split.info["preset"] = name  # as the prepare stage records it: Table I looks the paper's figures up by it
    return split
