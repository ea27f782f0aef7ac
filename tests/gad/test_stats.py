"""Statistics of GAD's runs: grouping by target, SDR per seed and over seeds, the error AUCs and error rates."""

from dataclasses import replace

import numpy as np
import pytest

from weakspot.errors import DataError
from weakspot.gad.stats import (
    across_seeds,
    auc,
    common_budget,
    curve_band,
    error_aucs,
    group_runs,
    lowest_gad_error_rate,
    nanmean,
    seed_stats,
)


def test_group_runs_sorts_by_split_seed_and_refuses_a_seed_twice(outcome, second_seed):
    groups = group_runs([second_seed, outcome])
    assert list(groups) == ["phoneme"] and [o.split_seed for o in groups["phoneme"]] == [0, 1]
    with pytest.raises(DataError, match="split seed"):
        group_runs([outcome, outcome])
    fewer = replace(second_seed, sdr={s: v for s, v in second_seed.sdr.items() if s != "gad"})
    with pytest.raises(DataError, match="different searches"):
        group_runs([outcome, fewer])


def test_seed_stats_are_means_over_the_pools(outcome):
    st = seed_stats(outcome, 10)
    for s in outcome.sdr:
        assert st[s]["sdr"] == pytest.approx(outcome.sdr[s][:, 9].mean())
        assert st[s]["lo"] <= st[s]["sdr"] <= st[s]["hi"]
        assert st[s]["errors"] == pytest.approx(outcome.errors[s].sum(axis=1).mean())
        assert st[s]["expected"] == pytest.approx((1 - outcome.confidence[s]).sum(axis=1).mean())
    assert seed_stats(outcome, 5)["random"]["sdr"] == pytest.approx(outcome.sdr["random"][:, 4].mean())
    assert common_budget([outcome]) == 10


def test_across_seeds_is_a_t_interval_over_seeds_or_over_pools_for_one(outcome, second_seed):
    from scipy import stats

    one = across_seeds([outcome], 10)
    st = seed_stats(outcome, 10)
    for s in outcome.sdr:
        assert [one[s][k] for k in ("sdr", "lo", "hi")] == [st[s][k] for k in ("sdr", "lo", "hi")]
    two = across_seeds([outcome, second_seed], 10)
    for s in outcome.sdr:
        own = [o.sdr[s][:, -1].mean() for o in (outcome, second_seed)]
        half = stats.t.ppf(0.975, 1) * np.std(own, ddof=1) / np.sqrt(2)
        assert [two[s]["lo"], two[s]["sdr"], two[s]["hi"]] == pytest.approx(
            [np.mean(own) - half, np.mean(own), np.mean(own) + half]
        )
        assert [two[s]["min"], two[s]["max"]] == pytest.approx([min(own), max(own)])


def test_curve_band_over_pools_for_one_seed_and_over_seed_means_for_several():
    a = np.array([[1.0, 2.0], [3.0, 4.0]])
    m, lo, hi = curve_band([a])
    np.testing.assert_allclose(m, [2.0, 3.0])
    assert (lo < m).all() and (hi > m).all()
    m, lo, hi = curve_band([a, a + 2])  # seed means [2, 3] and [4, 5]
    np.testing.assert_allclose(m, [3.0, 4.0])
    np.testing.assert_allclose(hi - m, m - lo)


def test_auc_known_answers():
    assert auc(np.array([1.0, 2.0, 3.0, 4.0]), np.array([0, 0, 1, 1])) == 1.0
    assert auc(np.array([1.0, 2.0, 3.0, 4.0]), np.array([1, 1, 0, 0])) == 0.0
    assert auc(np.array([1.0, 1.0, 1.0, 1.0]), np.array([0, 1, 0, 1])) == 0.5  # ties count half
    assert auc(np.array([1.0, 3.0, 2.0, 4.0]), np.array([0, 1, 0, 1])) == 1.0
    assert auc(np.array([2.0, 1.0, 3.0]), np.array([1, 0, 0])) == 0.5
    assert auc(np.array([-np.inf, 0.0, 1.0]), np.array([0, 1, 1])) == 1.0  # never-flipped rows rank lowest
    assert np.isnan(auc(np.array([1.0, 2.0]), np.array([1, 1])))


def test_error_aucs_and_lowest_gad_error_rate_on_the_outcome(outcome):
    o = outcome
    err = ~o.test_correct[o.eligible]
    a_gad, a_conf = error_aucs(o)
    pos, neg = -o.gad[err], -o.gad[~err]
    brute = np.mean((pos[:, None] > neg[None, :]) + 0.5 * (pos[:, None] == neg[None, :]))
    assert a_gad == pytest.approx(brute)
    assert 0 <= a_conf <= 1
    top, base = lowest_gad_error_rate(o)
    k = round(len(err) * o.budget / o.pool_size)
    assert top == pytest.approx(err[np.argsort(o.gad, kind="stable")[:k]].mean())
    assert base == pytest.approx(err.mean())


def test_nanmean_ignores_nan_and_is_nan_without_a_number():
    assert nanmean([1.0, float("nan"), 3.0]) == 2.0
    assert np.isnan(nanmean([float("nan")]))
