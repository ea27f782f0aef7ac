"""Weak segments' report and figure on a planted problem and on a model with nothing to find."""

from types import SimpleNamespace

import numpy as np
from matplotlib.figure import Figure

from tests.segments.test_run import Planted, table
from weakspot.evidence import COLUMNS
from weakspot.findings import normalise
from weakspot.segments.config import SegmentsParams
from weakspot.segments.figures import figures
from weakspot.segments.report import report
from weakspot.segments.run import run


def _run(model, n=2000, seed=0):
    t = SimpleNamespace(name="t", test=table(n, seed), model=model, classes=["neg", "pos"])
    res = run(t, SegmentsParams(), None)
    return res, report(res, SegmentsParams(), t), figures(res, SegmentsParams(), t)


def test_a_confirmed_segment_is_a_finding_with_its_evidence_the_headline_and_the_figure():
    res, out, figs = _run(Planted(lambda X: (X[:, 2] > 0.3) & (X[:, 3] <= -0.2)))
    f = normalise(out.findings)
    assert set(COLUMNS) <= set(f.columns) and f["confirmed"].iloc[0]
    top = res.confirmed[0].evidence
    assert f["severity"].iloc[0] == top.lift and f["lift_lo"].iloc[0] == top.lift_lo
    assert f["confirmation"].iloc[0].startswith(f"{top.failures} of {top.n_confirm} held-out rows fail inside")
    m = out.section.metrics
    assert m["beat_control"] and m["n_confirmed"] == len(res.confirmed) and m["top_lift"] == round(top.lift, 4)
    assert out.section.headline[0].startswith("Weak segment of t: f2 > 0.3")
    out.section.figures.update(figs)
    out.section.check()
    assert isinstance(figs["lift"], Figure) and len(figs["lift"].axes[0].get_yticklabels()) == len(res.segments)
    table_ = out.section.tables["segments"]
    assert list(table_["confirmed"]) == [s.evidence.confirmed for s in res.segments]


def test_a_model_with_nothing_to_find_says_it_found_no_weak_spot():
    res, out, _ = _run(Planted(lambda X: np.zeros(len(X), bool), noise=0.1), seed=3)
    assert not res.confirmed and not out.section.metrics["beat_control"]
    assert out.section.metrics["top_lift"] is None and out.section.headline == []
    assert "it found no weak spot on this target" in out.section.summary[1]
    assert not normalise(out.findings)["confirmed"].any()
