import numpy as np
import pandas as pd
import pytest

from weakspot.errors import ConfigError, DataError
from weakspot.gad.config import GadDatasetParams
from weakspot.gad.datasets import BiasRule, biased_split, load_keel, make_preset_split, split_from_params


def test_load_keel_shapes_and_labels(keel_root):
    X, y = load_keel("phoneme", keel_root)
    assert X.shape == (5404, 5) and list(X.columns) == ["Aa", "Ao", "Dcl", "Iy", "Sh"]
    assert int(y.sum()) == 1586  # oral sounds (KEEL phoneme: 3818 nasal, 1586 oral)
    X, y = load_keel("yeast1", keel_root)
    assert X.shape == (1484, 8) and int(y.sum()) == 429  # NUC


def test_load_keel_missing_file_names_the_path(tmp_path):
    with pytest.raises(DataError, match=str(tmp_path / "phoneme.dat")):
        load_keel("phoneme", tmp_path)
    with pytest.raises(ConfigError, match="valid names"):
        load_keel("iris", tmp_path)


def test_phoneme_bias_and_sizes(keel_root):
    X, y = load_keel("phoneme", keel_root)
    s = make_preset_split("phoneme", X, y, seed=3)
    iy = s.X_train[:, s.feature_names.index("Iy")]
    assert (iy[s.y_train == 1] > 0).all()  # Sec. V-A: oral only with positive Iy in training
    assert (s.X_test[:, 3][s.y_test == 1] <= 0).any()  # the test split is not biased
    assert len(s.X_test) == 2000 and len(s.X_train) <= 3400
    assert len(s.X_train) + len(s.X_test) + s.info["removed_by_bias"] == 5404


def test_yeast_bias_on_v1(keel_root):
    X, y = load_keel("yeast1", keel_root)
    s = make_preset_split("yeast1", X, y, seed=0)
    assert s.feature_names == ["mcg", "gvh"] and len(s.X_train) == 150 and len(s.X_test) == 490
    q40, q60 = np.quantile(X["mcg"], [0.4, 0.6])
    assert (s.X_train[s.y_train == 1, 0] < q60).all() and (s.X_train[s.y_train == 0, 0] > q40).all()
    assert (s.X_test[s.y_test == 1, 0] >= q60).any()  # the test split is not biased


def test_generic_split_is_deterministic_and_applies_rules():
    rng = np.random.default_rng(0)
    X = pd.DataFrame({"a": rng.normal(size=400), "b": rng.normal(size=400)})
    y = np.where(rng.random(400) < 0.5, "cat", "dog")
    kw = dict(class_of_interest="dog", rules=[BiasRule("a", "dog", "below", threshold=0.0)], n_test=100, seed=5)
    s1, s2 = biased_split(X, y, **kw), biased_split(X, y, **kw)
    np.testing.assert_array_equal(s1.X_train, s2.X_train)
    assert set(np.unique(s1.y_train)) == {0, 1}
    assert (s1.X_train[s1.y_train == 1, 0] < 0).all()
    assert len(s1.X_test) == 100


def test_bad_input_is_a_clear_error():
    X = pd.DataFrame({"a": [0.0, np.nan, 1.0, 2.0], "b": [1.0, 2.0, 3.0, 4.0]})
    with pytest.raises(DataError, match="NaN/inf.*row 1.*'a'"):
        biased_split(X, [0, 1, 0, 1], n_test=2)
    with pytest.raises(ConfigError, match="class_of_interest"):
        biased_split(X.fillna(0), [0, 1, 0, 1], class_of_interest=7, n_test=2)
    with pytest.raises(ConfigError, match="not a column"):
        biased_split(X.fillna(0), [0, 1, 0, 1], rules=[BiasRule("zz", 1, threshold=0.0)], n_test=2)


def test_csv_source_from_params(tmp_path):
    rng = np.random.default_rng(1)
    df = pd.DataFrame({"u": rng.normal(size=200), "v": rng.normal(size=200)})
    df["target"] = (df.u + df.v > 0).astype(int)
    df.to_csv(tmp_path / "d.csv", index=False)
    ds = GadDatasetParams(name="mine", source=f"csv:{tmp_path / 'd.csv'}", label="target", class_of_interest=1, n_test=80)
    s = split_from_params(ds, keel_root=tmp_path, seed=0)
    assert s.X_train.shape == (120, 2) and s.feature_names == ["u", "v"]
    with pytest.raises(ConfigError, match="class_of_interest"):
        split_from_params(GadDatasetParams(name="mine", source=f"csv:{tmp_path / 'd.csv'}", label="target"), keel_root=tmp_path, seed=0)
