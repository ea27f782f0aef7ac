"""Examiners on a black-box function on the 9-d box whose worst region is known (a basin near one corner)."""

import numpy as np
import pytest

from weakspot.errors import ConfigError, DataError
from weakspot.examine.examiners import EXAMINERS, make_examiner, run_examination

NAMES = [f"f{i}" for i in range(9)]
# different scales per factor: the examiners must work in the unit cube
BOUNDS = {k: (-float(i + 1), 10.0 * (i + 1)) for i, k in enumerate(NAMES)}
CORNER = np.full(9, 0.85)  # the worst region, in unit coordinates


def _unit(q):
    lo = np.array([BOUNDS[k][0] for k in NAMES])
    hi = np.array([BOUNDS[k][1] for k in NAMES])
    return (np.array([[p[k] for k in NAMES] for p in q]) - lo) / (hi - lo)


def prob(q):
    """A 'true-class probability' that is ~1 almost everywhere and drops to 0.05 at CORNER."""
    d2 = ((_unit(q) - CORNER) ** 2).sum(1)
    return 1 - 0.95 * np.exp(-d2 / (2 * 0.3**2))


SUCCESS = 0.5  # found the basin: a query with p below this (its ball holds ~2e-4 of the box's volume)
RL_FAST = dict(lr=0.05, batch_size=16)  # the fast profile's RL settings
RL_BUDGET = 40 * 16  # 40 policy-gradient iterations
BO_BUDGET = 40


def test_registry_lists_the_three_examiners():
    assert EXAMINERS.names() == ["bo", "random", "rl"]
    with pytest.raises(ConfigError, match="valid names: bo, random, rl"):
        make_examiner("cmaes", bounds=BOUNDS)


def test_bo_finds_the_basin_random_does_not():
    bo = sum(
        run_examination(make_examiner("bo", bounds=BOUNDS, seed=s), prob, BO_BUDGET)[1].min() < SUCCESS
        for s in range(3)
    )
    rnd = sum(
        run_examination(make_examiner("random", bounds=BOUNDS, seed=s), prob, BO_BUDGET)[1].min() < SUCCESS
        for s in range(3)
    )
    assert bo == 3
    assert rnd < bo


def test_rl_finds_the_basin_random_does_not():
    rl, rnd = 0, 0
    for s in range(3):
        _, p = run_examination(make_examiner("rl", bounds=BOUNDS, seed=s, **RL_FAST), prob, RL_BUDGET)
        rl += p.min() < SUCCESS
        # the policy concentrates: its last iterations are much worse for the model than its first
        assert p[-64:].mean() < p[:64].mean() - 0.3
        _, p = run_examination(make_examiner("random", bounds=BOUNDS, seed=s), prob, RL_BUDGET)
        rnd += p.min() < SUCCESS
    assert rl == 3
    assert rnd < rl


def test_rl_paper_settings_learn_with_paper_iterations():
    # paper Sec. 4.1: lr 0.001, batch 32; like Table 2, little changes in the first 100 iterations, then it drops
    _, p = run_examination(make_examiner("rl", bounds=BOUNDS, seed=0), prob, 300 * 32)
    assert p[:32].mean() > 0.95 and p[-320:].mean() < 0.7


@pytest.mark.parametrize("name,budget,opts", [("random", 40, {}), ("bo", 12, {}), ("rl", 64, RL_FAST)])
def test_same_seed_same_trajectory(name, budget, opts):
    q1, p1 = run_examination(make_examiner(name, bounds=BOUNDS, seed=3, **opts), prob, budget)
    q2, p2 = run_examination(make_examiner(name, bounds=BOUNDS, seed=3, **opts), prob, budget)
    q3, _ = run_examination(make_examiner(name, bounds=BOUNDS, seed=4, **opts), prob, budget)
    assert q1 == q2 and np.array_equal(p1, p2)
    assert q1 != q3


BO_DEFAULT = dict(kappa=0.5, objective="logit", ard=True, min_length_scale=0.05)  # params.yaml's examine.bo


def test_package_gp_collapses_on_noise_like_probabilities_and_the_floor_holds():
    # 40 scenes whose probabilities have no structure at their spacing (as neighbouring renders of the scenes target
    # do, 0.25 next to 0.75): the package's GP fits them with its smallest length scale (the prior everywhere else,
    # so UCB is random search); the default's floor keeps every length scale at 0.05 of the box or more
    for s in range(3):
        rng = np.random.default_rng(s)
        q = [dict(zip(NAMES, u)) for u in rng.random((40, 9))]
        p = rng.uniform(0.2, 1.0, 40)
        pkg = make_examiner("bo", bounds=BOUNDS, seed=s, kappa=1.0)
        ours = make_examiner("bo", bounds=BOUNDS, seed=s, **BO_DEFAULT)
        for ex in (pkg, ours):
            assert ex.length_scales() is None
            ex.observe(q, p)
            ex.suggest(1)
        assert pkg.length_scales().min() < 1e-4
        assert len(ours.length_scales()) == 9 and ours.length_scales().min() >= 0.05 - 1e-9


def test_default_bo_stays_in_a_narrow_weak_slab_on_a_rugged_landscape_random_does_not():
    # a confident model (logit 3.5, ripples of +-2 at a scale far below the queries' spacing) that fails only where
    # factor f5 is in the lowest fifth of its range: the default BO's last queries sit in that slab, random's do not
    w = np.random.default_rng(7).normal(size=9)

    def rugged(q):
        u = _unit(q)
        z = 3.5 + 2.0 * np.sin(997.0 * (u @ w)) - 12.0 * np.clip((0.2 - u[:, 5]) / 0.2, 0, 1)
        return 1 / (1 + np.exp(-z))

    for s in range(3):
        q, p = run_examination(make_examiner("bo", bounds=BOUNDS, seed=s, **BO_DEFAULT), rugged, 60)
        _, pr = run_examination(make_examiner("random", bounds=BOUNDS, seed=s), rugged, 60)
        assert p[-10:].mean() < 0.3 < 0.6 < pr[-10:].mean()
        assert np.mean(_unit(q[-10:])[:, 5] < 0.2) >= 0.7  # and they are in the slab (random: 0.2)


@pytest.mark.parametrize(
    "name,budget,opts", [("bo", BO_BUDGET, {}), ("bo", BO_BUDGET, BO_DEFAULT), ("rl", RL_BUDGET, RL_FAST)]
)
def test_strength_mode_finds_the_maximum(name, budget, opts):
    def strong(q):  # the model is sure (0.95 + ...) only near CORNER
        return 1.0 - prob(q)

    _, p = run_examination(make_examiner(name, bounds=BOUNDS, seed=0, mode="strength", **opts), strong, budget)
    _, pr = run_examination(make_examiner("random", bounds=BOUNDS, seed=0), strong, budget)
    assert p.max() > 1 - SUCCESS > pr.max()
    # and weakness mode on the same function does not go there
    _, pw = run_examination(make_examiner(name, bounds=BOUNDS, seed=0, **opts), strong, budget)
    assert pw[-10:].mean() < 0.1


def test_suggestions_lie_in_bounds_and_rl_on_its_grid():
    for name in ("random", "bo", "rl"):
        ex = make_examiner(name, bounds=BOUNDS, seed=0, **(RL_FAST if name == "rl" else {}))
        q = ex.suggest(5)
        assert len(q) == 5 and all(set(p) == set(NAMES) for p in q)
        u = _unit(q)
        assert np.all((u >= -1e-12) & (u <= 1 + 1e-12))
    u = _unit(make_examiner("rl", bounds=BOUNDS, seed=0, bins=11).suggest(50))
    assert np.allclose(u * 10, np.round(u * 10))


def test_bo_batch_constant_liar_gives_distinct_points_and_keeps_only_real_data():
    ex = make_examiner("bo", bounds=BOUNDS, seed=0)
    q = ex.suggest(2)
    ex.observe(q, prob(q))
    batch = ex.suggest(4)
    assert len(ex.space_) == 2  # the lies are gone
    u = _unit(batch)
    assert min(np.abs(u[i] - u[j]).max() for i in range(4) for j in range(i)) > 1e-6
    ex.observe(batch, prob(batch))
    assert len(ex.space_) == 6 and len(ex.history_) == 6


def test_rl_order_is_a_permutation_and_changes_the_sampling():
    order = NAMES[-4:] + NAMES[:-4]
    a = make_examiner("rl", bounds=BOUNDS, seed=0, order=order).suggest(8)
    b = make_examiner("rl", bounds=BOUNDS, seed=0).suggest(8)
    assert a != b
    with pytest.raises(ConfigError, match="permutation"):
        make_examiner("rl", bounds=BOUNDS, order=NAMES[:3]).suggest(1)


def test_rl_samples_the_point_light_energy_first_by_default():
    """Paper Sec. 4.5: the default order is Gamma_l, Gamma_o, r_l, A_l, U_l, r_v, A_v, U_v, theta_v, whatever the
    order of the bounds; the view-first order of the Sec. 4.5 check is another permutation with the same seed."""
    from weakspot.scene.space import DEFAULT_BOUNDS, RL_ORDER, RL_ORDER_VIEW_FIRST, SEARCHED

    assert RL_ORDER[0] == "light_energy" and sorted(RL_ORDER) == sorted(SEARCHED)
    assert RL_ORDER_VIEW_FIRST[:4] == ("view_distance", "view_azimuth", "view_elevation", "view_roll")
    bounds = {k: DEFAULT_BOUNDS[k] for k in SEARCHED}
    shuffled = {k: bounds[k] for k in reversed(SEARCHED)}
    default = make_examiner("rl", bounds=shuffled, seed=3).suggest(16)
    assert default == make_examiner("rl", bounds=bounds, seed=3, order=list(RL_ORDER)).suggest(16)
    assert default != make_examiner("rl", bounds=bounds, seed=3, order=list(SEARCHED)).suggest(16)
    assert default != make_examiner("rl", bounds=bounds, seed=3, order=list(RL_ORDER_VIEW_FIRST)).suggest(16)


def test_bad_input_is_named():
    with pytest.raises(ConfigError, match=r"bounds\['x'\]"):
        make_examiner("random", bounds={"x": (1.0, 0.0)}).suggest(1)
    with pytest.raises(ConfigError, match="mode"):
        make_examiner("bo", bounds=BOUNDS, mode="sideways").suggest(1)
    ex = make_examiner("rl", bounds=BOUNDS)
    q = ex.suggest(2)
    with pytest.raises(DataError, match="2 params but 3 losses"):
        ex.observe(q, [0.1, 0.2, 0.3])
    with pytest.raises(DataError, match="NaN"):
        ex.observe(q, [0.1, float("nan")])
    with pytest.raises(DataError, match="'f0'"):
        ex.observe([{"f1": 0.0}], [0.5])
    with pytest.raises(ConfigError, match="positive int"):
        ex.suggest(0)
    with pytest.raises(ConfigError, match="bad option"):
        make_examiner("random", bounds=BOUNDS, kappa=3.0)
    with pytest.raises(ConfigError, match="bo.objective"):
        make_examiner("bo", bounds=BOUNDS, objective="log").suggest(1)
