"""weakspot.models.table: a user's table model gets named columns and category texts back; methods never hand it a
category that does not exist."""

import numpy as np
import pandas as pd
import pytest

from weakspot.data.dataset import Dataset
from weakspot.errors import DataError, ModelError
from weakspot.models import CallableClassifier, SklearnClassifier, TorchClassifier
from weakspot.models.table import TableClassifier, for_data, frame_of

CATS = {"colour": ["blue", "green", "red"]}


def _table(n=200, seed=0):
    rng = np.random.default_rng(seed)
    X = np.column_stack([rng.uniform(-1, 1, n), rng.integers(0, 3, n)]).astype(np.float32)
    y = ((X[:, 0] > 0) ^ (X[:, 1] == 2)).astype(np.int64)
    return Dataset(X=X, y=y, classes=["no", "yes"], feature_names=["size", "colour"], categories=CATS)


def test_the_users_function_sees_texts_and_names():
    seen = {}

    def fn(frame):
        seen["frame"] = frame
        red = (frame["colour"] == "red").to_numpy()
        p = ((frame["size"].to_numpy() > 0) ^ red).astype(float)
        return np.column_stack([1 - p, p])

    ds = _table()
    clf = for_data(CallableClassifier(fn, n_classes=2), ds, trained_here=False)
    assert isinstance(clf, TableClassifier)
    assert (clf.predict(ds.X) == ds.y).all()  # right only if "red" reached it as text
    assert list(seen["frame"].columns) == ["size", "colour"] and set(seen["frame"]["colour"]) == set(CATS["colour"])


def test_a_code_that_is_not_a_category_is_refused_not_rounded():
    with pytest.raises(DataError, match="'colour' was given values other than its codes 0..2"):
        frame_of(np.array([[0.1, 1.5]]), ["size", "colour"], CATS)
    with pytest.raises(DataError, match="codes 0..2"):
        frame_of(np.array([[0.1, 3.0]]), ["size", "colour"], CATS)


def test_which_models_are_wrapped():
    import torch
    from sklearn.linear_model import LogisticRegression

    ds = _table()
    plain = Dataset(X=ds.X[:, :1], y=ds.y, classes=ds.classes, feature_names=["size"])
    arr = SklearnClassifier(LogisticRegression().fit(plain.X, plain.y))
    assert for_data(arr, plain, trained_here=False) is arr  # fitted on an array: left as it is
    named = SklearnClassifier(LogisticRegression().fit(pd.DataFrame(plain.X, columns=["size"]), plain.y))
    assert isinstance(for_data(named, plain, trained_here=False), TableClassifier)  # fitted on named columns
    assert for_data(named, ds, trained_here=True) is named  # weakspot's own model learnt the codes
    with pytest.raises(ModelError, match="categorical column.*colour.*torch"):
        for_data(TorchClassifier(torch.nn.Linear(2, 2), n_classes=2, device="cpu"), ds, trained_here=False)


def test_gad_never_moves_a_category_and_asks_the_model_only_about_observed_ones():
    from weakspot.gad.attack import gad_attack
    from weakspot.gad.extract import extract_pseudo_model

    ds = _table(400)
    asked = []

    def fn(frame):
        asked.append(set(frame["colour"]))
        p = 1 / (1 + np.exp(-8 * frame["size"].to_numpy()))
        return np.column_stack([1 - p, p])

    clf = for_data(CallableClassifier(fn, n_classes=2), ds, trained_here=False)
    X = ds.X.astype(np.float64)
    ext = extract_pseudo_model(clf, X, n_points=600, epochs=5, seed=0, device="cpu", fixed=[1])
    att = gad_attack(clf, ext.model, X[:50], step_size=0.02, max_steps=100, device="cpu", fixed=[1])
    assert att.flipped.mean() > 0.8  # the attack still works along the numeric column
    np.testing.assert_array_equal(att.x_adv[:, 1], X[:50, 1])  # the category never moved
    assert set().union(*asked) <= set(CATS["colour"])  # had a code been fractional, frame_of would have raised
