import pytest

from weakspot.errors import DataError
from weakspot.gad.config import SEARCH_NAMES, GadParams
from weakspot.gad.experiment import run_gad

SMALL = dict(
    datasets=[{"name": "breast_cancer"}], design_points=2000, epochs=6, batch_size=64, replicates=4, pool_size=60, budget=10,
    svm={"C": [1.0], "gamma": ["scale"], "cv": 2}, seed=11,
)


@pytest.fixture(scope="module")
def small_result():
    return run_gad(GadParams(**SMALL), device="cpu")


def test_metrics_have_the_issue_shape(small_result):
    m = small_result.metrics
    assert list(m) == ["breast_cancer"]
    d = m["breast_cancer"]
    assert set(d) == {"sdr", "sdr_ci95", "errors", "pseudo_r2", "train_accuracy", "test_accuracy"}
    for key in ("sdr", "sdr_ci95", "errors"):
        assert list(d[key]) == list(SEARCH_NAMES)
    for s in SEARCH_NAMES:
        lo, hi = d["sdr_ci95"][s]
        assert lo <= d["sdr"][s] <= hi
        assert 0 <= d["errors"][s] <= 10
    assert 0.5 < d["test_accuracy"] <= 1 and 0.5 < d["train_accuracy"] <= 1 and d["pseudo_r2"] > 0.5


def test_section_names_existing_figures_and_tables(small_result):
    r = small_result.check()
    assert {"sdr_curves", "errors_found", "confidence_boxplots", "reliability", "loess_fit"} <= set(r.figures)
    t = r.tables["sdr_curves"]
    assert len(t) == len(SEARCH_NAMES) * 10 and t["query"].max() == 10
    # the long table's last SDR row equals the metric
    last = t[(t.search == "gad") & (t["query"] == 10)]["sdr_mean"].iloc[0]
    assert last == pytest.approx(r.metrics["breast_cancer"]["sdr"]["gad"], abs=1e-3)
    ti = r.tables["table_i"]
    assert ti.loc[0, "N"] == 2000 and ti.loc[0, "loess"] == "Log MAE" and r.title and r.summary


def test_same_params_same_metrics(small_result):
    again = run_gad(GadParams(**SMALL), device="cpu")
    assert again.metrics == small_result.metrics


def test_too_few_confident_predictions_is_a_clear_error():
    with pytest.raises(DataError, match="budget"):
        run_gad(GadParams(**{**SMALL, "budget": 200, "pool_size": 400}), device="cpu")


def test_dict_params_are_validated():
    from weakspot.errors import ConfigError

    with pytest.raises(ConfigError, match="design_point"):
        run_gad({"design_point": 10}, device="cpu")
