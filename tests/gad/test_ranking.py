"""The to-label list is ranked by the label-free search that found the most errors per label, and says which."""

import numpy as np
import pytest

from weakspot.gad.findings import findings_of
from weakspot.gad.ranking import Ranking, choose, order_by


def test_the_label_free_search_with_the_most_errors_per_label_is_chosen():
    errors = {"gad": 11.6, "low_confidence": 16.3, "random": 14.6, "facility_location": 18.0}
    r = choose(errors, 50, gad_reliable=True)
    assert r.chosen == "low_confidence"  # facility locations found more, but needs each label to choose the next row
    assert "facility locations 18.0" in r.sentence() and r.sentence().startswith("ranked by lowest confidence: 16.3")
    assert choose({**errors, "gad": 17.0}, 50, gad_reliable=True).chosen == "gad"
    assert choose({**errors, "gad": 17.0}, 50, gad_reliable=False).chosen == "low_confidence"  # GAD withheld
    assert choose({"gad": 3.0, "low_confidence": 3.0, "random": 3.0}, 50, True).chosen == "low_confidence"  # a tie


def test_orders_follow_their_ranking_with_ties_by_row():
    conf = np.array([0.9, 0.7, 0.8, 0.7])
    score = np.array([1.0, -np.inf, 3.0, 1.0])
    rows = np.array([10, 11, 12, 13])
    assert order_by("low_confidence", conf, score, rows, 0).tolist() == [1, 3, 2, 0]
    assert order_by("gad", conf, score, rows, 0).tolist() == [2, 0, 3, 1]
    a, b = order_by("random", conf, score, rows, 5), order_by("random", conf, score, rows, 5)
    assert sorted(a.tolist()) == [0, 1, 2, 3] and a.tolist() == b.tolist()
    with pytest.raises(ValueError, match="label-free"):
        order_by("lakkaraju", conf, score, rows, 0)


def test_the_to_label_list_takes_the_chosen_order_and_names_it(outcome):
    r = Ranking(chosen="low_confidence", budget=10, errors={"gad": 1.0, "low_confidence": 2.0, "random": 1.5})
    _, to_label = findings_of(outcome, ranking=r)
    assert (to_label["ranked_by"] == "low_confidence").all()
    c = to_label["confidence"].to_numpy()
    assert np.all(c[:-1] <= c[1:]) and sorted(to_label["row"]) == sorted(outcome.eligible.tolist())
    weak, _ = findings_of(outcome)
    weak_low, _ = findings_of(outcome, ranking=r)
    assert weak.equals(weak_low)  # GAD's own findings still come from GAD's order


def test_the_report_orders_the_list_by_the_search_that_found_the_most_errors(outcome, target):
    from types import SimpleNamespace

    from tests.gad.helpers import small_params
    from weakspot.gad.report import report

    out = report([outcome], small_params(), SimpleNamespace(name="phoneme"))
    table = out.section.tables["to_label_ranking"]
    free = table[table["label_free"]]
    best = free.loc[free["errors_per_budget"].idxmax()]
    assert bool(best["ranks_to_label"]) and table["ranks_to_label"].sum() == 1
    import io

    import pandas as pd

    from weakspot.gad.search import search_label

    listed = pd.read_csv(io.BytesIO(out.extras["to_label.csv"]))
    assert set(listed["ranked_by"]) == {"gad" if best["search"] == "GAD" else listed["ranked_by"].iloc[0]}
    assert search_label(listed["ranked_by"].iloc[0]) == best["search"]
    assert any("The to-label list of phoneme" in h and "errors per" in h for h in out.section.headline)
