import numpy as np
import pandas as pd
import pytest

from weakspot.data import BiasRule, load_source
from weakspot.errors import ConfigError, DataError
from weakspot.gad.datasets import biased_split, make_preset_split


def test_phoneme_bias_sizes_and_class_codes():
    s = make_preset_split("phoneme", seed=3)
    assert s.classes == ["nasal", "oral"] and s.class_name(1) == "oral"  # oral = code 1, the class of interest
    iy = s.X_train[:, s.feature_names.index("Iy")]
    assert (iy[s.y_train == 1] > 0).all()  # Sec. V-A: oral only with positive Iy in training
    assert (s.X_test[:, 3][s.y_test == 1] <= 0).any()  # the test split is not biased
    assert len(s.X_test) == 2000 and len(s.X_train) <= 3400
    assert len(s.X_train) + len(s.X_test) + s.info["removed_by_bias"] == 5404
    assert s.X_train.dtype == np.float64 and s.log_mae


def test_yeast_bias_on_v1():
    s = make_preset_split("yeast1", seed=0)
    assert s.classes == ["negative", "positive"] and not s.log_mae  # positive = NUC = code 1
    assert s.feature_names == ["mcg", "mit"] and len(s.X_train) == 150 and len(s.X_test) == 490
    mcg = load_source("keel:yeast1").X[:, 0]
    q40, q60 = np.quantile(mcg, [0.4, 0.6])
    assert (s.X_train[s.y_train == 1, 0] < q60).all() and (s.X_train[s.y_train == 0, 0] > q40).all()
    assert (s.X_test[s.y_test == 1, 0] >= q60).any()  # the test split is not biased


def test_breast_cancer_preset_hides_small_malignant_tumours():
    s = make_preset_split("breast_cancer", seed=0)
    assert s.classes == ["malignant", "benign"] and len(s.feature_names) == 10 and len(s.X_test) == 300
    r = s.X_train[:, s.feature_names.index("mean radius")]
    assert (r[s.y_train == 0] > 15).all()


def test_generic_split_keeps_labels_and_applies_rules():
    rng = np.random.default_rng(0)
    X = pd.DataFrame({"a": rng.normal(size=400), "b": rng.normal(size=400)})
    y = np.where(rng.random(400) < 0.5, "cat", "dog")
    kw = dict(class_of_interest="dog", rules=[BiasRule("a", "dog", "below", threshold=0.0)], n_test=100, seed=5)
    s1, s2 = biased_split(X, y, **kw), biased_split(X, y, **kw)
    np.testing.assert_array_equal(s1.X_train, s2.X_train)
    assert set(np.unique(s1.y_train)) == {"cat", "dog"}  # not re-coded
    assert (s1.X_train[s1.y_train == "dog", 0] < 0).all()
    assert len(s1.X_test) == 100 and s1.class_name(1) == "1"  # no class names given: codes as text


def test_bad_input_is_a_clear_error():
    X = pd.DataFrame({"a": [0.0, np.nan, 1.0, 2.0], "b": [1.0, 2.0, 3.0, 4.0]})
    with pytest.raises(DataError, match="NaN/inf.*row 1.*'a'"):
        biased_split(X, [0, 1, 0, 1], n_test=2)
    with pytest.raises(ConfigError, match="class_of_interest"):
        biased_split(X.fillna(0), [0, 1, 0, 1], class_of_interest=7, n_test=2)
    with pytest.raises(ConfigError, match="not a column"):
        biased_split(X.fillna(0), [0, 1, 0, 1], rules=[BiasRule("zz", 1, threshold=0.0)], n_test=2)
    with pytest.raises(ConfigError, match="valid names"):
        make_preset_split("iris")
    with pytest.raises(ConfigError, match="not found"):
        make_preset_split("phoneme", features=["Aa", "nope"])
