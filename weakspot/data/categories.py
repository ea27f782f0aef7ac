"""A table's text columns as categories: the texts of a column and their codes (one encoder for every reader).

Caveats first: a text column's values are compared as strings (``str(value)``); an empty cell (NaN, ``None``,
``pd.NA``) is a missing value, never a category of its own: its code is NaN, and the user's model gets it back as NaN
and treats it its own way (:mod:`weakspot.data.missing`).

>>> import pandas as pd
>>> col = pd.Series(["red", "blue", None, "red"], name="colour")
>>> texts_of(col, where="t.csv"), encode(col, ["blue", "red"]).tolist()
(['blue', 'red'], [1.0, 0.0, nan, 1.0])
"""

from __future__ import annotations

from typing import Any, List, Sequence

import numpy as np


def is_text(col: Any) -> bool:
    """Whether a DataFrame column is a categorical (non-numeric) one; booleans count as numbers (0/1)."""
    import pandas as pd

    return not pd.api.types.is_numeric_dtype(col)


def texts_of(col: Any, *, where: str) -> List[str]:
    """The sorted distinct texts of a column's observed cells (an empty cell is a missing value, not a text).
    ``where`` says where the column was read (kept for the callers' messages)."""
    return sorted(set(col[~col.isna()].astype(str).tolist()))


def encode(col: Any, texts: Sequence[str]) -> np.ndarray:
    """The column's codes (float64) into ``texts``, which must hold every text of it; NaN where a cell is empty."""
    lookup = {t: float(i) for i, t in enumerate(texts)}
    empty = col.isna().to_numpy()
    return np.array([np.nan if e else lookup[t] for t, e in zip(col.astype(str).tolist(), empty)], dtype=np.float64)
