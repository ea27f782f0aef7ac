"""Weak segments on tables with missing values (issue 37): missingness is a condition of its own ("income is
missing"), tested like any candidate, and a condition on a value holds only where the value is observed."""

from pathlib import Path
from types import SimpleNamespace

import numpy as np

from weakspot.data.dataset import Dataset
from weakspot.rules import Column, Rule
from weakspot.segments.config import SegmentsParams
from weakspot.segments.report import metrics_of, summary_of
from weakspot.segments.run import run


def test_a_rule_on_a_value_leaves_the_missing_rows_out_and_missingness_reads_as_a_condition():
    values = np.array([[1.0, 0.0], [np.nan, 1.0], [5.0, np.nan], [np.nan, np.nan]])
    names, y = ["x", "city"], np.zeros(4, int)
    assert Rule({"x": (None, 3.0)}).mask(values, names, y).tolist() == [True, False, False, False]
    assert Rule({"x": (0.5, None)}).mask(values, names, y).tolist() == [True, False, True, False]
    not_a = Rule(cats={"city": frozenset({1})})  # "city not in {a}": an observed city other than a
    assert not_a.mask(values, names, y).tolist() == [False, True, False, False]
    gone = Rule().narrowed(Column("missing", "x"), 0.5, True)
    assert gone.text(["c"]) == "x is missing" and gone.mask(values, names, y).tolist() == [False, True, False, True]
    seen = Rule().narrowed(Column("missing", "city"), 0.5, False)
    assert seen.text(["c"]) == "city is observed" and seen.mask(values, names, y).tolist() == [True, True, False, False]
    both = seen.narrowed(Column("num", "x"), 3.0, False)  # a condition on x says x is observed; city's is kept
    assert both.text(["c"]) == "x <= 3 and city is observed"
    assert Rule({"x": (None, 3.0)}, missing={"x": False}).text(["c"]) == "x <= 3"


class WeakWhereHighOrMissing:
    """Right on every row except where x1 > 0.5 or x1 is missing (it answers the other class there) and on a 3%
    hash of the rest."""

    def predict_proba(self, X):
        y = (X[:, 0] > 0).astype(int)
        x1 = X[:, 1]
        flip = (np.nan_to_num(x1, nan=1.0) > 0.5) | (np.modf(np.abs(np.nansum(X, axis=1)) * 9973.0)[0] < 0.03)
        p = np.where(flip, 1 - y, y).astype(float) * 0.8 + 0.1
        return np.column_stack([1 - p, p])


def test_a_threshold_region_holds_only_observed_rows_and_the_missing_rows_are_their_own_segment():
    rng = np.random.default_rng(5)
    X = rng.uniform(-1, 1, (4000, 3)).astype(np.float32)
    X[rng.random(4000) < 0.15, 1] = np.nan
    ds = Dataset(X=X, y=(X[:, 0] > 0).astype(np.int64), classes=["neg", "pos"], feature_names=["x0", "x1", "x2"])
    res = run(SimpleNamespace(test=ds, model=WeakWhereHighOrMissing()), SegmentsParams(), None)
    texts = [s.text for s in res.confirmed]
    assert "x1 is missing" in texts, texts
    on_x1 = [s for s in res.segments if "x1" in s.rule.ranges]
    assert on_x1 and any(s.evidence.confirmed for s in on_x1), texts
    for s in res.segments:  # each rule counted by itself on the search half: a range never holds a missing row
        inside = s.rule.mask(X[res.search], ds.feature_names, ds.y[res.search])
        assert s.search_rows == inside.sum() and s.search_failures == res.failed[res.search][inside].sum()
        if "x1" in s.rule.ranges:
            assert not np.isnan(X[res.search][inside, 1]).any() and s.rule.missing.get("x1") is not True
    summary = " ".join(summary_of(metrics_of(res), res, SegmentsParams()))
    assert "Missing values are kept: the tree also saw whether x1 is missing" in summary


def test_the_planted_missingness_of_a_users_pipeline_is_a_confirmed_weak_segment(tmp_path: Path):
    """The pipeline's path on the helper's files: the CSVs prepared and written as Parquet, the pickled
    HistGradientBoosting pipeline loaded as params.yaml names it, weak segments run as the method stage runs them."""
    from tests.user_tables import audit_target, write_missing_csv_and_model
    from weakspot.methods import get, run_method
    from weakspot.runtime import Runtime

    ((name, entry),) = write_missing_csv_and_model(tmp_path).items()
    target = audit_target(tmp_path, name, entry)
    assert set(target.info["missing"]) == {"income", "city"}
    test = target.test
    assert 0.07 < np.isnan(test.X[:, test.feature_names.index("income")]).mean() < 0.13
    out = run_method(get("segments"), target, SegmentsParams(), Runtime(device="cpu"))
    top = out.findings[out.findings["confirmed"].astype(bool)].iloc[0]
    assert top["weak_spot"] == "income is missing" and top["lift_lo_adjusted"] > 3, out.findings.head()
    assert '"income": null' in top["example"]


def test_the_notebook_api_finds_the_same_weak_spot_and_its_page_says_what_is_missing(tmp_path: Path):
    import weakspot
    from tests.user_tables import missing_parts

    _, test, model = missing_parts(tmp_path)
    res = weakspot.audit(model, test.drop(columns="target"), test["target"], methods=["segments"], name="m")
    assert res.weak_spots.iloc[0]["weak_spot"] == "income is missing"
    page = res.to_html(tmp_path / "report.html").read_text()
    assert "missing values (kept as NaN, never imputed): income 9.2% of rows, city 5%" in page
