"""weakspot.data.bias: the paper's biased splits as row indices, the same rows as before the move for a seed."""

from __future__ import annotations

import hashlib

import numpy as np
import pandas as pd
import pytest

from weakspot.data import BIAS_PRESETS, BiasRule, biased_split_indices, load_source
from weakspot.errors import ConfigError, DataError


def _phoneme_indices(seed: int):
    ds = load_source("keel:phoneme")
    p = BIAS_PRESETS["phoneme"]
    X = pd.DataFrame(ds.X, columns=ds.feature_names)
    return ds, biased_split_indices(
        X,
        ds.y,
        class_of_interest=p.class_of_interest,
        rules=p.rules,
        n_train=p.n_train,
        n_test=p.n_test,
        seed=seed,
        name="phoneme",
    )


def test_phoneme_rows_are_pinned():
    # computed with weakspot.gad.datasets.biased_split before it moved here (same draws, seed 0)
    ds, (train, test, info) = _phoneme_indices(0)
    assert (len(train), len(test)) == (3158, 2000)
    assert train[:8].tolist() == [2, 3, 5, 6, 8, 9, 10, 15]
    assert test[:8].tolist() == [0, 1, 4, 7, 11, 12, 14, 17]
    digest = hashlib.sha256(train.astype("<i8").tobytes() + test.astype("<i8").tobytes()).hexdigest()
    assert digest.startswith("353d4001fb345950")
    assert info["n_train"] == 3158 and info["n_test"] == 2000 and info["n_train_asked"] == 3400
    assert info["rules"][0]["cut"] == 0.0 and info["removed_by_bias"] == 3404 - 3158
    assert not set(train) & set(test)
    iy = ds.X[train, ds.feature_names.index("Iy")]
    assert (iy[ds.y[train] == 1] > 0).all()  # oral (code 1) only with Iy > 0 in training


def test_labels_are_not_recoded_and_rates_count_the_class_of_interest():
    rng = np.random.default_rng(1)
    X = pd.DataFrame({"u": rng.normal(size=300)})
    y = np.where(rng.random(300) < 0.3, "rare", "common")
    train, test, info = biased_split_indices(X, y, class_of_interest="rare", n_test=100, seed=2)
    assert len(test) == 100 and len(train) == 200 and np.all(np.diff(train) > 0)
    assert info["test_positive_rate"] == pytest.approx(float((y[test] == "rare").mean()))
    again = biased_split_indices(X, y, class_of_interest="rare", n_test=100, seed=2)
    np.testing.assert_array_equal(train, again[0])


def test_presets_and_rules():
    assert set(BIAS_PRESETS) == {"phoneme", "yeast1", "breast_cancer"}
    assert BIAS_PRESETS["breast_cancer"].source == "sklearn:breast_cancer"
    with pytest.raises(ConfigError, match="exactly one"):
        BiasRule("Iy", 1, "above")
    with pytest.raises(ConfigError, match="keep"):
        BiasRule("Iy", 1, "sideways", threshold=0.0)
    X = pd.DataFrame({"a": np.arange(10.0)})
    with pytest.raises(DataError, match="single class"):
        biased_split_indices(
            X,
            np.r_[np.zeros(5, int), np.ones(5, int)],
            class_of_interest=1,
            rules=[BiasRule("a", 1, "above", threshold=100.0)],
            n_test=5,
        )


def test_a_missing_value_in_a_biased_split_says_why_and_never_asks_to_impute():
    """data.bias trains a built-in model, which takes no NaN: the error says so and points to auditing the user's own
    model (where missing values are kept), never to imputing, which would audit another model."""
    from weakspot.data.bias import validate_tabular

    X = pd.DataFrame({"a": [1.0, np.nan, 3.0], "b": [0.0, 1.0, 2.0]})
    with pytest.raises(DataError, match=r"1 NaN/inf feature value\(s\), first at row 1, column 'a'.*built-in") as e:
        validate_tabular(X, np.array([0, 1, 0]), where="data.bias")
    assert "impute" not in str(e.value) and "your own model" in str(e.value)
