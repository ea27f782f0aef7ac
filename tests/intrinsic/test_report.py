"""weakspot.intrinsic.report: the measurements as metrics, tables, prose and findings (nothing measured again)."""

import json
from types import SimpleNamespace

import numpy as np
import pytest

from weakspot.intrinsic.report import TITLE, metrics, report
from tests.intrinsic.helpers import small_params

TARGET = SimpleNamespace(name="toy")


@pytest.fixture(scope="module")
def out(measured):
    return report(measured, small_params(), TARGET)


def test_metrics_are_the_measurements(measured, out):
    m = out.section.metrics
    none, mm = measured.evals["none"], measured.evals["minmax"]
    assert m["psi"] == none.psi and m["minmax"]["psi"] == mm.psi and m["cw30_acc"] == none.acc["cw30"]
    # eps 0.15: no grade
    assert {"psi", "psi_softmax", "clean_acc", "fgsm_acc", "pgd30_acc", "cw30_acc"} == set(m["none"])
    assert m["eps"] == 0.15 and m["n_inputs"] == 120 and m["n_attack"] == 60
    assert m["reparam"] is measured.reparam and m["pgd_vs_art"] is measured.art_check
    assert m["claims"]["minmax_largest_psi"] is True
    assert set(m["stability"]) == {"b20", "b60"}
    assert m["least_stable_classes"] == [int(c) for c in np.argsort(none.psi_class)[:3]]
    (per,) = m["surface_boundary_distance"].values()
    assert set(per) == {"no defence (the audited model)", "min-max (PGD) training"}
    assert set(per["min-max (PGD) training"]) == {"random", "fgsm", "ll_fgsm", "cw"}
    json.dumps(m, allow_nan=True)  # JSON values only
    assert list(m) == list(metrics(measured, m["claims"]))  # the same order every time


def test_the_section_titles_the_target_and_names_only_what_it_has(out, measured):
    sec = out.section
    assert sec.title == f"{TITLE} (toy)" and sec.key_metrics == ["psi", "psi_softmax", "pgd30_acc", "cw30_acc"]
    assert {i["table"] for i in sec.items if "table" in i} <= set(sec.tables)
    figures = [i["figure"] for i in sec.items if "figure" in i]
    assert figures == ["psi_vs_attacks", "worst_inputs", "per_class", "surface_0", "stability"]
    assert sec.figures == {}  # drawn by weakspot.intrinsic.figures
    assert set(sec.tables) == {
        "seconds",
        "defences",
        "paper",
        "reparam",
        "stability",
        "per_class",
        "claims",
        "settings",
    }
    assert out.lineage == {"defences": measured.defence_info}


def test_prose_quotes_the_numbers(out, measured):
    none, mm = measured.evals["none"], measured.evals["minmax"]
    s = out.section.summary
    assert len(s) == 5  # what psi is, the audited model, the ART check, the defended models, the caveats
    assert "eps = 0.15" in s[0] and f"psi {none.psi:.1f}" in s[1] and "PGD-10 checked against IBM ART's" in s[2]
    assert (
        f"the largest psi is minmax's ({mm.psi:.1f}, at clean accuracy {mm.acc['clean']:.1%}; the audited "
        f"model's {none.acc['clean']:.1%})"
    ) in s[3]
    assert "(Table 4): yes (by construction)" in s[3]
    assert s[4].startswith("Caveats")
    assert "Settings that differ from the paper's (the settings table gives both values): pgd_steps, cw_steps" in s[4]
    (head,) = out.section.headline
    assert head.startswith(f"Intrinsic robustness: psi {none.psi:.1f};")
    assert f"min-max training: psi {mm.psi:.1f} at clean accuracy {mm.acc['clean']:.0%}" in head  # never psi alone


def test_every_number_in_the_headline_and_summary_comes_from_the_metrics(out):
    """The prose's numbers are the metrics' (or the settings that ran) formatted: nothing typed, nothing stale."""
    from tests.intrinsic.prose_numbers import unexplained

    sec = out.section
    texts = [*sec.headline, *sec.summary]
    assert unexplained(texts, sec.metrics, small_params().model_dump()) == []
    # the check bites: a number from nowhere is caught
    assert unexplained(["psi rose 27.4% (Table 3, Sec. 5.2)"], sec.metrics) == ["27.4%"]


def test_fig_6_pool_and_table_4_say_what_they_are(out, measured):
    sec = out.section
    assert sec.metrics["inputs"] == {
        "psi_test": 120,
        "psi_val": 0,
        "fig6_pool_test": 120,
        "fig6_pool_val": 0,
        "fig6_pool_train": 0,
    }
    fig = {i["figure"]: i["caption"] for i in sec.items if "figure" in i}
    cap = {i["table"]: i["caption"] for i in sec.items if "table" in i}
    assert "drawn from a pool of 120 inputs (120 test, no training input)." in fig["stability"]
    assert "the invariance holds by construction" in cap["reparam"]
    assert f"minmax {measured.evals['minmax'].acc['clean']:.1%}" in cap["reparam"]
    st = sec.tables["settings"].set_index("setting")
    assert st.loc["Fig. 6 pool", "ran"].startswith("120 inputs (120 test, no training input)")
    claims = sec.tables["claims"]
    assert list(claims.columns) == ["claim", "criterion", "numbers", "holds"]
    assert claims["criterion"].str.contains("by construction").any()


def test_findings_are_the_audited_models(out, measured):
    f = out.findings
    none = measured.evals["none"]
    assert f.iloc[0]["kind"] == "threat_model"
    assert f.iloc[0]["severity"] == pytest.approx(1 - min(none.acc[k] for k in ("fgsm", "pgd30", "cw30")))
    assert (f["kind"] == "input").sum() == 3  # max_findings
    assert set(f["kind"]) <= {"threat_model", "class", "input"}
