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
    assert set(d) == {"sdr", "sdr_ci95", "errors", "errors_expected", "pseudo_r2", "train_accuracy", "test_accuracy",
                      "budget"}
    assert list(d["sdr"]) == params.searches
    for s in params.searches:
        lo, hi = d["sdr_ci95"][s]
        assert lo <= d["sdr"][s] <= hi or np.isnan(d["sdr"][s])
        assert 0 <= d["errors"][s] <= 10
        # expected errors: each confident query expects at most 1 - the confidence threshold
        assert 0 < d["errors_expected"][s] <= 10 * (1 - params.confidence_threshold) + 1e-9
    assert "expect" in r.headline[0]
    assert 0.5 < d["test_accuracy"] <= 1 and d["pseudo_r2"] > 0.5
    assert {"sdr_curves", "errors_found", "confidence_boxplots", "reliability", "loess_fit"} <= set(r.figures)
    ti = r.tables["table_i"]
    assert ti.loc[0, "target"] == "phoneme" and ti.loc[0, "class_of_interest"] == "oral"
    assert ti.loc[0, "kernel"] == "rbf" and ti.loc[0, "N"] == 3000 and ti.loc[0, "loess"] == "Log MAE"
    t = r.tables["sdr_curves"]
    assert len(t) == len(params.searches) * 10
    last = t[(t.search == "gad") & (t["query"] == 10)]["sdr_mean"].iloc[0]
    assert last == pytest.approx(d["sdr"]["gad"], abs=1e-3)


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

