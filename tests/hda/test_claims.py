"""weakspot.hda.claims: each claim of seeds/004 on planted numbers whose verdict is known, with its criterion and
numbers, and "not tested" where its evidence is too thin."""

from types import SimpleNamespace

import numpy as np

from weakspot.hda.claims import as_metrics, check, table
from weakspot.hda.config import HdaParams
from weakspot.hda.fid import FidEstimate
from weakspot.hda.generate import CaseEval

P = HdaParams.model_validate(
    {
        "depth": "study",
        "ga": {"population": 20, "generations": 100},
        "coverage": {"mutants": 20},
        "fid": {"min_aes": 20},
    }
)


def _e(method, ae, n=100, fid=None, valid=None, seeds="selected"):
    mask = np.arange(n) < ae
    f = FidEstimate(*fid, int(ae)) if fid is not None else FidEstimate(np.nan, np.nan, np.nan, int(ae))
    return CaseEval(
        method,
        seeds,
        50,
        n,
        ae / n,
        0.5,
        f.value,
        0.0,
        0.1,
        0.95,
        2020.0,
        0.01,
        mask,
        fid_est=f,
        valid=None if valid is None else np.arange(n) < valid,
    )


def _result(evals, adversarial=None):
    t5 = {
        "selected": {"log_density": 1.0, "log10_local_robustness": -2.0},
        "random": {"log_density": 0.0, "log10_local_robustness": -1.0},
    }
    return SimpleNamespace(
        generators=SimpleNamespace(evals=evals),
        adversarial=adversarial,
        seeds=SimpleNamespace(table5=t5, pearson={"gradient": 0.3, "separation": -0.2}),
        distribution=SimpleNamespace(fid={"kde": 1.0, "uniform": 2.0}),
    )


M = {"latent": {"VAE encoder": {"vs": 0.5}, "PCA": {"vs": 0.4}}}
FT = {
    "none": {"global_robustness": 0.0, "test_acc": 0.9},
    "hda": {"global_robustness": 0.4, "test_acc": 0.88},
    "pgd": {"global_robustness": 0.5, "test_acc": 0.85},
    "coverage": {"global_robustness": 0.1, "test_acc": 0.9},
    "validation": {"hda_aes": 200},
}


def test_known_verdicts_with_criterion_and_numbers():
    evals = {
        ("hda", "selected"): _e("hda", 90, fid=(1.0, 0.8, 1.2), valid=100),
        ("pgd", "selected"): _e("pgd", 95, fid=(2.0, 1.7, 2.3)),
        ("coverage", "selected"): _e("coverage", 3, fid=(9.0, 2.0, 30.0)),  # 3 AEs: below min_aes
        ("pgd", "random"): _e("pgd", 40, valid=20, seeds="random"),
        ("ooda", "random"): _e("ooda", 10, seeds="random"),
    }
    adv = SimpleNamespace(
        evals={"adversarial": {a: _e(a, k) for a, k in (("fgsm", 10), ("pgd", 30), ("autoattack", 35), ("hda", 25))}}
    )
    claims = check(_result(evals, adv), M, FT, P)
    got = {c.key: c.holds for c in claims}
    assert got == {
        "hda_higher_ae_prop": False,  # PGD 95% > HDA 90%
        "hda_lower_fid": True,  # coverage's 3 AEs are not compared; HDA 1.0 < PGD 2.0
        "hda_more_valid_aes_than_ooda": True,  # 90 valid of 100 against OODA's 10 of 100
        "hda_highest_ae_prop_on_adversarial_model": False,  # Table 8 reversed: AutoAttack 35% > HDA 25%
        "seeds_denser": True,
        "seeds_less_robust": False,
        "finetune_most_robustness": False,  # PGD fine-tuning gains more (0.5 vs 0.4)
        "finetune_least_accuracy_drop": False,  # coverage lost no accuracy
        "vae_clusters_better_than_pca": True,
        "kde_samples_lower_fid_than_uniform": True,
        "indicators_correlate_as_expected": True,
    }
    t = table(claims)
    assert list(t.columns) == ["claim", "criterion", "numbers", "holds"] and (t["criterion"].str.len() > 20).all()
    row = t.set_index("claim").loc["HDA's AEs: a lower FID than PGD's and coverage's (Table 6)"]
    assert "at least 20 AEs" in row["criterion"] and "coverage 9 (2-30, 3 AEs)" in row["numbers"]
    assert "2021 queries a seed against HDA's 2020" in t["criterion"].iloc[0]  # coverage at HDA's budget
    assert "autoattack 35.0% (35 of 100)" in t[t["claim"].str.contains("Table 8")]["numbers"].iloc[0]
    assert "PGD's AEs before the filter: 50% valid" in t[t["claim"].str.contains("Table 7")]["numbers"].iloc[0]
    m = as_metrics(claims)
    assert (
        set(m["claims_rq1"])
        == {"vae_clusters_better_than_pca", "kde_samples_lower_fid_than_uniform", "indicators_correlate_as_expected"}
        and len(m["claims"]) == 8
    )


def test_a_fid_on_too_few_aes_decides_nothing():
    evals = {
        ("hda", "selected"): _e("hda", 10, fid=(0.1, 0.0, 0.5)),  # 10 AEs < 20
        ("pgd", "selected"): _e("pgd", 95, fid=(2.0, 1.7, 2.3)),
    }
    claims = {c.key: c for c in check(_result(evals), M, {}, P)}
    fid = claims["hda_lower_fid"]
    assert fid.holds is None and fid.row()["holds"] == "not tested (HDA has fewer than 20 AEs)"
    assert "hda_lower_fid" not in as_metrics(list(claims.values()))["claims"]
    assert "finetune_most_robustness" not in claims and "hda_more_valid_aes_than_ooda" not in claims
    assert set(c.key for c in check(_result({("hda", "selected"): evals[("hda", "selected")]}), M, {}, P)) == {
        "seeds_denser",
        "seeds_less_robust",
        "vae_clusters_better_than_pca",
        "kde_samples_lower_fid_than_uniform",
        "indicators_correlate_as_expected",
    }  # a black box: no rival generators, no Table 8, no fine-tuning


def test_at_depth_audit_only_the_claims_of_what_ran_are_checked():
    """Depth audit: HDA's GA alone, no local robustness, no Tables 3-4 nor Fig. 3: Table 5's density claim only."""
    result = _result({("hda", "selected"): _e("hda", 90), ("hda", "random"): _e("hda", 40, seeds="random")})
    result.seeds = SimpleNamespace(
        table5={"selected": {"log_density": 1.0, "indicator": 0.0}, "random": {"log_density": 0.0, "indicator": 0.0}},
        pearson={},
    )
    result.distribution = SimpleNamespace(fid={})
    claims = check(result, {}, {}, P.model_copy(update={"depth": "audit"}))
    assert [c.key for c in claims] == ["seeds_denser"] and claims[0].holds
    assert as_metrics(claims) == {"claims": {"seeds_denser": True}, "claims_rq1": {}}
