"""weakspot.intrinsic.claims: the paper's three claims checked on models whose answer is chosen, and Sec. 5.6's
grade."""

import numpy as np
import pytest

from weakspot.intrinsic.claims import GRADES, claims, grade, grade_applies
from tests.intrinsic.evals import accs, model_eval


def _evals(psi_of, cw_of, fgsm_of=None, pgd_of=None):
    fgsm_of, pgd_of = fgsm_of or cw_of, pgd_of or cw_of
    return {n: model_eval(n, np.full(12, 1.0 / psi_of[n]), accs(0.99, fgsm_of[n], pgd_of[n], cw_of[n]))
            for n in psi_of}


def test_claims_say_not_tested_without_the_models():
    t, out = claims({})
    assert len(t) == 0 and out == {} and list(t.columns) == ["claim", "holds", "numbers"]
    t, out = claims(_evals({"none": 2.0}, {"none": 0.1}))
    assert len(t) == 0 and out == {}


def test_min_max_largest_and_psi_ordering_hold_when_the_numbers_say_so():
    ev = _evals({"none": 2.0, "fgsm_at": 4.0, "minmax": 8.0}, {"none": 0.05, "fgsm_at": 0.3, "minmax": 0.6})
    t, out = claims(ev)
    assert out["minmax_largest_psi"] is True and out["psi_orders_as_cw30"] is True
    assert out["psi_cw30_pairs_agree"] == [3, 3] and out["psi_cw30_kendall_tau"] == pytest.approx(1.0)
    assert list(t["holds"]) == ["yes", "yes"] and t["numbers"].iloc[0].startswith("minmax 8.0, fgsm_at 4.0")


def test_a_reversed_order_and_a_smaller_min_max_psi_are_reported_as_not_holding():
    ev = _evals({"none": 9.0, "fgsm_at": 4.0, "minmax": 2.0}, {"none": 0.05, "fgsm_at": 0.3, "minmax": 0.6})
    t, out = claims(ev)
    assert out["minmax_largest_psi"] is False and out["psi_orders_as_cw30"] is False
    assert out["psi_cw30_pairs_agree"] == [0, 3] and out["psi_cw30_kendall_tau"] == pytest.approx(-1.0)


def test_equal_accuracies_leave_the_ordering_untested_and_tau_undefined():
    ev = _evals({"none": 2.0, "fgsm_at": 4.0, "minmax": 8.0}, {"none": 0.3, "fgsm_at": 0.3, "minmax": 0.3})
    t, out = claims(ev)
    assert out["psi_cw30_pairs_agree"] == [0, 0] and out["psi_cw30_kendall_tau"] is None
    assert t["holds"].iloc[1].startswith("not tested") and "undefined" in t["numbers"].iloc[1]


def test_distillation_claim_needs_its_premise():
    psi_of = {"none": 2.0, "minmax": 20.0, "distillation": 2.5}
    cw = {"none": 0.0, "minmax": 0.5, "distillation": 0.0}
    # distillation's FGSM and PGD accuracies far above the undefended model's, psi next to it: the claim holds
    high = {"none": 0.05, "minmax": 0.5, "distillation": 0.9}
    _, out = claims(_evals(psi_of, cw, high, high))
    assert out["distillation_claim"] == "yes" and out["distillation_psi_ratio"] == pytest.approx(1.25)
    # its psi nearer min-max's: the claim fails
    _, out = claims(_evals({**psi_of, "distillation": 15.0}, cw, high, high))
    assert out["distillation_claim"] == "no"
    # no gain under FGSM or PGD: the premise is absent
    low = {"none": 0.05, "minmax": 0.5, "distillation": 0.06}
    t, out = claims(_evals(psi_of, cw, low, low))
    assert out["distillation_claim"] == "premise absent" and t["holds"].iloc[-1].startswith("premise absent (")


def test_grade_is_anchored_on_table_1():
    assert [grade(v) for v in (93.8, 157.0, 158.0, 264.7, 503.0, 504.0, 958.4)] == \
        [GRADES[0], GRADES[0], GRADES[1], GRADES[1], GRADES[1], GRADES[2], GRADES[2]]
    assert grade_applies((5, 1, 8, 8), 0.3, (0.0, 1.0)) and grade_applies((5, 1, 8, 8), 0.6, (-1.0, 1.0))
    assert not grade_applies((5, 3, 8, 8), 0.3, (0.0, 1.0))  # colour
    assert not grade_applies((5, 1, 8, 8), 0.15, (0.0, 1.0))  # not MNIST's eps
    assert not grade_applies((5, 64), 0.3, (0.0, 1.0))  # not images
