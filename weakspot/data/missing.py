"""Missing values of a table: kept as they are, never imputed, and passed to the user's model as pandas gives them.

Caveats first: a missing cell is NaN in weakspot's float64 table, in a numeric column and in a text column alike (in
place of the category's code); the user's model gets NaN back in that cell (a text column's as ``NaN`` in an object
column, as ``pandas.read_csv`` gives an empty text cell, :mod:`weakspot.models.table`). Imputing would audit a model
other than the one in production, and where a value is missing is often where a model is weak. Infinite values are
still an error that names the column, and so is any NaN in images or in the label.

>>> import numpy as np
>>> X = np.array([[1.0, np.nan], [2.0, 0.0], [np.nan, 1.0], [4.0, 1.0]], np.float32)
>>> missing_shares(X, ["income", "city"])
{'income': 0.25, 'city': 0.25}
>>> describe_missing({"income": 0.1, "city": 0.025})
'income 10% of rows, city 2.5%'
"""

from __future__ import annotations

from typing import Any, Dict, List, Sequence

import numpy as np

from weakspot.errors import DataError


def check_table_values(X: Any, names: Sequence[str], *, where: str) -> None:
    """A ``DataError`` naming each column of the table ``X`` ``(n, d)`` that holds infinite values (and how many
    rows); NaN (a missing value) is allowed."""
    X = np.asarray(X)
    if X.ndim != 2 or not X.size:
        return
    bad = np.isinf(X)
    if bad.any():
        per_col = bad.sum(axis=0)
        which = ", ".join(f"{c!r} ({int(n)} rows)" for c, n in zip(names, per_col) if n)
        raise DataError(
            f"{where}: infinite values in column(s) {which}; a missing value (an empty cell, NaN) is kept and given "
            "to the model as it is, but an infinite one is not a value: clean it first"
        )


def check_image_values(X: Any, *, where: str) -> None:
    """A ``DataError`` where images hold NaN or infinite values (an image has no missing pixel)."""
    X = np.asarray(X)
    if X.size and not np.isfinite(X).all():
        rows = int((~np.isfinite(X.reshape(len(X), -1))).any(axis=1).sum())
        raise DataError(f"{where}: {rows} images hold NaN or infinite values (an image has no missing pixel)")


def missing_shares(X: Any, names: Sequence[str]) -> Dict[str, float]:
    """The share of rows whose value is missing (NaN), for each column of ``X`` ``(n, d)`` named ``names`` that has
    any, in column order."""
    X = np.asarray(X)
    if X.ndim != 2 or not len(X):
        return {}
    share = np.isnan(X).mean(axis=0)
    return {str(c): float(s) for c, s in zip(names, share) if s > 0}


def with_missing(X: Any) -> List[int]:
    """Indices of the columns of ``X`` ``(n, d)`` with at least one missing value."""
    X = np.asarray(X, np.float64)
    return [] if X.ndim != 2 or not X.size else [int(j) for j in np.flatnonzero(np.isnan(X).any(axis=0))]


def _pct(s: float) -> str:
    if s < 0.001:
        return "<0.1%"
    return f"{s:.0%}" if round(s * 100, 1) == round(s * 100) else f"{s:.1%}"


def describe_missing(shares: Dict[str, float]) -> str:
    """``{"income": 0.1, "city": 0.025}`` -> ``"income 10% of rows, city 2.5%"`` (empty for no missing values)."""
    parts = [f"{c} {_pct(s)}" for c, s in shares.items()]
    if parts:
        parts[0] += " of rows"
    return ", ".join(parts)
