"""weakspot.data.sources: built-in sources give known shapes/counts; bad input gives an error naming the problem."""

from __future__ import annotations

import struct

import numpy as np
import pandas as pd
import pytest

from weakspot.data import SOURCES, Dataset, load_source, register_source
from weakspot.errors import ConfigError, DataError
from weakspot.data.frames import from_frame, to_frame


def test_digits_shape_range_and_labels():
    ds = load_source("digits")
    assert ds.X.shape == (1797, 1, 8, 8)
    assert ds.X.dtype == np.float32 and ds.y.dtype == np.int64
    assert ds.X.min() == 0.0 and ds.X.max() == 1.0
    assert ds.image_shape == (1, 8, 8) and ds.feature_names is None
    assert ds.n_classes == 10 and ds.classes == [str(i) for i in range(10)]
    assert np.array_equal(np.unique(ds.y), np.arange(10))
    assert len(ds.provenance["files"]) == 1 and len(next(iter(ds.provenance["files"].values()))) == 64
    # pixel values are sklearn's 0..16 divided by 16: every value is a multiple of 1/16
    assert np.allclose(ds.X * 16, np.round(ds.X * 16))


@pytest.mark.parametrize(
    "spec, n, d, counts, names",
    [
        ("keel:phoneme", 5404, 5, {"nasal": 3818, "oral": 1586}, ["Aa", "Ao", "Dcl", "Iy", "Sh"]),
        (
            "keel:yeast1",
            1484,
            8,
            {"negative": 1055, "positive": 429},
            ["mcg", "gvh", "alm", "mit", "erl", "pox", "vac", "nuc"],
        ),
    ],
)
def test_keel_row_counts_and_class_balance(spec, n, d, counts, names):
    ds = load_source(spec)
    assert ds.X.shape == (n, d)
    assert ds.class_counts() == counts
    assert ds.feature_names == names
    assert ds.image_shape is None
    assert np.isfinite(ds.X).all()
    ((path, sha),) = ds.provenance["files"].items()
    assert path.startswith("data/external/keel/") and len(sha) == 64


def test_keel_first_row_matches_file():
    ds = load_source("keel:yeast1")
    # first line of yeast1.dat: 0.58, 0.61, 0.47, 0.13, 0.50, 0.00, 0.48, 0.22, negative
    assert np.allclose(ds.X[0], [0.58, 0.61, 0.47, 0.13, 0.50, 0.00, 0.48, 0.22])
    assert ds.classes[ds.y[0]] == "negative"


def test_keel_missing_root_and_changed_file(tmp_path):
    with pytest.raises(DataError, match=r"phoneme\.dat"):
        load_source("keel:phoneme", root=tmp_path)
    (tmp_path / "phoneme.dat").write_text("1,2,3,4,5,0\n")
    with pytest.raises(DataError, match="sha256"):
        load_source("keel:phoneme", root=tmp_path)
    with pytest.raises(ConfigError, match="keel:phoneme"):
        load_source("keel:iris")


def test_unknown_spec_lists_valid_kinds():
    with pytest.raises(ConfigError) as err:
        load_source("imagenet:val")
    msg = str(err.value)
    assert "'imagenet'" in msg
    for kind in ("digits", "keel", "csv", "parquet", "torchvision"):
        assert kind in msg


def _table(n=12, seed=0):
    rng = np.random.default_rng(seed)
    return pd.DataFrame(
        {
            "a": rng.normal(size=n),
            "b": rng.integers(0, 5, size=n),
            "target": np.where(np.arange(n) % 3 == 0, "cat", "dog"),
        }
    )


@pytest.mark.parametrize("fmt", ["csv", "parquet"])
def test_table_round_trip_with_label_column(tmp_path, fmt):
    df = _table()
    path = tmp_path / f"t.{fmt}"
    df.to_csv(path, index=False) if fmt == "csv" else df.to_parquet(path, index=False)
    ds = load_source(f"{fmt}:{path}", label="target")
    assert ds.feature_names == ["a", "b"]
    assert ds.classes == ["cat", "dog"]
    assert np.allclose(ds.X, df[["a", "b"]].to_numpy(), atol=1e-6)
    assert np.array_equal(ds.y, (df["target"] == "dog").astype(int).to_numpy())
    assert ds.provenance["label"] == "target" and str(path) in ds.provenance["files"]
    relative = load_source(f"{fmt}:t.{fmt}", label="target", root=tmp_path)  # a relative path under root
    assert np.array_equal(relative.X, ds.X) and np.array_equal(relative.y, ds.y)


def test_table_numeric_labels_sorted_numerically(tmp_path):
    df = pd.DataFrame({"x": [0.1, 0.2, 0.3, 0.4], "y": [10, 2, 2, 10]})
    df.to_csv(tmp_path / "n.csv", index=False)
    ds = load_source(f"csv:{tmp_path / 'n.csv'}", label="y")
    assert ds.classes == ["2", "10"] and ds.y.tolist() == [1, 0, 0, 1]


def test_missing_file_names_path(tmp_path):
    path = tmp_path / "absent.csv"
    with pytest.raises(DataError, match="absent.csv"):
        load_source(f"csv:{path}", label="y")
    with pytest.raises(DataError, match="absent.parquet"):
        load_source(f"parquet:{tmp_path / 'absent.parquet'}", label="y")


def test_missing_label_column_names_column_and_available(tmp_path):
    _table().to_csv(tmp_path / "t.csv", index=False)
    with pytest.raises(DataError) as err:
        load_source(f"csv:{tmp_path / 't.csv'}", label="class")
    assert "'class'" in str(err.value) and "a, b, target" in str(err.value)
    with pytest.raises(ConfigError, match="label"):
        load_source(f"csv:{tmp_path / 't.csv'}")


def test_infinite_cell_names_column_and_row_count(tmp_path):
    df = _table().astype({"b": float})
    df.loc[[2, 5], "b"] = np.inf
    df.loc[3, "a"] = np.nan  # a missing value is kept (tests/data/test_data_missing.py)
    df.to_csv(tmp_path / "t.csv", index=False)
    with pytest.raises(DataError) as err:
        load_source(f"csv:{tmp_path / 't.csv'}", label="target")
    assert "'b' (2 rows)" in str(err.value) and "'a'" not in str(err.value) and "infinite" in str(err.value)


def test_text_columns_become_categories(tmp_path):
    df = _table()
    df["colour"] = np.where(np.arange(len(df)) % 3 == 0, "red", "blue")
    df.to_csv(tmp_path / "t.csv", index=False)
    ds = load_source(f"csv:{tmp_path / 't.csv'}", label="target")
    assert ds.categories == {"colour": ["blue", "red"]}
    col = ds.feature_names.index("colour")
    assert ds.categorical == [col]
    assert ds.X[:, col].tolist() == [1.0 if i % 3 == 0 else 0.0 for i in range(len(df))]
    assert "1 categorical" in ds.provenance["description"]
    back = from_frame(to_frame(ds))  # the categories survive the prepared Parquet's metadata
    assert back.categories == ds.categories and back.subset([0, 1]).categories == ds.categories


def test_empty_category_cell_is_a_missing_value(tmp_path):
    df = _table()
    df["colour"] = "red"
    df.loc[3, "colour"] = None
    df.to_csv(tmp_path / "t.csv", index=False)
    ds = load_source(f"csv:{tmp_path / 't.csv'}", label="target")
    col = ds.X[:, ds.feature_names.index("colour")]
    assert ds.categories == {"colour": ["red"]} and np.isnan(col[3]) and (np.delete(col, 3) == 0).all()


def test_empty_label_cell_is_named(tmp_path):
    df = _table()
    df.loc[[1, 4], "target"] = None
    df.to_csv(tmp_path / "t.csv", index=False)
    with pytest.raises(DataError, match="label column 'target' .* 2 empty rows; a label cannot be missing"):
        load_source(f"csv:{tmp_path / 't.csv'}", label="target")


def test_torchvision_missing_root_names_expected_path(tmp_path):
    with pytest.raises(DataError) as err:
        load_source("torchvision:MNIST", root=tmp_path)
    assert str(tmp_path / "MNIST" / "raw" / "train-images-idx3-ubyte") in str(err.value)
    assert "never downloads" in str(err.value)
    with pytest.raises(DataError, match="cifar-10-batches-py"):
        load_source("torchvision:CIFAR10", root=tmp_path)
    with pytest.raises(ConfigError, match="root"):
        load_source("torchvision:MNIST")
    with pytest.raises(ConfigError, match="FashionMNIST"):
        load_source("torchvision:ImageNet", root=tmp_path)


def _write_idx(path, array, magic):
    with open(path, "wb") as fh:
        fh.write(struct.pack(">I", magic))
        for dim in array.shape:
            fh.write(struct.pack(">I", dim))
        fh.write(array.astype(np.uint8).tobytes())


def test_torchvision_mnist_reads_local_copy(tmp_path):
    raw = tmp_path / "MNIST" / "raw"
    raw.mkdir(parents=True)
    rng = np.random.default_rng(0)
    imgs = {"train": rng.integers(0, 256, (6, 28, 28)), "t10k": rng.integers(0, 256, (4, 28, 28))}
    labels = {"train": np.array([0, 1, 2, 3, 4, 5]), "t10k": np.array([9, 8, 7, 6])}
    for part in ("train", "t10k"):
        _write_idx(raw / f"{part}-images-idx3-ubyte", imgs[part], 2051)
        _write_idx(raw / f"{part}-labels-idx1-ubyte", labels[part], 2049)
    ds = load_source("torchvision:MNIST", root=tmp_path)
    assert ds.X.shape == (10, 1, 28, 28) and ds.image_shape == (1, 28, 28)
    assert np.allclose(ds.X[:6, 0] * 255, imgs["train"]) and np.allclose(ds.X[6:, 0] * 255, imgs["t10k"])
    assert ds.y.tolist() == [0, 1, 2, 3, 4, 5, 9, 8, 7, 6]
    assert ds.n_classes == 10 and ds.provenance["parts"] == {"train": 6, "test": 4}


def test_register_a_new_source():
    name = "test-const"
    if name not in SOURCES:

        @register_source(name)
        def _const(arg, *, label=None, root=None):
            k = int(arg)
            return Dataset(X=np.zeros((k, 2)), y=np.arange(k) % 2, classes=["a", "b"])

    ds = load_source(f"{name}:6")
    assert len(ds) == 6 and ds.provenance["spec"] == f"{name}:6"
    with pytest.raises(ConfigError, match="already registered"):
        register_source(name)(lambda arg, **kw: None)


def test_dataset_validates_its_fields():
    with pytest.raises(DataError, match="labels must be in 0..1"):
        Dataset(X=np.zeros((3, 2)), y=np.array([0, 1, 2]), classes=["a", "b"])
    with pytest.raises(DataError, match="image_shape"):
        Dataset(X=np.zeros((3, 1, 4, 4)), y=np.zeros(3, int), classes=["a"], image_shape=(1, 8, 8))
    with pytest.raises(DataError, match=r"\(3,\)"):
        Dataset(X=np.zeros((3, 2)), y=np.zeros(4, int), classes=["a"])


def test_sklearn_breast_cancer_source():
    ds = load_source("sklearn:breast_cancer")
    assert ds.X.shape == (569, 10) and ds.classes == ["malignant", "benign"]  # benign = code 1
    assert ds.class_counts() == {"malignant": 212, "benign": 357}
    assert all(f.startswith("mean ") for f in ds.feature_names)
    assert "Wisconsin" in ds.provenance["description"] and ds.provenance["spec"] == "sklearn:breast_cancer"
    with pytest.raises(ConfigError, match="sklearn:breast_cancer"):
        load_source("sklearn:iris")


def test_keel_class_codes_put_the_class_of_interest_at_1():
    assert load_source("keel:phoneme").classes == ["nasal", "oral"]  # GAD paper: "misclassified as oral"
    assert load_source("keel:yeast1").classes == ["negative", "positive"]  # positive = NUC
