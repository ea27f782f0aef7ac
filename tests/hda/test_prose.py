"""Every number HDA's headline and summary state comes from its metrics or the settings that ran (issue 24: numbers
are computed, never typed into prose); the paper's own figures ("paper: 100") and the interval level are not
measurements and are taken out first."""

import re

from tests.intrinsic.prose_numbers import unexplained
from weakspot.hda.report import report
from weakspot.methods import AuditTarget

PAPER = [r"\(paper: [^)]*\)", r"95%", r"Huang et al\.", r"Table \d+", r"Fig\. \d+", r"Definition \d+"]


def _clean(texts):
    out = []
    for t in texts:
        for pattern in PAPER:
            t = re.sub(pattern, " ", t)
        out.append(t)
    return out


def test_every_number_in_the_headline_and_summary_is_a_metric_or_setting(toy):
    result, p = toy["white"][:2]
    sec = report(result, p, AuditTarget(name="toy", model=None, classes=["a", "b", "c"], test=None)).section
    texts = _clean(sec.summary + sec.headline)
    assert unexplained(texts, sec.metrics, p.model_dump()) == []
    typed = texts[2] + " a margin fell x1.5"  # the checker catches a number typed into prose
    assert unexplained([typed], sec.metrics, p.model_dump()) == ["1.5"]
