"""What the GAD protocol, report and figures tests share: a small protocol, a small phoneme target, a black box no
pseudo-model can learn."""

import numpy as np

from weakspot.gad.config import GadParams

#: the Sec. V-C protocol scaled down to a few seconds (3 pools of 60, 10 queries)
SMALL = dict(
    design_points=3000,
    epochs=12,
    hidden_units=32,
    batch_size=128,
    replicates=3,
    pool_size=60,
    budget=10,
    step_size=0.01,
    max_steps=200,
    refine_iters=4,
    seed=11,
)


def small_params(**over) -> GadParams:
    return GadParams(**{**SMALL, **over})


def phoneme_target(split_seed: int = 0):
    """A small biased phoneme split (the paper's bias) and an RBF SVM black box trained on it: (clf, split, info)."""
    from weakspot.gad.datasets import make_preset_split
    from weakspot.gad.protocol import dataset_seed
    from weakspot.models import SKLEARN_ARCHS, SklearnClassifier

    seed = dataset_seed(11, "phoneme", split_seed)
    split = make_preset_split("phoneme", seed=seed, n_train=600, n_test=700)
    est, info = SKLEARN_ARCHS.get("svm_grid")(split.X_train, split.y_train, seed=seed, kernels=["rbf"], C=[1.0], cv=2)
    return SklearnClassifier(est, n_classes=2), split, info


def noise_black_box():
    """A black box whose confidence is a hash of its input: deterministic, but no pseudo-model can learn it."""
    from weakspot.models import CallableClassifier

    w = np.array([12.9898, 78.233, 37.719])

    def fn(x):
        v = np.sin(np.asarray(x, dtype=np.float64) @ w) * 43758.5453
        p = v - np.floor(v)
        return np.column_stack([1 - p, p])

    return CallableClassifier(fn, n_classes=2)


def noise_split():
    from weakspot.gad.datasets import Split

    rng = np.random.default_rng(1)
    X = rng.uniform(-1, 1, size=(600, 3))
    y = rng.integers(0, 2, 600)
    return Split(name="noise", X_train=X[:0], y_train=y[:0], X_test=X, y_test=y, feature_names=["a", "b", "c"])


#: the noise target's protocol: fewer design points and epochs (the gate fails whatever the budget)
NOISE = dict(design_points=2000, epochs=4)
