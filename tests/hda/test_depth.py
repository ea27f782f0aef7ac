"""hda.depth: the audit depth (the weak spots and their evidence) draws what the study depth draws up to HDA's GA, so
its seeds, test cases, evidence and findings are the study's, for less work; its report leaves out what did not run
and names the depth."""

import json

import numpy as np
import pandas as pd
import pytest

from weakspot.hda.evidence import class_evidence, seed_set_evidence
from weakspot.hda.figures import figures
from weakspot.hda.report import findings, metrics, report
from weakspot.methods import AuditTarget

TARGET = AuditTarget(name="toy", model=None, classes=["a", "b", "c"], test=None)
#: the clock's steps only the study runs
STUDY_STEPS = {
    "FID reference network",
    "Table 3 and Fig. 3",
    "local robustness (AMLS)",
    "Table 8",
    "Table 9 (fine-tuning)",
}


def _flat(d, prefix=""):
    out = {}
    for k, v in d.items():
        if isinstance(v, dict):
            out.update(_flat(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = v
    return out


@pytest.fixture(autouse=True)
def _close():
    yield
    import matplotlib.pyplot as plt

    plt.close("all")


def test_the_audit_depth_finds_the_study_depths_weak_spots_for_less_work(toy, toy_audit):
    (study, ps), (audit, pa) = toy["white"][:2], toy_audit
    assert (study.depth, audit.depth) == ("study", "audit") and (ps.depth, pa.depth) == ("study", "audit")
    for name in ("X", "y", "log_density", "selected", "random", "balls", "separation", "gradient", "selected_proba"):
        assert np.array_equal(getattr(audit.seeds, name), getattr(study.seeds, name)), name
    assert audit.seeds.table5["selected"]["log_density"] == study.seeds.table5["selected"]["log_density"]
    for sname in ("selected", "random"):
        a, s = audit.generators.results[("hda", sname)], study.generators.results[("hda", sname)]
        assert np.array_equal(a.X_cases, s.X_cases) and np.array_equal(a.seed_index, s.seed_index), sname
        assert a.queries == s.queries and a.extra["curve"] == s.extra["curve"]
        ea, es = audit.generators.evals[("hda", sname)], study.generators.evals[("hda", sname)]
        assert np.array_equal(ea.ae_mask, es.ae_mask) and np.array_equal(ea.valid, es.valid)
        assert np.array_equal(audit.generators.allocation[sname], study.generators.allocation[sname])
    # the evidence and the findings: the same weak spots, the same numbers
    assert repr(seed_set_evidence(audit)) == repr(seed_set_evidence(study))  # repr: NaN equals NaN
    assert repr(class_evidence(audit, pa.seed)) == repr(class_evidence(study, ps.seed))
    pd.testing.assert_frame_equal(findings(audit, pa), findings(study, ps))
    # every metric the audit depth has, the study depth has with the same value (its depth aside)
    ma, ms = _flat(metrics(audit, pa)), _flat(metrics(study, ps))
    assert ma.pop("depth") == "audit" and ms.pop("depth") == "study"
    assert {k: v for k, v in ms.items() if k in ma} == ma and "hda_ae_prop" in ma
    # what it skipped: the paper's comparisons, nothing of the evidence
    assert list(audit.generators.evals) == [("hda", "selected"), ("hda", "random")]
    assert audit.adversarial is None and audit.finetuning is None and study.finetuning is not None
    assert audit.distribution.table3 is None and audit.distribution.fid == {} and audit.seeds.pearson == {}
    assert np.isnan(audit.seeds.log10_p).all() and audit.generators.evals[("hda", "selected")].fid_est.n == 0
    assert STUDY_STEPS <= set(study.seconds) and not STUDY_STEPS & set(audit.seconds)
    assert {"VAE and KDE", "indicators", "total"} <= set(audit.seconds)


def test_the_audit_depths_report_leaves_out_the_study_and_names_its_depth(toy_audit):
    from tests.hda.test_prose import _clean
    from tests.intrinsic.prose_numbers import unexplained

    result, p = toy_audit
    out = report(result, p, TARGET)
    sec, m = out.section, out.section.metrics
    assert set(sec.tables) == {"table5", "table6", "claims", "settings", "seconds"}
    assert not any(i.get("table") in ("table3", "table4", "table7", "table8", "table9") for i in sec.items)
    figs = figures(result, p)
    assert list(figs) == ["landscape", "aes", "ga_curve"]
    sec.figures.update(figs)
    assert sec.check() is sec  # every item's table and figure is there
    t6 = sec.tables["table6"]
    assert list(t6["seeds"]) == ["selected", "random"] and not any("FID" in c for c in t6.columns)
    assert not any("log10 P" in c for c in sec.tables["table5"].columns)
    st = sec.tables["settings"].set_index("setting")
    assert st.loc["depth", "ran"].startswith("audit: the weak spots") and st.loc["depth", "differs"]
    assert not any("FID" in s or s.startswith(("finetune", "robustness", "fid")) for s in st.index)
    line = next(t for t in sec.summary if t.startswith("Depth: audit"))
    assert "hda.depth: study" in line and "{per_target: {<target>: {depth: study}}}" in line
    assert "Table 8" in line and "repaired model" in line
    assert "FID" not in " ".join(sec.summary[2:4] + sec.headline)
    assert unexplained(_clean(sec.summary + sec.headline), m, p.model_dump()) == []
    # metrics: what ran, nothing of what did not (no nulls standing in for it)
    assert m["depth"] == "audit" and m["hda_ae_prop"] == m["hda"]["ae_prop"] and "hda_fid" not in m
    assert not {"fid", "fid_interval", "fid_aes"} & (set(m["hda"]) | set(m["random_seeds"]["hda"]))
    assert not {"latent", "fid_kde_samples", "fid_reference", "indicator_pearson", "adversarial_model"} & set(m)
    assert list(m["random_seeds"]) == ["hda"] and "finetune" not in m and "pgd" not in m
    assert list(m["claims"]) == ["seeds_denser"] and "claims_rq1" not in m
    assert sec.key_metrics == ["hda_ae_prop"]
    json.dumps(m, allow_nan=False)
    # no repaired model: its model.json says why and how to get one
    assert out.repaired["state_dict"] is None and out.repaired["spec"]["depth"] == "audit"
    assert "hda.depth: study" in out.repaired["spec"]["why"] and "per_target" in out.repaired["spec"]["why"]
    assert out.lineage == {}


def test_the_study_depths_report_names_its_depth(toy):
    result, p = toy["white"][:2]
    sec = report(result, p, TARGET).section
    assert sec.metrics["depth"] == "study" and not sec.tables["settings"].set_index("setting").loc["depth", "differs"]
    assert any(t.startswith("Depth: study") for t in sec.summary)
