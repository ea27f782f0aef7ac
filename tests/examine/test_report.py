"""The examiner's report on a target: metric keys, Table 2 at equal cost, the planted weakness found, the findings
and their wording, the settings against the paper's."""

import io
import json

import numpy as np
import pytest

from weakspot.examine.report import FINDING_COLUMNS, at_renders, equal_cost, mean_ci, settings_table, target_section
from weakspot.examine.sessions import Session
from weakspot.scene.space import SceneSpace

from .examine_helpers import CLASSES, tiny_params


def test_metrics_have_model_independent_keys(examined):
    res, out, _ = examined
    m = out.section.metrics
    assert set(m) == {
        "random",
        "bo",
        "rl",
        "per_class",
        "renders",
        "at_equal_renders",
        "classes_t0_below_half",
        "repeats",
        "regions",
    }
    for e in ("random", "bo", "rl"):
        assert list(m[e]) == ["T0", "T10", "T20", "T30"]  # keyed by the iterations that ran
        assert all(0.0 <= v <= 1.0 for v in m[e].values())
    # renders: RL a batch of 8 per iteration, BO one, random 2; compared at BO's render counts
    assert m["renders"] == {
        "random": {"T0": 0, "T10": 20, "T20": 40, "T30": 60},
        "bo": {"T0": 0, "T10": 10, "T20": 20, "T30": 30},
        "rl": {"T0": 0, "T10": 80, "T20": 160, "T30": 240},
    }
    assert all(list(m["at_equal_renders"][e]) == ["R10", "R20", "R30"] for e in ("random", "bo", "rl"))
    assert set(m["per_class"]) == set(CLASSES)
    assert set(m["per_class"]["disc"]) == {"random", "bo", "rl"}
    assert set(m["per_class"]["disc"]["bo"]) == {"T0", "T30", "T30_lo", "T30_hi", "min_found", "gp_length_scale_min"}
    assert set(m["per_class"]["disc"]["rl"]) == {"T0", "T30", "T30_lo", "T30_hi", "min_found"}
    # every class examined `repeats` times; the per-class value and the headline are means over the repeats
    reps = m["repeats"]["bo"]
    assert len(reps["per_repeat"]) == res.sessions[-1].rep + 1 == 2
    assert reps["mean"] == pytest.approx(m["bo"]["T30"]) and reps["lo"] <= reps["mean"] <= reps["hi"]
    assert m["per_class"]["disc"]["bo"]["gp_length_scale_min"] > 0
    st = out.section.tables["settings"].set_index("setting")
    assert bool(st.loc["T", "differs"]) and st.loc["T", "ran"] == "30" and not bool(st.loc["bo.init_points", "differs"])
    assert "T500" not in json.dumps(m) and "T500" not in " ".join(out.section.summary + out.section.headline)
    json.dumps(m)  # writable as metrics/examine.json
    assert set(out.section.tables) == {
        "table2",
        "per_class",
        "worst",
        "equal_renders",
        "t0_per_class",
        "settings",
        "regions",
        "curve",
    }
    curve = out.section.tables["curve"]  # Fig. 1 as a DVC plot: one column per examiner and T0, per iteration
    assert list(curve.columns) == ["iteration", "random", "bo", "rl", "T0"] and len(curve) == 30
    assert out.section.figures == {}  # drawn by weakspot.examine.figures
    assert out.section.headline
    # T0 of a class is the mean of its T = 0 protocol's random scenes, the same for every examiner
    t0 = {c: np.mean([s.probs[0].mean() for s in res.sessions if s.group == "main_t0" and s.cls == c]) for c in CLASSES}
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
    # the fake renderer squashes views from the top or bottom: the confirmed regions bound view_elevation there
    found = out.findings
    ok = found[(found.kind == "factor_region") & found.confirmed]
    elev = ok[ok.weak_spot.str.contains("view_elevation")]
    assert len(elev) >= 2 and "view_elevation" in ok.weak_spot.iloc[0], found[["weak_spot", "lift", "lift_lo"]]
    assert all(abs(json.loads(f)["view_elevation"]) > 45 for f in elev.factors)  # failed fresh renders up there


def test_findings_table(examined):
    from PIL import Image

    _, out, _ = examined
    all_findings, metrics = out.findings, out.section.metrics
    assert list(all_findings.columns)[: len(FINDING_COLUMNS)] == list(FINDING_COLUMNS)
    # a class with T0 < 0.5 is a finding of its own: the model never learnt it
    t0 = {c: v["random"]["T0"] for c, v in metrics["per_class"].items()}
    unlearnt = all_findings[all_findings.kind == "unlearnt_class"]
    assert sorted(unlearnt.label) == sorted(c for c, v in t0.items() if v < 0.5)
    assert sorted(metrics["classes_t0_below_half"]) == sorted(unlearnt.label)
    assert np.allclose(unlearnt.severity, [1 - t0[c] for c in unlearnt.label])
    findings = all_findings[all_findings.kind == "factor_region"]
    assert (
        len(findings) == metrics["regions"]["proposed"] and findings.confirmed.sum() == metrics["regions"]["confirmed"]
    )
    assert set(findings.label) <= set(CLASSES)
    assert list(all_findings.confirmed) == sorted(all_findings.confirmed, reverse=True)  # confirmed first
    for _, row in findings.iterrows():
        assert row.weak_spot.startswith(f"class {row.label} fails when ")
        assert row.severity == pytest.approx(np.nan_to_num(row.lift)) and row.n_confirm == row.n_control == 40
        assert row.confirmed == (row.lift_lo > 1) and "fresh renders on unseen instances" in row.confirmation
        if row.failures:  # the example is a failed fresh render inside the box
            factors = json.loads(row.factors)
            assert set(factors) == set(SceneSpace().bounds)  # searched and fixed (sun) factors
            assert np.asarray(Image.open(io.BytesIO(row.image))).shape == (24, 24, 3)
            assert row.prediction in CLASSES and row.prediction != row.label


def test_mean_ci_known_answers():
    m, lo, hi = mean_ci([1.0, 2.0, 3.0])
    assert m == 2.0 and (lo, hi) == pytest.approx((2 - 2.4841, 2 + 2.4841), abs=1e-3)  # t(0.975, 2) = 4.303
    m, lo, hi = mean_ci([0.5])
    assert m == 0.5 and np.isnan(lo) and np.isnan(hi)


def test_equal_cost_and_renders_known_answers():
    q, grid, w = equal_cost(tiny_params())
    assert (q, grid, w) == ({"random": 2, "bo": 1, "rl": 8}, [10, 20, 30], 8)

    def session(probs):
        s = Session(
            group="main",
            model="m",
            examiner_name="x",
            cls="c",
            label=0,
            instance=0,
            sun={},
            examiner=None,
            T=len(probs),
            batch=len(probs[0]),
            tail=1,
        )
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


def test_the_factor_ranges_that_differ_from_table_1_are_named():
    from weakspot.examine.config import ExamineParams
    from weakspot.scene.space import PAPER_BOUNDS, SceneSpace

    st = settings_table(ExamineParams(), SceneSpace()).set_index("setting")
    differ = sorted(k[len("range of ") :] for k in st.index if k.startswith("range of "))
    assert differ == ["light_energy", "view_distance"]  # the two ranges mapped to this scene's units
    assert st.loc["range of light_energy", "ran"] == "[900, 3000] W" and st.loc["range of light_energy", "differs"]
    assert not len([k for k in st.index if k.startswith("range of ") and k[len("range of ") :] not in PAPER_BOUNDS])
