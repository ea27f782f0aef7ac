"""Tests of weakspot.hda.coverage: neuron coverage and the coverage-guided fuzzer (HDA's baseline)."""

import math

import numpy as np
import pytest
import torch
import torch.nn as nn

from weakspot.errors import ConfigError, DataError
from weakspot.hda.coverage import FuzzResult, NeuronCoverage, coverage_fuzz


def _conv_net():
    torch.manual_seed(0)
    return nn.Sequential(
        nn.Conv2d(1, 4, 3), nn.ReLU(), nn.Flatten(), nn.Linear(4 * 4 * 4, 5), nn.ReLU(), nn.Linear(5, 3)
    )


def _planted_mlp():
    """Inputs (n, 4). Hidden unit A = relu(x1 - 0.5); hidden unit B = relu(10 (x0 - 0.9)): fires only for x0 > 0.9."""
    net = nn.Sequential(nn.Linear(4, 2), nn.ReLU(), nn.Linear(2, 2))
    with torch.no_grad():
        net[0].weight.zero_()
        net[0].weight[0, 1] = 1.0
        net[0].bias[0] = -0.5
        net[0].weight[1, 0] = 10.0
        net[0].bias[1] = -9.0
        net[2].weight.fill_(0.5)
        net[2].bias.zero_()
    return net


def _planted_ref():
    # rows with x0 < 0.9 and x1 < 0.5 exist, so both units' minimum over X_ref is 0: with threshold 0 a unit is
    # covered exactly when it fires
    g = torch.Generator().manual_seed(0)
    return torch.rand(200, 4, generator=g)


# ------------------------------------------------------------------------------------------------------------------
# NeuronCoverage
# ------------------------------------------------------------------------------------------------------------------
def test_neuron_count_conv_channels_and_dense_units():
    net = _conv_net()
    X = torch.rand(50, 1, 6, 6, generator=torch.Generator().manual_seed(1))
    with NeuronCoverage(net, X) as cov:
        assert cov.n_neurons == 4 + 5
        assert cov.layers == ["1", "4"]
        acts = cov.activations(X[:7])
        assert acts.shape == (7, 9) and acts.dtype == torch.float32
        # a conv neuron is a channel: its activation is the spatial mean of the ReLU output, min-max scaled over X_ref
        with torch.no_grad():
            raw = net[1](net[0](X)).mean(dim=(2, 3))
        lo, hi = raw.min(0).values, raw.max(0).values
        assert torch.allclose(acts[:, :4], (raw[:7] - lo) / (hi - lo), atol=1e-5)
        # over X_ref itself every scaled activation is in [0, 1]
        full = cov.activations(X)
        assert full.min() >= -1e-6 and full.max() <= 1 + 1e-6


def test_model_without_relu_hooks_linear_layers_but_the_last():
    net = nn.Sequential(nn.Linear(3, 6), nn.Tanh(), nn.Linear(6, 4), nn.Tanh(), nn.Linear(4, 2))
    with NeuronCoverage(net, torch.rand(20, 3)) as cov:
        assert cov.n_neurons == 6 + 4
        assert cov.layers == ["0", "2"]


def test_constant_neuron_is_guarded():
    net = _planted_mlp()
    X_ref = torch.zeros(10, 4)  # both units constant 0 over X_ref: max == min
    with NeuronCoverage(net, X_ref) as cov:
        acts = cov.activations(torch.tensor([[0.0, 0.0, 0, 0], [0.95, 1.0, 0, 0]]))
        assert torch.isfinite(acts).all()
        assert torch.allclose(acts, torch.tensor([[0.0, 0.0], [0.5, 0.5]]), atol=1e-5)


def test_update_counts_only_new_neurons_in_row_order():
    net = _planted_mlp()
    with NeuronCoverage(net, _planted_ref(), threshold=0.0) as cov:
        x = torch.tensor(
            [
                [0.0, 0.0, 0, 0],  # nothing
                [0.0, 0.8, 0, 0],  # A
                [0.95, 0.8, 0, 0],  # A (already covered) and B (new)
                [0.95, 0.0, 0, 0],  # B (already covered)
            ]
        )
        assert cov.update(x).tolist() == [0, 1, 1, 0]
        assert cov.covered.tolist() == [True, True] and cov.rate == 1.0
        assert cov.update(x).tolist() == [0, 0, 0, 0]
        cov.reset()
        assert cov.rate == 0.0 and not cov.covered.any()
        # a neuron covered by several rows counts for the first one only
        assert cov.update(x[[2, 2, 1]]).tolist() == [2, 0, 0]


def test_coverage_monotone_and_rate_in_unit_interval():
    net = _conv_net()
    g = torch.Generator().manual_seed(2)
    with NeuronCoverage(net, torch.rand(40, 1, 6, 6, generator=g), threshold=0.7) as cov:
        prev_cov, prev_rate = cov.covered.clone(), cov.rate
        for _ in range(6):
            gains = cov.update(torch.rand(5, 1, 6, 6, generator=g))
            assert gains.dtype == torch.int64 and (gains >= 0).all()
            assert int(gains.sum()) == int(cov.covered.sum()) - int(prev_cov.sum())
            assert (cov.covered | prev_cov).equal(cov.covered)  # nothing uncovered
            assert 0.0 <= prev_rate <= cov.rate <= 1.0
            prev_cov, prev_rate = cov.covered.clone(), cov.rate


def test_hooks_removed_and_module_unchanged():
    net = _conv_net()
    net.train()
    before = {k: v.clone() for k, v in net.state_dict().items()}
    cov = NeuronCoverage(net, torch.rand(10, 1, 6, 6))
    assert any(len(m._forward_hooks) for m in net.modules())
    cov.update(torch.rand(3, 1, 6, 6))
    assert all(m.training for m in net.modules())  # training flags restored after the eval-mode passes
    cov.close()
    assert all(len(m._forward_hooks) == 0 for m in net.modules())
    cov.close()  # idempotent
    with pytest.raises(ConfigError, match="closed"):
        cov.update(torch.rand(2, 1, 6, 6))
    for k, v in net.state_dict().items():
        assert torch.equal(v, before[k])
    with NeuronCoverage(net, torch.rand(10, 1, 6, 6)):
        pass
    assert all(len(m._forward_hooks) == 0 for m in net.modules())


# ------------------------------------------------------------------------------------------------------------------
# coverage_fuzz
# ------------------------------------------------------------------------------------------------------------------
def _planted_seeds():
    seeds = torch.full((3, 4), 0.3)
    seeds[:, 0] = 0.85  # B needs x0 > 0.9: 0.05 away
    seeds[:, 1] = 0.8  # A covered by the seeds themselves
    return seeds


def test_planted_unit_reached_only_when_inside_the_ball():
    net = _planted_mlp()
    seeds = _planted_seeds()
    with NeuronCoverage(net, _planted_ref(), threshold=0.0) as cov:
        near = coverage_fuzz(net, seeds, None, [2, 2, 2], 0.02, coverage=cov, iterations=30, mutants=10)
        assert near.coverage_rate == 0.5  # A only: x0 <= 0.87 < 0.9 everywhere in the ball
        assert (near.X_cases[:, 0] <= 0.87 + 1e-6).all()
        far = coverage_fuzz(net, seeds, None, [2, 2, 2], 0.1, coverage=cov, iterations=30, mutants=10)
        assert far.coverage_rate == 1.0
        assert far.coverage_curve[-1] == 1.0
        # the mutant that covered B joined its seed's queue, so it is among the test cases
        assert (far.X_cases[:, 0] > 0.9).any()


def test_cases_inside_ball_and_clip_with_right_shapes():
    net = _conv_net()
    g = torch.Generator().manual_seed(3)
    X_ref = torch.rand(60, 1, 6, 6, generator=g)
    seeds = torch.rand(4, 1, 6, 6, generator=g)
    seeds[0, 0, 0, :] = 0.0  # on the clip boundary
    seeds[1, 0, :, 0] = 1.0
    n_cases = [1, 3, 25, 7]  # 25 > what the queue holds: filled from earlier iterations' mutants
    r = 0.2
    with NeuronCoverage(net, X_ref) as cov:
        res = coverage_fuzz(net, seeds, np.array([0, 1, 2, 0]), n_cases, r, coverage=cov, iterations=6, mutants=5)
    assert isinstance(res, FuzzResult)
    assert res.X_cases.shape == (36, 1, 6, 6) and res.X_cases.dtype == np.float32
    assert res.seed_index.tolist() == [0] + [1] * 3 + [2] * 25 + [3] * 7
    assert np.issubdtype(res.seed_index.dtype, np.integer)
    dist = np.abs(res.X_cases - seeds.numpy()[res.seed_index]).reshape(36, -1).max(axis=1)
    assert (dist <= r + 1e-6).all()
    assert (dist > 0).mean() >= 0.9  # test cases are mutants, not the seeds (a mutation clipped away is rare)
    assert res.X_cases.min() >= 0.0 and res.X_cases.max() <= 1.0
    # 25 cases from a seed that got 30 mutants: (almost surely) all distinct
    assert len(np.unique(res.X_cases[res.seed_index == 2].reshape(25, -1), axis=0)) == 25
    assert res.queries == 4 + 6 * 4 * 5
    assert len(res.coverage_curve) == 6
    assert all(a <= b for a, b in zip(res.coverage_curve, res.coverage_curve[1:]))
    assert 0.0 <= res.coverage_curve[0] and res.coverage_curve[-1] == res.coverage_rate <= 1.0
    assert res.seconds > 0


def test_clip_none_allows_leaving_unit_interval():
    net = _planted_mlp()
    seeds = torch.full((2, 4), 0.99)
    with NeuronCoverage(net, _planted_ref()) as cov:
        res = coverage_fuzz(net, seeds, None, 5, 0.1, clip=None, coverage=cov, iterations=5, mutants=8)
    assert res.X_cases.max() > 1.0
    assert (np.abs(res.X_cases - 0.99) <= 0.1 + 1e-6).all()


def test_deterministic_from_seed_and_blind_to_labels():
    net = _conv_net()
    g = torch.Generator().manual_seed(4)
    X_ref, seeds = torch.rand(40, 1, 6, 6, generator=g), torch.rand(3, 1, 6, 6, generator=g)
    kw = dict(iterations=8, mutants=6)
    with NeuronCoverage(net, X_ref, threshold=0.6) as cov:
        a = coverage_fuzz(net, seeds, [0, 1, 2], 4, 0.1, coverage=cov, seed=7, **kw)
        b = coverage_fuzz(net, seeds, [2, 2, 1], 4, 0.1, coverage=cov, seed=7, **kw)  # other labels
        c = coverage_fuzz(net, seeds, [0, 1, 2], 4, 0.1, coverage=cov, seed=8, **kw)
    assert a.X_cases.tobytes() == b.X_cases.tobytes()
    assert a.coverage_curve == b.coverage_curve
    assert a.X_cases.tobytes() != c.X_cases.tobytes()
    with NeuronCoverage(net, X_ref, threshold=0.6) as fresh:  # a fresh coverage object gives the same run
        d = coverage_fuzz(net, seeds, None, 4, 0.1, coverage=fresh, seed=7, **kw)
    assert a.X_cases.tobytes() == d.X_cases.tobytes()


def test_progress_called_per_iteration():
    net = _planted_mlp()
    calls = []
    with NeuronCoverage(net, _planted_ref()) as cov:
        coverage_fuzz(
            net,
            _planted_seeds(),
            None,
            1,
            0.05,
            coverage=cov,
            iterations=4,
            mutants=3,
            progress=lambda what, done, total: calls.append((done, total)),
        )
    assert calls == [(1, 4), (2, 4), (3, 4), (4, 4)]


def _ladder():
    """A model where coverage guidance provably helps: 6 units fire at rising thresholds of w.(x - seed).

    Unit j fires when w.(x - seed) > 1.2 j / 6 (w alternating +-1, so brightness shifts cancel); the whole ball
    reaches 16 * 0.1 = 1.6. One random in-ball point has w.(x - seed) of standard deviation 0.23, so the top units
    (4-5 standard deviations) are out of reach of a few hundred random samples; the fuzzer climbs the ladder because
    each mutant that fires the next unit joins the queue and is mutated further.
    """
    d, J, r = 16, 6, 0.1
    g = torch.Generator().manual_seed(0)
    seed = 0.2 + 0.6 * torch.rand(1, d, generator=g)
    w = torch.tensor([1.0, -1.0] * (d // 2))
    t = torch.tensor([0.75 * d * r * j / J for j in range(1, J + 1)])
    net = nn.Sequential(nn.Linear(d, J), nn.ReLU(), nn.Linear(J, 2))
    with torch.no_grad():
        net[0].weight.copy_(w.expand(J, d))
        net[0].bias.copy_(-(w @ seed[0] + t))
        net[2].weight.fill_(0.1)
        net[2].bias.zero_()
    X_ref = torch.cat([seed, torch.rand(100, d, generator=g)])  # the seed fires no unit: every minimum is 0
    return net, X_ref, seed, r


def test_coverage_guidance_beats_random_sampling_on_a_ladder():
    # On generic random-init MLPs (biased units) the comparison the HDA baseline invites is NOT reliable: measured
    # on 20 such models (10 seeds, radius 0.1, 200 queries per seed), uniform-in-ball sampling beat the fuzzer in 15
    # and tied in 4 -- neuron coverage saturates fast, and uniform noise puts more mass near the ball's faces than
    # the fuzzer's mostly small mutations. What guidance does reliably buy is climbing: reaching neurons that need
    # a chain of coverage-increasing steps. That is what this test asserts, with the same query budget.
    net, X_ref, seed, r = _ladder()
    iters, mutants = 60, 20
    fuzz, rand = [], []
    with NeuronCoverage(net, X_ref, threshold=0.0) as cov:
        for s in range(4):
            res = coverage_fuzz(net, seed, None, 5, r, coverage=cov, iterations=iters, mutants=mutants, seed=s)
            assert res.queries == 1 + iters * mutants
            fuzz.append(res.coverage_rate)
            cov.reset()
            cov.update(seed)
            g = torch.Generator().manual_seed(100 + s)
            u = seed + (torch.rand(res.queries - 1, seed.shape[1], generator=g) * 2 - 1) * r
            cov.update(u.clamp(0, 1))
            rand.append(cov.rate)
    assert all(f >= q for f, q in zip(fuzz, rand)), (fuzz, rand)
    assert np.mean(fuzz) >= np.mean(rand) + 0.15, (fuzz, rand)
    assert max(rand) < 1.0  # the top of the ladder really is out of random sampling's reach


@pytest.mark.parametrize("radius", [0, -0.1, math.inf, math.nan, True])
def test_bad_radius(radius):
    net = _planted_mlp()
    with NeuronCoverage(net, _planted_ref()) as cov, pytest.raises(ConfigError, match="radius"):
        coverage_fuzz(net, _planted_seeds(), None, 1, radius, coverage=cov)


@pytest.mark.parametrize(
    "kw, err, msg",
    [
        (dict(clip=(1.0, 0.0)), ConfigError, "clip"),
        (dict(clip=(0.5, 0.5)), ConfigError, "clip"),
        (dict(n_cases=[1, 1]), ConfigError, "n_cases"),
        (dict(n_cases=[1, 0, 1]), ConfigError, "n_cases"),
        (dict(n_cases=10_000), ConfigError, "n_cases"),
        (dict(iterations=0), ConfigError, "iterations"),
        (dict(mutants=0), ConfigError, "mutants"),
        (dict(y=[0, 1]), DataError, "y"),
        (dict(X_seeds=torch.full((3, 4), 1.5)), DataError, "X_seeds"),
        (dict(X_seeds=torch.full((3, 4), math.nan)), DataError, "X_seeds"),
    ],
)
def test_bad_arguments(kw, err, msg):
    net = _planted_mlp()
    args = dict(X_seeds=_planted_seeds(), y=None, n_cases=1)
    args.update({k: kw.pop(k) for k in list(kw) if k in args})
    with NeuronCoverage(net, _planted_ref()) as cov, pytest.raises(err, match=msg):
        coverage_fuzz(net, args["X_seeds"], args["y"], args["n_cases"], 0.1, coverage=cov, **kw)


def test_coverage_of_another_module_rejected():
    net, other = _planted_mlp(), _planted_mlp()
    with NeuronCoverage(other, _planted_ref()) as cov, pytest.raises(ConfigError, match="module"):
        coverage_fuzz(net, _planted_seeds(), None, 1, 0.1, coverage=cov)


def test_hookable_names_why_a_module_has_no_neurons_to_hook():
    import warnings

    from weakspot.hda.coverage import hookable
    from weakspot.models.scripted import ScriptedModule

    net = _conv_net().eval()
    assert hookable(net) is None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # torch.jit is deprecated
        scripted = [torch.jit.script(net), torch.jit.trace(net, torch.zeros(2, 1, 6, 6))]
    for mod in (*scripted, ScriptedModule(scripted[0]), nn.Sequential(ScriptedModule(scripted[1]), nn.LogSoftmax(1))):
        assert hookable(mod) == "the model's layers cannot be hooked (TorchScript)"
        with pytest.raises(ConfigError, match=r"cannot be hooked \(TorchScript\)"):
            NeuronCoverage(mod, torch.rand(4, 1, 6, 6))
    assert "no nn.ReLU submodule" in hookable(nn.Sequential(nn.Flatten(), nn.Linear(4, 2)))
    assert "not a torch.nn.Module" in hookable(lambda x: x)
