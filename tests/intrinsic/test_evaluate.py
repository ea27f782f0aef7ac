"""weakspot.intrinsic.evaluate: one model's psi, per-class psi, worst neighbours and accuracy under the reference
attacks, and our PGD against IBM ART's."""

import numpy as np
import pytest

from weakspot.errors import ModelError
from weakspot.intrinsic.evaluate import ATTACK_KEYS, ascent_kwargs, attack_accuracies, evaluate_model, pgd_vs_art
from weakspot.intrinsic.psi import max_kl, psi
from tests.intrinsic.helpers import digits_net, small_params


@pytest.fixture(scope="module")
def digits():
    net, X, y = digits_net()
    return net, X[:120], y[:120]


def test_a_model_is_measured_as_the_paper_measures_it(digits):
    net, X, y = digits
    p = small_params(n_attack=80)
    e = evaluate_model("none", "the model", net, X, y, 10, eps=0.1, clip=(0.0, 1.0), params=p)
    assert (
        e.kl.shape == (120,) and e.psi == pytest.approx(psi(e.kl)) and e.psi_softmax == pytest.approx(psi(e.kl_softmax))
    )
    assert e.n_attacked == 80 and set(e.acc) == {"clean", *ATTACK_KEYS}
    assert e.acc["clean"] == pytest.approx(np.mean(e.pred[:80] == y[:80]))
    # PGD and CW search what FGSM's one step searches, and more: no higher accuracy (two inputs' slack)
    assert e.acc["pgd30"] <= e.acc["fgsm"] + 2 / 80 and e.acc["cw30"] <= e.acc["clean"] - 0.1
    # per-class psi is 1 / the class's mean KL
    c = int(y[0])
    assert e.psi_class[c] == pytest.approx(1.0 / e.kl[y == c].mean())
    assert np.abs(e.x_worst - X).max() <= 0.1 + 1e-6 and (e.conf_worst <= 1).all()
    assert set(e.seconds) == {"psi", "psi_softmax", *ATTACK_KEYS}


def test_a_pool_that_starts_with_the_inputs_is_reused_as_it_is(digits):
    """The audited model's KLs come from the larger Fig. 6 pool; its prefix is what a fresh ascent on the inputs gives
    (the same random starts, batch for batch)."""
    net, X, y = digits
    p = small_params(n_attack=20)
    pool = max_kl(
        net, np.concatenate([X, X[:60]]), normalisation="invariant", **ascent_kwargs(p, 0.1, (0.0, 1.0), "cpu")
    )
    reused = evaluate_model(
        "none", "", net, X, y, 10, eps=0.1, clip=(0.0, 1.0), params=p, kl_pool=(pool.kl, pool.x_worst)
    )
    fresh = evaluate_model("none", "", net, X, y, 10, eps=0.1, clip=(0.0, 1.0), params=p)
    assert np.array_equal(reused.kl, fresh.kl) and np.array_equal(reused.x_worst, fresh.x_worst)
    assert reused.acc == fresh.acc


def test_an_attack_that_leaves_the_ball_is_an_error(digits, monkeypatch):
    from weakspot.adversarial import attacks as A

    net, X, y = digits
    monkeypatch.setattr(A, "fgsm", lambda module, x, y, *, eps, clip: x + 2 * eps)
    with pytest.raises(ModelError, match="none: attack fgsm left the eps-ball"):
        attack_accuracies("none", net, X[:10], y[:10], 10, eps=0.1, clip=(0.0, 1.0), params=small_params())


def test_attacks_report_progress_and_are_seeded(digits):
    net, X, y = digits
    calls = []
    a, _ = attack_accuracies(
        "m",
        net,
        X[:40],
        y[:40],
        10,
        eps=0.1,
        clip=(0.0, 1.0),
        params=small_params(),
        progress=lambda *c: calls.append(c),
    )
    b, _ = attack_accuracies("m", net, X[:40], y[:40], 10, eps=0.1, clip=(0.0, 1.0), params=small_params())
    assert a == b and [c[1:] for c in calls] == [(1, 3), (2, 3), (3, 3)]
    assert calls[0][0] == "m: attacks (fgsm)"


def test_our_pgd_against_art_agrees(digits):
    net, X, y = digits
    r = pgd_vs_art(net, X[:60], y[:60], 10, eps=0.08, clip=(0.0, 1.0), steps=10, batch_size=60)
    assert set(r) == {"ours", "art", "max_abs_diff"}
    assert abs(r["ours"] - r["art"]) <= 1 / 60 and r["max_abs_diff"] < 1e-5
