"""weakspot.hda.generate (seeds/004 Secs. 3.3-3.4): seed selection, the two-step GA and PGD's test cases, on planted
models whose answer is known."""

import math

import numpy as np
import pytest
import torch

from weakspot.errors import ConfigError, DataError
from weakspot.hda import generate as G
from weakspot.hda.density import train_density

from .conftest import Pixel0
from .conftest import images as _images


class Coherent(torch.nn.Module):
    """Two classes by the mean of all pixels: an AE needs most pixels pushed the same way (random noise cancels)."""

    def forward(self, x):
        d = 40.0 * (x.reshape(len(x), -1).mean(1) - 0.5)
        return torch.stack([-d / 2, d / 2], 1)


# -------------------------------------------------------------------------------------------------- seed selection
def test_selected_seeds_come_from_the_planted_dense_fragile_region():
    """Three regions: A dense and near the boundary (fragile), B dense and far (robust), C near but sparse. The
    selection by density x gradient indicator must pick A's inputs."""
    g = np.random.default_rng(0)
    pat = {"A": (0.56, 0.2), "B": (0.95, 0.8), "C": (0.56, 0.55)}

    def region(name, n):
        x0, rest = pat[name]
        X = _images(n, rest, g, 0.04)
        X[:, 0, 0, 0] = x0 + 0.01 * g.standard_normal(n)
        return X

    X_train = np.concatenate([region("A", 400), region("B", 400), region("C", 12)])
    dens = train_density(
        X_train, clip=(0.0, 1.0), latent_dim=2, hidden=16, epochs=40, max_steps=1200, batch_size=32, seed=0
    )
    X_cand = np.concatenate([region("A", 40), region("B", 40), region("C", 40)])
    y_cand = (X_cand[:, 0, 0, 0] > 0.5).astype(np.int64)
    model = Pixel0(k=20.0)
    ld = dens.log_density(X_cand)
    grad = G.gradient_indicator(model, X_cand, y_cand)
    assert ld[:40].mean() > ld[80:].mean() and grad[:40].mean() > grad[40:80].mean()  # the plant is as described
    sel = G.select_seeds(ld, grad, 20)
    assert (sel < 40).mean() >= 0.8, np.bincount(sel // 40, minlength=3)
    # neither factor alone does it: density alone mixes A and B, the indicator alone mixes A and C
    by_density = np.argsort(-ld, kind="stable")[:20]
    by_grad = np.argsort(-grad, kind="stable")[:20]
    assert (by_density < 40).mean() < 0.8 and (by_grad < 40).mean() < 0.8, (
        (by_density < 40).mean(),
        (by_grad < 40).mean(),
    )


def test_select_seeds_and_allocation_contracts():
    with pytest.raises(DataError, match="NaN"):
        G.select_seeds(np.array([0.0, np.nan]), np.array([1.0, 2.0]), 1)
    n = G.allocate(np.array([0.0, 0.0, math.log(8.0)]), 30, cap=20)
    assert n.sum() == 30 and (n >= 1).all() and (n <= 20).all() and n[2] == n.max()
    n = G.allocate(np.array([0.0, 50.0]), 100, cap=20)  # one seed dominates: capped, the rest spill over
    assert n.tolist() == [20, 20]
    n = G.allocate(np.zeros(4), 2, cap=5)  # fewer cases than seeds: one each
    assert n.tolist() == [1, 1, 1, 1]


def test_separation_indicator_is_the_nearest_other_label_output():
    P = np.array([[0.9, 0.1], [0.6, 0.4]])
    P_ref = np.array([[0.8, 0.2], [0.3, 0.7], [0.5, 0.5]])
    y_ref = np.array([0, 1, 1])
    d = G.separation_indicator(P, np.array([0, 0]), P_ref, y_ref)
    np.testing.assert_allclose(d, [np.hypot(0.4, 0.4), np.hypot(0.1, 0.1)], rtol=1e-6)


def test_prediction_loss_is_positive_exactly_on_errors():
    p = torch.tensor([[0.7, 0.2, 0.1], [0.3, 0.6, 0.1], [0.5, 0.5, 0.0]])
    J = G.prediction_loss(p, torch.tensor([0, 0, 1]))
    assert J[0] < 0 and J[1] > 0 and J[2] == pytest.approx(0.0, abs=1e-6)


# ------------------------------------------------------------------------------------------------------------- GA
def _ga(model, X, y, **kw):
    kw = {"population": 16, "generations": 30, "metric": "mse", "lam": 0.0, "seed": 0, **kw}
    return G.two_step_ga(G.module_proba(model), X, y, np.full(len(X), 4), kw.pop("radius", 0.1), **kw)


def test_ga_never_leaves_the_ball_or_the_data_range():
    g = np.random.default_rng(0)
    X = _images(6, 0.5, g, 0.45)  # some pixels at 0 and 1: the range clips the ball
    X[:, 0, 0, 0] = 0.55
    y = np.ones(6, np.int64)
    seen = []
    model = Pixel0()

    def proba(x):
        seen.append(x.clone())
        return G.module_proba(model)(x)

    res = G.two_step_ga(proba, X, y, np.full(6, 5), 0.1, population=10, generations=15, metric="ssim", lam=50.0)
    allx = torch.cat(seen)
    assert float(allx.min()) >= 0.0 and float(allx.max()) <= 1.0
    k, P = 6, 10
    per_seed = allx.reshape(-1, k, P, 16)
    dist = (per_seed - torch.as_tensor(X).reshape(1, k, 1, 16)).abs().max().item()
    assert dist <= 0.1 + 1e-6
    assert np.abs(res.X_cases - X[res.seed_index]).max() <= 0.1 + 1e-6
    assert res.queries == k * P * 16


def test_same_seed_same_aes_and_another_seed_other_aes():
    g = np.random.default_rng(0)
    X = _images(5, 0.56, g, 0.05)
    y = np.ones(5, np.int64)
    a, b = _ga(Pixel0(), X, y), _ga(Pixel0(), X, y)
    assert np.array_equal(a.X_cases, b.X_cases) and np.array_equal(a.seed_index, b.seed_index)
    c = _ga(Pixel0(), X, y, seed=1)
    assert not np.array_equal(a.X_cases, c.X_cases)


def test_ga_finds_coherent_aes_that_random_search_of_the_same_budget_misses():
    """The mean-pixel model: uniform noise in the ball averages out (random search almost never flips it); the GA's
    selection accumulates the perturbation."""
    g = np.random.default_rng(0)
    X = _images(10, 0.53, g, 0.02, shape=(1, 8, 8))
    X += 0.53 - X.mean(axis=(1, 2, 3), keepdims=True)  # every seed's mean exactly 0.53: 4 sd of the noise's mean
    y = np.ones(10, np.int64)
    model = Coherent()
    res = _ga(model, X, y, radius=0.1, population=16, generations=40)
    ga_ae = (G.module_proba(model)(torch.as_tensor(res.X_cases)).argmax(1).numpy() != y[res.seed_index]).mean()
    n_q = res.queries // len(X)
    rnd = (
        torch.as_tensor(X).repeat_interleave(n_q, 0)
        + (2 * torch.rand(len(X) * n_q, 1, 8, 8, generator=torch.Generator().manual_seed(0)) - 1) * 0.1
    )
    rnd = rnd.clamp(0, 1)
    rnd_hit = (model(rnd).argmax(1).reshape(len(X), n_q) != torch.as_tensor(y)[:, None]).any(1).float().mean().item()
    assert ga_ae >= 0.9, ga_ae
    assert rnd_hit <= 0.2, rnd_hit


def test_the_second_fitness_makes_aes_closer_to_the_seed():
    """Only pixel 0 matters: with the perceptual term (MSE, lambda > 0) the GA keeps the AEs and shrinks the useless
    perturbation of the other 15 pixels, which the prediction-loss-only GA (lambda 0) leaves at random."""
    g = np.random.default_rng(0)
    X = _images(8, 0.5, g, 0.05)
    X[:, 0, 0, 0] = 0.56
    y = np.ones(8, np.int64)
    plain = _ga(Pixel0(), X, y, lam=0.0, generations=60)
    nat = _ga(Pixel0(), X, y, lam=20.0, generations=60)
    pf = G.module_proba(Pixel0())

    def stats(res):
        ae = (pf(torch.as_tensor(res.X_cases)).argmax(1).numpy() != y[res.seed_index]).mean()
        d = np.abs(res.X_cases - X[res.seed_index]).reshape(len(res.X_cases), -1)[:, 1:].mean()
        return ae, d

    (ae0, d0), (ae1, d1) = stats(plain), stats(nat)
    assert ae0 >= 0.9 and ae1 >= 0.9, (ae0, ae1)
    assert d1 < 0.6 * d0, (d0, d1)
    assert max(c["stage2"] for c in nat.extra["curve"]) == 1.0  # every seed reached the second step


def test_ga_rejects_bad_arguments():
    X = np.zeros((2, 1, 4, 4), np.float32)
    with pytest.raises(ConfigError, match="radius"):
        G.two_step_ga(G.module_proba(Pixel0()), X, np.zeros(2, np.int64), [1, 1], float("nan"))
    with pytest.raises(ConfigError, match="n_cases"):
        G.two_step_ga(G.module_proba(Pixel0()), X, np.zeros(2, np.int64), [1, 99], 0.1, population=8)
    with pytest.raises(DataError, match="NaN"):
        G.two_step_ga(G.module_proba(Pixel0()), X * np.nan, np.zeros(2, np.int64), [1, 1], 0.1)
    with pytest.raises(ConfigError, match="HDA PGD: clip"):
        G.pgd_cases(Pixel0(), X, np.zeros(2, np.int64), [1, 1], 0.1, clip=(1.0, 0.0))


def test_pgd_cases_one_random_start_per_case_inside_the_ball():
    g = np.random.default_rng(0)
    X = _images(4, 0.5, g, 0.05)
    X[:, 0, 0, 0] = 0.56
    y = np.ones(4, np.int64)
    res = G.pgd_cases(Pixel0(), X, y, [1, 2, 3, 1], 0.1, steps=10)
    assert res.seed_index.tolist() == [0, 1, 1, 2, 2, 2, 3]
    assert np.abs(res.X_cases - X[res.seed_index]).max() <= 0.1 + 1e-6
    assert (res.X_cases[:, 0, 0, 0] < 0.5).all()  # pixel 0 pushed across the boundary: every case an AE
