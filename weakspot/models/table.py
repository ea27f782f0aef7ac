"""The user's table model sees the rows it was built for: named columns, categories as their text.

Caveats first: weakspot holds a table as float64 numbers (a categorical column as its codes, see
:class:`~weakspot.data.dataset.Dataset`); a model the user fitted on a DataFrame (a scikit-learn ``Pipeline`` with a
``ColumnTransformer`` and a ``OneHotEncoder``, say) wants the DataFrame back. :class:`TableClassifier` rebuilds it,
column names and category texts, before every ``predict_proba``. A code that is not a whole number (a method moving a
categorical column) is an error, never rounded silently. A model weakspot trained itself learnt the codes and is
left as it is, and so is a user's torch module (it takes numbers; encode the categories in its factory). A missing
value reaches the model as NaN, in a text column too (as ``pandas.read_csv`` gives an empty cell).

>>> import numpy as np
>>> from weakspot.data.dataset import Dataset
>>> ds = Dataset(X=np.array([[0.5, 1], [2.0, 0]], np.float32), y=np.array([0, 1]), classes=["a", "b"],
...              feature_names=["size", "colour"], categories={"colour": ["blue", "red"]})
>>> frame_of(ds.X, ds.feature_names, ds.categories)["colour"].tolist()
['red', 'blue']
"""

from __future__ import annotations

from typing import Any, Dict, List

import numpy as np

from weakspot.errors import DataError, ModelError


def frame_of(X: Any, names: List[str], categories: Dict[str, List[str]]) -> "Any":
    """The rows ``X`` ``(n, d)`` as a DataFrame named ``names``, each categorical column as its category texts."""
    import pandas as pd

    X = np.asarray(X, np.float64)
    if X.ndim != 2 or X.shape[1] != len(names):
        raise DataError(f"a table of {len(names)} columns ({names[:5]}...) cannot hold rows of shape {X.shape}")
    df = pd.DataFrame(X, columns=list(names))
    for col, texts in categories.items():
        all_codes = df[col].to_numpy()
        seen = ~np.isnan(all_codes)  # a missing value: NaN in its cell, as read_csv gives an empty text cell
        codes = all_codes[seen]
        whole = np.rint(codes)
        if len(codes) and (np.abs(codes - whole).max() > 1e-6 or whole.min() < 0 or whole.max() >= len(texts)):
            raise DataError(
                f"categorical column {col!r} was given values other than its codes 0..{len(texts) - 1} "
                f"(e.g. {codes[np.abs(codes - whole) > 1e-6][:3].tolist() or codes[:3].tolist()}); a "
                "method must hold categories at observed values"
            )
        out = np.full(len(all_codes), np.nan, dtype=object)
        out[seen] = np.asarray(texts, dtype=object)[whole.astype(np.int64)]
        df[col] = out
    return df


class TableClassifier:
    """A black box whose inputs are rebuilt as a DataFrame (names, category texts) before the model sees them.

    Parameters
    ----------
    inner : Classifier
        A :class:`~weakspot.models.SklearnClassifier` or :class:`~weakspot.models.CallableClassifier`; its
        ``predict_proba`` receives the DataFrame.
    names : list of str
        The columns, in the order of weakspot's feature matrix.
    categories : dict of str to list of str
        The categorical columns' texts by code.
    """

    def __init__(self, inner: Any, names: List[str], categories: Dict[str, List[str]]):
        self.inner = inner
        self.names = list(names)
        self.categories = {c: list(v) for c, v in categories.items()}
        self.n_classes = inner.n_classes
        self.name = f"{inner.name} on a table"

    def predict_proba(self, x: Any) -> np.ndarray:
        """``(n, k)`` probabilities of the user's model for rows given as weakspot's numbers."""
        return self.inner.predict_proba(frame_of(x, self.names, self.categories))

    def predict(self, x: Any) -> np.ndarray:
        return self.predict_proba(x).argmax(axis=1).astype(np.int64)

    def __repr__(self) -> str:
        return f"TableClassifier({self.inner!r}, {len(self.names)} columns, {len(self.categories)} categorical)"


def _fitted_on_frame(clf: Any, names: List[str]) -> bool:
    seen = getattr(getattr(clf, "estimator", None), "feature_names_in_", None)
    if seen is None:  # an ONNX graph with one input per column: fed by name (it names a column the data lack)
        return getattr(clf, "feature_names_in_", None) is not None
    return seen is not None and set(map(str, seen)) <= set(names)


def for_data(clf: Any, ds: Any, *, trained_here: bool) -> Any:
    """``clf`` as the audit should call it on ``ds``'s rows: wrapped in :class:`TableClassifier` when ``ds`` is a table
    the user's model reads as a DataFrame (it has categorical columns, or the estimator was fitted on named columns),
    else as it is.

    Raises
    ------
    ModelError
        A user's torch module on a table with categorical columns (it cannot take text).
    """
    from weakspot.models.adapters import TorchClassifier

    if trained_here or getattr(ds, "image_shape", None) is not None or not getattr(ds, "feature_names", None):
        return clf
    names, cats = list(ds.feature_names), dict(ds.categories or {})
    if isinstance(clf, TorchClassifier):
        if cats:
            raise ModelError(
                f"{clf.name}: the table has categorical column(s) {sorted(cats)}, which a torch module "
                "cannot take as text; encode them in the model's factory, or give a scikit-learn pipeline"
            )
        return clf
    if cats or _fitted_on_frame(clf, names):
        return TableClassifier(clf, names, cats)
    return clf
