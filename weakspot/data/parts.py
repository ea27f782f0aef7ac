"""Splits that respect the model: its training rows are never the rows it is judged on.

Caveats first:

* A model weakspot trains is split as before (``fractions``, a bias); a model it did not train is judged only on rows
  outside its training part. One source given for such a model is all evaluation data (``train`` and ``val`` stay
  empty; the methods that need the training rows say so and do not run). A torchvision set keeps its official parts:
  the train part is what the model trained on, the test part what it is judged on.
* Named parts (``data.train``, ``data.val``, ``data.test``) are read as given; where the model is weakspot's, a
  validation part missing is carved from the train part. Their classes are merged by name.
* Evaluation rows whose input is byte-identical to a training row are left out of the evaluation (``dropped``): an
  input the model trained on is never one it is judged on, whatever file it came from.
"""

from __future__ import annotations

import hashlib
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

from weakspot.data.dataset import Dataset
from weakspot.errors import ConfigError, DataError

EMPTY = np.zeros(0, dtype=np.int64)


def row_digests(X: np.ndarray) -> List[bytes]:
    """A digest of each input's bytes (C order, in the dtype ``Dataset`` holds them): equal inputs, equal digests."""
    flat = np.ascontiguousarray(np.asarray(X).reshape(len(X), -1))
    return [hashlib.blake2b(r.tobytes(), digest_size=16).digest() for r in flat]


def overlapping(X: np.ndarray, rows: np.ndarray, train_rows: np.ndarray) -> np.ndarray:
    """The entries of ``rows`` whose input equals the input of some row in ``train_rows``."""
    if not len(rows) or not len(train_rows):
        return EMPTY
    seen = set(row_digests(X[train_rows]))
    hit = np.array([d in seen for d in row_digests(X[rows])], dtype=bool)
    return np.asarray(rows, np.int64)[hit]


def sample_rows(n: int, limit: Optional[int], seed: int) -> np.ndarray:
    """Indices of at most ``limit`` of ``n`` rows, drawn with ``seed`` and kept in order (all ``n`` when ``limit`` is
    None or not smaller): what a method that fits a model of the data trains on, so its cost is its sample's."""
    if limit is None or n <= int(limit):
        return np.arange(n, dtype=np.int64)
    return np.sort(np.random.default_rng([int(seed) % (2**32), 11]).choice(n, size=int(limit), replace=False))


def carve_val(y: np.ndarray, rows: np.ndarray, fractions: Sequence[float], seed: int) -> Tuple[np.ndarray, np.ndarray]:
    """Split ``rows`` (a train part) into train and validation in the ratio of ``fractions``' first two shares,
    stratified by class where every class has two rows or more."""
    from sklearn.model_selection import train_test_split

    share = float(fractions[1]) / float(fractions[0] + fractions[1])
    rows = np.asarray(rows, np.int64)
    counts = np.bincount(y[rows])
    strat = y[rows] if (counts[counts > 0] >= 2).all() else None
    tr, va = train_test_split(rows, test_size=share, random_state=int(seed), stratify=strat)
    return np.sort(tr), np.sort(va)


def _merged_classes(parts: Dict[str, Dataset]) -> List[str]:
    names: List[str] = []
    for ds in parts.values():
        names += [c for c in ds.classes if c not in names]
    if all(list(ds.classes) == list(next(iter(parts.values())).classes) for ds in parts.values()):
        return names

    def key(c: str) -> Tuple[int, float, str]:
        try:
            return (0, float(c), c)
        except ValueError:
            return (1, 0.0, c)

    return sorted(names, key=key)


def _merged_categories(parts: Dict[str, Dataset]) -> Tuple[Dict[str, List[str]], Any]:
    """Each categorical column's categories over every part (sorted), and a function giving a part's features with
    its codes renumbered into them (a category one file lacks is still the same text in every part)."""
    columns = sorted({c for ds in parts.values() for c in ds.categories})
    merged = {c: sorted({v for ds in parts.values() for v in ds.categories.get(c, [])}) for c in columns}
    for name, ds in parts.items():
        numeric = [c for c in columns if c not in ds.categories]
        if numeric:
            raise DataError(
                f"data.{name}: column(s) {numeric} are numbers there but text in another part; "
                "give every part the same column types"
            )

    def recode(ds: Dataset) -> np.ndarray:
        X = np.array(ds.X, np.float64)
        for c in columns:
            assert ds.feature_names is not None  # categorical columns exist only in tables
            j = ds.feature_names.index(c)
            new = np.array([merged[c].index(v) for v in ds.categories[c]], dtype=np.float32)
            seen = ~np.isnan(X[:, j])  # a missing value stays NaN
            X[seen, j] = new[X[seen, j].astype(np.int64)]
        return X

    return merged, recode


def concat_parts(parts: Dict[str, Dataset]) -> Tuple[Dataset, Dict[str, np.ndarray]]:
    """Named parts -> one Dataset (classes merged by name) and each part's row indices in it."""
    first_name, first = next(iter(parts.items()))
    for name, ds in parts.items():
        if (ds.image_shape is None) != (first.image_shape is None):
            raise DataError(
                f"data.{name} holds {'images' if ds.image_shape else 'a table'} but data.{first_name} "
                f"holds {'images' if first.image_shape else 'a table'}"
            )
        if (
            ds.image_shape is not None
            and first.image_shape is not None
            and tuple(ds.image_shape) != tuple(first.image_shape)
        ):
            raise DataError(
                f"data.{name} has images of shape {tuple(ds.image_shape)}, data.{first_name} "
                f"{tuple(first.image_shape)}: every part must have the same size"
            )
        if ds.image_shape is None and list(ds.feature_names or []) != list(first.feature_names or []):
            raise DataError(
                f"data.{name} has columns {ds.feature_names}, data.{first_name} {first.feature_names}: "
                "every part must have the same feature columns"
            )
    classes = _merged_classes(parts)
    categories, recode = _merged_categories(parts)
    X, y, idx, start = [], [], {}, 0
    files: Dict[str, str] = {}
    for name, ds in parts.items():
        code = np.array([classes.index(c) for c in ds.classes], dtype=np.int64)
        X.append(recode(ds))
        y.append(code[ds.y] if len(ds.y) else np.zeros(0, np.int64))
        idx[name] = np.arange(start, start + len(ds), dtype=np.int64)
        start += len(ds)
        files.update(ds.provenance.get("files") or {})
    desc = "; ".join(
        f"{name}: {ds.provenance.get('description', ds.provenance.get('spec'))}" for name, ds in parts.items()
    )
    ds = Dataset(
        X=np.concatenate(X),
        y=np.concatenate(y),
        classes=classes,
        feature_names=first.feature_names,
        image_shape=first.image_shape,
        categories=categories,
        provenance={
            "spec": ", ".join(f"{k} {v.provenance.get('spec')}" for k, v in parts.items()),
            "files": files,
            "description": desc,
            **({"label": first.provenance["label"]} if first.provenance.get("label") else {}),
        },
    )
    return ds, idx


def model_splits(
    ds: Dataset, parts: Dict[str, np.ndarray], *, trains: bool, fractions: Sequence[float], seed: int
) -> Tuple[Dict[str, np.ndarray], Dict[str, Any]]:
    """The audit's train/val/test rows from a source's parts (``train``, optional ``val``, ``test``).

    Returns the splits and what was done: ``val`` (given, carved from the train part, or none), ``dropped`` (test
    and validation rows left out because their input is a training row's)."""
    train = np.asarray(parts.get("train", EMPTY), np.int64)
    test = np.asarray(parts["test"], np.int64)
    val = parts.get("val")
    how = "given"
    if val is None:
        if trains and len(train):
            train, val = carve_val(ds.y, train, fractions, seed)
            how = "carved from the train part"
        else:
            val, how = EMPTY, "none (the model is not weakspot's to tune)"
    val = np.asarray(val, np.int64)
    dropped = {}
    for name, rows in (("test", test), ("val", val)):
        dup = overlapping(ds.X, rows, train)
        if len(dup):
            dropped[name] = int(len(dup))
            rows = np.setdiff1d(rows, dup)
        if name == "test":
            test = rows
        else:
            val = rows
    return {"train": train, "val": val, "test": test}, {"val": how, "dropped": dropped}


def check_parts(splits: Dict[str, np.ndarray], *, trains: bool, what: str) -> None:
    """Clear errors for parts a target cannot do without."""
    if not len(splits["test"]):
        raise DataError(
            f"{what}: no evaluation rows are left (the test part is empty, or every test input is also "
            "a training input)"
        )
    if trains and not len(splits["train"]):
        raise ConfigError(
            f"{what}: weakspot trains this model (a built-in architecture without weights) but the "
            "data give no training rows (data.train)"
        )
    if trains and not len(splits["val"]):
        raise DataError(f"{what}: the validation split is empty; give more data, data.val, or other fractions")
