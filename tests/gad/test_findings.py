"""findings_of: the to-label list (GAD's ranking, no ground truth) and the weak spots in the shared findings shape."""

import json
import re
from dataclasses import replace

import numpy as np
import pytest

from weakspot.errors import ConfigError
from weakspot.findings import normalise
from weakspot.gad.findings import FINDING_COLUMNS, findings_of, unreliable_reason


def test_to_label_is_ranked_by_gad_score_without_ground_truth(target, outcome):
    _, split, _ = target
    weak, to_label = findings_of(outcome)
    assert list(to_label.columns) == [
        "rank",
        *split.feature_names,
        "prediction",
        "confidence",
        "adversarial_distance",
        "gad_score",
        "row",
        "part",
        "ranked_by",
    ]
    assert (to_label["part"] == "test").all()  # no unlabelled part: the eligible test rows
    assert (to_label["ranked_by"] == "gad").all()  # no ranking chosen: GAD's own, where it is reliable
    assert "label" not in to_label.columns and len(to_label) == len(outcome.eligible)
    s = to_label["gad_score"].to_numpy()
    assert np.all(s[:-1] >= s[1:])  # descending: most likely confident error first
    assert to_label["rank"].tolist() == list(range(1, len(to_label) + 1))
    assert sorted(to_label["row"]) == sorted(outcome.eligible.tolist())
    assert (to_label["prediction"] == 1).all() and (to_label["confidence"] > 0.65).all()
    first = to_label.iloc[0]
    np.testing.assert_allclose(first[split.feature_names].to_numpy(float), split.X_test[int(first["row"])])
    # each row keeps its own distance and confidence
    pos = np.searchsorted(outcome.eligible, to_label["row"].to_numpy())
    np.testing.assert_array_equal(to_label["adversarial_distance"].to_numpy(), outcome.distance[pos])
    np.testing.assert_array_equal(to_label["gad_score"].to_numpy(), -outcome.gad[pos])


def test_the_ranking_is_lowest_gad_first_ties_by_row_never_flipped_last(outcome):
    o = outcome
    _, to_label = findings_of(o)
    np.testing.assert_array_equal(to_label["row"].to_numpy(), o.eligible[np.lexsort((o.eligible, o.gad))])
    s, flipped = to_label["gad_score"].to_numpy(), int(o.flipped.sum())
    assert np.isfinite(s[:flipped]).all() and np.isneginf(s[flipped:]).all()


def test_weak_spots_have_the_shared_findings_shape(outcome):
    weak, to_label = findings_of(outcome, top=15)
    assert list(weak.columns)[: len(FINDING_COLUMNS)] == list(FINDING_COLUMNS)
    assert not weak["confirmed"].iloc[1:].any() and (weak["n_confirm"].iloc[1:] == 0).all()  # inputs: unchecked
    assert weak["kind"].iloc[0] == "feature_range" and weak["weak_spot"].iloc[0].startswith("feature range: ")
    assert (weak["kind"].iloc[1:] == "input").all() and 1 <= len(weak) - 1 <= 5
    sev = weak["severity"].iloc[1:].to_numpy()
    assert np.all(sev[:-1] >= sev[1:]) and np.isfinite(weak["severity"]).all()
    assert set(weak["prediction"]) == {"oral"} and set(weak["label"]) <= {"oral", "nasal"}
    assert set(json.loads(weak["example"].iloc[1])) == {"Aa", "Ao", "Dcl", "Iy", "Sh"}
    assert len(normalise(weak)) == len(weak)  # accepted by weakspot.findings
    # the input rows are the top of the to-label list, their severity its GAD score
    np.testing.assert_array_equal(sev, to_label["gad_score"].to_numpy()[: len(sev)])
    assert weak["weak_spot"].iloc[1] == f"test row {to_label['row'].iloc[0]} (GAD rank 1 of {len(to_label)})"


def test_the_feature_range_is_measured_on_the_rows_it_was_not_drawn_from(outcome):
    """Known answer from the outcome: the box's errors among the eligible rows outside the top 15 (held out) against
    the rest of those rows; the severity is that lift."""
    weak, to_label = findings_of(outcome, top=15)
    row = weak.iloc[0]
    wrong = ~outcome.test_correct[to_label["row"].to_numpy()]
    ranges = re.findall(r"(\S+) in \[([^,\]]+), ([^\]]+)\]", row["weak_spot"])
    inside = np.ones(len(to_label), bool)
    for name, _, _ in ranges:
        q = np.quantile(to_label[name].to_numpy()[:15], [0.25, 0.75])
        inside &= (to_label[name].to_numpy() >= q[0]) & (to_label[name].to_numpy() <= q[1])
    held = np.arange(len(to_label)) >= 15
    assert row["n_confirm"] == (inside & held).sum() and row["failures"] == (wrong & inside & held).sum()
    assert row["n_control"] == (~inside & held).sum() and row["control_failures"] == (wrong & ~inside & held).sum()
    assert row["severity"] == pytest.approx(np.nan_to_num(row["lift"]))
    assert row["confirmed"] == (row["lift_lo_adjusted"] > 1 and row["n_confirm"] >= 5)
    assert weak["confidence"].iloc[0] == pytest.approx(to_label["confidence"].iloc[:15].mean())
    ranges = re.findall(r"(\S+) in \[([^,\]]+), ([^\]]+)\]", weak["weak_spot"].iloc[0])
    assert 1 <= len(ranges) <= 3
    for name, lo, hi in ranges:
        q = np.quantile(to_label[name].to_numpy()[:15], [0.25, 0.75])
        np.testing.assert_allclose([float(lo), float(hi)], q, rtol=1e-3, atol=1e-4)  # 4 significant digits


def test_a_planted_region_that_gads_top_rows_fall_in_is_confirmed_on_the_rows_they_were_not_drawn_from(outcome):
    """Issue 47's known answer: the outcome's ground truth and GAD's ranking planted. Every eligible row with Iy at
    or below its median is a confident error, and 3% of the rest at random; GAD ranks 40 of the planted rows first.
    The feature range names Iy alone, inside the planted region, is measured on the other eligible rows (never the 40
    it was drawn from), every one of its rows an error, and is confirmed there."""
    from dataclasses import replace

    rows = np.asarray(outcome.eligible, np.int64)
    names = list(outcome.split.feature_names)
    iy = np.asarray(outcome.split.X_test, np.float64)[:, names.index("Iy")]
    cut = np.median(iy[rows])
    planted = iy <= cut
    rng = np.random.default_rng(0)
    correct = ~planted & (rng.random(len(iy)) >= 0.03)
    score = rng.random(len(rows))
    score[rng.permutation(np.flatnonzero(planted[rows]))[:40]] += 10  # GAD's score: higher first
    o = replace(outcome, test_correct=correct, gad=-score)
    assert o.gad_reliable  # the fixture's pseudo-model passes its gate (else no feature range is offered)
    weak, _ = findings_of(o, top=40)
    row = weak.iloc[0]
    found = re.findall(r"(\S+) in \[([^,\]]+), ([^\]]+)\]", row["weak_spot"])
    assert [f[0] for f in found] == ["Iy"], row["weak_spot"]
    assert float(found[0][2]) <= cut + 1e-6, (row["weak_spot"], cut)  # inside the planted region
    assert row["n_confirm"] + row["n_control"] == len(rows) - 40  # the rows it was drawn from are not measured
    assert row["n_confirm"] >= 5 and row["failures"] == row["n_confirm"], row.to_dict()
    assert row["confirmed"] and row["lift_lo_adjusted"] > 1.5, row.to_dict()


def test_where_gad_is_unreliable_the_rows_come_lowest_confidence_first(noise_outcome):
    o = noise_outcome
    weak, to_label = findings_of(o)
    assert weak["kind"].tolist() == ["method_caveat"] and "unreliable" in weak["weak_spot"].iloc[0]
    assert unreliable_reason(o) in weak["weak_spot"].iloc[0] and "R^2" in unreliable_reason(o)
    assert to_label["gad_score"].isna().all()
    c = to_label["confidence"].to_numpy()
    assert (c[:-1] <= c[1:]).all()  # lowest confidence first, no GAD ranking
    assert len(normalise(weak)) == 1


def test_top_must_be_a_positive_integer(outcome):
    for bad in (0, -1, 2.5, True):
        with pytest.raises(ConfigError, match="top"):
            findings_of(outcome, top=bad)


def test_no_eligible_row_gives_no_weak_spot(outcome):
    empty = replace(outcome, eligible=outcome.eligible[:0], gad=outcome.gad[:0], distance=outcome.distance[:0])
    weak, to_label = findings_of(empty)
    assert len(weak) == 0 and len(to_label) == 0 and list(weak.columns)[: len(FINDING_COLUMNS)] == list(FINDING_COLUMNS)
