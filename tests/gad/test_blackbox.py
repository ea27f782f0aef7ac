"""The black box GAD is given: weakspot.models' SklearnClassifier (checked probabilities) and the svm_grid arch."""

import numpy as np
import pytest

from weakspot.errors import ConfigError, ModelError
from weakspot.models import SKLEARN_ARCHS, CallableClassifier, SklearnClassifier, register_sklearn_arch
from weakspot.models.sklearn_archs import fit_sklearn_factory, fit_svm_grid


def test_wrong_shape_nan_and_non_probabilities_are_model_errors():
    X = np.zeros((4, 2))
    with pytest.raises(ModelError, match=r"shape \(4,\)"):
        CallableClassifier(lambda x: np.full(len(x), 0.5), n_classes=2).predict_proba(X)
    with pytest.raises(ModelError, match="NaN"):
        CallableClassifier(lambda x: np.full((len(x), 2), np.nan), n_classes=2).predict_proba(X)
    with pytest.raises(ModelError, match="sum to 1"):
        CallableClassifier(lambda x: np.full((len(x), 2), 0.9), n_classes=2).predict_proba(X)
    with pytest.raises(ModelError, match="predict_proba"):
        SklearnClassifier(object())


def test_svm_grid_picks_rbf_for_a_ring_and_is_registered():
    rng = np.random.default_rng(0)
    X = rng.uniform(-1, 1, size=(300, 2))
    y = (np.hypot(X[:, 0], X[:, 1]) < 0.6).astype(int)  # not linearly separable
    fit = SKLEARN_ARCHS.get("svm_grid")
    assert fit is fit_svm_grid
    est, info = fit(X, y, seed=0)  # defaults: kernels linear+rbf, C 0.1/1/10, gamma scale, cv 3
    assert info["arch"] == "svm_grid" and info["kernel"] == "rbf" and info["cv_accuracy"] > 0.9
    assert [type(s).__name__ for s in est.named_steps.values()] == ["StandardScaler", "SVC"]
    assert est.named_steps["svc"].probability
    assert SklearnClassifier(est).predict_proba(X).shape == (300, 2)
    with pytest.raises(ConfigError, match="kernels"):
        fit(X, y, seed=0, kernels=["poly"])
    with pytest.raises(ConfigError, match="cv"):
        fit(X, y, seed=0, cv=1)


def test_register_a_sklearn_arch_and_fit_a_factory():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(100, 3))
    y = (X[:, 0] > 0).astype(int)
    name = "_test_logreg"
    if name not in SKLEARN_ARCHS:

        @register_sklearn_arch(name)
        def _fit(X, y, *, seed, C=1.0):
            return fit_sklearn_factory("sklearn.linear_model:LogisticRegression", X, y, seed=seed)

    try:
        est, info = SKLEARN_ARCHS.get(name)(X, y, seed=0)
        assert info["kernel"] == "LogisticRegression" and (SklearnClassifier(est).predict(X) == y).mean() > 0.95
    finally:
        SKLEARN_ARCHS._items.pop(name, None)
    with pytest.raises(ConfigError, match="valid names: svm_grid"):
        SKLEARN_ARCHS.get("no_such_arch")
    with pytest.raises(ModelError, match="cannot import"):
        fit_sklearn_factory("no.such.module:thing", X, y)
