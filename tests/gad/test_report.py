"""GAD's report: metrics pooled over split seeds, Table I and the SDR tables, the headline and prose, the findings
and the to-label list as extra products."""

import io

import numpy as np
import pandas as pd
import pytest

from tests.gad.helpers import NOISE, small_params
from weakspot.gad.ranking import choose
from weakspot.gad.findings import findings_of
from weakspot.gad.report import ITEMS, metrics_of, report, section
from weakspot.methods import AuditTarget, MethodReport


def test_section_names_metrics_tables_and_class(outcome):
    params = small_params()
    r = section([outcome], params)
    assert list(r.metrics) == ["phoneme"] and r.title.endswith("(phoneme)") and r.items == ITEMS
    d = r.metrics["phoneme"]
    assert set(d) == {
        "sdr",
        "sdr_ci95",
        "sdr_range",
        "errors",
        "errors_expected",
        "pseudo_r2",
        "pseudo_r2_lowest",
        "train_accuracy",
        "test_accuracy",
        "budget",
        "replicates",
        "pool_size",
        "seeds",
        "n_seeds",
        "interval_over",
        "gad_reliable",
        "min_pseudo_r2",
        "gad_error_auc",
        "confidence_error_auc",
        "per_seed",
    }
    assert d["seeds"] == [0] and d["n_seeds"] == 1 and d["interval_over"] == "pools" and list(d["per_seed"]) == ["0"]
    assert list(d["sdr"]) == params.searches
    for s in params.searches:
        lo, hi = d["sdr_ci95"][s]
        assert lo <= d["sdr"][s] <= hi
        # one seed: the across-seed figures are that seed's, its interval the one over pools
        assert d["sdr"][s] == d["per_seed"]["0"]["sdr"][s] and [lo, hi] == d["per_seed"]["0"]["sdr_ci95_pools"][s]
        assert d["sdr"][s] == round(float(outcome.sdr[s][:, -1].mean()), 4)
        assert 0 <= d["errors"][s] <= 10
        # expected errors: each confident query expects at most 1 - the confidence threshold
        assert 0 < d["errors_expected"][s] <= 10 * (1 - params.confidence_threshold) + 1e-9
    assert "expect" in r.headline[0] and "on one split (3 pools of 60)" in r.headline[0]
    assert 0.5 < d["test_accuracy"] <= 1 and d["pseudo_r2"] > 0.5 and d["gad_reliable"] is True
    assert not r.figures  # drawn by weakspot.gad.figures
    ti = r.tables["table_i"]
    assert ti.loc[0, "target"] == "phoneme" and ti.loc[0, "class_of_interest"] == "oral" and ti.loc[0, "seed"] == 0
    assert ti.loc[0, "kernel"] == "rbf" and ti.loc[0, "N"] == 3000 and ti.loc[0, "loess"] == "Log MAE"
    # the paper's Table I next to ours (the split comes from the phoneme preset)
    assert (ti.loc[0, "paper_train_accuracy"], ti.loc[0, "paper_test_accuracy"], ti.loc[0, "paper_kernel"]) == (
        0.81,
        0.81,
        "Radial",
    )
    assert ti.loc[0, "never_flipped"] == int((~outcome.flipped).sum())
    t = r.tables["sdr_curves"]
    assert len(t) == len(params.searches) * 10
    last = t[(t.search == "gad") & (t["query"] == 10)]["sdr_mean"].iloc[0]
    assert last == pytest.approx(d["sdr"]["gad"], abs=1e-3)
    assert any(p.startswith("phoneme (class of interest 'oral')") for p in r.summary)


def test_metrics_pool_split_seeds_with_a_t_interval_over_seeds(outcome, second_seed):
    params = small_params(seeds=[0, 1])
    r = section([second_seed, outcome], params)  # any order: grouped by target, sorted by seed
    d = r.metrics["phoneme"]
    assert d["seeds"] == [0, 1] and d["n_seeds"] == 2 and d["interval_over"] == "seeds"
    assert set(d["per_seed"]) == {"0", "1"}
    for s in params.searches:
        per = [d["per_seed"][k]["sdr"][s] for k in ("0", "1")]
        own = [float(o.sdr[s][:, -1].mean()) for o in (outcome, second_seed)]
        np.testing.assert_allclose(per, own, atol=1e-4)  # each seed's mean over its pools
        assert d["sdr"][s] == pytest.approx(np.mean(own), abs=1e-4)
    # the test split differs between the seeds, and the audited model (seed 0) gives the accuracies
    assert not np.array_equal(outcome.split.X_test, second_seed.split.X_test)
    assert d["test_accuracy"] == round(outcome.test_accuracy, 4)
    assert "over 2 split seeds (3 pools of 60 each)" in r.headline[0] and "95% t over seeds" in r.headline[0]
    ti = r.tables["table_i"]
    assert ti["seed"].tolist() == [0, 1] and len(r.tables["sdr_by_seed"]) == 2 * len(params.searches)
    assert len(r.tables["sdr_across_seeds"]) == len(params.searches)
    assert (r.tables["sdr_across_seeds"]["interval_over"] == "seeds").all()


def test_the_gate_withholds_gad_in_metrics_tables_headline_and_prose(noise_outcome):
    p = small_params(**NOISE)
    r = section([noise_outcome], p)
    d = r.metrics["noise"]
    assert d["gad_reliable"] is False and d["pseudo_r2_lowest"] < 0.5
    for key in ("sdr", "sdr_ci95", "sdr_range", "errors", "errors_expected"):
        assert d[key]["gad"] is None and d[key]["random"] is not None
    assert d["per_seed"]["0"]["sdr"]["gad"] is None and d["per_seed"]["0"]["pseudo_r2"] is not None
    assert d["gad_error_auc"] is None and d["confidence_error_auc"] is not None
    h = r.headline[0]
    assert "unreliable" in h and "R^2" in h and "GAD finds" not in h
    assert any(s.startswith("Caveat: GAD is unreliable on noise") for s in r.summary)
    assert "gad" not in set(r.tables["sdr_curves"]["search"])
    assert pd.isna(r.tables["sdr_across_seeds"].set_index("search").loc["gad", "sdr_mean"])


def test_a_small_pool_is_labelled_with_the_queries_it_ran(outcome):
    from dataclasses import replace

    five = replace(outcome, budget=5)  # as if a pool had held only 5 queries
    res = section([five], small_params())
    assert res.metrics["phoneme"]["budget"] == 5 and "with 5 labels" in res.headline[0]
    assert res.metrics["phoneme"]["sdr"]["random"] == round(float(outcome.sdr["random"][:, 4].mean()), 4)


def test_metrics_are_json_numbers_or_null(noise_outcome, outcome):
    import json

    text = json.dumps(metrics_of([outcome, noise_outcome]), allow_nan=False)  # no NaN or inf slips through
    assert set(json.loads(text)) == {"phoneme", "noise"}


def test_report_hands_back_the_section_findings_and_the_to_label_list(outcome, second_seed):
    params = small_params(seeds=[0, 1])
    t = AuditTarget(name="phoneme", model=None, classes=["nasal", "oral"], test=None)
    out = report([second_seed, outcome], params, t)
    assert isinstance(out, MethodReport) and set(out.extras) == {"to_label.parquet", "to_label.csv"}
    m = section([outcome, second_seed], params).metrics["phoneme"]
    ranking = choose({k: v for k, v in m["errors"].items() if v is not None}, m["budget"], m["gad_reliable"])
    # the audited run's (split seed 0), whatever the order given, listed by the search with the most errors per label
    weak, to_label = findings_of(outcome, ranking=ranking)
    pd.testing.assert_frame_equal(out.findings, weak)
    pd.testing.assert_frame_equal(pd.read_parquet(io.BytesIO(out.extras["to_label.parquet"])), to_label)
    assert out.extras["to_label.csv"].decode() == to_label.to_csv(index=False)
    assert out.section.metrics == section([outcome, second_seed], params).metrics
