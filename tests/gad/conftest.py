import os
import warnings

import numpy as np
import pytest

os.environ.setdefault("MPLBACKEND", "Agg")
warnings.filterwarnings("ignore", category=FutureWarning)

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
KEEL_ROOT = os.path.join(REPO, "data", "external", "keel")


class LinearLogistic:
    """A known black box: p(class 1) = sigmoid(w.x + b)."""

    classes_ = np.array([0, 1])

    def __init__(self, w, b=0.0):
        self.w = np.asarray(w, dtype=np.float64)
        self.b = float(b)
        self.n_calls_ = 0
        self.n_rows_ = 0

    def predict_proba(self, X):
        self.n_calls_ += 1
        self.n_rows_ += len(X)
        z = np.asarray(X) @ self.w + self.b
        p = 1.0 / (1.0 + np.exp(-z))
        return np.column_stack([1 - p, p])


class LinearPseudo:
    """A torch pseudo-model whose logit is exactly w.x + b (the gradient direction is known)."""

    def __init__(self, w, b=0.0):
        import torch

        self.lin = torch.nn.Linear(len(w), 1)
        with torch.no_grad():
            self.lin.weight[:] = torch.as_tensor(np.asarray(w), dtype=torch.float32)[None, :]
            self.lin.bias[:] = float(b)

    def to(self, dev):
        self.lin = self.lin.to(dev)
        return self

    def logit(self, x):
        return self.lin(x).squeeze(-1)


def black_box(estimator):
    """The checked black box GAD is given: a scikit-learn-like estimator behind weakspot's SklearnClassifier."""
    from weakspot.models import SklearnClassifier

    return SklearnClassifier(estimator)


@pytest.fixture
def keel_root():
    return KEEL_ROOT
