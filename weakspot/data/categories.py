"""A table's text columns as categories: the texts of a column and their codes (one encoder for every reader).

Caveats first: a text column's values are compared as strings (``str(value)``); an empty cell is an error that names
the column, never a category of its own, because the user's model may treat missing values its own way.

>>> import pandas as pd
>>> col = pd.Series(["red", "blue", "red"], name="colour")
>>> texts_of(col, where="t.csv"), encode(col, ["blue", "red"]).tolist()
(['blue', 'red'], [1.0, 0.0, 1.0])
"""

from __future__ import annotations

from typing import Any, List, Sequence

import numpy as np

from weakspot.errors import DataError


def is_text(col: Any) -> bool:
    """Whether a DataFrame column is a categorical (non-numeric) one; booleans count as numbers (0/1)."""
    import pandas as pd

    return not pd.api.types.is_numeric_dtype(col)


def texts_of(col: Any, *, where: str) -> List[str]:
    """The sorted distinct texts of a column (a ``DataError`` naming it and ``where`` for an empty cell)."""
    if col.isna().any():
        raise DataError(
            f"{where}: categorical column {str(col.name)!r} has {int(col.isna().sum())} empty cells; "
            "fill them (e.g. with 'missing') first"
        )
    return sorted(set(col.astype(str).tolist()))


def encode(col: Any, texts: Sequence[str]) -> np.ndarray:
    """The column's codes (float64) into ``texts``, which must hold every text of it."""
    lookup = {t: float(i) for i, t in enumerate(texts)}
    return np.array([lookup[t] for t in col.astype(str).tolist()], dtype=np.float64)
