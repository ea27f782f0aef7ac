"""The examiner's report on a target: metric keys, Table 2 at equal cost, the planted weakness found, the findings
and their wording, the settings against the paper's."""

import io
import json

import numpy as np
import pytest

from weakspot.examine.report import (FINDING_COLUMNS, at_renders, condition_summary, equal_cost, settings_table,
                                     target_section)
from weakspot.examine.sessions import Session
from weakspot.scene.space import SceneSpace

from .examine_helpers import CLASSES, tiny_params


def test_metrics_have_model_independent_keys(examined):
    res, out, _ = examined
    m = out.section.metrics
    assert set(m) == {"random", "bo", "rl", "per_class", "renders", "at_equal_renders", "classes_t0_below_half"}
    for e in ("random", "bo", "rl"):
        assert list(m[e]) == ["T0", "T10", "T20", "T30"]  # keyed by the iterations that ran
        assert all(0.0 <= v <= 1.0 for v in m[e].values())
    # renders: RL a batch of 8 per iteration, BO one, random 2; compared at BO's render counts
    assert m["renders"] == {"random": {"T0": 0, "T10": 20, "T20": 40, "T30": 60},
                            "bo": {"T0": 0, "T10": 10, "T20": 20, "T30": 30},
                            "rl": {"T0": 0, "T10": 80, "T20": 160, "T30": 240}}
    assert all(list(m["at_equal_renders"][e]) == ["R10", "R20", "R30"] for e in ("random", "bo", "rl"))
    assert set(m["per_class"]) == set(CLASSES)
    assert set(m["per_class"]["disc"]) == {"random", "bo", "rl"}
    assert set(m["per_class"]["disc"]["bo"]) == {"T0", "T30", "min_found", "gp_length_scale_min"}
    assert set(m["per_class"]["disc"]["rl"]) == {"T0", "T30", "min_found"}
    assert m["per_class"]["disc"]["bo"]["gp_length_scale_min"] > 0
    st = out.section.tables["settings"].set_index("setting")
    assert bool(st.loc["T", "differs"]) and st.loc["T", "ran"] == "30" and not bool(st.loc["bo.init_points", "differs"])
    assert "T500" not in json.dumps(m) and "T500" not in " ".join(out.section.summary + out.section.headline)
    json.dumps(m)  # writable as metrics/examine.json
    assert set(out.section.tables) == {"table2", "per_class", "worst", "equal_renders", "t0_per_class", "settings"}
    assert out.section.figures == {}  # drawn by weakspot.examine.figures
    assert out.section.headline
    # T0 of a class is the mean of its T = 0 protocol's random scenes, the same for every examiner
    t0 = {s.cls: float(s.probs[0].mean()) for s in res.sessions if s.group == "main_t0"}
    assert m["random"]["T0"] == pytest.approx(np.mean(list(t0.values())))
    assert len({m[e]["T0"] for e in ("random", "bo", "rl")}) == 1


def test_the_report_is_a_function_of_the_result(world, examined):
    res, out, _ = examined
    again = target_section(res, world[4])
    assert again.metrics == out.section.metrics and again.summary == out.section.summary
    assert again.items == out.section.items and again.headline == out.section.headline


def test_examiners_find_the_planted_weakness(examined):
    _, out, _ = examined
    worst = out.section.tables["worst"]
    for e in ("bo", "rl"):
        w = worst[worst.examiner == e]
        # the worst scenes found look from the top or the bottom
        assert np.median(np.abs(w.view_elevation)) > 45
        assert w.p_true.max() < out.section.metrics[e]["T0"]
    found = out.findings
    elev = [json.loads(f)["view_elevation"] for f in found[found.kind == "class_condition"].factors]
    assert np.median(np.abs(elev)) > 45


def test_findings_table(examined):
    from PIL import Image

    _, out, _ = examined
    all_findings, metrics = out.findings, out.section.metrics
    assert list(all_findings.columns) == list(FINDING_COLUMNS)
    # a class with T0 < 0.5 is a finding of its own: the model never learnt it
    t0 = {c: v["random"]["T0"] for c, v in metrics["per_class"].items()}
    unlearnt = all_findings[all_findings.kind == "unlearnt_class"]
    assert sorted(unlearnt.label) == sorted(c for c, v in t0.items() if v < 0.5)
    assert sorted(metrics["classes_t0_below_half"]) == sorted(unlearnt.label)
    assert np.allclose(unlearnt.severity, [1 - t0[c] for c in unlearnt.label])
    findings = all_findings[all_findings.kind == "class_condition"]
    assert sorted(findings.label) == sorted(CLASSES) and len(findings) == len(CLASSES)
    assert findings.severity.is_monotonic_decreasing
    assert ((findings.severity >= 0) & (findings.severity <= 1)).all()
    assert ((findings.confidence >= 1 / len(CLASSES) - 1e-9) & (findings.confidence <= 1)).all()
    assert findings.prediction.isin(CLASSES).all()
    for _, row in findings.iterrows():
        assert row.weak_spot.startswith(f"class {row.label} under rendering conditions ")
        factors = json.loads(row.factors)
        assert set(factors) == set(SceneSpace().bounds)  # searched and fixed (sun) factors
        img = np.asarray(Image.open(io.BytesIO(row.image)))
        assert img.shape == (24, 24, 3)
        # severity is 1 - the lowest true-class probability BO and RL reached
        low = min(metrics["per_class"][row.label][e]["min_found"] for e in ("bo", "rl"))
        assert row.severity == pytest.approx(1 - low)
        if row.severity > 0.5 and row.prediction == row.label:
            pytest.fail("a class whose true-class probability fell below 0.5 cannot be predicted with top-1")


def test_a_weak_spot_names_the_factors_farthest_from_the_middle():
    space = SceneSpace()
    query = {k: (lo + hi) / 2 for k, (lo, hi) in space.bounds.items()}
    query.update(view_elevation=89.0, light_energy=2999.6, sun_energy=0.123456)
    assert condition_summary(query, space) == "light_energy=3000, view_elevation=89, sun_energy=0.123"
    assert condition_summary(query, space, k=1) == "light_energy=3000"


def test_equal_cost_and_renders_known_answers():
    q, grid, w = equal_cost(tiny_params())
    assert (q, grid, w) == ({"random": 2, "bo": 1, "rl": 8}, [10, 20, 30], 8)

    def session(probs):
        s = Session(group="main", model="m", examiner_name="x", cls="c", label=0, instance=0, sun={}, examiner=None,
                    T=len(probs), batch=len(probs[0]), tail=1)
        s.probs = [np.asarray(p, float) for p in probs]
        return s

    a, b = session([[0.1, 0.2], [0.3, 0.4]]), session([[1.0, 1.0], [0.0, 0.0]])
    assert at_renders([a], 3, 2) == pytest.approx(0.25)  # renders 2 and 3: 0.2, 0.3
    assert at_renders([a, b], 4, 1) == pytest.approx((0.4 + 0.0) / 2)
    assert np.isnan(at_renders([], 4, 1))


def test_settings_against_the_papers():
    st = settings_table(tiny_params()).set_index("setting")
    assert st.loc["T", "ran"] == "30" and bool(st.loc["T", "differs"]) and st.loc["T", "paper"] == "500 (Sec. 4.1)"
    assert st.loc["rl.batch_size", "ran"] == "8" and not bool(st.loc["bo.init_points", "differs"])
    assert bool(st.loc["checkpoints", "differs"])
    from weakspot.examine.config import ExamineParams

    assert not settings_table(ExamineParams()).differs.any()  # the defaults are the paper's
