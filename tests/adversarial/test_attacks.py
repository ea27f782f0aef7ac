"""weakspot.adversarial.attacks: FGSM, PGD and CW (seeds/002 Sec. 5.1) against known answers."""

import numpy as np
import pytest
import torch

from weakspot.errors import ConfigError, DataError
from weakspot.adversarial import attacks as A
from tests.adversarial.helpers import EPS, accuracy, attacked_digits, in_ball_and_range


@pytest.fixture(scope="module")
def digits():
    return attacked_digits()


# ------------------------------------------------------------------------------------------------------ known answers
def test_fgsm_on_a_linear_two_class_model_is_the_sign_of_the_weight_difference():
    lin = torch.nn.Linear(5, 2)
    with torch.no_grad():
        lin.weight.copy_(torch.tensor([[1.0, -2.0, 0.5, -0.1, 3.0], [-1.0, 1.0, 0.7, 0.4, 2.0]]))
        lin.bias.zero_()
    x = torch.full((2, 5), 0.5)
    y = torch.tensor([0, 1])
    out = A.fgsm(lin, x, y, eps=0.1)
    # the cross-entropy of class y grows along w_other - w_y (its input gradient is (1 - q_y) (w_other - w_y))
    d = (lin.weight[1] - lin.weight[0]).detach()
    torch.testing.assert_close(out[0], 0.5 + 0.1 * d.sign())
    torch.testing.assert_close(out[1], 0.5 - 0.1 * d.sign())


def test_cw_is_at_least_as_strong_as_fgsm_and_stays_in_the_ball(digits):
    net, X, y = digits
    X = X.copy()
    X[:, :4] = 0.01  # clipping binds here
    cw = A.batched(A.pgd, net, X, y, eps=EPS, steps=10, loss="cw", generator=torch.Generator().manual_seed(0))
    fg = A.batched(A.fgsm, net, X, y, eps=EPS)
    assert accuracy(net, cw, y) <= accuracy(net, fg, y) + 0.01
    assert accuracy(net, cw, y) < accuracy(net, X, y) - 0.2  # it does attack
    assert in_ball_and_range(cw, X, EPS) and in_ball_and_range(fg, X, EPS)
    assert (cw[:, :4] == 0.0).any()


def test_cw_margin_known_values():
    z = torch.tensor([[3.0, 1.0, 2.0], [0.0, 5.0, -1.0]])
    torch.testing.assert_close(A.cw_margin(z, torch.tensor([0, 0])), torch.tensor([1.0, -5.0]))


def test_least_likely_fgsm_moves_toward_the_target(digits):
    net, X, y = digits
    x = torch.as_tensor(X)
    with torch.no_grad():
        p0 = torch.softmax(net(x), 1)
    target = p0.argmin(1)
    adv = A.fgsm(net, x, torch.as_tensor(y), eps=0.05, target=target)
    with torch.no_grad():
        p1 = torch.softmax(net(adv), 1)
    gain = (p1.gather(1, target[:, None]) - p0.gather(1, target[:, None]))[:, 0]
    assert (gain > 0).float().mean() > 0.95 and gain.mean() > 0
    assert in_ball_and_range(adv.numpy(), X, 0.05)


# ------------------------------------------------------------------------------------------------------------ errors
def test_attack_errors(digits):
    net, X, y = digits
    bad = X[:4].copy()
    bad[2, 1] = np.nan
    with pytest.raises(DataError, match="NaN"):
        A.batched(A.pgd, net, bad, y[:4], eps=EPS)
    x, t = torch.as_tensor(X[:4]), torch.as_tensor(y[:4])
    with pytest.raises(ConfigError, match=r"fgsm: eps = -0.1: must be a finite number >= 0"):
        A.fgsm(net, x, t, eps=-0.1)
    with pytest.raises(ConfigError, match=r"pgd: loss = 'hinge': use one of ce, cw"):
        A.pgd(net, x, t, eps=EPS, loss="hinge")
    with pytest.raises(ConfigError, match=r"pgd: steps = 0: must be an integer >= 1"):
        A.pgd(net, x, t, eps=EPS, steps=0)
    with pytest.raises(ConfigError, match=r"pgd: clip = \(1, 0\)"):
        A.pgd(net, x, t, eps=EPS, clip=(1, 0))
    with pytest.raises(DataError, match="4 inputs but 3 labels"):
        A.batched(A.fgsm, net, X[:4], y[:3], eps=EPS)
