"""run_target on a small real split (phoneme, the paper's bias) with a given SVM black box; findings; the result."""

import json

import numpy as np
import pytest

from weakspot.errors import ConfigError, DataError
from weakspot.findings import normalise
from weakspot.gad.config import GadParams
from weakspot.gad.datasets import make_preset_split
from weakspot.gad.experiment import dataset_seed, findings_of, result_of, run_target
from weakspot.models import SKLEARN_ARCHS, SklearnClassifier

SMALL = dict(
    design_points=3000, epochs=12, hidden_units=32, batch_size=128, replicates=3, pool_size=60, budget=10,
    step_size=0.01, max_steps=200, refine_iters=4, seed=11,
)
SEED = dataset_seed(11, "phoneme")


@pytest.fixture(scope="module")
def target():
    split = make_preset_split("phoneme", seed=SEED, n_train=600, n_test=700)
    est, info = SKLEARN_ARCHS.get("svm_grid")(split.X_train, split.y_train, seed=SEED, kernels=["rbf"], C=[1.0], cv=2)
    return SklearnClassifier(est, n_classes=2), split, info


@pytest.fixture(scope="module")
def outcome(target):
    clf, split, info = target
    return run_target(clf, split, GadParams(**SMALL), class_index=1, device="cpu", seed=SEED, model_info=info)


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


def test_to_label_is_ranked_by_gad_score_without_ground_truth(target, outcome):
    _, split, _ = target
    weak, to_label = findings_of(outcome)
    assert list(to_label.columns) == ["rank", *split.feature_names, "prediction", "confidence",
                                      "adversarial_distance", "gad_score", "row"]
    assert "label" not in to_label.columns and len(to_label) == len(outcome.eligible)
    s = to_label["gad_score"].to_numpy()
    assert np.all(s[:-1] >= s[1:])  # descending: most likely confident error first
    assert to_label["rank"].tolist() == list(range(1, len(to_label) + 1))
    assert sorted(to_label["row"]) == sorted(outcome.eligible.tolist())
    assert (to_label["prediction"] == 1).all() and (to_label["confidence"] > 0.65).all()
    first = to_label.iloc[0]
    np.testing.assert_allclose(first[split.feature_names].to_numpy(float), split.X_test[int(first["row"])])


def test_weak_spots_have_the_shared_findings_shape(outcome):
    weak, _ = findings_of(outcome, top=15)
    assert list(weak.columns) == ["weak_spot", "kind", "severity", "severity_meaning", "label", "prediction",
                                  "confidence", "example"]
    assert weak["kind"].iloc[0] == "feature_range" and weak["weak_spot"].iloc[0].startswith("feature range: ")
    assert (weak["kind"].iloc[1:] == "input").all() and 1 <= len(weak) - 1 <= 5
    sev = weak["severity"].iloc[1:].to_numpy()
    assert np.all(sev[:-1] >= sev[1:]) and np.isfinite(weak["severity"]).all()
    assert set(weak["prediction"]) == {"oral"} and set(weak["label"]) <= {"oral", "nasal"}
    assert set(json.loads(weak["example"].iloc[1])) == {"Aa", "Ao", "Dcl", "Iy", "Sh"}
    assert len(normalise(weak)) == len(weak)  # accepted by weakspot.findings


def test_result_across_targets_names_figures_tables_and_class(outcome):
    params = GadParams(**SMALL)
    r = result_of([outcome], params).check()
    assert list(r.metrics) == ["phoneme"]
    d = r.metrics["phoneme"]
    assert set(d) == {"sdr", "sdr_ci95", "sdr_range", "errors", "errors_expected", "pseudo_r2", "pseudo_r2_lowest",
                      "train_accuracy", "test_accuracy", "budget", "replicates", "pool_size", "seeds", "n_seeds",
                      "interval_over", "gad_reliable", "min_pseudo_r2", "gad_error_auc", "confidence_error_auc",
                      "per_seed"}
    assert d["seeds"] == [0] and d["n_seeds"] == 1 and d["interval_over"] == "pools" and list(d["per_seed"]) == ["0"]
    assert list(d["sdr"]) == params.searches
    for s in params.searches:
        lo, hi = d["sdr_ci95"][s]
        assert lo <= d["sdr"][s] <= hi
        # one seed: the across-seed figures are that seed's, its interval the one over pools
        assert d["sdr"][s] == d["per_seed"]["0"]["sdr"][s] and [lo, hi] == d["per_seed"]["0"]["sdr_ci95_pools"][s]
        assert 0 <= d["errors"][s] <= 10
        # expected errors: each confident query expects at most 1 - the confidence threshold
        assert 0 < d["errors_expected"][s] <= 10 * (1 - params.confidence_threshold) + 1e-9
    assert "expect" in r.headline[0] and "on one split (3 pools of 60)" in r.headline[0]
    assert 0.5 < d["test_accuracy"] <= 1 and d["pseudo_r2"] > 0.5 and d["gad_reliable"] is True
    assert {"sdr_curves", "errors_found", "confidence_boxplots", "reliability", "loess_fit", "sdr_by_seed"} <= set(r.figures)
    ti = r.tables["table_i"]
    assert ti.loc[0, "target"] == "phoneme" and ti.loc[0, "class_of_interest"] == "oral" and ti.loc[0, "seed"] == 0
    assert ti.loc[0, "kernel"] == "rbf" and ti.loc[0, "N"] == 3000 and ti.loc[0, "loess"] == "Log MAE"
    # the paper's Table I next to ours (the split comes from the phoneme preset)
    assert (ti.loc[0, "paper_train_accuracy"], ti.loc[0, "paper_test_accuracy"], ti.loc[0, "paper_kernel"]) == (0.81, 0.81, "Radial")
    t = r.tables["sdr_curves"]
    assert len(t) == len(params.searches) * 10
    last = t[(t.search == "gad") & (t["query"] == 10)]["sdr_mean"].iloc[0]
    assert last == pytest.approx(d["sdr"]["gad"], abs=1e-3)


@pytest.fixture(scope="module")
def second_seed():
    """The same protocol on another split seed: another biased split and another SVM."""
    seed = dataset_seed(11, "phoneme", 1)
    split = make_preset_split("phoneme", seed=seed, n_train=600, n_test=700)
    est, info = SKLEARN_ARCHS.get("svm_grid")(split.X_train, split.y_train, seed=seed, kernels=["rbf"], C=[1.0], cv=2)
    return run_target(SklearnClassifier(est, n_classes=2), split, GadParams(**SMALL), class_index=1, device="cpu",
                      seed=seed, model_info=info, split_seed=1)


def test_metrics_pool_split_seeds_with_a_t_interval_over_seeds(outcome, second_seed):
    from scipy import stats

    params = GadParams(**SMALL, seeds=[0, 1])
    r = result_of([second_seed, outcome], params)  # any order: grouped by target, sorted by seed
    d = r.metrics["phoneme"]
    assert d["seeds"] == [0, 1] and d["n_seeds"] == 2 and d["interval_over"] == "seeds"
    assert set(d["per_seed"]) == {"0", "1"}
    for s in params.searches:
        per = [d["per_seed"][k]["sdr"][s] for k in ("0", "1")]
        own = [float(o.sdr[s][:, -1].mean()) for o in (outcome, second_seed)]
        np.testing.assert_allclose(per, own, atol=1e-4)  # each seed's mean over its pools
        assert d["sdr"][s] == pytest.approx(np.mean(own), abs=1e-4)
        half = stats.t.ppf(0.975, 1) * np.std(own, ddof=1) / np.sqrt(2)
        assert d["sdr_ci95"][s] == pytest.approx([np.mean(own) - half, np.mean(own) + half], abs=2e-4)
        assert d["sdr_range"][s] == pytest.approx([min(own), max(own)], abs=1e-4)
    # the test split differs between the seeds, and the audited model (seed 0) gives the accuracies
    assert not np.array_equal(outcome.split.X_test, second_seed.split.X_test)
    assert d["test_accuracy"] == round(outcome.test_accuracy, 4)
    assert "over 2 split seeds (3 pools of 60 each)" in r.headline[0] and "95% t over seeds" in r.headline[0]
    ti = r.tables["table_i"]
    assert ti["seed"].tolist() == [0, 1] and len(r.tables["sdr_by_seed"]) == 2 * len(params.searches)
    with pytest.raises(DataError, match="split seed"):
        result_of([outcome, outcome], params)


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
    frac = GadParams(**SMALL).loess_frac
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


def test_gad_order_on_a_small_real_split_is_lowest_gad_first(outcome):
    """The ranking handed to a person is Eq. 2 over all eligible rows, lowest GAD first, never-flipped rows last."""
    o = outcome
    g = _independent_gad(o.test_confidence[o.eligible], o.distance, o.flipped, GadParams(**SMALL).loess_frac)
    np.testing.assert_allclose(o.gad[o.flipped], g[o.flipped], atol=1e-9)
    _, to_label = findings_of(o)
    expected = o.eligible[np.lexsort((o.eligible, g))]
    np.testing.assert_array_equal(to_label["row"].to_numpy(), expected)


def test_gad_ranking_does_not_depend_on_a_feature_s_units(target, outcome):
    """Standardised network input and range-unit steps: measuring one feature in thousandths changes nothing."""
    clf, split, info = target
    k = np.array([1.0, 1000.0, 1.0, 1.0, 1.0])

    class Rescaled:
        n_classes = 2

        def predict_proba(self, X):
            return clf.predict_proba(np.asarray(X) / k)

    s2 = type(split)(name=split.name, X_train=split.X_train * k, y_train=split.y_train, X_test=split.X_test * k,
                     y_test=split.y_test, feature_names=split.feature_names, log_mae=split.log_mae, info=split.info,
                     classes=split.classes)
    o2 = run_target(Rescaled(), s2, GadParams(**SMALL), class_index=1, device="cpu", seed=SEED, model_info=info)
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
    bb = CallableClassifier(lambda x: np.column_stack([1 - np.clip(x[:, 0], 0, 1), np.clip(x[:, 0], 0, 1)]), n_classes=2)
    split = Split(name="planted", X_train=X[:0], y_train=y[:0], X_test=X, y_test=y, feature_names=["p", "noise"])
    p = GadParams(**{**SMALL, "pool_size": 40, "design_points": 1000, "epochs": 3})
    o = run_target(bb, split, p, class_index=1, device="cpu", seed=3)
    np.testing.assert_array_equal(o.eligible, np.flatnonzero(p1 > 0.65))
    assert 0.6500001 in set(X[o.eligible, 0]) and 0.65 not in set(X[o.eligible, 0])
    assert not np.isin(np.flatnonzero(p1 < 0.35), o.eligible).any()  # confident, but of the other class
    for s in o.confidence:  # every query of every search is an eligible row
        assert (o.confidence[s] > 0.65).all()
    assert (o.pools < len(o.eligible)).all()


def _noise_black_box():
    """A black box whose confidence is a hash of its input: deterministic, but no pseudo-model can learn it."""
    from weakspot.models import CallableClassifier

    w = np.array([12.9898, 78.233, 37.719])

    def fn(x):
        v = np.sin(np.asarray(x, dtype=np.float64) @ w) * 43758.5453
        p = v - np.floor(v)
        return np.column_stack([1 - p, p])

    return CallableClassifier(fn, n_classes=2)


def test_gate_withholds_gad_where_the_pseudo_model_cannot_learn_the_black_box():
    from weakspot.gad.datasets import Split

    rng = np.random.default_rng(1)
    X = rng.uniform(-1, 1, size=(600, 3))
    y = rng.integers(0, 2, 600)
    split = Split(name="noise", X_train=X[:0], y_train=y[:0], X_test=X, y_test=y, feature_names=["a", "b", "c"])
    p = GadParams(**{**SMALL, "design_points": 2000, "epochs": 4})
    o = run_target(_noise_black_box(), split, p, class_index=1, device="cpu", seed=5)
    assert o.pseudo_r2_gate < p.min_pseudo_r2 and not o.gad_reliable
    r = result_of([o], p)
    d = r.metrics["noise"]
    assert d["gad_reliable"] is False and d["pseudo_r2_lowest"] < 0.5
    for key in ("sdr", "sdr_ci95", "sdr_range", "errors", "errors_expected"):
        assert d[key]["gad"] is None and d[key]["random"] is not None
    assert d["per_seed"]["0"]["sdr"]["gad"] is None and d["per_seed"]["0"]["pseudo_r2"] is not None
    h = r.headline[0]
    assert "unreliable" in h and "R^2" in h and "GAD finds" not in h
    assert any("unreliable" in s for s in r.summary)
    assert "gad" not in set(r.tables["sdr_curves"]["search"])
    weak, to_label = findings_of(o)
    assert weak["kind"].tolist() == ["method_caveat"] and "unreliable" in weak["weak_spot"].iloc[0]
    assert to_label["gad_score"].isna().all()
    c = to_label["confidence"].to_numpy()
    assert (c[:-1] <= c[1:]).all()  # lowest confidence first, no GAD ranking
    assert len(normalise(weak)) == 1


def test_clear_errors(target):
    clf, split, _ = target
    with pytest.raises(ConfigError, match="class_index"):
        run_target(clf, split, GadParams(**SMALL), class_index=2, device="cpu")
    with pytest.raises(DataError, match="enlarge the test split"):  # far too few confident rows for any protocol
        run_target(clf, split, GadParams(**{**SMALL, "pool_max_fraction": 0.01, "design_points": 200, "epochs": 1}),
                   class_index=1, device="cpu")


def test_a_small_pool_runs_the_protocol_with_as_many_queries_as_it_holds(target):
    """A user's small table cannot fill the paper's 50 queries: the searches get a pool's worth, labelled."""
    clf, split, info = target
    p = GadParams(**{**SMALL, "budget": 600, "pool_size": 700, "design_points": 200, "epochs": 1, "replicates": 2})
    out = run_target(clf, split, p, class_index=1, device="cpu", seed=SEED, model_info=info)
    assert 10 <= out.budget == out.pool_size < 600
    assert all(e.shape == (2, out.budget) for e in out.errors.values())
    res = result_of([out], p)
    assert res.metrics["phoneme"]["budget"] == out.budget
    assert f"with {out.budget} labels" in res.headline[0]

