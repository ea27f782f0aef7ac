"""run_target (the Sec. V-C protocol) on a small real split (phoneme, the paper's bias) with a given SVM black box,
on planted black boxes, and dataset_seed."""

import numpy as np
import pytest

from tests.gad.helpers import SMALL, small_params
from weakspot.errors import ConfigError, DataError
from weakspot.gad.protocol import MIN_BUDGET, DatasetOutcome, dataset_seed, run_target


def test_dataset_seed_is_per_target_and_split_seed_and_split_seed_0_keeps_the_old_seed():
    s = dataset_seed(11, "phoneme")
    assert s == dataset_seed(11, "phoneme", 0) and 0 <= s < 2**32
    # known answer: the seed of the version before split seeds (SeedSequence of the run seed and crc32 of the name)
    import zlib

    assert s == int(np.random.SeedSequence([11, zlib.crc32(b"phoneme")]).generate_state(1)[0])
    assert len({s, dataset_seed(11, "phoneme", 1), dataset_seed(11, "yeast1"), dataset_seed(12, "phoneme")}) == 4


def test_eligible_rows_are_confident_predictions_of_the_class_of_interest(target, outcome):
    clf, split, _ = target
    p = clf.predict_proba(split.X_test[outcome.eligible])
    assert len(outcome.eligible) >= 60
    assert (p.argmax(axis=1) == 1).all() and (p.max(axis=1) > 0.65).all()
    assert outcome.class_name == "oral" and outcome.n_classes == 2
    np.testing.assert_array_equal(outcome.test_correct, outcome.test_prediction == split.y_test)
    assert outcome.distance.shape == outcome.gad.shape == (len(outcome.eligible),)
    assert np.isfinite(outcome.gad[outcome.flipped]).all() and outcome.flipped.mean() > 0.5
    for s, e in outcome.errors.items():
        assert e.shape == (3, 10) and outcome.sdr[s].shape == (3, 10)
    assert list(outcome.errors) == small_params().searches
    assert set(outcome.seconds) == {"black_box", "extract", "attack", "searches", "total"}


def _independent_gad(conf: np.ndarray, dist: np.ndarray, flipped: np.ndarray, frac: float) -> np.ndarray:
    """Eq. 2 recomputed with statsmodels directly: log-MAE minus its LOESS on confidence over the flipped rows."""
    from statsmodels.nonparametric.smoothers_lowess import lowess

    g = np.full(len(conf), np.inf)
    t = np.log(np.maximum(dist[flipped], 1e-12))
    g[flipped] = t - lowess(t, conf[flipped], frac=frac, it=0, return_sorted=False)
    return g


def test_pools_come_from_the_eligible_rows_and_gad_refits_loess_on_each_pool(outcome):
    """Sec. V-C: every pool is drawn from the eligible rows only; Eq. 2's F is refitted on each pool (Sec. IV-A:
    "fitting a LOESS ... over an evaluation set"), so each replicate's GAD queries are the pool's own lowest GAD."""
    o = outcome
    n_el, B = len(o.eligible), o.budget
    assert o.pools.shape == (3, o.pool_size) and o.pool_size == 60
    assert (o.pools >= 0).all() and (o.pools < n_el).all()
    assert all(len(np.unique(p)) == o.pool_size for p in o.pools)
    assert len({tuple(p) for p in o.pools}) == 3  # the replicates differ
    err = ~o.test_correct[o.eligible]
    conf = o.test_confidence[o.eligible]
    frac = small_params().loess_frac
    for r, idx in enumerate(o.pools):
        g = _independent_gad(conf[idx], o.distance[idx], o.flipped[idx], frac)
        order = np.argsort(g, kind="stable")[:B]
        np.testing.assert_array_equal(o.errors["gad"][r], err[idx][order])
        np.testing.assert_allclose(o.confidence["gad"][r], conf[idx][order])
        for s in o.errors:  # every search's recorded queries are rows of this pool
            assert np.isin(o.confidence[s][r], conf[idx]).all()
    # Fig. 1's curve is pool 1's own LOESS, not the one fitted on all eligible rows
    idx = o.pools[0]
    fin = o.flipped[idx]
    t = np.log(o.distance[idx][fin])
    pool_fit = t - _independent_gad(conf[idx], o.distance[idx], o.flipped[idx], frac)[fin]
    np.testing.assert_allclose(o.example["fitted"], pool_fit, atol=1e-9)
    global_fit = (np.log(o.distance) - o.gad)[idx][fin]
    assert np.abs(global_fit - pool_fit).max() > 1e-3
    # SDR (Eq. 1) is each pool's errors found over errors expected after each query
    np.testing.assert_allclose(
        o.sdr["random"], np.cumsum(o.errors["random"], axis=1) / np.cumsum(1 - o.confidence["random"], axis=1)
    )


def test_gad_over_all_eligible_rows_is_eq_2(outcome):
    """The GAD the findings rank by is Eq. 2 over all eligible rows; never-flipped rows get +inf."""
    o = outcome
    g = _independent_gad(o.test_confidence[o.eligible], o.distance, o.flipped, small_params().loess_frac)
    np.testing.assert_allclose(o.gad[o.flipped], g[o.flipped], atol=1e-9)
    assert np.isposinf(o.gad[~o.flipped]).all()


def test_gad_ranking_does_not_depend_on_a_feature_s_units(target, outcome):
    """Standardised network input and range-unit steps: measuring one feature in thousandths changes nothing."""
    clf, split, info = target
    k = np.array([1.0, 1000.0, 1.0, 1.0, 1.0])

    class Rescaled:
        n_classes = 2

        def predict_proba(self, X):
            return clf.predict_proba(np.asarray(X) / k)

    s2 = type(split)(
        name=split.name,
        X_train=split.X_train * k,
        y_train=split.y_train,
        X_test=split.X_test * k,
        y_test=split.y_test,
        feature_names=split.feature_names,
        log_mae=split.log_mae,
        info=split.info,
        classes=split.classes,
    )
    o2 = run_target(
        Rescaled(), s2, small_params(), class_index=1, device="cpu", seed=dataset_seed(11, "phoneme"), model_info=info
    )
    np.testing.assert_array_equal(o2.eligible, outcome.eligible)
    close = np.isclose(o2.distance, outcome.distance, rtol=1e-3)
    assert close.mean() > 0.95
    from scipy.stats import spearmanr

    both = outcome.flipped & o2.flipped
    assert spearmanr(outcome.gad[both], o2.gad[both]).statistic > 0.98


def test_eligibility_is_a_confident_prediction_of_the_class_of_interest():
    """Sec. V-C: eligible = predicted as the class of interest with confidence strictly above the threshold; a row
    predicted as the other class is never eligible however confident, and neither is one at 0.65 exactly."""
    from weakspot.gad.datasets import Split
    from weakspot.models import CallableClassifier

    rng = np.random.default_rng(0)
    p1 = np.r_[np.linspace(0.02, 0.98, 290), [0.65, 0.65, 0.6500001]]  # P(class 1) = the first feature
    X = np.column_stack([p1, rng.uniform(-1, 1, len(p1))])
    y = rng.integers(0, 2, len(p1))
    bb = CallableClassifier(
        lambda x: np.column_stack([1 - np.clip(x[:, 0], 0, 1), np.clip(x[:, 0], 0, 1)]), n_classes=2
    )
    split = Split(name="planted", X_train=X[:0], y_train=y[:0], X_test=X, y_test=y, feature_names=["p", "noise"])
    p = small_params(pool_size=40, design_points=1000, epochs=3)
    o = run_target(bb, split, p, class_index=1, device="cpu", seed=3)
    np.testing.assert_array_equal(o.eligible, np.flatnonzero(p1 > 0.65))
    assert 0.6500001 in set(X[o.eligible, 0]) and 0.65 not in set(X[o.eligible, 0])
    assert not np.isin(np.flatnonzero(p1 < 0.35), o.eligible).any()  # confident, but of the other class
    for s in o.confidence:  # every query of every search is an eligible row
        assert (o.confidence[s] > 0.65).all()
    assert (o.pools < len(o.eligible)).all()
    assert np.isnan(o.train_accuracy)  # no training rows


def test_the_gate_fails_where_the_pseudo_model_cannot_learn_the_black_box(noise_outcome):
    o = noise_outcome
    assert o.pseudo_r2_gate < o.min_pseudo_r2 == small_params().min_pseudo_r2 and not o.gad_reliable
    assert o.pseudo_r2_gate == min(o.pseudo_r2, o.pseudo_r2_eval)


def test_the_gate_is_the_lower_r2_and_nan_fails(outcome):
    from dataclasses import replace

    assert replace(outcome, pseudo_r2=0.9, pseudo_r2_eval=0.4).gad_reliable is False
    assert replace(outcome, pseudo_r2=0.9, pseudo_r2_eval=0.6).pseudo_r2_gate == 0.6
    nan = replace(outcome, pseudo_r2=float("nan"))
    assert np.isnan(nan.pseudo_r2_gate) and nan.gad_reliable is False
    assert isinstance(outcome, DatasetOutcome) and outcome.gad_reliable is True


def test_clear_errors(target):
    clf, split, _ = target
    with pytest.raises(ConfigError, match="class_index"):
        run_target(clf, split, small_params(), class_index=2, device="cpu")
    with pytest.raises(ConfigError, match="predict_proba"):
        run_target(object(), split, small_params(), class_index=1, device="cpu")
    with pytest.raises(DataError, match="enlarge the test split"):  # far too few confident rows for any protocol
        run_target(
            clf, split, small_params(pool_max_fraction=0.01, design_points=200, epochs=1), class_index=1, device="cpu"
        )
    bad = type(split)(
        name="bad",
        X_train=split.X_train,
        y_train=split.y_train,
        X_test=split.X_test,
        y_test=split.y_test[:-1],
        feature_names=split.feature_names,
    )
    with pytest.raises(DataError, match="do not match"):
        run_target(clf, bad, small_params(), class_index=1, device="cpu")


def test_a_small_pool_runs_the_protocol_with_as_many_queries_as_it_holds(target):
    """A user's small table cannot fill the paper's 50 queries: the searches get a pool's worth."""
    clf, split, info = target
    p = small_params(budget=600, pool_size=700, design_points=200, epochs=1, replicates=2)
    out = run_target(clf, split, p, class_index=1, device="cpu", seed=dataset_seed(11, "phoneme"), model_info=info)
    assert MIN_BUDGET <= out.budget == out.pool_size < 600
    assert all(e.shape == (2, out.budget) for e in out.errors.values())
    assert SMALL["budget"] == 10  # the fixtures' budget stays below any pool
