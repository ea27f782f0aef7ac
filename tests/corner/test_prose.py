"""Every number in the corner section's headline and summary is a metric's or a param's value as formatted: no figure
is typed into the prose (issue 24: a stale hard-coded "x1.5" stood in the report)."""

import re
from pathlib import Path


from weakspot.corner.config import PAPER_SETTINGS

ROOT = Path(__file__).resolve().parents[2]
#: citations, not figures: the paper's sections and figures, its seed file
CITATIONS = re.compile(r"Sec\. \d+(?:\.\d+)?(?:-\d+(?:\.\d+)?)?(?:, \d+(?:\.\d+)?)*|Fig\. \d+(?:-\d+)?|seeds/\d+")
#: a number, possibly a percentage, possibly after "x" (a factor); never part of a word such as "p1"
NUMBER = re.compile(r"(?<![A-Za-wyz_\d.])\d+(?:\.\d+)?(?:e[-+]?\d+)?%?")
#: the intervals' level, a convention of every interval in the report
LITERALS = {"95%"}


def _leaves(v):
    if isinstance(v, dict):
        for x in v.values():
            yield from _leaves(x)
    elif isinstance(v, (list, tuple)):
        for x in v:
            yield from _leaves(x)
    else:
        yield v


def allowed(metrics, params):
    """Every way the prose formats a metric's or a param's value (and a ratio of two metrics, a share of a count)."""
    from weakspot.fmt import fmt

    values = list(_leaves(metrics)) + list(_leaves(params.model_dump())) + [v for v, _ in PAPER_SETTINGS.values()]
    out = set(LITERALS)
    for v in values:
        if isinstance(v, bool) or v is None:
            continue
        if isinstance(v, str):
            out.add(v)
            continue
        v = float(v)
        out |= {fmt(v), f"{v:.0%}", f"{v:.1%}", f"{v:.2f}", f"{v:.3f}", str(v), f"{v:g}"}
        if v == int(v):
            out.add(str(int(v)))
    return out


def stray_numbers(text, ok):
    """The number-like tokens of ``text`` that are not in ``ok`` (citations removed first)."""
    return [t for t in NUMBER.findall(CITATIONS.sub(" ", text)) if t not in ok]


def test_the_checker_catches_a_typed_number(toy_run, toy):
    from weakspot.corner.report import report

    params, res, _ = toy_run
    m = report(res, params, toy).section.metrics
    ok = allowed(m, params)
    assert stray_numbers("the margin fell only x1.5 (digits)", ok) == ["1.5"]
    assert stray_numbers(f"x{m['margin_reduction']:.3g} in Sec. 4.3, Fig. 4-5, p1 - p2", ok) == []


def test_every_number_in_the_headline_and_summary_comes_from_the_metrics_or_params(toy_run, toy):
    import dataclasses

    from weakspot.corner.report import report

    params, res, _ = toy_run
    for r, p in (
        (res, params),
        (dataclasses.replace(res, controls=None), params),
        (res, params.model_copy(update={"lr_schedule": "cosine"})),
    ):
        sec = report(r, p, toy).section
        ok = allowed(sec.metrics, p)
        text = " ".join(sec.headline + sec.summary)
        assert stray_numbers(text, ok) == [], text
