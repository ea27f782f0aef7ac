import numpy as np
import pytest

from weakspot.errors import ConfigError, ModelError
from weakspot.gad.blackbox import BlackBox, fit_estimator, fit_svm_grid


def test_wrong_shape_nan_and_non_probabilities_are_model_errors():
    X = np.zeros((4, 2))
    with pytest.raises(ModelError, match=r"shape \(4,\)"):
        BlackBox(lambda x: np.full(len(x), 0.5)).predict_proba(X)
    with pytest.raises(ModelError, match="NaN"):
        BlackBox(lambda x: np.full((len(x), 2), np.nan)).predict_proba(X)
    with pytest.raises(ModelError, match="not probabilities"):
        BlackBox(lambda x: np.full((len(x), 2), 0.9)).predict_proba(X)
    with pytest.raises(ModelError, match="no predict_proba"):
        BlackBox(object())


def test_prediction_is_argmax_of_probabilities():
    bb = BlackBox(lambda x: np.column_stack([1 - x[:, 0], x[:, 0]]))
    pred, conf = bb.predict(np.array([[0.2], [0.9]]))
    assert pred.tolist() == [0, 1] and np.allclose(conf, [0.8, 0.9])


def test_svm_grid_picks_rbf_for_a_ring():
    rng = np.random.default_rng(0)
    X = rng.uniform(-1, 1, size=(300, 2))
    y = (np.hypot(X[:, 0], X[:, 1]) < 0.6).astype(int)  # not linearly separable
    bb, info = fit_svm_grid(X, y, seed=0)
    assert info["kernel"] == "rbf" and info["cv_accuracy"] > 0.9
    assert bb.predict_proba(X).shape == (300, 2)


def test_any_sklearn_estimator_from_a_factory_string():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(100, 3))
    y = (X[:, 0] > 0).astype(int)
    bb, info = fit_estimator("sklearn.linear_model:LogisticRegression", X, y)
    assert info["kernel"] == "LogisticRegression" and (bb.predict(X)[0] == y).mean() > 0.95
    with pytest.raises(ConfigError, match="cannot import"):
        fit_estimator("no.such.module:thing", X, y)
