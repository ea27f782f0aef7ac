"""weakspot.intrinsic.claims: the paper's three claims checked on models whose answer is chosen, and Sec. 5.6's
grade."""

import numpy as np
import pytest

from weakspot.intrinsic.claims import GRADES, claims, grade, grade_applies
from tests.intrinsic.evals import accs, model_eval


def _evals(psi_of, cw_of, fgsm_of=None, pgd_of=None):
    fgsm_of, pgd_of = fgsm_of or cw_of, pgd_of or cw_of
    return {n: model_eval(n, np.full(12, 1.0 / psi_of[n]), accs(0.99, fgsm_of[n], pgd_of[n], cw_of[n])) for n in psi_of}


def test_claims_say_not_tested_without_the_models():
    t, out = claims({})
    assert len(t) == 0 and out == {} and list(t.columns) == ["claim", "criterion", "numbers", "holds"]
    t, out = claims(_evals({"none": 2.0}, {"none": 0.1}))
    assert len(t) == 0 and out == {}


def test_min_max_largest_and_psi_ordering_hold_when_the_numbers_say_so():
    ev = _evals({"none": 2.0, "fgsm_at": 4.0, "minmax": 8.0}, {"none": 0.05, "fgsm_at": 0.3, "minmax": 0.6})
    t, out = claims(ev)
    assert out["minmax_largest_psi"] is True and out["psi_orders_as_cw30"] is True
    assert out["psi_cw30_pairs_agree"] == [3, 3] and out["psi_cw30_kendall_tau"] == pytest.approx(1.0)
    assert list(t["holds"]) == ["yes", "yes"]
    # a defended model's psi is never given without its clean accuracy
    assert t["numbers"].iloc[0].startswith("psi (clean accuracy): minmax 8.00 (99.0%), fgsm_at 4.00 (99.0%)")
    assert "largest of the 3 models" in t["criterion"].iloc[0] and "two standard errors" in t["criterion"].iloc[1]


def test_a_reversed_order_and_a_smaller_min_max_psi_are_reported_as_not_holding():
    ev = _evals({"none": 9.0, "fgsm_at": 4.0, "minmax": 2.0}, {"none": 0.05, "fgsm_at": 0.3, "minmax": 0.6})
    t, out = claims(ev)
    assert out["minmax_largest_psi"] is False and out["psi_orders_as_cw30"] is False
    assert out["psi_cw30_pairs_agree"] == [0, 3] and out["psi_cw30_kendall_tau"] == pytest.approx(-1.0)
    assert t["holds"].iloc[0] == "no: none's psi is larger" and t["holds"].iloc[1] == "no: 3 pair(s) reversed"
    assert (
        "none above minmax by psi (9.00 against 2.00: +350.0%, 95% interval +350.0% to +350.0%) but below by CW-30 "
        "(5.0% against 60.0%)"
    ) in t["numbers"].iloc[1]
    assert out["psi_cw30_reversed_within_noise"] == 0


def test_a_reversed_pair_within_psis_noise_says_so():
    rng = np.random.default_rng(3)
    ev = {
        "none": model_eval("none", rng.lognormal(0, 1.5, 300) / 2.0, accs(0.99, 0.1, 0.1, 0.3)),
        "gradreg": model_eval("gradreg", rng.lognormal(0, 1.5, 300) / 2.0, accs(0.99, 0.1, 0.1, 0.05)),
        "minmax": model_eval("minmax", np.full(300, 0.05), accs(0.98, 0.5, 0.5, 0.6)),
    }
    hi, lo = sorted(("none", "gradreg"), key=lambda n: -ev[n].psi)  # the higher psi gets the lower CW-30 accuracy
    ev[hi].acc["cw30"], ev[lo].acc["cw30"] = 0.05, 0.3
    t, out = claims(ev)
    assert out["psi_cw30_pairs_reversed"] == 1 and out["psi_cw30_reversed_within_noise"] == 1
    assert t["holds"].iloc[1] == "no: 1 pair(s) reversed, 1 of them by a psi difference within its sampling noise"


def test_a_min_max_model_that_lost_clean_accuracy_says_so_beside_its_verdict():
    ev = _evals({"none": 1.0, "minmax": 9.0}, {"none": 0.0, "minmax": 0.1})
    ev["minmax"].acc["clean"], ev["none"].acc["clean"] = 0.425, 0.73
    t, out = claims(ev)
    assert t["holds"].iloc[0] == (
        "yes, at a clean accuracy of 42.5% against the audited model's 73.0%: a flatter "
        "model, not only a more robust one"
    )
    assert out["minmax_clean_drop"] == pytest.approx(0.305)


def test_equal_accuracies_leave_the_ordering_untested_and_tau_undefined():
    ev = _evals({"none": 2.0, "fgsm_at": 4.0, "minmax": 8.0}, {"none": 0.3, "fgsm_at": 0.3, "minmax": 0.3})
    t, out = claims(ev)
    assert out["psi_cw30_pairs_agree"] == [0, 0] and out["psi_cw30_kendall_tau"] is None
    assert t["holds"].iloc[1].startswith("not tested") and "undefined" in t["numbers"].iloc[1]


def _distilled(psi_d, n=300, spread=0.0, fgsm_d=0.9, seed=0):
    """none, min-max and distillation on the same n inputs: per-input KLs around 1 / psi (lognormal noise of sigma
    ``spread``; the same noise for none and distillation, so the planted ratio is exact); CW-30 ranks distillation
    last, FGSM/PGD first."""
    noise = np.random.default_rng(seed).lognormal(0, spread, n) if spread else np.ones(n)
    kl = {"none": noise / 2.0, "minmax": noise / 20.0, "distillation": noise / (2.0 * psi_d / 2.0)}
    acc = {
        "none": accs(0.99, 0.05, 0.05, 0.05),
        "minmax": accs(0.98, 0.5, 0.5, 0.5),
        "gradreg": accs(0.99, 0.1, 0.1, 0.1),
        "distillation": accs(0.95, fgsm_d, fgsm_d, 0.01),
    }
    kl["gradreg"] = noise / 2.2
    return {k: model_eval(k, kl[k], acc[k], n_attacked=200) for k in ("none", "minmax", "gradreg", "distillation")}


def test_distillation_psi_27_percent_above_the_undefended_models_is_stated_and_fails_the_claim():
    t, out = claims(_distilled(2.0 * 1.27))
    row = t.iloc[2]
    assert row["claim"].startswith("distillation's high FGSM/PGD accuracy does not raise its psi")
    assert "psi 2.00 -> 2.54 (+27.0%; 95% interval +27.0% to +27.0%)" in row["numbers"]
    assert "distillation ranks 2 of 4 by psi, 4 of 4 by CW-30" in row["numbers"]
    assert (
        "95% paired-bootstrap interval (2000 resamples of the 300 psi inputs) reaches 0% or lower" in row["criterion"]
    )
    assert row["holds"] == "no: psi rose +27.0%, beyond its sampling noise (interval +27.0% to +27.0%)"
    assert out["distillation_claim"] == "no" and out["distillation_psi_change"] == pytest.approx(0.27)
    assert out["distillation_rank_psi"] == 2 and out["distillation_rank_cw30"] == 4 and out["n_models"] == 4
    # nearer the undefended model's than min-max's in log psi: the paper's second half holds
    assert t.iloc[3]["holds"] == "yes" and out["distillation_nearer_none"] == "yes"
    assert list(t.columns) == ["claim", "criterion", "numbers", "holds"]


def test_a_distillation_psi_change_within_its_noise_holds():
    # the same per-input noise is not paired here: distillation's KLs get their own draw, so psi moves by chance
    ev = _distilled(2.0, spread=1.5)
    ev["distillation"] = model_eval(
        "distillation", np.random.default_rng(9).lognormal(0, 1.5, 300) / 2.0, accs(0.95, 0.9, 0.9, 0.01)
    )
    t, out = claims(ev)
    lo, hi = out["distillation_psi_change_ci95"]
    assert lo < 0 < hi, (lo, hi)  # within its noise: the interval holds no change
    assert t.iloc[2]["holds"] == "yes" and out["distillation_claim"] == "yes"


def test_a_distillation_psi_below_the_undefended_models_holds_as_in_the_paper():
    t, out = claims(_distilled(2.0 * 70.5 / 89.8))  # MNIST's 89.8 -> 70.5
    assert t.iloc[2]["holds"] == "yes" and out["distillation_psi_change"] == pytest.approx(70.5 / 89.8 - 1)


def test_distillation_near_min_max_fails_the_second_row():
    t, out = claims(_distilled(15.0))
    assert t.iloc[3]["holds"] == "no" and out["distillation_nearer_none"] == "no"


def test_distillation_claims_need_their_premise():
    t, out = claims(_distilled(2.0 * 1.27, fgsm_d=0.06))
    assert out["distillation_claim"] == "premise absent" and out["distillation_nearer_none"] == "premise absent"
    assert t["holds"].iloc[2].startswith("premise absent (") and t["holds"].iloc[3].startswith("premise absent (")


def test_table_4_invariance_is_by_construction_and_the_others_move():
    row = {
        "x1": 2.16,
        "x100": 2.16 * (1 + 1e-6),
        "x0.01": 2.16,
        "softmax_x1": 0.17,
        "softmax_x100": 4.8,
        "softmax_x0.01": 119.0,
        "sharpness_x1": 1132.0,
        "sharpness_x100": 7021.0,
        "sharpness_x0.01": 6.6,
    }
    t, out = claims({}, {"none": row}, [100.0, 0.01])
    assert list(t["claim"].str.contains("Table 4")) == [True, True]
    assert "holds by construction, not as an empirical finding" in t["criterion"].iloc[0]
    assert t["holds"].iloc[0] == "yes (by construction)" and t["holds"].iloc[1] == "yes"
    assert "largest relative change 1.0e-06" in t["numbers"].iloc[0]
    assert out["reparam_invariant"] is True and out["reparam_others_move"] is True
    moved = {**row, "x100": 3.0, "softmax_x100": 0.2, "softmax_x0.01": 0.18}
    t, out = claims({}, {"none": moved}, [100.0, 0.01])
    assert t["holds"].iloc[0].startswith("no: ") and t["holds"].iloc[1] == "no"
    assert out["reparam_invariant"] is False and out["reparam_others_move"] is False


def test_grade_is_anchored_on_table_1():
    assert [grade(v) for v in (93.8, 157.0, 158.0, 264.7, 503.0, 504.0, 958.4)] == [
        GRADES[0],
        GRADES[0],
        GRADES[1],
        GRADES[1],
        GRADES[1],
        GRADES[2],
        GRADES[2],
    ]
    assert grade_applies((5, 1, 8, 8), 0.3, (0.0, 1.0)) and grade_applies((5, 1, 8, 8), 0.6, (-1.0, 1.0))
    assert not grade_applies((5, 3, 8, 8), 0.3, (0.0, 1.0))  # colour
    assert not grade_applies((5, 1, 8, 8), 0.15, (0.0, 1.0))  # not MNIST's eps
    assert not grade_applies((5, 64), 0.3, (0.0, 1.0))  # not images


def test_table_4_with_a_saturated_softmax_whose_psi_is_exactly_zero():
    """A model that separates its inputs perfectly (a synthetic MNIST-size target on a GPU) saturates the softmax:
    softmax psi is 0.0 in float32 at some scales. The claims still come out: 0 -> 0 is no move, 0 -> x an infinite
    one; nothing divides by zero."""
    row = {
        "x1": 2.0,
        "x100": 2.0,
        "x0.01": 2.0,
        "softmax_x1": 0.0,
        "softmax_x100": 0.0,
        "softmax_x0.01": 3.0,
        "sharpness_x1": 0.0,
        "sharpness_x100": 0.0,
        "sharpness_x0.01": 0.0,
    }
    t, out = claims({}, {"none": row}, [100.0, 0.01])
    assert out["reparam_invariant"] is True
    assert out["reparam_others_move"] is False  # eps-sharpness never moved (0 at every scale)
    assert "softmax psi by a factor inf" in t["numbers"].iloc[1]
    row0 = {**row, "x1": 0.0, "x100": 0.0, "x0.01": 0.0}
    assert claims({}, {"none": row0}, [100.0, 0.01])[1]["reparam_max_change"] == 0.0
