"""AMLS (Webb et al., ICLR 2019) against known answers: a one-coordinate property, an empty set, a linear model.

Tolerances. With exact resampling, AMLS's log-estimate has a standard deviation of about ``sqrt(|log P| / N)``
(``N`` particles; Guyader et al. 2011); with 10 MH steps per level we measured ~1.1x that over 100 seeds on the
known-answer problem below (and a mean error within +-0.06). Each run is allowed ``4 * sqrt(|log P| / N) + 0.2``
(about 3.5 measured standard deviations plus slack for MH bias), and the mean over three seeds ``3 *
sqrt(|log P| / N) / sqrt(3) + 0.1``, which a bias of a fraction of a standard deviation would already break.
"""

import math
from fractions import Fraction

import numpy as np
import pytest
import torch

from weakspot.errors import ConfigError, DataError, ModelError
from weakspot.hda.robustness import (
    AMLSResult,
    amls_log_prob,
    misclassification_score,
    monte_carlo_log_prob,
)

SEEDS = (0, 1, 2)


def _sd(p, particles):
    return math.sqrt(abs(math.log(p)) / particles)


def _assert_close_over_seeds(estimates, p_true, particles):
    """``estimates``: (seeds, balls) log-estimates; ``p_true`` (balls,). The bounds of the module docstring."""
    est = np.asarray(estimates)
    for j, p in enumerate(p_true):
        sd = _sd(p, particles)
        err = est[:, j] - math.log(p)
        assert np.all(np.abs(err) <= 4 * sd + 0.2), (p, err)
        assert abs(err.mean()) <= 3 * sd / math.sqrt(len(err)) + 0.1, (p, err)


# ------------------------------------------------------------------------------------------------- known answer

R = 0.5
P_TRUE = np.array([1.0, 0.3, 1e-2, 1e-4, 1e-8])
CENTRES = np.array([0.0, 1.0, -2.0, 3.0, 0.5])


def _one_coordinate_problem(p_true=P_TRUE, centres=CENTRES, dim=8):
    """s_i(x') = x'_0 - t_i in the full cube (clip far away): P_i = (c_i + r - t_i) / (2r) exactly."""
    t = torch.tensor(centres + R - 2 * R * p_true, dtype=torch.float64)
    x = torch.zeros(len(p_true), dim, dtype=torch.float64)
    x[:, 0] = torch.tensor(centres, dtype=torch.float64)
    x[:, 1:] = torch.linspace(-1, 1, dim - 1, dtype=torch.float64)

    def score(xb, idx):
        return xb[:, 0] - t[idx]

    return score, x


def test_known_answer_from_1_to_1e_minus_8_in_one_call():
    score, x = _one_coordinate_problem()
    runs = [amls_log_prob(score, x, R, clip=(-1e6, 1e6), particles=64, seed=s) for s in SEEDS]
    for res in runs:
        assert isinstance(res, AMLSResult)
        assert res.log_p.dtype == np.float64 and res.log_p.shape == (5,)
        assert res.log_p[0] == 0.0 and res.levels[0] == 0  # P = 1: every particle violates at once
        assert not res.terminated.any()
        assert np.all(res.levels[1:] > 0) and np.all(np.diff(res.levels) > 0)  # rarer -> more levels
        assert (res.particles, res.mh_steps, res.rho) == (64, 10, 0.1)
        # the proposal width adapts to the shrinking level sets: ~the 1e-8 interval's share of the box at the end
        assert res.width[0] == 0.1 and res.width[4] < 1e-5
        # queries: N initial draws per ball plus at most N * mh_steps per level
        assert 5 * 64 < res.queries <= 5 * 64 + res.levels.sum() * 64 * 10
    _assert_close_over_seeds([r.log_p for r in runs], P_TRUE, 64)


def test_staircase_score_ties_are_killed_together():
    # s = floor(4 u) - 3 with u = (x'_0 - lo) / (hi - lo): plateaus, P = 1/4 exactly. Each level sits on a plateau and
    # kills every particle tied with it, so the survival fractions are ~3/4, 2/3, 1/2, not 1 - floor(rho N) / N.
    x = torch.zeros(1, 3, dtype=torch.float64)

    def score(xb, idx):
        return torch.floor(4 * (xb[:, 0] + R) / (2 * R)) - 3

    runs = [amls_log_prob(score, x, R, clip=(-9.0, 9.0), particles=64, seed=s) for s in SEEDS]
    assert all(r.levels[0] == 3 for r in runs)  # one level per plateau below 0
    _assert_close_over_seeds([r.log_p for r in runs], [0.25], 64)


def test_a_ball_done_at_the_first_level_reports_the_violating_fraction_of_its_first_draws():
    score, x = _one_coordinate_problem(p_true=np.array([0.97]), centres=np.array([0.0]))
    first = []

    def spy(xb, idx):
        s = score(xb, idx)
        if not first:
            first.append(s.clone())
        return s

    fractions = []
    for seed in range(4):
        first.clear()
        res = amls_log_prob(spy, x, R, clip=(-9.0, 9.0), particles=64, seed=seed)
        if res.levels[0] == 0:  # >= 59 of the 64 first draws violated: no level below 0 was needed
            hits = int((first[0] >= 0).sum())
            assert res.log_p[0] == math.log(hits) - math.log(64)
            fractions.append(hits / 64)
    assert len(fractions) >= 2 and min(fractions) < 1.0  # (0.97^64 = 0.14: most runs have some non-violating draw)


def test_empty_violation_set_returns_the_floor_terminated():
    # t beyond the box: s < 0 everywhere, but the score still increases towards the edge, so levels keep rising
    score, x = _one_coordinate_problem(p_true=np.array([0.5]), centres=np.array([0.0]))
    t_far = torch.tensor([R + 0.25], dtype=torch.float64)
    res = amls_log_prob(
        lambda xb, idx: xb[:, 0] - t_far[idx], x, R, clip=(-9.0, 9.0), particles=32, mh_steps=4, log_p_min=-15.0, seed=0
    )
    assert res.log_p[0] == -15.0 and res.terminated[0]
    # it climbed level by level: at most 15 / -log(29/32) = 152 levels, fewer only where resampled copies that never
    # moved tie at a level and are killed together
    assert 120 <= res.levels[0] <= 153
    # a flat score: every particle ties at the first level -> nothing survives -> the floor at once, no MH queries
    flat = amls_log_prob(
        lambda xb, idx: torch.full((len(xb),), -1.0), x, R, clip=(-9.0, 9.0), particles=16, log_p_min=-7.0
    )
    assert flat.log_p[0] == -7.0 and flat.terminated[0] and flat.levels[0] == 0 and flat.queries == 16


def test_max_levels_returns_the_running_upper_bound_flagged():
    score, x = _one_coordinate_problem(p_true=np.array([1e-4, 1.0]), centres=np.array([0.0, 0.0]))
    calls = []
    res = amls_log_prob(
        score,
        x,
        R,
        clip=(-9.0, 9.0),
        particles=64,
        max_levels=5,
        seed=3,
        progress=lambda what, done, total: calls.append((what, done, total)),
    )
    assert calls[0][1:] == (1, 2) and calls[-1][1:] == (2, 2) and len(calls) == 6  # ball 1 done at level 1
    # continuous scores, no ties: each level keeps exactly 64 - floor(0.1 * 64) = 58 particles
    assert res.levels[0] == 5 and res.terminated[0]
    assert res.log_p[0] == pytest.approx(5 * math.log(58 / 64), abs=1e-12)
    assert res.log_p[0] > math.log(1e-4)
    assert res.log_p[1] == 0.0 and not res.terminated[1]


# ------------------------------------------------------------------------------------------------- data range


def test_every_evaluated_particle_stays_inside_the_clipped_box():
    g = torch.Generator().manual_seed(0)
    x = torch.rand(3, 2, 3, generator=g) * 0.05  # near the lower edge of the data range
    x[2] = 0.97  # and one near the upper edge
    radius = 0.1
    lo = torch.clamp(x - radius, min=0.0)
    hi = torch.clamp(x + radius, max=1.0)
    seen = []

    def score(xb, idx):
        seen.append((xb.clone(), idx.clone()))
        return xb.reshape(len(xb), -1).sum(1) - (lo + 0.93 * (hi - lo)).reshape(3, -1).sum(1)[idx]

    res = amls_log_prob(score, x, radius, clip=(0.0, 1.0), particles=32, mh_steps=5, seed=1, batch=50)
    assert np.all(res.levels > 5)  # a rare-ish event: many MH moves were made
    total = 0
    for xb, idx in seen:
        assert xb.shape[1:] == (2, 3) and len(xb) <= 50
        assert torch.all(xb >= lo[idx]) and torch.all(xb <= hi[idx])
        assert torch.all(xb >= 0.0)
        total += len(xb)
    assert total == res.queries
    # the clipped box really is clipped: some particle came within 1% of the data range's edge 0
    assert min(float(xb.min()) for xb, _ in seen) < 0.01 * 0.1


# ------------------------------------------------------------------------------------------------- Monte Carlo


def test_monte_carlo_agrees_with_amls_near_p_0_3():
    def score(xb, idx):  # a curved property in 4-d
        return torch.sin(3 * xb[:, 0]) + xb[:, 1] ** 2 - 1.2 + 0.1 * idx.to(xb.dtype)

    x = torch.full((2, 4), 0.5, dtype=torch.float64)
    mc = monte_carlo_log_prob(score, x, 0.5, clip=(0.0, 1.0), samples=40000, seed=0, batch=6000)
    p_mc = np.exp(mc.log_p)
    assert np.all((p_mc > 0.2) & (p_mc < 0.45)) and not mc.zero_hits.any()
    assert mc.queries == 80000 and mc.hits.dtype == np.int64
    amls = amls_log_prob(score, x, 0.5, clip=(0.0, 1.0), particles=256, seed=0)
    sd = np.sqrt(np.abs(np.log(p_mc)) / 256 + (1 - p_mc) / (p_mc * 40000))
    assert np.all(np.abs(amls.log_p - mc.log_p) <= 4 * sd + 0.05), (amls.log_p, mc.log_p)


def test_monte_carlo_flags_zero_hits():
    x = torch.zeros(1, 3)
    mc = monte_carlo_log_prob(lambda xb, idx: -torch.ones(len(xb)), x, 0.1, samples=100, seed=0)
    assert mc.zero_hits[0] and mc.hits[0] == 0 and mc.log_p[0] == pytest.approx(math.log(0.005))


# ------------------------------------------------------------------------------------------------- determinism


def test_same_seed_identical_other_seed_different_batch_irrelevant():
    score, x = _one_coordinate_problem(p_true=np.array([1e-4, 0.3]), centres=np.array([0.0, 0.0]))
    kw = dict(clip=(-9.0, 9.0), particles=32, mh_steps=4)
    a = amls_log_prob(score, x, R, seed=5, **kw)
    b = amls_log_prob(score, x, R, seed=5, **kw)
    c = amls_log_prob(score, x, R, seed=6, **kw)
    d = amls_log_prob(score, x, R, seed=5, batch=7, **kw)
    for other in (b, d):
        assert a.log_p.tobytes() == other.log_p.tobytes()
        np.testing.assert_array_equal(a.levels, other.levels)
        np.testing.assert_array_equal(a.width, other.width)
        assert a.queries == other.queries
    assert a.log_p[0] != c.log_p[0]
    m1 = monte_carlo_log_prob(score, x, R, clip=(-9.0, 9.0), samples=500, seed=2)
    m2 = monte_carlo_log_prob(score, x, R, clip=(-9.0, 9.0), samples=500, seed=2)
    np.testing.assert_array_equal(m1.hits, m2.hits)


# ------------------------------------------------------------------------------------------------- a real model


def _p_linear(a, b, lo, hi):
    """Exact Pr[a.x + b >= 0], x ~ Uniform(prod [lo_j, hi_j]): the CDF of a weighted sum of uniforms (rational)."""
    c = [Fraction(float(aj)) * (Fraction(float(h)) - Fraction(float(lw))) for aj, lw, h in zip(a, lo, hi)]
    # a.x + b = b + a.lo + sum_j c_j U_j; flip negative c_j (U -> 1 - U) so all weights are positive
    shift = Fraction(float(b)) + sum(Fraction(float(aj)) * Fraction(float(lw)) for aj, lw in zip(a, lo))
    shift += sum(cj for cj in c if cj < 0)
    w = [abs(cj) for cj in c if cj != 0]
    d = len(w)
    # Pr[sum w U >= -shift] = Pr[sum w (1 - U) <= sum w + shift] = F(sum w + shift), the lower CDF, few terms
    s = sum(w) + shift
    if s <= 0:
        return 0.0
    if s >= sum(w):
        return 1.0
    w.sort()
    total = Fraction(0)
    stack = [(0, s, 1)]  # inclusion-exclusion over the subsets with sum < s only (weights sorted: prune early)
    while stack:
        start, v, sign = stack.pop()
        total += sign * v**d
        for j in range(start, d):
            if v - w[j] <= 0:
                break
            stack.append((j + 1, v - w[j], -sign))
    return float(total / (math.factorial(d) * math.prod(w)))


def test_linear_two_class_model_matches_the_exact_probability():
    torch.manual_seed(0)
    model = torch.nn.Linear(10, 2).double()
    with torch.no_grad():
        model.weight.copy_(torch.randn(2, 10, dtype=torch.float64))
        model.bias.copy_(torch.tensor([0.0, -1.9], dtype=torch.float64))
        a = (model.weight[1] - model.weight[0]).numpy()
        b = float(model.bias[1] - model.bias[0])  # z1 - z0 = a.x + b
    radius = 0.1
    rng = np.random.default_rng(0)
    base = rng.uniform(0.35, 0.65, size=(3, 10))
    base[1, :5] = 0.03  # ball 1 is cut by the data range on half of its coordinates
    labels = torch.tensor([0, 1, 0])
    targets = [1e-2, 1e-2, 2e-3]

    def p_of(i, shift):  # move ball i along +-a (free coordinates only) to reach its target probability
        direction = np.sign(a) * (1 if labels[i] == 1 else -1)
        if i == 1:
            direction[:5] = 0
        xi = np.clip(base[i] + shift * direction * 0.1, 0.0, 1.0)  # monotone in shift, clipped or not
        lo, hi = np.maximum(xi - radius, 0.0), np.minimum(xi + radius, 1.0)
        sign = -1.0 if labels[i] == 0 else 1.0  # violation: the other class wins
        return _p_linear(-sign * a, -sign * b, lo, hi), xi

    x, p_true = np.zeros((3, 10)), np.zeros(3)
    for i, target in enumerate(targets):
        lo_s, hi_s = -8.0, 8.0  # P decreases in the shift
        for _ in range(40):
            mid = (lo_s + hi_s) / 2
            lo_s, hi_s = (mid, hi_s) if p_of(i, mid)[0] > target else (lo_s, mid)
        p_true[i], x[i] = p_of(i, lo_s)
    assert np.all((x >= 0) & (x <= 1))
    np.testing.assert_allclose(p_true, targets, rtol=1e-3)

    score = misclassification_score(model, labels)
    xt = torch.tensor(x)
    # the closed form against 10^6 Monte-Carlo samples per ball (sd of P: ~1e-4 at P = 1e-2)
    mc = monte_carlo_log_prob(score, xt, radius, samples=10**6, seed=0, batch=2**17)
    p_mc = mc.hits / mc.samples
    assert np.all(np.abs(p_mc - p_true) <= 5 * np.sqrt(p_true / 1e6)), (p_mc, p_true)

    runs = [amls_log_prob(score, xt, radius, particles=128, seed=s).log_p for s in SEEDS]
    _assert_close_over_seeds(runs, p_true, 128)

    # the black-box reading (probabilities -> their logs) scores the same, up to rounding
    proba = misclassification_score(lambda xb: torch.softmax(model(xb), dim=1), labels, from_logits=False)
    xs = torch.rand(200, 10, dtype=torch.float64)
    idx = torch.randint(0, 3, (200,))
    np.testing.assert_allclose(proba(xs, idx).numpy(), score(xs, idx).numpy(), atol=1e-9)
    logits = model(xs)
    assert torch.equal(score(xs, idx) >= 0, logits.argmax(1) != labels[idx])


# ------------------------------------------------------------------------------------------------- validation


@pytest.mark.parametrize("radius", [float("nan"), -0.1, 0.0, float("inf"), "0.1", True])
def test_bad_radius_is_a_config_error(radius):
    with pytest.raises(ConfigError, match="radius"):
        amls_log_prob(lambda xb, idx: xb.sum(1), torch.zeros(2, 3), radius)
    with pytest.raises(ConfigError, match="radius"):
        monte_carlo_log_prob(lambda xb, idx: xb.sum(1), torch.zeros(2, 3), radius)


@pytest.mark.parametrize(
    "kw, name",
    [
        (dict(rho=1.0), "rho"),
        (dict(rho=0.0), "rho"),
        (dict(particles=1), "particles"),
        (dict(mh_steps=0), "mh_steps"),
        (dict(width=0.0), "width"),
        (dict(log_p_min=0.0), "log_p_min"),
        (dict(max_levels=0), "max_levels"),
        (dict(clip=(1.0, 0.0)), "clip"),
        (dict(batch=0), "batch"),
    ],
)
def test_bad_settings_are_config_errors(kw, name):
    with pytest.raises(ConfigError, match=name):
        amls_log_prob(lambda xb, idx: xb.sum(1), torch.zeros(2, 3), 0.1, **kw)


def test_bad_data_and_bad_scores():
    with pytest.raises(DataError, match="outside clip"):
        amls_log_prob(lambda xb, idx: xb.sum(1), torch.full((1, 3), 2.0), 0.1)
    with pytest.raises(ModelError, match="shape"):
        amls_log_prob(lambda xb, idx: xb, torch.zeros(2, 3), 0.1)
    with pytest.raises(ModelError, match="NaN"):
        amls_log_prob(lambda xb, idx: xb.sum(1) * float("nan"), torch.zeros(2, 3), 0.1)
