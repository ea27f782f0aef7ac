import numpy as np
import pytest

from weakspot.errors import DataError, ModelError
from weakspot.gad.attack import gad_attack
from weakspot.models import CallableClassifier
from weakspot.gad.distance import mae

from .conftest import LinearLogistic, LinearPseudo, black_box


def test_attack_flips_a_linear_model_at_the_analytic_distance():
    w, b, eps = np.array([2.0, -1.0, 0.5]), 0.3, 0.01
    rng = np.random.default_rng(0)
    X = rng.uniform(-1, 1, size=(300, 3))
    bb = black_box(LinearLogistic(w, b))
    margin = X @ w + b
    res = gad_attack(bb, LinearPseudo(w, b), X, step_size=eps, max_steps=2000, refine_iters=0, device="cpu")
    assert res.flipped.all()
    # each sign step moves the margin by eps * ||w||_1 towards the boundary: the flip takes ceil(|m| / (eps ||w||_1))
    l1 = np.abs(w).sum()
    expected_steps = np.floor(np.abs(margin) / (eps * l1)) + 1  # strict flip (margin crosses 0)
    assert np.abs(res.steps - expected_steps).max() <= 1
    # the L_inf distance to the boundary of a linear model is |m| / ||w||_1; the attack lands within one step of it
    d_inf = np.abs(res.x_adv - X).max(axis=1)
    assert np.all(np.abs(d_inf - np.abs(margin) / l1) <= eps + 1e-9)
    assert np.all(np.sign(res.x_adv @ w + b) != np.sign(margin))


def test_refinement_lands_on_the_boundary_and_stays_flipped():
    w, b, eps = np.array([1.0, 1.0]), 0.0, 0.05
    X = np.array([[0.3, 0.4], [-0.2, -0.5], [0.01, 0.02]])
    bb = black_box(LinearLogistic(w, b))
    res = gad_attack(bb, LinearPseudo(w, b), X, step_size=eps, refine_iters=12, device="cpu")
    m_adv = res.x_adv @ w + b
    assert np.all(bb.predict(res.x_adv)[0] != bb.predict(X)[0])  # still on the flipped side
    assert np.all(np.abs(m_adv) <= 2 * eps / 2**12 + 1e-12)
    # MAE (Eq. 3) to the partner equals the analytic |m| / ||w||_1 (all coordinates move equally here)
    np.testing.assert_allclose(mae(X, res.x_adv), np.abs(X @ w) / 2, atol=eps / 2**11)


def test_step_cap_marks_instances_that_never_flip():
    w = np.array([1.0, 0.0])
    X = np.array([[0.05, 0.0], [5.0, 0.0]])
    res = gad_attack(black_box(LinearLogistic(w)), LinearPseudo(w), X, step_size=0.01, max_steps=20, device="cpu")
    assert res.flipped.tolist() == [True, False]
    assert res.never_flipped.tolist() == [False, True] and res.steps[1] == 20


def test_attack_batches_black_box_calls_over_unflipped_rows():
    w = np.array([1.0])
    X = np.linspace(-1, 1, 101)[:, None] + 0.005
    est = LinearLogistic(w)
    res = gad_attack(black_box(est), LinearPseudo(w), X, step_size=0.01, refine_iters=0, device="cpu")
    # one call for the original predictions plus one per step, never one per instance
    assert est.n_calls_ == 1 + res.steps.max()
    assert est.n_rows_ < 101 * (1 + res.steps.max())


def test_bad_input():
    w = np.array([1.0, 1.0])
    with pytest.raises(DataError, match="infinite"):  # a missing value (NaN) is kept: tests/gad/test_missing_values.py
        gad_attack(black_box(LinearLogistic(w)), LinearPseudo(w), np.array([[np.inf, 0.0]]), device="cpu")
    bad = CallableClassifier(lambda x: np.ones((len(x), 3)) / 3, n_classes=2)
    with pytest.raises(ModelError, match=r"shape \(2, 3\), expected"):
        gad_attack(bad, LinearPseudo(w), np.zeros((2, 2)), device="cpu")
