"""corner.depth (issue 49): the audit runs the generator, the search, realism and the judge's controls, not the
paper's comparisons (FGSM against a latent step, the paper-lr rerun); its corner cases and findings are the study's;
its report leaves out what did not run and names the depth."""

import pandas as pd
import pytest
import torch

from weakspot.config import validate_section
from weakspot.corner.report import report
from weakspot.errors import ConfigError

from .conftest import TINY, RecordingRuntime


@pytest.fixture(scope="module")
def audited(toy):
    """``run`` on :func:`toy` with :data:`TINY` params at depth audit, the comparisons made to fail if called."""
    import weakspot.corner.run as run_module
    from weakspot.corner.config import CornerParams

    def never(*a, **k):
        raise AssertionError("a comparison of the study ran at depth audit")

    torch.set_num_threads(1)
    params = CornerParams(**TINY)
    saved = run_module.fgsm_vs_latent, run_module.paper_lr_margins
    run_module.fgsm_vs_latent = run_module.paper_lr_margins = never
    try:
        res = run_module.run(toy, params, RecordingRuntime())
    finally:
        run_module.fgsm_vs_latent, run_module.paper_lr_margins = saved
    return params, res, report(res, params, toy)


def test_the_audit_is_the_default_and_skips_the_papers_comparisons(audited):
    params, res, _ = audited
    assert params.depth == "audit" and res.depth == "audit"
    assert res.comparison is None and res.paper_lr is None
    assert list(res.seconds) == ["generator", "search", "distances", "judge"]
    assert res.controls is not None  # the judge's controls are the evidence: they run at both depths


def test_the_audit_finds_exactly_the_studys_corner_cases(audited, toy_run, toy):
    params, res, rep = audited
    sparams, study, _ = toy_run
    assert study.depth == "study" and study.comparison is not None and study.paper_lr is not None
    pd.testing.assert_frame_equal(rep.findings, report(study, sparams, toy).findings)
    assert len(rep.findings) > 0
    for k in study.flags:
        assert (res.flags[k] == study.flags[k]).all(), k
    assert (res.controls["passed"] == study.controls["passed"]).all()


def test_the_audits_report_leaves_out_what_did_not_run_and_names_its_depth(audited, toy_run, toy):
    params, res, rep = audited
    sparams, study, _ = toy_run
    sec, full = rep.section, report(study, sparams, toy).section
    assert "fgsm_comparison" not in sec.tables and "fgsm_comparison" in full.tables
    assert {i.get("table") for i in sec.items} - {None} <= set(sec.tables)
    assert "fgsm_vs_latent" not in {i.get("figure") for i in sec.items}
    assert all(len(t) for t in sec.tables.values())  # no empty table
    m, ms = sec.metrics, full.metrics
    assert {"tv_corner", "tv_fgsm", "manifold_fgsm", "flip_rate_fgsm", "paper_lr"}.isdisjoint(m)
    assert m["depth"] == "audit" and ms["depth"] == "study"
    assert set(m) < set(ms) and all(m[k] == ms[k] for k in m if k != "depth")  # the same numbers, the same keys
    assert sec.key_metrics == ["margin_before", "margin_after", "margin_reduction", "n_corner_cases"]
    claims = list(sec.tables["claims"]["claim"])
    assert len(claims) == 3 and not any("FGSM" in c or "paper's step" in c for c in claims)
    text = " ".join(sec.headline + sec.summary)
    assert "FGSM images are noisier" not in text and "Noise (Sec. 4.5)" not in text
    assert "Why the step differs" not in text
    assert (
        "Depth: audit — the generator, the search, realism and the judge's controls; `corner.depth: study` adds "
        "the FGSM comparison (Sec. 4.5) and the search rerun at the paper's step (Sec. 4.3)."
    ) in sec.summary[0]
    assert "Depth: study — " in full.summary[0]
    st = sec.tables["settings"].set_index("setting")
    assert st.loc["depth", "ran"].startswith("audit — ") and bool(st.loc["depth", "differs"])
    assert "fgsm_eps" not in st.index


def test_every_number_of_the_audits_prose_comes_from_its_metrics_or_params(audited):
    from .test_prose import allowed, stray_numbers

    params, _, rep = audited
    text = " ".join(rep.section.headline + rep.section.summary)
    assert stray_numbers(text, allowed(rep.section.metrics, params)) == [], text


def test_the_audits_figures_are_the_ones_its_report_names(audited, toy):
    from weakspot.corner.figures import figures
    from weakspot.plotting import pyplot

    params, res, rep = audited
    figs = figures(res, params, toy)
    try:
        assert set(figs) == {i["figure"] for i in rep.section.items if "figure" in i}
    finally:
        for f in figs.values():
            pyplot().close(f)


def test_depth_is_set_per_target():
    data = {"corner": {"per_target": {"digits": {"depth": "study"}}}}
    assert validate_section("corner", data, target="digits").depth == "study"
    assert validate_section("corner", data, target="scenes").depth == "audit"
    with pytest.raises(ConfigError, match="depth"):
        validate_section("corner", {"corner": {"depth": "deep"}})
