"""intrinsic.depth (issue 49): the audit measures the audited model's weak spots with their evidence and nothing of
the paper's comparisons; its findings are the study's, to the bit; the report leaves out what did not run and names
the depth."""

from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
import torch

from weakspot.config import validate_section
from weakspot.errors import ConfigError
from weakspot.intrinsic.report import report
from tests.intrinsic.helpers import small_params

TARGET = SimpleNamespace(name="toy")
#: psi on 100 inputs in ascent batches of 30 (two restarts), Fig. 6's pool 250: the audit cuts the pool to 120 rows
DEPTH_PARAMS = dict(
    n_inputs=100, psi={"steps": 10, "restarts": 2}, stability={"batch_sizes": [20, 60], "draws": 5, "pool": 250}
)


@pytest.fixture(scope="module")
def both(trained):
    """``{depth: (result, report, rows of each KL ascent of the pool)}`` of the two models at both depths."""
    import weakspot.intrinsic.run as run_module

    models, X, y = trained
    out = {}
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        for depth in ("audit", "study"):
            rows = []

            def recording(module, Xs, **kw):
                rows.append(len(Xs))
                return max_kl(module, Xs, **kw)

            max_kl = run_module.max_kl
            run_module.max_kl = recording
            try:
                p = small_params(depth=depth, **DEPTH_PARAMS)
                res = run_module.measure(
                    models, X, y, [str(c) for c in range(10)], p, eps=0.15, clip=(0.0, 1.0), n_test=len(X)
                )
            finally:
                run_module.max_kl = max_kl
            out[depth] = (res, report(res, p, TARGET), rows)
    finally:
        torch.set_num_threads(threads)
    return out


def test_the_audit_finds_exactly_the_studys_weak_spots(both):
    """Same inputs, same random streams: the same KL of every psi input, the same attacks, the same findings table
    (its evidence columns included)."""
    (a, ra, _), (s, rs, _) = both["audit"], both["study"]
    assert len(ra.findings) > 0 and ra.findings["kind"].iloc[0] == "threat_model"
    pd.testing.assert_frame_equal(ra.findings, rs.findings)
    none_a, none_s = a.evals["none"], s.evals["none"]
    assert np.array_equal(none_a.kl, none_s.kl) and np.array_equal(none_a.x_worst, none_s.x_worst)
    assert none_a.acc == none_s.acc and a.art_check == s.art_check
    assert np.array_equal(a.X, s.X) and a.n_attack == s.n_attack


def test_the_audit_skips_the_papers_comparisons(both):
    """No defended model is measured, no Table 4, no Fig. 6; the KL ascent runs on the psi inputs rounded up to whole
    batches of the ascent (100 -> 120 rows of 30), not on Fig. 6's pool of 250."""
    (a, _, rows_a), (s, _, rows_s) = both["audit"], both["study"]
    assert list(a.evals) == ["none"] and list(s.evals) == ["none", "minmax"]
    assert a.reparam == {} and set(s.reparam) == {"none", "minmax"}
    assert a.stability is None and len(s.stability) == 2
    assert a.n_pool == 0 and s.n_pool == 250
    assert rows_a == [120] and rows_s == [250]
    assert [set(per) for per in a.surfaces.values()] == [{"no defence (the audited model)"}]
    assert a.depth == "audit" and s.depth == "study"


def test_the_audits_report_leaves_out_what_did_not_run_and_names_its_depth(both):
    (_, ra, _), (_, rs, _) = both["audit"], both["study"]
    sec, study = ra.section, rs.section
    assert set(sec.tables) == {"seconds", "defences", "per_class", "settings"}
    assert {"claims", "paper", "reparam", "stability"} <= set(study.tables)
    assert {i["table"] for i in sec.items if "table" in i} <= set(sec.tables)
    figures = [i["figure"] for i in sec.items if "figure" in i]
    assert figures == ["worst_inputs", "per_class", "surface_0"]
    assert all(len(t) for t in sec.tables.values())  # no empty table
    assert list(sec.tables["defences"]["model"]) == ["none"]
    # the metrics both depths hold are the same numbers under the same keys
    m, ms = sec.metrics, study.metrics
    assert {"reparam", "stability", "claims", "minmax"}.isdisjoint(m) and set(m) < set(ms)
    assert m["inputs"] == {"psi_test": 100, "psi_val": 0}
    assert m["depth"] == "audit" and ms["depth"] == "study"
    for k in set(m) - {"inputs", "surface_boundary_distance", "depth"}:
        assert m[k] == ms[k], k
    label = "no defence (the audited model)"  # the surfaces: the audited model's at both depths
    assert {i: {label: d[label]} for i, d in ms["surface_boundary_distance"].items()} == m["surface_boundary_distance"]
    words = (
        "Depth: audit — the model's own psi, attacks and class evidence; `intrinsic.depth: study` adds the "
        "defended copies (fgsm_at, minmax, gradreg, distillation), Table 4 and Fig. 6."
    )
    assert words in sec.summary[0] and "Depth: study — " in study.summary[0]
    assert len(sec.summary) == 4  # no defended models' paragraph
    st = sec.tables["settings"].set_index("setting")
    assert st.loc["depth", "ran"].startswith("audit — ") and bool(st.loc["depth", "differs"])
    assert "Fig. 6 pool" not in st.index and "depth" in sec.summary[-1]
    assert "Fig. 6" not in sec.sample and "Fig. 6" in study.sample


def test_every_number_of_the_audits_prose_comes_from_its_metrics(both):
    from tests.intrinsic.prose_numbers import unexplained

    sec = both["audit"][1].section
    p = small_params(depth="audit", **DEPTH_PARAMS)
    assert unexplained([*sec.headline, *sec.summary], sec.metrics, p.model_dump()) == []


def test_the_audits_figures_are_the_ones_its_report_names(both):
    import matplotlib.pyplot as plt

    from weakspot.intrinsic.figures import figures

    res, rep, _ = both["audit"]
    figs = figures(res, small_params(depth="audit", **DEPTH_PARAMS), None)
    try:
        assert set(figs) == {i["figure"] for i in rep.section.items if "figure" in i}
    finally:
        for f in figs.values():
            plt.close(f)


def test_run_trains_no_defended_copy_at_depth_audit(monkeypatch):
    import weakspot.intrinsic.run as run_module
    from weakspot.data.dataset import Dataset

    asked = []
    monkeypatch.setattr(run_module, "measure", lambda *a, **k: None)
    monkeypatch.setattr(run_module, "defended_models", lambda t, names, *a: asked.append(names) or ({}, {}, 0.1))
    part = Dataset(X=np.full((4, 1, 4, 4), 0.5, np.float32), y=np.arange(4) % 2, classes=["a", "b"])
    target = SimpleNamespace(
        name="t", test=part, val=None, train=part, classes=["a", "b"], model=SimpleNamespace(module=None)
    )
    rt = SimpleNamespace(device="cpu", progress=None)
    for depth in ("audit", "study"):
        run_module.run(target, small_params(depth=depth, defences=["minmax"]), rt)
    assert asked == [[], ["minmax"]]


def test_depth_is_set_per_target():
    data = {"intrinsic": {"n_inputs": 50, "per_target": {"digits": {"depth": "study"}}}}
    assert validate_section("intrinsic", data, target="digits").depth == "study"
    assert validate_section("intrinsic", data, target="scenes").depth == "audit"
    assert validate_section("intrinsic", {}).depth == "audit"
    with pytest.raises(ConfigError, match="depth"):
        validate_section("intrinsic", {"intrinsic": {"per_target": {"digits": {"depth": "deep"}}}}, target="digits")
