"""The HTML report is self-contained: figures embedded, tables cut to size, text escaped."""

import base64

import numpy as np
import pandas as pd

from weakspot.report import render_report

PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="
)


def _section(stage, order, **kw):
    return {
        "stage": stage,
        "order": order,
        "title": stage.title(),
        "summary": ["a < b & c"],
        "items": [],
        "lineage": {},
        **kw,
    }


def test_sections_in_pipeline_order_with_embedded_figure_and_escaped_text():
    secs = [
        _section("report", 9),
        _section("train_target", 1, items=[{"figure": "rel", "caption": "Reliability"}]),
    ]
    page = render_report(secs, figures={"train_target/rel": PNG}, tables={}, metrics={"train_target": {"ece": 0.01}})
    assert page.index("id='train_target'") < page.index("id='report'")
    assert "data:image/png;base64," + base64.b64encode(PNG).decode() in page
    assert "a &lt; b &amp; c" in page and "a < b & c" not in page
    assert "src='http" not in page  # readable offline
    assert "ece" in page


def test_long_table_is_cut_and_says_so():
    df = pd.DataFrame({"x": range(50), "y": [0.5] * 50})
    page = render_report(
        [_section("gad", 2, items=[{"table": "t", "caption": "T"}])],
        figures={},
        tables={"gad/t": df},
        metrics={},
        max_table_rows=10,
    )
    assert page.count("<tr>") == 11  # header + 10 rows
    assert "40 more rows" in page


def test_wide_short_table_is_transposed_with_rows_named_by_their_leading_columns():
    cols = {f"c{i}": [i, i + 0.5] for i in range(20)}
    df = pd.DataFrame({"target": ["phoneme", "phoneme"], "seed": [0, 1], **cols})
    page = render_report(
        [_section("gad", 2, items=[{"table": "t", "caption": "T"}])], figures={}, tables={"gad/t": df}, metrics={}
    )
    assert "class='transposed'" in page and "<th>phoneme / 0</th><th>phoneme / 1</th>" in page
    assert page.count("<tr><td>c") == 20 and "<tr><td>c19</td><td>19</td><td>19.5</td></tr>" in page
    narrow = pd.DataFrame({"x": [1, 2]})  # and a narrow one is not
    page = render_report(
        [_section("gad", 2, items=[{"table": "t", "caption": "T"}])], figures={}, tables={"gad/t": narrow}, metrics={}
    )
    assert "transposed" not in page


def test_missing_figure_is_flagged_not_silently_dropped():
    page = render_report(
        [_section("gad", 2, items=[{"figure": "nope", "caption": ""}])], figures={}, tables={}, metrics={}
    )
    assert "figure gad/nope is missing" in page


def test_headlines_open_the_page_in_stage_order():
    secs = [_section("gad", 2, headline=["GAD finds 9 errors"]), _section("train_target", 1, headline=["acc 0.99"])]
    page = render_report(secs, figures={}, tables={}, metrics={})
    assert (
        page.index("At a glance")
        < page.index("acc 0.99")
        < page.index("GAD finds 9 errors")
        < page.index("id='train_target'")
    )


def test_weak_spots_come_first_with_examples_and_reasons():
    import pandas as pd

    from weakspot.findings import normalise, to_png
    from weakspot.report import render_report

    found = normalise(
        pd.DataFrame(
            {
                "weak_spot": ["class cap under low light"],
                "kind": ["class_condition"],
                "severity": [0.9],
                "severity_meaning": ["1 - lowest true-class probability"],
                "label": ["cap"],
                "prediction": ["bowl"],
                "confidence": [0.8],
                "image": [to_png(np.zeros((3, 4, 4), np.float32))],
            }
        )
    )
    target = {
        "name": "scenes",
        "intro": "a CNN",
        "methods": [
            {"name": "examine", "title": "Adversarial examiner", "paper": "seeds/000", "findings": found},
            {"name": "gad", "title": "GAD", "paper": "seeds/001", "reason": "needs tabular data"},
        ],
    }
    page = render_report(
        [{"stage": "train", "target": "scenes", "title": "Model", "summary": ["x"], "items": []}],
        figures={},
        tables={},
        metrics={},
        targets=[target],
    )
    assert page.index("Weak spots of scenes") < page.index("<h2>Model</h2>")
    assert "class cap under low light" in page and "predicted <b>bowl</b>" in page
    assert "Not run on this target: needs tabular data" in page
    assert page.count("data:image/png;base64,") == 1


NASTY = "<script>alert('x')</script> & \"q\""


def test_every_given_text_is_escaped_wherever_the_page_prints_it():
    import json

    from weakspot.findings import normalise, to_png

    found = normalise(
        pd.DataFrame(
            {
                "weak_spot": [NASTY],
                "kind": ["input"],
                "severity": [1.0],
                "severity_meaning": [NASTY],
                "label": [NASTY],
                "prediction": [NASTY],
                "confidence": [0.5],
                "image": [to_png(np.zeros((3, 4, 4), np.float32))],
                "example": [json.dumps({NASTY: NASTY})],
                "factors": [""],
            }
        )
    )
    targets = [
        {
            "name": NASTY,
            "intro": NASTY,
            "methods": [
                {"name": NASTY, "title": NASTY, "paper": NASTY, "findings": found, "anchor": NASTY},
                {"name": NASTY, "title": NASTY, "paper": NASTY, "reason": NASTY},
                {"name": NASTY, "title": NASTY, "paper": NASTY},
            ],
        }
    ]
    secs = [
        _section(
            "gad",
            2,
            target=NASTY,
            title=NASTY,
            summary=[NASTY],
            headline=[NASTY],
            lineage={NASTY: NASTY},
            items=[
                {"figure": "f", "caption": NASTY},
                {"table": "t", "caption": NASTY},
                {"figure": NASTY, "caption": NASTY},
            ],
        )
    ]
    key = f"gad/{NASTY}"
    row = {
        "metric": NASTY,
        "before": NASTY,
        "after": [NASTY],
        "change": 0.5,
        "rule": NASTY,
        "note": NASTY,
        "regression": True,
    }
    since = {
        "n_audits": 2,
        "previous": NASTY,
        "current": NASTY,
        "recorded": True,
        "rows": [row],
        "trend": {},
        "times": [],
        "gates": [{"condition": NASTY, "passed": False, "numbers": NASTY}],
    }
    page = render_report(
        secs,
        figures={f"{key}/f": PNG},
        tables={f"{key}/t": pd.DataFrame({NASTY: [NASTY]})},
        metrics={key: {NASTY: 1.0}},
        title=NASTY,
        run_info={NASTY: NASTY},
        targets=targets,
        groups={"gad": NASTY},
        since=since,
        trend_png=PNG,
    )
    assert "<script>" not in page and "alert(&#39;x&#39;)" in page
    assert page.count("&lt;script&gt;") >= 30  # each of the texts above, printed (and escaped) at least once


def test_every_template_loads_and_the_css_is_embedded():
    from weakspot.report.html import environment

    env = environment()
    names = env.list_templates()
    assert {
        "page.html",
        "section.html",
        "since.html",
        "weak_spots.html",
        "method.html",
        "finding.html",
        "conditions.html",
        "report.css",
    } <= set(names)
    for name in names:
        env.get_template(name)  # compiles
    assert env.autoescape("page.html") and env.autoescape("section.html")
    page = render_report([], figures={}, tables={}, metrics={})
    css = env.loader.get_source(env, "report.css")[0]
    assert css.strip() in page and "<style>" in page


def test_a_part_renders_alone_as_it_does_in_the_page():
    from weakspot.report.html import since_html, weak_spots_html

    target = {"name": "t", "intro": "i", "methods": [{"name": "gad", "title": "GAD", "reason": "needs a table"}]}
    since = {"n_audits": 0}
    part, comparison = weak_spots_html(target), since_html(since)
    assert part.startswith("<section class='target' id='target-t'>") and "Not run on this target" in part
    assert comparison.startswith("<section class='since' id='since'>") and "no audit recorded yet" in comparison
    page = render_report([], figures={}, tables={}, metrics={}, targets=[target], since=since)
    assert part in page and comparison in page
