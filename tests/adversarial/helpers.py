"""Shared by the attack tests: the small digits MLP and two checks on attacked inputs."""

import numpy as np

from weakspot.adversarial import attacks as A
from tests.intrinsic.helpers import digits_net

EPS = 0.08  # on these digits (in [0, 1]) PGD-10 leaves about half the inputs correct: a non-trivial range


def attacked_digits():
    """The digits MLP and 300 held-out inputs it gets more than 90% right."""
    net, X, y = digits_net()
    X, y = X[:300], y[:300]
    assert (A.predict(net, X) == y).mean() > 0.9
    return net, X, y


def accuracy(net, X, y):
    return float((A.predict(net, X) == y).mean())


def in_ball_and_range(X_adv, X, eps, clip=(0.0, 1.0)):
    """Every attacked input within ``eps`` of its input (L-inf) and inside ``clip``."""
    return np.abs(X_adv - X).max() <= eps + 1e-6 and X_adv.min() >= clip[0] and X_adv.max() <= clip[1]
