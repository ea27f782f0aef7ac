"""Missing values reach the model as they are (issue 37): a table's empty cells are kept as NaN from the CSV through
the prepared Parquet to the user's model, the data section says how many there are, and what is still refused
(infinite values, NaN images, a missing label) is named."""

from __future__ import annotations

import hashlib

import numpy as np
import pandas as pd
import pytest

from weakspot.data import Dataset, from_frame, load_source, read_split_parquet, to_frame, write_split_parquet
from weakspot.data.missing import describe_missing, missing_shares
from weakspot.errors import DataError


def _csv(tmp_path, n=40):
    rng = np.random.default_rng(0)
    df = pd.DataFrame(
        {
            "income": rng.normal(50, 10, n).round(2),
            "city": rng.choice(["north", "south"], n),
            "age": rng.integers(20, 60, n),
            "y": np.where(np.arange(n) % 2, "yes", "no"),
        }
    )
    df.loc[[1, 5, 9, 13], "income"] = np.nan  # 10%
    df.loc[[2, 7], "city"] = None
    path = tmp_path / "t.csv"
    df.to_csv(path, index=False)
    return df, path


def test_a_csv_keeps_its_empty_cells_as_missing_values_through_the_prepared_parquet(tmp_path):
    df, path = _csv(tmp_path)
    ds = load_source(f"csv:{path}", label="y")
    X = pd.DataFrame(ds.X, columns=ds.feature_names)
    assert X["income"].isna().tolist() == df["income"].isna().tolist()
    assert X["city"].isna().tolist() == df["city"].isna().tolist() and ds.categories == {"city": ["north", "south"]}
    assert missing_shares(ds.X, ds.feature_names) == {"income": 0.1, "city": 0.05}
    digests = []
    for name in ("a", "b"):  # written twice: the same bytes (DVC's digests do not move)
        write_split_parquet(tmp_path / f"{name}.parquet", to_frame(ds))
        digests.append(hashlib.sha256((tmp_path / f"{name}.parquet").read_bytes()).hexdigest())
    back = read_split_parquet(tmp_path / "a.parquet")
    assert digests[0] == digests[1]
    np.testing.assert_array_equal(back.X, ds.X)  # NaN where NaN (assert_array_equal treats NaN as equal)
    assert back.categories == ds.categories


def test_infinite_values_nan_images_and_missing_labels_are_still_refused_by_name(tmp_path):
    df, path = _csv(tmp_path)
    df["age"] = df["age"].astype(float)
    df.loc[3, "age"] = np.inf
    df.to_csv(path, index=False)
    with pytest.raises(DataError, match=r"infinite values in column\(s\) 'age' \(1 rows\)"):
        load_source(f"csv:{path}", label="y")
    table = Dataset(X=np.array([[np.nan, 1.0]]), y=np.array([0]), classes=["a"], feature_names=["u", "v"])
    frame = to_frame(table)
    frame.loc[0, "v"] = np.inf
    with pytest.raises(DataError, match=r"infinite values in column\(s\) 'v'"):
        from_frame(frame)
    assert np.isnan(from_frame(to_frame(table)).X[0, 0])  # the missing value itself is kept
    images = to_frame(Dataset(X=np.zeros((2, 1, 2, 2)), y=np.array([0, 1]), classes=["a", "b"], image_shape=(1, 2, 2)))
    images.loc[1, "px_3"] = np.nan
    with pytest.raises(DataError, match="1 images hold NaN or infinite values"):
        from_frame(images)


def test_the_api_keeps_missing_values_and_refuses_nan_images_and_labels():
    from weakspot.api import as_dataset, text_columns

    X = pd.DataFrame({"income": [1.0, np.nan, 3.0], "city": ["a", None, "b"]})
    cats = text_columns(X)
    ds = as_dataset(X, ["n", "y", "n"], ["n", "y"], what="X_test", categories=cats)
    assert cats == {"city": ["a", "b"]} and np.isnan(ds.X[1]).all() and ds.X[2].tolist() == [3.0, 1.0]
    with pytest.raises(DataError, match="X_test: 1 images hold NaN"):
        as_dataset(np.full((2, 4, 4), 0.5) * [[[1]], [[np.nan]]], [0, 1], [0, 1], what="X_test")
    with pytest.raises(DataError, match=r"label column 'target' holds 1 missing values"):
        as_dataset(X, pd.Series(["n", np.nan, "y"], name="target"), ["n", "y"], what="X_test", categories=cats)


def test_the_user_s_model_gets_nan_where_the_csv_had_an_empty_cell(tmp_path):
    from sklearn.compose import ColumnTransformer
    from sklearn.ensemble import HistGradientBoostingClassifier
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import OneHotEncoder

    from weakspot.models import SklearnClassifier
    from weakspot.models.table import for_data, frame_of

    _, path = _csv(tmp_path)
    raw = pd.read_csv(path)
    ds = load_source(f"csv:{path}", label="y")
    frame = frame_of(ds.X, ds.feature_names, ds.categories)
    assert frame["city"].isna().tolist() == raw["city"].isna().tolist()
    assert frame["income"].isna().tolist() == raw["income"].isna().tolist()
    model = make_pipeline(
        ColumnTransformer([("c", OneHotEncoder(handle_unknown="ignore"), ["city"])], remainder="passthrough"),
        HistGradientBoostingClassifier(max_iter=5),
    ).fit(raw.drop(columns="y"), raw["y"])
    clf = for_data(SklearnClassifier(model, n_classes=2), ds, trained_here=False)
    np.testing.assert_allclose(clf.predict_proba(ds.X), model.predict_proba(raw.drop(columns="y")), atol=1e-6)


def test_prepare_records_and_the_data_section_shows_the_share_missing_per_column(tmp_path):
    from weakspot.data.prepare import prepare_target_data
    from weakspot.data.summary import data_section
    from weakspot.targets import DataParams

    _csv(tmp_path)
    p = DataParams.model_validate({"source": "csv:t.csv", "label": "y", "root": str(tmp_path)})
    ds, splits, info = prepare_target_data(p, trains=False)
    assert info["missing"] == {"income": 0.1, "city": 0.05}
    sec = data_section("t", p.described, ds, splits, info)
    sec.check()
    assert "Missing values" in " ".join(sec.summary) and "income 10% of rows, city 5%" in " ".join(sec.summary)
    table = sec.tables["missing_values"]
    assert table["column"].tolist() == ["income", "city"] and table["test"].tolist() == [0.1, 0.05]
    full = load_source("sklearn:breast_cancer")  # no missing value: no table, no key
    assert "missing_values" not in data_section("b", "b", full, {k: np.arange(10) for k in SPLITS}, INFO).tables


SPLITS = ("train", "val", "test")
INFO = {"kind": "stratified"}


def test_named_parts_and_unlabelled_rows_keep_their_missing_values(tmp_path):
    from weakspot.data.parts import concat_parts
    from weakspot.data.unlabelled import load_unlabelled

    df, path = _csv(tmp_path)
    other = df.assign(city=np.where(np.arange(len(df)) % 2, "west", None))
    other.to_csv(tmp_path / "o.csv", index=False)
    a, b = load_source(f"csv:{path}", label="y"), load_source(f"csv:{tmp_path / 'o.csv'}", label="y")
    ds, _ = concat_parts({"train": a, "test": b})  # the codes renumbered into the merged categories, NaN kept
    city = pd.Series(frame_city(ds))
    assert ds.categories["city"] == ["north", "south", "west"]
    assert city.isna().sum() == 2 + len(df) // 2 and set(city.dropna()) == {"north", "south", "west"}
    X, cats, _ = load_unlabelled(f"csv:{tmp_path / 'o.csv'}", a)
    assert np.isnan(X[:, 0]).sum() == 4 and cats["city"] == ["north", "south", "west"]


def frame_city(ds):
    from weakspot.models.table import frame_of

    return frame_of(ds.X, ds.feature_names, ds.categories)["city"]


def test_weakspot_s_own_architectures_refuse_missing_values_by_name():
    from weakspot.models import fit_builtin
    from weakspot.targets import TrainParams

    X = np.array([[0.0, np.nan], [1.0, 2.0], [0.5, 0.5], [0.2, 0.1]], np.float32)
    with pytest.raises(DataError, match="svm_grid: 1 training rows hold missing values"):
        fit_builtin("svm_grid", X, np.array([0, 1, 0, 1]), 2, TrainParams(), seed=0)


def test_describe_missing_reads_as_a_person_would():
    assert describe_missing({}) == ""
    assert describe_missing({"a": 0.1234, "b": 0.0004}) == "a 12.3% of rows, b <0.1%"
