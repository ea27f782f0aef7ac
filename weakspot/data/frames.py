"""Datasets as DataFrames and Parquet files (the ``prepare`` stage's artifacts).

Caveats first: images are flattened into float32 columns ``px_0 .. px_{C*H*W-1}`` (C-order of ``(C, H, W)``);
tabular data keeps its feature names and float64 values (a categorical column as its codes, the categories in the
metadata; a missing value as NaN, which Parquet keeps). Either way the integer class code is the column ``label``.
Class names, image shape, feature names and provenance travel in the frame's ``attrs["weakspot"]`` (a JSON string),
which pandas writes into the Parquet schema metadata (key ``PANDAS_ATTRS``) and restores on reading. A frame without
that metadata is read as tabular data whose classes are the sorted distinct labels.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Dict, Optional

import numpy as np

from weakspot.data.dataset import Dataset
from weakspot.data.missing import check_image_values, check_table_values
from weakspot.errors import DataError
from weakspot.io import _json_default

META_KEY = "weakspot"
LABEL = "label"
PIXEL_PREFIX = "px_"
FORMAT_VERSION = 1


def to_frame(ds: Dataset, idx: Optional[Any] = None) -> "Any":
    """The rows ``idx`` of ``ds`` (all rows when ``None``) as a DataFrame with metadata in ``attrs``.

    Parameters
    ----------
    ds : Dataset
    idx : index array or boolean mask, optional

    Returns
    -------
    pandas.DataFrame
        Columns ``px_0..`` (images) or the feature names (tabular), then ``label`` (int64).

    Examples
    --------
    >>> from weakspot.data import load_source
    >>> df = to_frame(load_source("digits"), [0, 1, 2])
    >>> df.shape
    (3, 65)
    """
    import pandas as pd

    sub = ds if idx is None else ds.subset(idx)
    n = len(sub)
    flat = sub.X.reshape(n, int(np.prod(sub.X.shape[1:])))
    if sub.image_shape is not None:
        columns = [f"{PIXEL_PREFIX}{i}" for i in range(flat.shape[1])]
    elif sub.feature_names is not None:
        columns = list(sub.feature_names)
    else:
        columns = [f"x{i}" for i in range(flat.shape[1])]
    if LABEL in columns:
        raise DataError(f"a feature column is named {LABEL!r}, which is reserved for the class code; rename it")
    if len(set(columns)) != len(columns):
        dup = sorted({c for c in columns if columns.count(c) > 1})
        raise DataError(f"duplicate feature names {dup}; every column needs its own name")
    df = pd.DataFrame(flat.astype(sub.X.dtype, copy=False), columns=columns)  # images float32, tables float64
    df[LABEL] = sub.y.astype(np.int64)
    meta = {
        "format": FORMAT_VERSION,
        "classes": list(sub.classes),
        "image_shape": None if sub.image_shape is None else list(sub.image_shape),
        "feature_names": None if sub.image_shape is not None else columns,
        "provenance": sub.provenance,
        "categories": sub.categories,
    }
    df.attrs[META_KEY] = json.dumps(meta, sort_keys=True, default=_json_default)
    return df


def _meta_of(df: "Any") -> Optional[Dict[str, Any]]:
    raw = df.attrs.get(META_KEY)
    if raw is None:
        return None
    try:
        return json.loads(raw) if isinstance(raw, str) else dict(raw)
    except (TypeError, ValueError) as exc:
        raise DataError(f"the frame's attrs[{META_KEY!r}] is not valid JSON metadata: {exc}") from None


def from_frame(df: "Any") -> Dataset:
    """Inverse of :func:`to_frame`: a DataFrame (with or without weakspot metadata) back to a :class:`Dataset`."""
    if LABEL not in df.columns:
        raise DataError(f"the frame has no {LABEL!r} column; columns: {', '.join(map(str, df.columns[:20]))}")
    meta = _meta_of(df)
    features = [c for c in df.columns if c != LABEL]
    if meta is not None and meta.get("image_shape") is not None:
        shape = tuple(int(s) for s in meta["image_shape"])
        expected = [f"{PIXEL_PREFIX}{i}" for i in range(int(np.prod(shape)))]
        if [str(c) for c in features] != expected:
            raise DataError(
                f"image frame must have columns px_0..px_{len(expected) - 1} then {LABEL!r} for image shape {shape}"
            )
        X = df[expected].to_numpy(dtype=np.float32).reshape((len(df),) + shape)
        feature_names = None
    else:
        shape = None
        if meta is not None and meta.get("feature_names") is not None:
            wanted = [str(c) for c in meta["feature_names"]]
            missing = [c for c in wanted if c not in df.columns]
            if missing:
                raise DataError(f"feature column(s) {missing} named in the metadata are missing from the frame")
            features = wanted
        X = df[features].to_numpy(dtype=np.float64, na_value=np.nan)
        feature_names = [str(c) for c in features]
    if feature_names is None:
        check_image_values(X, where="the frame")
    else:
        check_table_values(X, feature_names, where="the frame")  # a missing value (NaN) is kept
    y = df[LABEL].to_numpy()
    if meta is not None:
        classes = list(meta["classes"])
        if not np.issubdtype(y.dtype, np.integer):
            raise DataError(f"column {LABEL!r} must hold integer class codes, got dtype {y.dtype}")
        provenance = dict(meta.get("provenance") or {})
    else:
        uniq, y = np.unique(y, return_inverse=True)
        classes = [str(u) for u in uniq]
        provenance = {}
    categories = dict((meta or {}).get("categories") or {})
    return Dataset(
        X=X,
        y=y.astype(np.int64),
        classes=classes,
        feature_names=feature_names,
        image_shape=shape,
        provenance=provenance,
        categories=categories,
    )


def write_split_parquet(path: "os.PathLike | str", df: "Any") -> Path:
    """Write a frame from :func:`to_frame` as Parquet, atomically, with its metadata in the schema metadata."""
    from weakspot.io import write_parquet

    if LABEL not in df.columns:
        raise DataError(f"refusing to write {path}: the frame has no {LABEL!r} column (make it with to_frame)")
    if META_KEY not in df.attrs:
        raise DataError(f"refusing to write {path}: the frame carries no weakspot metadata (make it with to_frame)")
    return write_parquet(path, df)


def read_split_parquet(path: "os.PathLike | str") -> Dataset:
    """Read a Parquet file written by :func:`write_split_parquet` back into a :class:`Dataset`."""
    import pandas as pd

    path = Path(path)
    if not path.is_file():
        raise DataError(f"prepared data not found: {path} (run the 'prepare' stage first)")
    try:
        df = pd.read_parquet(path, engine="pyarrow")
    except Exception as exc:  # pyarrow raises several unrelated types for a corrupt file  # noqa: BLE001
        raise DataError(f"cannot read {path} as Parquet: {exc}") from None
    if META_KEY not in df.attrs:
        import pyarrow.parquet as pq

        raw = (pq.read_schema(path).metadata or {}).get(b"PANDAS_ATTRS")
        if raw:
            df.attrs.update(json.loads(raw))
    return from_frame(df)
