"""weakspot.data.frames: Dataset <-> DataFrame <-> Parquet round trips keep everything."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest

from weakspot.data import (
    Dataset,
    from_frame,
    load_source,
    read_split_parquet,
    split_dataset,
    to_frame,
    write_split_parquet,
)
from weakspot.errors import DataError


def _same(a: Dataset, b: Dataset) -> None:
    assert np.array_equal(a.X, b.X, equal_nan=True)
    assert a.X.dtype == b.X.dtype == (np.float32 if a.image_shape else np.float64)  # a table is never rounded
    assert np.array_equal(a.y, b.y)
    assert a.classes == b.classes and a.image_shape == b.image_shape and a.feature_names == b.feature_names


def test_image_round_trip_through_parquet(tmp_path):
    ds = load_source("digits")
    idx = split_dataset(ds.y, seed=0)["test"]
    df = to_frame(ds, idx)
    assert list(df.columns[:2]) == ["px_0", "px_1"] and df.columns[-1] == "label" and df.shape == (len(idx), 65)
    path = write_split_parquet(tmp_path / "prepared" / "test.parquet", df)
    meta = json.loads(json.loads(pq.read_schema(path).metadata[b"PANDAS_ATTRS"])["weakspot"])
    assert meta["image_shape"] == [1, 8, 8] and meta["classes"][3] == "3"
    assert meta["provenance"]["spec"] == "digits"
    back = read_split_parquet(path)
    _same(back, ds.subset(idx))
    assert back.provenance["spec"] == "digits"
    # the same file through the parquet: source keeps images and classes
    again = load_source(f"parquet:{path}")
    _same(again, ds.subset(idx))


def test_tabular_round_trip_keeps_feature_names(tmp_path):
    ds = load_source("keel:yeast1")
    df = to_frame(ds, np.arange(0, 1484, 7))
    assert list(df.columns) == ds.feature_names + ["label"]
    back = read_split_parquet(write_split_parquet(tmp_path / "y.parquet", df))
    _same(back, ds.subset(np.arange(0, 1484, 7)))
    assert back.classes == ["negative", "positive"]
    _same(from_frame(df), back)


def test_no_temp_files_left_and_missing_file_error(tmp_path):
    df = to_frame(load_source("digits"), [0, 1])
    write_split_parquet(tmp_path / "a.parquet", df)
    assert [p.name for p in tmp_path.iterdir()] == ["a.parquet"]
    with pytest.raises(DataError, match="nothere.parquet"):
        read_split_parquet(tmp_path / "nothere.parquet")


def test_plain_frame_without_metadata():
    df = pd.DataFrame({"u": [0.0, 1.0, 2.0], "label": ["b", "a", "b"]})
    ds = from_frame(df)
    assert ds.classes == ["a", "b"] and ds.y.tolist() == [1, 0, 1] and ds.feature_names == ["u"]
    with pytest.raises(DataError, match="metadata"):
        write_split_parquet("unused.parquet", df)
    with pytest.raises(DataError, match="'label'"):
        from_frame(df.drop(columns="label"))


def test_reserved_label_feature_name():
    ds = Dataset(X=np.zeros((2, 2)), y=np.array([0, 1]), classes=["a", "b"], feature_names=["x", "label"])
    with pytest.raises(DataError, match="reserved"):
        to_frame(ds)


def test_provenance_paths_are_written_as_text():
    import json
    import os

    from weakspot.data.frames import META_KEY

    class Where(os.PathLike):
        def __fspath__(self):
            return "data/x.csv"

    ds = Dataset(
        X=np.zeros((2, 1), np.float32),
        y=np.array([0, 1]),
        classes=["a", "b"],
        feature_names=["f"],
        provenance={"file": Where(), "sha": np.str_("ab")},
    )
    meta = json.loads(to_frame(ds).attrs[META_KEY])
    assert meta["provenance"] == {"file": "data/x.csv", "sha": "ab"}
