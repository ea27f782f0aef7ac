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


@pytest.fixture(scope="session")
def target():
    """(clf, split, info): the small phoneme target of :mod:`tests.gad.helpers`, split seed 0."""
    from tests.gad.helpers import phoneme_target

    return phoneme_target(0)


@pytest.fixture(scope="session")
def outcome(target):
    """The small protocol on the small phoneme target (split seed 0, the audited run)."""
    from tests.gad.helpers import small_params
    from weakspot.gad.protocol import dataset_seed, run_target

    clf, split, info = target
    return run_target(
        clf, split, small_params(), class_index=1, device="cpu", seed=dataset_seed(11, "phoneme"), model_info=info
    )


@pytest.fixture(scope="session")
def second_seed():
    """The same protocol on split seed 1: another biased split and another SVM."""
    from tests.gad.helpers import phoneme_target, small_params
    from weakspot.gad.protocol import dataset_seed, run_target

    clf, split, info = phoneme_target(1)
    return run_target(
        clf,
        split,
        small_params(),
        class_index=1,
        device="cpu",
        seed=dataset_seed(11, "phoneme", 1),
        model_info=info,
        split_seed=1,
    )


@pytest.fixture(scope="session")
def noise_outcome():
    """The protocol on a black box no pseudo-model can learn: GAD fails the R^2 gate."""
    from tests.gad.helpers import NOISE, noise_black_box, noise_split, small_params
    from weakspot.gad.protocol import run_target

    return run_target(noise_black_box(), noise_split(), small_params(**NOISE), class_index=1, device="cpu", seed=5)
