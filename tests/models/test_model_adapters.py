"""weakspot.models adapters and check_probabilities: each bad output is caught; good ones pass unchanged."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from weakspot.errors import ConfigError, ModelError
from weakspot.models import (
    CallableClassifier,
    Classifier,
    SklearnClassifier,
    TorchClassifier,
    check_probabilities,
    is_white_box,
)


# ------------------------------------------------------------------------------------------- check_probabilities


def test_check_probabilities_accepts_valid_and_torch():
    p = np.array([[0.2, 0.8], [1.0, 0.0]])
    assert np.array_equal(check_probabilities(p, 2, 2, "m"), p)
    out = check_probabilities(torch.tensor(p, dtype=torch.float32), 2, 2, "m")
    assert out.dtype == np.float64 and out.shape == (2, 2)
    # within the 1e-4 tolerance
    check_probabilities(np.array([[0.5, 0.50009]]), 1, 2, "m")


@pytest.mark.parametrize(
    "p, pattern",
    [
        (np.full((3, 3), 1 / 3), r"shape \(3, 3\), expected \(n, k\) = \(3, 2\)"),
        (np.full((2, 2), 0.5), r"shape \(2, 2\), expected \(n, k\) = \(3, 2\)"),
        (np.full(3, 0.5), r"shape \(3,\)"),
        (np.array([[0.5, 0.5], [np.nan, 1.0], [0.5, 0.5]]), r"NaN in 1 of 3 rows \(first at row 1\)"),
        (np.array([[0.5, 0.5], [np.inf, 0.0], [0.5, 0.5]]), r"inf in 1 of 3 rows"),
        (np.array([[1.2, -0.2], [0.5, 0.5], [0.5, 0.5]]), r"negative values in 1 of 3 rows"),
        (np.array([[0.5, 0.5], [0.5, 0.5], [0.7, 0.7]]), r"sum to 1 .*1 of 3 rows.*row 2 sums to 1\.4"),
        (np.array([[2.0, -1.0]] * 3) + 5, r"sum to 1"),
    ],
)
def test_check_probabilities_catches_each_bad_output(p, pattern):
    with pytest.raises(ModelError, match=pattern) as err:
        check_probabilities(p, 3, 2, "MyModel")
    assert "MyModel" in str(err.value)


# ------------------------------------------------------------------------------------------- torch


def _linear(seed=0, d=4, k=3):
    torch.manual_seed(seed)
    return torch.nn.Linear(d, k)


def test_torch_classifier_matches_softmax_and_batches():
    lin = _linear()
    x = np.random.default_rng(0).normal(size=(37, 4)).astype(np.float32)
    clf = TorchClassifier(lin, n_classes=3, device="cpu", batch_size=8)
    expected = torch.softmax(lin(torch.from_numpy(x)), 1).detach().numpy()
    assert np.allclose(clf.predict_proba(x), expected, atol=1e-6)
    assert isinstance(clf, Classifier) and is_white_box(clf)
    assert clf.predict_proba(x[:0]).shape == (0, 3)


def test_torch_input_gradient_matches_analytic_linear_softmax():
    # for logits W x + b, d(-log p_t)/dx = W^T (p - e_t)
    lin = _linear()
    x = np.random.default_rng(1).normal(size=(10, 4)).astype(np.float32)
    t = np.arange(10) % 3
    clf = TorchClassifier(lin, n_classes=3, device="cpu", batch_size=4)
    p = clf.predict_proba(x)
    onehot = np.eye(3)[t]
    W = lin.weight.detach().numpy().astype(np.float64)
    expected = (p - onehot) @ W
    g = clf.input_gradient(x, t)
    assert g.shape == x.shape and np.allclose(g, expected, atol=1e-5)
    assert np.allclose(clf.input_gradient(x, 0), (p - np.eye(3)[0]) @ W, atol=1e-5)
    with pytest.raises(ModelError, match="target"):
        clf.input_gradient(x, 5)


def test_torch_probs_outputs_and_logits():
    class Probs(torch.nn.Module):
        def forward(self, x):
            return torch.softmax(x[:, :3] * 2.0, dim=1)

    x = np.random.default_rng(2).normal(size=(6, 5)).astype(np.float32)
    clf = TorchClassifier(Probs(), n_classes=3, device="cpu", outputs="probs")
    ref = torch.softmax(torch.from_numpy(x[:, :3]) * 2.0, 1).numpy()
    assert np.allclose(clf.predict_proba(x), ref, atol=1e-6)
    # log p are logits up to a per-row constant: their softmax gives p back
    assert np.allclose(torch.softmax(clf.logits(torch.from_numpy(x)), 1).detach().numpy(), ref, atol=1e-6)


def test_torch_wrong_output_shape_and_nan_are_model_errors():
    x = np.zeros((5, 4), np.float32)
    with pytest.raises(ModelError, match=r"shape \(5, 3\), expected \(n, k\) = \(5, 2\)"):
        TorchClassifier(_linear(), n_classes=2, device="cpu").predict_proba(x)

    class NaNNet(torch.nn.Module):
        def forward(self, x):
            return x[:, :2] * float("nan")

    with pytest.raises(ModelError, match="NaN"):
        TorchClassifier(NaNNet(), n_classes=2, device="cpu").predict_proba(x)

    class NotProbs(torch.nn.Module):
        def forward(self, x):
            return x[:, :2] + 3.0

    with pytest.raises(ModelError, match="sum to 1"):
        TorchClassifier(NotProbs(), n_classes=2, device="cpu", outputs="probs").predict_proba(x)
    with pytest.raises(ConfigError, match="outputs"):
        TorchClassifier(_linear(), n_classes=3, device="cpu", outputs="scores")
    with pytest.raises(ModelError, match="torch.nn.Module"):
        TorchClassifier(lambda x: x, n_classes=3, device="cpu")


# ------------------------------------------------------------------------------------------- sklearn, callable


def test_sklearn_adapter_flattens_and_matches_estimator():
    from sklearn.linear_model import LogisticRegression

    rng = np.random.default_rng(0)
    X = rng.normal(size=(60, 1, 2, 2)).astype(np.float32)
    y = (X.reshape(60, -1).sum(1) > 0).astype(int)
    est = LogisticRegression().fit(X.reshape(60, -1), y)
    clf = SklearnClassifier(est)
    assert clf.n_classes == 2 and not is_white_box(clf) and isinstance(clf, Classifier)
    assert np.allclose(clf.predict_proba(X), est.predict_proba(X.reshape(60, -1)))


def test_sklearn_adapter_places_missing_classes():
    from sklearn.linear_model import LogisticRegression

    X = np.array([[0.0], [1.0], [2.0], [3.0]])
    est = LogisticRegression().fit(X, [0, 0, 2, 2])  # class 1 never seen
    clf = SklearnClassifier(est, n_classes=3)
    p = clf.predict_proba(X)
    assert p.shape == (4, 3) and np.all(p[:, 1] == 0)
    assert np.allclose(p[:, [0, 2]], est.predict_proba(X))
    with pytest.raises(ModelError, match="cannot be mapped"):
        SklearnClassifier(est, n_classes=2)


def test_sklearn_adapter_refuses_unfitted_and_no_proba():
    from sklearn.linear_model import LogisticRegression
    from sklearn.svm import SVC

    with pytest.raises(ModelError, match="not fitted"):
        SklearnClassifier(LogisticRegression())
    with pytest.raises(ModelError, match="probability=True"):
        SklearnClassifier(SVC())


def test_callable_adapter_checks_outputs():
    def uniform(x):
        return np.full((len(x), 4), 0.25)

    clf = CallableClassifier(uniform, n_classes=4)
    assert np.allclose(clf.predict_proba(np.zeros((3, 2))), 0.25)
    assert clf.predict(np.zeros((2, 2))).tolist() == [0, 0]
    with pytest.raises(
        ModelError, match=r"CallableClassifier\(uniform\).*shape \(3, 4\), expected \(n, k\) = \(3, 2\)"
    ):
        CallableClassifier(uniform, n_classes=2).predict_proba(np.zeros((3, 2)))
    torch_fn = CallableClassifier(lambda x: torch.full((len(x), 2), 0.5), n_classes=2)
    assert torch_fn.predict_proba(np.zeros((2, 1))).shape == (2, 2)
    with pytest.raises(ModelError, match="callable"):
        CallableClassifier("not a function", n_classes=2)
