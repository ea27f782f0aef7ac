"""The report's data: numbers as text, tables transposed or cut, findings and the history's rows ready to print."""

import base64
import json

import pandas as pd

from weakspot.report import view
from weakspot.report.html import weak_spots_html


def test_numbers_print_to_four_significant_digits_and_small_ones_in_e_notation():
    assert view.number(0.123456) == "0.1235" and view.number(12345.6) == "1.235e+04"
    assert view.number(0.000123456) == "1.23e-04" and view.number(0.0) == "0" and view.number(-0.5) == "-0.5"
    assert view.number(float("nan")) == "NaN" and view.number(None) == "None" and view.number(True) == "True"
    assert view.number(7) == "7" and view.number("a<b") == "a<b"  # text stays text: the template escapes it


def test_png_becomes_a_data_uri_that_decodes_to_the_same_bytes():
    png = b"\x89PNG\r\n\x1a\nxyz"
    src = view.png_src(png)
    assert src.startswith("data:image/png;base64,") and base64.b64decode(src.split(",", 1)[1]) == png


def test_a_wide_short_table_is_transposed_and_names_rows_by_as_few_leading_columns_as_tell_them_apart():
    cols = {f"c{i}": [i, i + 0.5] for i in range(view.TRANSPOSE_COLUMNS)}
    same_target = pd.DataFrame({"target": ["t", "t"], "seed": [0, 1], **cols})
    t = view.table(same_target, max_rows=20)
    assert t["transposed"] and t["head"] == ["column", "t / 0", "t / 1"] and t["more"] == 0
    assert t["rows"][0] == ["target", "t", "t"] and t["rows"][-1] == ["c13", "13", "13.5"]
    assert len(t["rows"]) == len(same_target.columns)
    twins = pd.DataFrame({"a": [1, 1], "b": [2, 2], "c": [3, 3], **cols})  # no three leading columns tell them apart
    assert view.table(twins, max_rows=20)["head"] == ["column", "row 1", "row 2"]


def test_a_table_is_transposed_only_when_wide_short_and_not_cut():
    wide = pd.DataFrame({f"c{i}": [1.0] * 3 for i in range(view.TRANSPOSE_COLUMNS + 1)})
    assert view.table(wide, max_rows=20)["transposed"]
    assert not view.table(wide.iloc[:, : view.TRANSPOSE_COLUMNS], max_rows=20)["transposed"]  # not wide enough
    assert not view.table(pd.concat([wide] * 3), max_rows=20)["transposed"]  # 9 rows: too long
    assert not view.table(wide, max_rows=2)["transposed"]  # would be cut: shown as it is, cut
    assert not view.table(wide.iloc[:0], max_rows=20)["transposed"]  # empty


def test_a_long_table_keeps_its_first_rows_and_counts_the_rest():
    df = pd.DataFrame({"x": range(50), "y": [1e-5] * 50})
    t = view.table(df, max_rows=10)
    assert t["head"] == ["x", "y"] and len(t["rows"]) == 10 and t["more"] == 40
    assert t["rows"][9] == ["9", "1.00e-05"]
    assert view.table(df, max_rows=50)["more"] == 0


def test_cards_follow_key_metrics_else_the_first_eight_scalars_never_booleans_or_text():
    metrics = {"a": 0.5, "flag": True, "name": "x", "b": 2, **{f"m{i}": float(i) for i in range(10)}}
    assert view.cards(metrics, ["b", "missing", "a", "flag"]) == [("2", "b"), ("0.5", "a")]
    shown = view.cards(metrics)
    assert len(shown) == 8 and shown[:3] == [("0.5", "a"), ("2", "b"), ("0", "m0")]
    assert view.cards({"name": "x"}) == []


def test_a_finding_says_what_the_model_predicted_and_the_true_class_and_keeps_its_example_small():
    row = {
        "rank": 2,
        "weak_spot": "w",
        "severity": 0.25,
        "prediction": "bowl",
        "confidence": 0.8,
        "label": "cap",
        "image": b"png",
        "example": json.dumps({f"k{i}": i / 3 for i in range(10)}),
        "factors": "not json",
    }
    f = view.finding(row)
    assert f["rank"] == 2 and f["severity"] == "0.25" and f["prediction"] == "bowl" and f["confidence"] == "0.8"
    assert f["label"] == "cap" and f["image"] == view.png_src(b"png")
    assert len(f["tables"]) == 1 and len(f["tables"][0]) == 8 and f["tables"][0][1] == ("k1", "0.3333")
    bare = view.finding({"rank": 1, "weak_spot": "w", "severity": 1.0, "prediction": "", "label": "", "image": None})
    assert bare["prediction"] == bare["confidence"] == bare["label"] == bare["image"] == "" and bare["tables"] == []


def test_a_method_card_says_why_it_did_not_run_or_that_its_findings_are_missing_or_shows_the_top_ones():
    df = pd.DataFrame(
        {
            "rank": [1, 2, 3],
            "weak_spot": ["a", "b", "c"],
            "severity": [3.0, 2.0, 1.0],
            "severity_meaning": ["how bad"] * 3,
            "prediction": [""] * 3,
            "label": [""] * 3,
            "n_confirm": [40, 40, 40],
            "confirmed": [True, True, False],
            "confirmation": ["held out"] * 3,
        }
    )
    card = view.method_card({"name": "m", "title": "M", "findings": df, "anchor": "m-t"}, max_findings=2)
    assert [f["weak_spot"] for f in card["findings"]] == ["a", "b"] and card["count"] == 3
    assert [f["weak_spot"] for f in card["unconfirmed"]] == ["c"] and card["control"]["kind"] == "found"
    assert card["meaning"] == "how bad" and card["anchor"] == "m-t" and not card["missing"]
    assert view.method_card({"name": "m", "title": "M", "reason": "needs images", "findings": df}, 2)["findings"] == []
    assert view.method_card({"name": "m", "title": "M"}, 2)["missing"]


def test_since_puts_the_regressions_first_and_counts_the_rows_left_out():
    rows = [
        {
            "metric": f"m{i}",
            "before": 1.0,
            "after": [[], None, {"a": 1}][i % 3],
            "change": None if i % 2 else 0.5,
            "rule": "lower",
            "note": "",
            "regression": i in (3, 7),
        }
        for i in range(10)
    ]
    s = view.since_section(
        {
            "n_audits": 2,
            "previous": "P",
            "current": "C",
            "recorded": True,
            "rows": rows,
            "trend": {f"m{i}": [1, 2] for i in range(13)},
            "times": ["a", "b"],
        },
        b"png",
        max_rows=4,
    )
    assert [r["metric"] for r in s["rows"]] == ["m3", "m7", "m0", "m1"] and s["more"] == 6 and s["bad"]
    assert [r["after"] for r in s["rows"]] == ["none", "–", "none", "–"] and s["rows"][2]["change"] == "0.5"
    assert s["rows"][1]["change"] == "" and s["verdict"] == "2 regressions among 10 watched metrics since audit P"
    assert s["trend_which"].startswith("12 of the 13") and s["n_times"] == 2 and s["trend"] == view.png_src(b"png")


def test_the_verdict_line_before_any_audit_and_on_the_first():
    assert view.verdict_line({"n_audits": 0}).startswith("no audit recorded yet")
    assert view.verdict_line({"n_audits": 1, "previous": None}).startswith("first audit")
    one = [{"regression": True}, {"regression": False}]
    assert view.verdict_line({"n_audits": 2, "previous": "P", "rows": one}).startswith("1 regression among 2")


def test_a_section_names_what_is_missing_and_folds_its_lineage():
    s = {
        "stage": "gad",
        "target": "t",
        "title": "GAD",
        "items": [{"figure": "f"}, {"table": "x", "caption": "X"}, {"figure": "gone"}, {"note": "neither"}],
    }
    v = view.section(
        s,
        "gad/t",
        figures={"gad/t/f": b"p"},
        tables={"gad/t/x": pd.DataFrame({"a": [1]})},
        metrics={"gad/t": {"n": 1}},
        max_table_rows=5,
    )
    assert v["id"] == "gad-t" and [p["kind"] for p in v["parts"]] == ["figure", "table", "missing"]
    assert v["parts"][2]["missing"] == "figure gad/t/gone" and v["parts"][0]["caption"] == ""
    assert v["details"] and json.loads(v["metrics_json"]) == {"n": 1} and v["lineage_json"] == "{}"
    bare = view.section({"stage": "render"}, "render", figures={}, tables={}, metrics={}, max_table_rows=5)
    assert not bare["details"] and bare["metrics_json"] is None and bare["title"] == "render"


def test_the_page_opens_each_group_once_and_navigates_to_targets_since_and_groups_in_page_order():
    secs = [
        {"stage": "gad", "target": "b", "order": 2, "headline": ["h2"]},
        {"stage": "gad", "target": "a", "order": 2},
        {"stage": "train", "target": "a", "order": 1, "title": "Model", "headline": ["h1"]},
    ]
    p = view.page(
        secs,
        figures={},
        tables={},
        metrics={},
        title="T",
        run_info={"when": 1},
        max_table_rows=5,
        targets=[{"name": "a", "methods": []}],
        groups={"gad": "GAD"},
        since={"n_audits": 0},
        trend_png=None,
    )
    assert [s["id"] for s in p["sections"]] == ["train-a", "gad-a", "gad-b"]
    assert [s["group"] for s in p["sections"]] == ["Model", "GAD", None]
    assert [a for a, _ in p["nav"]] == ["overview", "glance", "target-a", "since", "group-train-a", "group-gad-a"]
    assert p["glance"] == [("Model", "h1"), ("gad", "h2")] and p["meta"][0] == ("when", "1")
    assert p["meta"][1][0] == "since the last audit" and p["since"]["verdict"].startswith("no audit")


def test_only_confirmed_findings_are_weak_spots_and_a_method_that_found_none_says_so():
    base = {
        "rank": [1, 2],
        "weak_spot": ["a", "b"],
        "severity": [3.0, 2.0],
        "severity_meaning": ["lift"] * 2,
        "prediction": [""] * 2,
        "label": [""] * 2,
    }
    lost = view.method_card(
        {
            "name": "m",
            "title": "M",
            "findings": pd.DataFrame(
                {**base, "n_confirm": [30, 30], "confirmed": [False, False], "confirmation": ["x", "y"]}
            ),
        },
        4,
    )
    assert lost["findings"] == [] and lost["n_unconfirmed"] == 2 and lost["control"]["kind"] == "clear"
    assert lost["control"]["text"].startswith("Found no weak spot: none of the 2 candidate(s)")
    unchecked = view.method_card(
        {
            "name": "m",
            "title": "M",
            "findings": pd.DataFrame(
                {**base, "n_confirm": [0, 0], "confirmed": [False, False], "confirmation": ["not checked"] * 2}
            ),
        },
        4,
    )
    assert unchecked["findings"] == [] and unchecked["control"]["kind"] == "unchecked"
    html = weak_spots_html(
        {
            "name": "t",
            "methods": [
                {
                    "name": "m",
                    "title": "M",
                    "findings": pd.DataFrame(
                        {**base, "n_confirm": [30, 30], "confirmed": [False, False], "confirmation": ["x", "y"]}
                    ),
                }
            ],
        }
    )
    assert "No confirmed weak spot." in html and "2 not confirmed" in html and "<details" in html


def test_the_report_opens_with_a_row_per_target_and_ranks_confirmed_weak_spots_by_the_adjusted_lower_bound():
    def df(spots, confirmed, lifts, lows=None):
        n = len(spots)
        return pd.DataFrame(
            {
                "rank": range(1, n + 1),
                "weak_spot": spots,
                "severity": lifts,
                "severity_meaning": ["lift"] * n,
                "prediction": [""] * n,
                "label": [""] * n,
                "n_confirm": [40] * n,
                "confirmed": confirmed,
                "lift": lifts,
                "lift_lo": [1.5] * n,
                "lift_hi": [9.0] * n,
                "lift_lo_adjusted": lows or [1.2] * n,
                "confirmation": ["held out"] * n,
            }
        )

    targets = [
        {
            "name": "a",
            "model": "sklearn svm",
            "accuracy": 0.8123,
            "methods": [
                {
                    "name": "segments",
                    "title": "Weak segments",
                    "findings": df(["x <= 0", "y > 1"], [True, True], [2.0, 5.0], [1.8, 1.1]),
                },
                {"name": "gad", "title": "GAD", "findings": df(["row 3"], [False], [7.0])},
                {"name": "hda", "title": "HDA", "reason": "needs images"},
            ],
        },
        {
            "name": "b",
            "methods": [{"name": "segments", "title": "Weak segments", "findings": df(["class = c"], [False], [1.1])}],
        },
    ]
    spots = view.confirmed_spots(targets[0])
    # a sure lift of 2 before a lucky one of 5; GAD's unconfirmed row is not there
    assert [s["weak_spot"] for s in spots] == ["x <= 0", "y > 1"]
    o = view.overview([view.target(t) for t in targets])
    assert o["methods"] == ["Weak segments", "GAD", "HDA"]
    a, b = o["rows"]
    assert a["accuracy"] == "81.2%" and a["n_confirmed"] == 2
    assert a["worst"].startswith("fails on natural inputs: x <= 0 (Weak segments): lift 2"), a["worst"]
    assert a["verdicts"] == ["found", "clear", "not run"] and b["verdicts"] == ["clear", "", ""]
    assert a["found"] == [2, 0, 0] and b["found"] == [0, 0, 0]
    assert b["worst"] == "none confirmed"
    html = weak_spots_html({**targets[0]})
    assert html.index("Confirmed weak spots") < html.index("<h3>Weak segments")


def test_conditions_summary_puts_failed_gates_and_regressions_first():
    from weakspot.report.view import conditions_section

    rule = {
        "metric": "train/digits:test_accuracy",
        "rule": "down > 0.01",
        "before": 0.95,
        "after": 0.9,
        "change": -0.05,
        "regression": True,
        "note": "",
    }
    ok_rule = {**rule, "metric": "train/scenes:test_accuracy", "regression": False}
    gates = [
        {"condition": "g1", "passed": True, "numbers": "1 of 1 hold"},
        {"condition": "g2", "passed": False, "numbers": "1 of 1 fail: x = 0.5"},
    ]
    c = conditions_section({"gates": gates, "rows": [ok_rule, rule], "previous": "A"})
    assert c["bad"] and c["verdict"] == "3 of 4 conditions failed"
    assert [(r["passed"], r["condition"]) for r in c["rows"]] == [
        (False, "g2"),
        (False, "train/digits:test_accuracy (worse if down > 0.01)"),
        (False, "no watched metric worse than audit A"),
        (True, "g1"),
    ]
    assert c["rows"][2]["numbers"] == "1 of 2 watched metrics within their rules"
    assert conditions_section({"gates": [], "rows": []}) is None  # a first audit without gates: no section
    assert conditions_section({"gates": gates[:1]})["verdict"] == "the one condition holds"


def test_a_region_ranks_before_a_class_alone_however_large_the_classs_lift():
    """Issue 47: a class the model recalls poorly (kind ``class``: known only with the label) outranked the planted
    feature region. It ranks after every region, and is never the target's worst."""
    import pandas as pd

    def rows(kind, spot, lo):
        return {
            "rank": 1, "weak_spot": spot, "kind": kind, "severity": 2 * lo, "severity_meaning": "lift",
            "prediction": "", "label": "", "n_confirm": 40, "failures": 30, "n_control": 400,
            "control_failures": 20, "confirmed": True, "lift": 2 * lo, "lift_lo": lo, "lift_hi": 3 * lo,
            "lift_lo_adjusted": lo, "p_adjusted": 1e-6, "family": 2, "confirmation": "",
        }  # fmt: skip

    target = {
        "name": "t",
        "methods": [
            {"name": "hda", "title": "HDA", "findings": pd.DataFrame([rows("class", "class 3", 20.0)])},
            {"name": "segments", "title": "Weak segments", "findings": pd.DataFrame([rows("segment", "f0 > 37", 2.0)])},
        ],
    }
    spots = view.confirmed_spots(target)
    assert [s["weak_spot"] for s in spots] == ["f0 > 37", "class 3"]
    row = view.overview([view.target(target)])["rows"][0]
    assert "class 3" not in row["worst"] and "f0 > 37" in row["worst"]
