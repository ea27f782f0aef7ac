"""weakspot.hda.protocol: each research question of seeds/004 on a tiny toy target (tests/hda/conftest.py), and the
helpers they share."""

import math
import time

import numpy as np
import pytest
import torch

from weakspot.hda import generate as G
from weakspot.hda.protocol import Clock, _pearson, landscape, predict

from .conftest import toy_net


# ---------------------------------------------------------------------------------------------------------- helpers
def test_pearson_known_answers_and_what_gives_nan():
    x = np.arange(10.0)
    assert _pearson(x, 3 * x + 1) == pytest.approx(1.0)
    assert _pearson(x, -x) == pytest.approx(-1.0)
    a, b = np.array([1.0, 2.0, 3.0, np.nan, 4.0]), np.array([2.0, 4.0, 6.0, 0.0, np.inf])
    assert _pearson(a, b) == pytest.approx(1.0)  # the NaN and infinite pairs are left out
    assert math.isnan(_pearson(a[:2], b[:2]))  # fewer than 3 finite pairs
    assert math.isnan(_pearson(x, np.ones(10)))  # a constant input
    g = np.random.default_rng(0)
    u, v = g.normal(size=50), g.normal(size=50)
    assert _pearson(u, u + v) == pytest.approx(np.corrcoef(u, u + v)[0, 1], abs=1e-12)


def test_predict_in_batches_equals_one_batch(toy):
    net, X = toy["white"][2], toy["data"][0][:37]
    pf = G.module_proba(net)
    np.testing.assert_allclose(predict(pf, X, 5), predict(pf, X, 1000), rtol=1e-6, atol=1e-7)
    assert predict(pf, X, 5).shape == (37, 3)


def test_clock_records_each_step_in_seconds():
    clock = Clock()
    with clock("nap"):
        time.sleep(0.03)
    assert list(clock.seconds) == ["nap"] and 0.02 <= clock.seconds["nap"] < 1.0
    assert clock.seconds["nap"] == round(clock.seconds["nap"], 2)


def test_landscape_centres_the_training_codes(toy):
    from weakspot.hda.density import train_density

    X = toy["data"][0][:120]
    dens = train_density(X, clip=(0.0, 1.0), latent_dim=3, hidden=16, epochs=2, max_steps=10, batch_size=32, seed=0)
    land = landscape(dens, X, grid=7)
    assert land.gx.shape == land.gy.shape == land.log_density.shape == (7, 7)
    assert np.isfinite(land.log_density).all() and land.candidates.shape == (120, 2)
    # the training inputs' codes are the KDE's centres, whose mean is the plane's origin
    np.testing.assert_allclose(land.candidates.mean(0), 0.0, atol=1e-4)


# -------------------------------------------------------------------------------------------------------------- RQ1
def test_rq1_distribution_tables_and_samples(toy):
    d = toy["white"][0].distribution
    assert list(d.table3["compression"]) == ["PCA", "VAE encoder"] and set(d.fid) == {"kde", "uniform"}
    assert d.samples_kde.shape == d.samples_uniform.shape == (8, 1, 8, 8)
    assert 0.0 <= d.samples_kde.min() and d.samples_kde.max() <= 1.0
    assert d.featurizer.startswith("a reference CNN trained by this stage")  # never the audited model
    assert toy["black"][0].distribution.featurizer == d.featurizer  # the same ruler for a black box


def test_rq1_seeds_are_correct_dense_fragile_candidates(toy):
    result, p, net, _ = toy["white"]
    s = result.seeds
    assert (predict(G.module_proba(net), s.X, 64).argmax(1) == s.y).all()  # only correctly classified candidates
    X, _ = toy["data"]
    assert len(s.X) == len(s.names) == p.pool
    for x, name in zip(s.X, s.names):  # "test input j" is row 500 + j, "validation input j" row 400 + j
        kind, j = name.rsplit(" ", 1)
        np.testing.assert_array_equal(x, X[(500 if kind == "test input" else 400) + int(j)])
    np.testing.assert_array_equal(s.selected, G.select_seeds(s.log_density, s.gradient, p.n_seeds))
    # the control seeds: the Table 4 balls that are no selected seed, in draw order (topped up from the other
    # candidates where too few are left), so the control is disjoint from the selection
    outside = s.balls[~np.isin(s.balls, s.selected)][: p.n_seeds]
    np.testing.assert_array_equal(s.random[: len(outside)], outside)
    assert len(s.random) == p.n_seeds and not np.isin(s.random, s.selected).any()
    estimated = np.zeros(len(s.X), bool)
    estimated[np.concatenate([s.balls, s.selected])] = True
    assert np.isfinite(s.log10_p[estimated]).all() and np.isnan(s.log10_p[~estimated]).all()
    assert (s.log10_p[estimated] <= 0).all() and (s.log10_p[estimated] >= -8 / math.log(10) - 1e-9).all()
    assert s.indicator == "gradient" and s.table5["selected"]["log_density"] == pytest.approx(
        s.log_density[s.selected].mean()
    )
    assert s.selected_proba.shape == (p.n_seeds, 3) and np.allclose(s.selected_proba.sum(1), 1, atol=1e-5)


def test_rq1_on_a_black_box_uses_the_separation_indicator(toy):
    s = toy["black"][0].seeds
    assert s.indicator == "separation" and s.gradient is None and s.pearson["gradient"] is None
    # fragile = small separation: the selection ranks the negated distance
    np.testing.assert_array_equal(s.selected, G.select_seeds(s.log_density, -s.separation, len(s.selected)))


# -------------------------------------------------------------------------------------------------------------- RQ2
def test_rq2_every_generator_on_both_seed_sets(toy):
    result, p, _, _ = toy["white"]
    g, s = result.generators, result.seeds
    assert list(g.evals) == [
        (m, sn) for sn in ("selected", "random") for m in ("hda", "foda", "pgd", "ooda", "coverage")
    ]
    for (m, sn), e in g.evals.items():
        res = g.results[(m, sn)]
        assert e.n_cases == len(res.X_cases) == g.allocation[sn].sum() and e.seeds == sn
        if m != "foda":  # FODA decodes codes: it is not confined to the ball
            seeds = s.X[s.selected if sn == "selected" else s.random]
            assert np.abs(res.X_cases - seeds[res.seed_index]).max() <= 0.1 + 1e-5
    assert 0.0 <= g.coverage_rate <= 1.0
    for sn in ("selected", "random"):  # OODA: PGD's test cases, only the AEs the VAE's threshold accepts
        o, pg = g.evals[("ooda", sn)], g.evals[("pgd", sn)]
        assert g.results[("ooda", sn)].X_cases is g.results[("pgd", sn)].X_cases
        np.testing.assert_array_equal(o.ae_mask, pg.ae_mask & pg.valid)
        assert o.valid_ae_share in (1.0,) or np.isnan(o.valid_ae_share)
    e = g.evals[("hda", "selected")]  # every FID rests on the AEs it names, with an interval around it
    assert e.fid_est.n == e.ae_mask.sum() and (e.fid_est.n < 2 or e.fid_est.lo <= e.fid <= e.fid_est.hi)
    assert e.queries_per_seed == p.ga.population * (p.ga.generations + 1)
    assert list(toy["black"][0].generators.evals) == [
        ("hda", "selected"),
        ("foda", "selected"),
        ("hda", "random"),
        ("foda", "random"),
    ]


# -------------------------------------------------------------------------------------------------------------- RQ3
def test_rq3_reuses_rq2_on_the_audited_model_and_reselects_for_the_other(toy):
    result, p, _, adv = toy["white"]
    a, g = result.adversarial, result.generators
    assert list(a.evals) == ["normal", "adversarial"] and a.label == "the twin"
    assert all(list(row) == ["fgsm", "pgd", "autoattack", "hda"] for row in a.evals.values())
    assert (
        a.evals["normal"]["pgd"] is g.evals[("pgd", "selected")]
        and a.evals["normal"]["hda"] is g.evals[("hda", "selected")]
    )
    assert a.evals["normal"]["fgsm"].n_cases == len(result.seeds.selected)  # one FGSM case per seed
    assert a.seed_log_density["normal"] == pytest.approx(result.seeds.log_density[result.seeds.selected].mean())


# -------------------------------------------------------------------------------------------------------------- RQ4
def test_rq4_finetunes_copies_and_keeps_the_hda_one(toy):
    result, p, net, _ = toy["white"]
    ft = result.finetuning
    assert list(ft.after) == ["hda", "pgd", "coverage"] and ft.seeds == {"hda": 5, "pgd": 5, "coverage": 5}
    assert ft.train_inputs == 50 and ft.validation["pool"] == 30
    assert 0 <= ft.validation["pgd_aes"] <= 30 and 0 <= ft.validation["hda_aes"] <= 30 * p.finetune.cases_per_seed
    X, y = toy["data"]
    acc = (predict(G.module_proba(net), X[500:], 64).argmax(1) == y[500:]).mean()
    assert ft.before["test_acc"] == pytest.approx(acc)
    fresh = toy_net(X, y, 0).state_dict()
    assert all(torch.equal(v, fresh[k]) for k, v in net.state_dict().items())  # the audited model is untouched
    assert set(ft.repaired) == set(fresh) and not all(torch.equal(ft.repaired[k], fresh[k]) for k in fresh)
    assert ft.test_cases["pgd"] == ft.test_cases["coverage"] == 5 * p.finetune.cases_per_seed


def test_rq4_fine_tuning_and_validation_seeds_are_disjoint(toy):
    """The repair is judged on AEs around seeds no method fine-tuned with: the pool's two halves never meet."""
    ft = toy["white"][0].finetuning
    tune, held = set(ft.split["tune"]), set(ft.split["held"])
    assert tune and held and not tune & held and len(tune | held) == ft.validation["pool"] == 30
    assert ft.validation["held_seeds"] == len(held) == 15
    for mname, ids in ft.split["seeds"].items():
        assert set(ids) <= tune and not set(ids) & held, mname
    ra = ft.reattack  # the repaired model attacked again: a fresh search around the held-out seeds, PGD on test inputs
    assert ra["hda_search"]["before"]["n"] > 0 and ra["hda_search"]["after"]["n"] > 0
    for att in ("pgd_accuracy", "autoattack_accuracy"):
        assert ra[att]["before"]["n"] == ra[att]["after"]["n"] > 0, att


def test_split_pool_halves_every_index_once():
    from weakspot.hda.protocol import split_pool

    for n in (2, 3, 30, 301):
        tune, held = split_pool(n, np.random.default_rng(n))
        assert sorted(np.concatenate([tune, held]).tolist()) == list(range(n)) and len(held) == n // 2
