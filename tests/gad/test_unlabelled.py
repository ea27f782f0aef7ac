"""The unlabelled part: GAD's to-label list ranks production rows no one has labelled, by the search chosen on the
labelled pools, with the audited run's pseudo-model."""

from dataclasses import replace

import numpy as np
import pytest

from weakspot.gad.findings import findings_of
from weakspot.gad.ranking import Ranking


@pytest.fixture(scope="module")
def with_unlabelled(target):
    """The small phoneme protocol where half the test rows are handed over as unlabelled rows (their labels kept
    aside here as the ground truth the audit never sees)."""
    from tests.gad.helpers import small_params
    from weakspot.gad.protocol import dataset_seed, run_target

    clf, split, info = target
    half = len(split.X_test) // 2
    hidden = split.y_test[half:]
    split = replace(split, X_test=split.X_test[:half], y_test=split.y_test[:half], X_unlabelled=split.X_test[half:])
    out = run_target(
        clf,
        split,
        small_params(pool_max_fraction=0.9),
        class_index=1,
        device="cpu",
        seed=dataset_seed(11, "phoneme"),
        model_info=info,
    )
    return out, hidden


def test_the_list_is_the_unlabelled_rows_ranked_by_the_chosen_search(with_unlabelled):
    out, hidden = with_unlabelled
    u = out.unlabelled
    assert len(u.prediction) == len(out.split.X_unlabelled) and len(u.distance) == len(u.eligible)
    ranking = Ranking(chosen="low_confidence", budget=10, errors={"low_confidence": 5.0, "random": 3.0, "gad": 2.0})
    _, to_label = findings_of(out, ranking=ranking)
    assert (to_label["part"] == "unlabelled").all() and sorted(to_label["row"]) == sorted(u.eligible.tolist())
    conf = to_label["confidence"].to_numpy()
    assert np.all(conf[:-1] <= conf[1:])  # lowest confidence first, as chosen
    np.testing.assert_allclose(
        to_label[out.split.feature_names].to_numpy(float), out.split.X_unlabelled[to_label["row"].to_numpy()]
    )
    # the ranking is worth a label: its first 30 rows hold more errors than the eligible rows' share predicts
    wrong = hidden[to_label["row"].to_numpy()] != to_label["prediction"].to_numpy()
    assert wrong[:30].mean() > wrong.mean(), (wrong[:30].mean(), wrong.mean())


def test_gad_ranks_the_unlabelled_rows_by_its_own_score_where_chosen(with_unlabelled):
    out, _ = with_unlabelled
    ranking = Ranking(chosen="gad", budget=10, errors={"low_confidence": 2.0, "random": 3.0, "gad": 5.0})
    assert out.gad_reliable, "the pseudo-model failed its gate on this split: the test would show nothing"
    weak, to_label = findings_of(out, ranking=ranking)
    s = to_label["gad_score"].to_numpy()
    assert np.all(s[:-1] >= s[1:]) and (to_label["ranked_by"] == "gad").all()
    assert weak["weak_spot"].iloc[0].startswith("feature range")  # the weak spots stay on the labelled test rows
