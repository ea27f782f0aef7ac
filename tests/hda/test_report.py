"""weakspot.hda.report: metrics, the paper's claims, tables and prose, findings and the repaired model of an HDA
result (the toy audits of tests/hda/conftest.py)."""

import copy
import io
import json
from dataclasses import replace
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from weakspot.findings import REQUIRED
from weakspot.hda.report import findings, metrics, repaired_model, report
from weakspot.methods import AuditTarget
from weakspot.fmt import rounded

TARGET = AuditTarget(name="toy", model=None, classes=["a", "b", "c"], test=None)


def test_metrics_are_the_rounded_results_and_strict_json(toy):
    result = toy["white"][0]
    m = metrics(result, toy["white"][1])
    h = result.generators.evals[("hda", "selected")]
    assert m["hda"]["ae_prop"] == rounded(h.ae_prop) == m["hda_ae_prop"] and m["n_seeds"] == 6 and m["radius"] == 0.1
    assert m["random_seeds"]["pgd"]["test_cases"] == result.generators.evals[("pgd", "random")].n_cases
    none = dict(m["finetune"]["none"])
    ci = none.pop("intervals")
    assert none == {k: rounded(v) for k, v in result.finetuning.before.items()}
    assert list(m["finetune"]) == ["hda", "pgd", "coverage", "none", "validation", "reattack"]
    assert ci["global_robustness"][0] <= (none["global_robustness"] or 0) <= ci["global_robustness"][1]
    for att, row in m["finetune"]["reattack"].items():  # the repaired model attacked again, with intervals
        assert set(row) == {"before", "after"} and all(v["n"] > 0 for v in row.values()), att
        assert all(v["interval"][0] <= v["rate"] <= v["interval"][1] for v in row.values()), att
    assert list(m["adversarial_model"]) == ["normal", "adversarial"]
    json.dumps(m, allow_nan=False)  # NaN is null, never NaN: the file stays strict JSON
    black = metrics(toy["black"][0], toy["black"][1])
    assert "pgd" not in black and "finetune" not in black and black["adversarial_model"] == {}


def test_the_report_section_tables_and_lineage(toy):
    from weakspot.hda.figures import figures

    result, p = toy["white"][:2]
    out = report(result, p, TARGET)
    sec = out.section
    assert sec.title.endswith("(toy)") and sec.key_metrics == ["hda_ae_prop", "hda_fid", "pgd_ae_prop", "pgd_fid"]
    assert set(sec.tables) == {
        "table3",
        "fig3_fid",
        "table4",
        "table5",
        "table6",
        "table7",
        "table8",
        "table9",
        "reattack",
        "claims",
        "settings",
        "seconds",
    }
    assert list(sec.tables["table7"]["method"]) == [
        "OODA (PGD, valid AEs only)",
        "FODA (VAE decoding)",
        "HDA (two-step GA)",
    ]
    assert list(sec.tables["claims"].columns) == ["claim", "criterion", "numbers", "holds"]
    st = sec.tables["settings"].set_index("setting")
    assert st.loc["FID features", "differs"] and "reference CNN" in st.loc["FID features", "ran"]
    assert "validation inputs" in st.loc["validity threshold (OODA, % valid AEs)", "ran"]
    assert len(sec.tables["table6"]) == 10 and len(sec.tables["table8"]) == 8 and len(sec.tables["table9"]) == 4
    assert list(sec.tables["seconds"]["step"])[-1] == "total" and "Table 9 (fine-tuning)" in list(
        sec.tables["seconds"]["step"]
    )
    assert sec.summary[1].startswith("Depth: study") and sec.headline[0].startswith("HDA: ")
    assert "gradient indicator" in sec.summary[2] and "depth" in list(sec.tables["settings"]["setting"])
    with pytest.raises(ValueError, match="figure"):
        sec.check()  # the items name figures that figures() draws
    sec.figures.update(figures(result, p))
    assert sec.check() is sec
    assert set(out.lineage) == {"seconds"} and out.lineage["seconds"] is result.seconds
    with_adv = copy.copy(result)
    with_adv.adversarial_info = {"label": "min-max"}
    assert list(report(with_adv, p, TARGET).lineage) == ["adversarial_model", "seconds"]
    import matplotlib.pyplot as plt

    plt.close("all")


def test_a_black_box_report_has_no_white_box_tables_nor_a_repaired_model(toy):
    result, p = toy["black"][:2]
    out = report(result, p, TARGET)
    assert "table8" not in out.section.tables and "table9" not in out.section.tables
    assert not any(i.get("table") in ("table8", "table9") for i in out.section.items)
    assert out.repaired["state_dict"] is None and "white-box" in out.repaired["spec"]["why"] and out.lineage == {}
    assert out.section.key_metrics == ["hda_ae_prop", "hda_fid"]


def test_findings_rank_the_seeds_with_aes(toy):
    result, p = toy["white"][:2]
    out = findings(result, p)
    df = out[out["kind"] == "input"]
    e, res = result.generators.evals[("hda", "selected")], result.generators.results[("hda", "selected")]
    with_ae = {i for i in range(len(result.seeds.selected)) if e.ae_mask[res.seed_index == i].any()}
    assert len(df) == min(len(with_ae), p.max_findings) and set(REQUIRED) <= set(df.columns)
    assert list(df["severity"]) == sorted(df["severity"], reverse=True)
    assert ((0 <= df["severity"]) & (df["severity"] <= 1)).all()
    assert all(json.loads(x)["seed"] in result.seeds.names for x in df["example"])
    assert df["confirmation"].str.startswith("not checked").all() and not df["confirmed"].astype(bool).any()
    if len(with_ae) >= 2:
        again = findings(result, p.model_copy(update={"max_findings": 1}))
        assert (again["kind"] == "input").sum() == 1


def test_the_seed_set_row_carries_its_evidence_and_each_class_is_confirmed_on_random_seeds(toy):
    from weakspot.hda.evidence import seeds_failed

    result, p = toy["white"][:2]
    out = findings(result, p)
    row = out[out["kind"] == "seed_set"].iloc[0]
    (sel, sel_m), (rnd, rnd_m) = seeds_failed(result, "selected"), seeds_failed(result, "random")
    # a seed fails when HDA's GA found an AE around it; seeds the allocation gave no test case are not measured
    res = result.generators.results[("hda", "selected")]
    assert sel_m.sum() == len(np.unique(res.seed_index)) and row["n_confirm"] == sel_m.sum()
    assert (row["failures"], row["control_failures"]) == (sel[sel_m].sum(), rnd[rnd_m].sum())
    assert row["severity"] == pytest.approx(np.nan_to_num(row["lift"])) and "random ones" in row["confirmation"]
    for _, r in out[out["kind"] == "class"].iterrows():  # confirmed on the random seeds, which never chose it
        assert r["n_confirm"] <= rnd_m.sum() and r["confirmed"] == (r["lift_lo"] > 1 and r["n_confirm"] >= 5)


def _known(sel, rnd):
    """A result whose seeds of class 1 always fail (HDA's GA found an AE around each) and of class 0 never."""
    from weakspot.hda.generate import CaseEval, LocalResult

    y = np.array([0] * 40 + [1] * 40)

    def gen(ids):
        idx = np.arange(len(ids))
        ae = y[ids] == 1
        return (
            LocalResult("hda", np.zeros((len(ids), 1)), idx, 0, 0.0),
            CaseEval("hda", "", len(ids), len(ids), 0, 0, 0, 0, 0, 0, 0, 0, ae_mask=ae),
        )

    (rs, es), (rr, er) = gen(sel), gen(rnd)
    return SimpleNamespace(
        seeds=SimpleNamespace(y=y, selected=sel, random=rnd),
        generators=SimpleNamespace(
            results={("hda", "selected"): rs, ("hda", "random"): rr},
            evals={("hda", "selected"): es, ("hda", "random"): er},
        ),
    )


def test_class_evidence_known_answer():
    """Selected seeds of class 1 always fail, of class 0 never; the random seeds of class 1 fail, the rest not: class 1
    is proposed and confirmed on the random seeds (20 of 20 against 0 of 20), class 0 is not proposed."""
    from weakspot.hda.evidence import class_evidence

    result = _known(np.arange(0, 80, 4), np.arange(1, 80, 2))  # 10 + 10 selected, 20 + 20 random
    ((c, ev),) = class_evidence(result, seed=0)
    assert c == 1 and ev.failures == ev.n_confirm == 20 and ev.confirmed and ev.control_rate < 1
    assert (ev.control_failures, ev.n_control) == (0, 20)


def test_the_seed_set_is_checked_against_random_seeds_measured_the_same_way():
    """Known answer: a seed fails when HDA's GA found an AE around it. Selected seeds half of class 1 (10 of 20 fail),
    random seeds half of class 1 too (20 of 40): lift 1, not confirmed. Selected seeds all of class 1 (20 of 20)
    against the same random ones: confirmed."""
    from weakspot.hda.evidence import seed_set_evidence

    e = seed_set_evidence(_known(np.arange(0, 80, 4), np.arange(1, 80, 2)))
    assert (e.failures, e.n_confirm, e.control_failures, e.n_control) == (10, 20, 20, 40)
    assert e.lift == 1.0 and not e.confirmed
    e = seed_set_evidence(_known(np.arange(40, 80, 2), np.arange(1, 80, 2)))
    assert (e.failures, e.n_confirm, e.control_failures, e.n_control) == (20, 20, 20, 40) and e.confirmed


def test_random_seeds_that_are_the_selected_ones_confirm_nothing():
    """Issue 47: with every candidate selected, the selected seeds stood in as the control: the search's own seeds.
    Now neither the seed set nor a class is tested."""
    from weakspot.hda.evidence import class_evidence, seed_set_evidence

    sel = np.arange(0, 80, 2)
    result = _known(sel, sel[:20])
    ((c, ev),) = class_evidence(result, seed=0)
    assert c == 1 and not ev.testable and not ev.confirmed
    e = seed_set_evidence(result)
    assert e.n_control == 0 and not e.testable and not e.confirmed


def test_no_aes_no_findings_but_the_same_columns(toy):
    result, p = toy["black"][:2]
    key = ("hda", "selected")
    e = result.generators.evals[key]
    none = copy.copy(result)
    none.generators = replace(
        result.generators, evals={**result.generators.evals, key: replace(e, ae_mask=np.zeros_like(e.ae_mask))}
    )
    df = findings(none, p)
    assert (df["kind"] == "input").sum() == 0 and set(REQUIRED) <= set(df.columns)
    assert df[df["kind"] == "seed_set"]["failures"].iloc[0] == 0  # the seed set still measured: no AE anywhere


def test_the_repaired_model_is_the_hda_finetuned_weights(toy):
    result, p = toy["white"][:2]
    rep = repaired_model(result, p)
    state = torch.load(io.BytesIO(rep["state_dict"]))
    assert all(torch.equal(state[k], v) for k, v in result.finetuning.repaired.items())
    spec = rep["spec"]
    assert spec["after"] == metrics(result, p)["finetune"]["hda"] and spec["settings"]["seeds"] == 5
    assert spec["settings"]["validation_pool"] == 30 and spec["settings"]["train_inputs"] == 50
    assert spec["settings"]["held_out_seeds"] == 15 and "by construction" in spec["caveat"]
    assert spec["reattack"] == metrics(result, p)["finetune"]["reattack"]
    assert rep["state_dict"] == repaired_model(result, p)["state_dict"]  # the same bytes every time
