"""weakspot.adversarial.art_attacks: IBM ART's PGD and a reduced AutoAttack, against this library's attacks."""

import subprocess
import sys

import numpy as np
import pytest
import torch

from weakspot.errors import ConfigError, DataError
from weakspot.adversarial import attacks as A
from tests.adversarial.helpers import EPS, accuracy, attacked_digits, in_ball_and_range


@pytest.fixture(scope="module")
def digits():
    return attacked_digits()


def test_our_pgd_matches_art_pgd(digits):
    """Same model, inputs, eps, steps and step size, no random start: the same robust accuracy (within 1 point)."""
    from weakspot.adversarial.art_attacks import art_pgd

    net, X, y = digits
    ours = A.batched(A.pgd, net, X, y, eps=EPS, steps=10, step_size=0.02, random_start=False)
    art = art_pgd(net, X, y, eps=EPS, steps=10, step_size=0.02, n_classes=10)
    acc_ours, acc_art = accuracy(net, ours, y), accuracy(net, art, y)
    assert 0.2 <= acc_ours <= 0.8, acc_ours
    assert abs(acc_ours - acc_art) <= 0.01, (acc_ours, acc_art)
    assert in_ball_and_range(ours, X, EPS) and in_ball_and_range(art, X, EPS)
    assert np.abs(ours - art).max() < 1e-5  # the same walk, up to float rounding


def test_art_autoattack_is_stronger_than_pgd_deterministic_and_leaves_the_global_rng(digits):
    from weakspot.adversarial.art_attacks import art_autoattack

    net, X, y = digits
    X, y = X[:150], y[:150]
    np.random.seed(123)
    torch.manual_seed(123)
    np_state, torch_state = np.random.get_state()[1].copy(), torch.get_rng_state().clone()
    a = art_autoattack(net, X, y, eps=EPS, n_classes=10, iters=10, seed=4)
    assert np.array_equal(np.random.get_state()[1], np_state) and torch.equal(torch.get_rng_state(), torch_state)
    b = art_autoattack(net, X, y, eps=EPS, n_classes=10, iters=10, seed=4)
    assert np.array_equal(a, b)
    pgd = A.batched(A.pgd, net, X, y, eps=EPS, steps=10, generator=torch.Generator().manual_seed(0))
    assert accuracy(net, a, y) <= accuracy(net, pgd, y) + 0.02
    assert accuracy(net, a, y) < accuracy(net, X, y) - 0.2
    assert in_ball_and_range(a, X, EPS)


def test_art_wrappers_reject_bad_settings(digits):
    from weakspot.adversarial.art_attacks import art_autoattack, art_pgd

    net, X, y = digits
    with pytest.raises(ConfigError, match="apgd-ce, apgd-dlr"):
        art_autoattack(net, X[:4], y[:4], eps=EPS, n_classes=10, attacks=("square",))
    with pytest.raises(ConfigError, match="n_classes >= 3"):
        art_autoattack(net, X[:4], y[:4] % 2, eps=EPS, n_classes=2)
    with pytest.raises(ConfigError, match=r"art_pgd: eps = 0.0: must be a finite number > 0"):
        art_pgd(net, X[:4], y[:4], eps=0.0, n_classes=10)
    with pytest.raises(ConfigError, match=r"art_pgd: steps = 0: must be an integer >= 1"):
        art_pgd(net, X[:4], y[:4], eps=EPS, n_classes=10, steps=0)
    with pytest.raises(ConfigError, match=r"art_autoattack: n_classes = 1: must be an integer >= 2"):
        art_autoattack(net, X[:4], y[:4] * 0, eps=EPS, n_classes=1, attacks=("apgd-ce",))
    with pytest.raises(ConfigError, match=r"art_autoattack: iters = 0: must be an integer >= 1"):
        art_autoattack(net, X[:4], y[:4], eps=EPS, n_classes=10, iters=0)
    with pytest.raises(ConfigError, match=r"art_pgd: clip = \(0.0, nan\)"):
        art_pgd(net, X[:4], y[:4], eps=EPS, n_classes=10, clip=(0.0, float("nan")))
    with pytest.raises(DataError, match="outside"):
        art_pgd(net, X[:4], y[:4] + 10, eps=EPS, n_classes=10)
    bad = X[:4].copy()
    bad[0, 0] = np.nan
    with pytest.raises(DataError, match="NaN"):
        art_pgd(net, bad, y[:4], eps=EPS, n_classes=10)


def test_importing_weakspot_does_not_import_art():
    code = (
        "import sys, weakspot, weakspot.adversarial.attacks, weakspot.intrinsic.psi, "
        "weakspot.adversarial.art_attacks; sys.exit('art' in sys.modules)"
    )
    assert subprocess.run([sys.executable, "-c", code], timeout=120).returncode == 0
