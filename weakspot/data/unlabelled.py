"""The ``unlabelled`` part: production rows no one has labelled, which GAD's to-label list ranks for a person.

Caveats first: the rows must have the labelled data's feature columns (by name; others, the label column among them,
are left out and said so). A categorical column's texts are coded as in the labelled data; a text the labelled data
never had gets a new code after theirs (the user's model decides what it makes of it); an empty cell is a missing
value, kept as NaN as in the labelled data. The rows carry no label: in
the prepared data their label column holds the placeholder 0, which no method reads.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple

import numpy as np

from weakspot.data.categories import encode, is_text, texts_of
from weakspot.data.missing import check_table_values
from weakspot.data.dataset import Dataset
from weakspot.errors import DataError
from weakspot.hashing import sha256_file


def load_unlabelled(
    spec: str, like: Dataset, *, root: Optional[Any] = None
) -> Tuple[np.ndarray, Dict[str, List[str]], Dict[str, Any]]:
    """The rows of ``spec`` as ``like``'s features: ``(X float64 (n, d), like's categories extended by new texts,
    provenance)``.

    Raises
    ------
    DataError
        A missing file or feature column, an infinite cell, no rows (an empty cell is a missing value, kept as NaN).
    """
    from weakspot.data.sources import read_table

    if like.feature_names is None:
        raise DataError("data.unlabelled holds table rows, but the labelled data are images")
    df, path = read_table(spec, root)
    df.columns = [str(c) for c in df.columns]
    names = list(like.feature_names)
    missing = [c for c in names if c not in df.columns]
    if missing:
        raise DataError(f"data.unlabelled {spec}: column(s) {missing} of the labelled data are missing from {path}")
    if not len(df):
        raise DataError(f"data.unlabelled {spec}: {path} has no rows")
    ignored = [c for c in df.columns if c not in names]
    cats = {c: list(v) for c, v in like.categories.items()}
    X = np.zeros((len(df), len(names)), np.float64)
    for j, c in enumerate(names):
        col = df[c]
        if c in cats:
            cats[c] += [t for t in texts_of(col, where=f"data.unlabelled {spec}") if t not in cats[c]]
            X[:, j] = encode(col, cats[c])
        elif is_text(col):
            raise DataError(f"data.unlabelled {spec}: column {c!r} holds text, but it is numeric in the labelled data")
        else:  # an empty cell is a missing value, kept as NaN
            X[:, j] = col.to_numpy(np.float64, na_value=np.nan)
    check_table_values(X, names, where=f"data.unlabelled {spec}")
    new = {c: cats[c][len(like.categories[c]) :] for c in cats if len(cats[c]) > len(like.categories[c])}
    desc = f"unlabelled: {path.name}, {len(df)} rows without labels"
    if ignored:
        desc += f" (columns left out: {', '.join(ignored[:8])})"
    if new:
        desc += "; categories the labelled data lack: " + "; ".join(f"{c}: {', '.join(v[:5])}" for c, v in new.items())
    return X, cats, {"files": {str(path): sha256_file(path)}, "description": desc}


def with_unlabelled(ds: Dataset, spec: str, *, root: Optional[Any] = None) -> Tuple[Dataset, np.ndarray]:
    """``ds`` with the unlabelled rows appended (label placeholder 0) and their indices in it."""
    X, cats, prov = load_unlabelled(spec, ds, root=root)
    assert ds.feature_names is not None  # load_unlabelled raised for images
    files = {**(ds.provenance.get("files") or {}), **prov["files"]}
    desc = "; ".join(d for d in (ds.provenance.get("description"), prov["description"]) if d)
    out = Dataset(
        X=np.concatenate([ds.X, X]),
        y=np.concatenate([ds.y, np.zeros(len(X), np.int64)]),
        classes=list(ds.classes),
        feature_names=list(ds.feature_names),
        categories=cats,
        provenance={**ds.provenance, "files": files, "description": desc},
    )
    return out, np.arange(len(ds), len(out), dtype=np.int64)
