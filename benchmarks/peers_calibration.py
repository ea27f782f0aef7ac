"""Run three peer weak-segment finders at their documented defaults and dump what each one reports.

weakspot is benchmarked side by side with three peer tools. This script runs the peers only, in their own
virtualenv (they pin versions weakspot cannot share; see benchmarks/peers-requirements.txt):

    .venv-peers/bin/python benchmarks/peers_calibration.py IN_DIR OUT_JSON

IN_DIR/cases.json is a JSON list of cases
    {"name": str, "csv": file name inside IN_DIR, "features": [columns], "categorical": [text columns], "classes": int}
and each CSV holds the held-out test rows of one pre-trained classifier: the feature columns, the true class `y`
and the model's predicted class `pred` (a row fails when pred != y). Only predictions are used, never a model.

OUT_JSON gets
    {case: {peer: {"regions": [{"text": str, "rows": [sorted CSV row indices]}, ...],
                   "seconds": float, "error": null or str}}}
with regions in the peer's own ranking order, worst first. `rows` is rebuilt from the region's own conditions
(numeric ranges, category sets) evaluated on every row of the CSV. A peer that raises on a case records the
exception text in "error" and an empty region list; the other peers and cases still run. `seconds` is the wall time
of the peer's own search call (data preparation and row-mask rebuilding excluded).

What each peer "reports" to a user, at its defaults:

* erroranalysis 0.5.5 (Microsoft Error Analysis, the engine of the Responsible AI dashboard's tree view):
  PredictionsAnalyzer(pred, X, y).compute_error_tree on all features with no cohort filter, and max_depth=3,
  num_leaves=31, min_child_samples=20 (erroranalysis' DEFAULT_* constants, the ones the dashboard passes). The
  dashboard colours a leaf darker/red when its error rate is above the overall (root) error rate; those leaves are
  the reported regions, ranked by error rate (ties: larger leaf first). text = the conditions on the root-to-leaf path.
* deepchecks 0.19.1: tabular.checks.WeakSegmentsPerformance() with every constructor default (n_top_features=10,
  segment_minimum_size_ratio=0.05, n_samples=10_000, categorical_aggregation_threshold=0.05, random_state=42,
  multiple_segments_per_feature=True, default scorer = accuracy for classification). It runs as a single-dataset
  check on a Dataset(features + label y, cat_features=categorical), given y_pred=pred and y_proba=one-hot(pred)
  (deepchecks needs probabilities for its per-sample cross-entropy score). The reported regions are the rows of
  result.value["weak_segments_list"], in its order (the display says: "The full list of weak segments can be
  observed in the check result value"; the heatmaps show its first n_to_show=3).
* sliceline 0.3.0: sliceline.slicefinder.Slicefinder() with its defaults (alpha=0.6, k=1, max_l=4, min_sup=10),
  fit on the features discretised coarsely (each numeric column into 5 quantile bins, categorical columns as is)
  and the 0/1 error vector. The reported regions are top_slices_ in order (k=1: one slice, more only on score ties);
  a None in a slice means "any value". text = the slice's conditions, numeric bins written as their intervals.
  Slices scoring <= 0 are never reported, and with alpha=0.6 the size penalty makes small slices (a few percent of
  the rows) score negative even at a 100% error rate, so sliceline often reports nothing at its defaults.
"""

import importlib
import json
import sys
import time
import traceback
from pathlib import Path

import numpy as np
import pandas as pd

PEERS = ("erroranalysis", "deepchecks", "sliceline")

# Stand-in for a missing value in a categorical column, so that the three peers all treat it the same way: as one
# more category (rather than each peer's own NaN handling for text columns).
MISSING_CATEGORY = "<missing>"

# Quantile bins per numeric column for sliceline, which needs discrete inputs: kept coarse on purpose, since finer
# bins blow up its slice lattice (and its memory, to tens of GiB).
SLICELINE_BINS = 5


# ----------------------------------------------------------------------------------------------------------------
# Data
# ----------------------------------------------------------------------------------------------------------------


def load_case(in_dir, case):
    """Read one case's CSV; returns (X features frame, y, pred) with a 0..n-1 index equal to the CSV row number."""
    categorical = list(case.get("categorical", []))
    df = pd.read_csv(Path(in_dir) / case["csv"], dtype={c: str for c in categorical}, keep_default_na=True)
    df = df.reset_index(drop=True)
    features = list(case["features"])
    X = df[features].copy()
    for col in features:
        if col in categorical:
            X[col] = X[col].astype(object).where(X[col].notna(), MISSING_CATEGORY).astype(str)
        else:
            X[col] = pd.to_numeric(X[col], errors="coerce").astype(float)
    return X, df["y"].astype(int).to_numpy(), df["pred"].astype(int).to_numpy()


def mask_to_rows(mask):
    """Boolean mask -> sorted list of python int row indices."""
    return [int(i) for i in np.flatnonzero(np.asarray(mask, dtype=bool))]


def fmt(value):
    """Short number for region texts."""
    return f"{value:.4g}"


# ----------------------------------------------------------------------------------------------------------------
# erroranalysis
# ----------------------------------------------------------------------------------------------------------------


def erroranalysis_tree(X, y, pred, categorical, classes):
    """The peer's own call: the surrogate error tree as the dashboard computes it. Returns (tree nodes, analyzer)."""
    from erroranalysis._internal.constants import ModelTask
    from erroranalysis._internal.error_analyzer import PredictionsAnalyzer
    from erroranalysis._internal.surrogate_error_tree import (
        DEFAULT_MAX_DEPTH,
        DEFAULT_MIN_CHILD_SAMPLES,
        DEFAULT_NUM_LEAVES,
    )

    features = list(X.columns)
    analyzer = PredictionsAnalyzer(
        pred,
        X,
        y,
        features,
        list(categorical),
        model_task=ModelTask.CLASSIFICATION,
        # classes only labels the tree nodes; error_rate (the classification
        # default metric) does not use it.
        classes=list(range(classes)),
    )
    # The dashboard's tree view starts on the whole dataset (no filters) with all features selected, and passes
    # the library defaults (3, 31, 20); spelled out here so the run documents them.
    tree = analyzer.compute_error_tree(
        features,
        [],
        [],
        max_depth=DEFAULT_MAX_DEPTH,
        num_leaves=DEFAULT_NUM_LEAVES,
        min_child_samples=DEFAULT_MIN_CHILD_SAMPLES,
    )
    return tree, analyzer


def erroranalysis_regions(tree, analyzer, X):
    """Leaves with error rate above the root's, worst first; each with its path conditions and row mask."""
    by_id = {node["id"]: node for node in tree}
    parents = {node["parentId"] for node in tree if node["parentId"] is not None}
    root = next(node for node in tree if node["parentId"] is None)
    overall = root["metricValue"]
    categories = dict(zip(analyzer.categorical_features or [], analyzer.categories or []))

    leaves = [node for node in tree if node["id"] not in parents and node["parentId"] is not None]
    # Reported = leaves the dashboard colours above the overall error rate. Ranked by error rate, ties by size.
    leaves = [node for node in leaves if node["metricValue"] > overall]
    leaves.sort(key=lambda node: (-node["metricValue"], -node["size"]))

    regions = []
    for leaf in leaves:
        path, node = [], leaf
        while node["parentId"] is not None:
            path.append(node)
            node = by_id[node["parentId"]]
        path.reverse()
        mask = np.ones(len(X), dtype=bool)
        for step in path:
            col = X[step["parentNodeName"]]
            method, arg = step["method"], step["arg"]
            # A NaN fails both `<=` and `>`, as in erroranalysis' own filter_by_threshold (node sizes agree).
            if method == "less and equal":
                mask &= (col <= arg).to_numpy()
            elif method == "greater":
                mask &= (col > arg).to_numpy()
            elif method in ("includes", "excludes"):
                # arg holds ordinal codes into analyzer.categories (sorted OrdinalEncoder categories).
                values = [categories[step["parentNodeName"]][int(a)] for a in arg]
                inside = col.isin(values).to_numpy()
                mask &= inside if method == "includes" else ~inside
            else:
                raise ValueError(f"unknown erroranalysis split method {method!r}")
        text = " AND ".join(step["condition"] for step in path)
        regions.append({"text": text, "rows": mask_to_rows(mask)})
    return regions


def run_erroranalysis(X, y, pred, categorical, classes):
    start = time.perf_counter()
    tree, analyzer = erroranalysis_tree(X, y, pred, categorical, classes)
    seconds = time.perf_counter() - start
    return erroranalysis_regions(tree, analyzer, X), seconds


# ----------------------------------------------------------------------------------------------------------------
# deepchecks
# ----------------------------------------------------------------------------------------------------------------


def deepchecks_result(X, y, pred, categorical, classes):
    """The peer's own call: WeakSegmentsPerformance at its defaults. Returns (weak segments frame, check)."""
    from deepchecks.tabular import Dataset
    from deepchecks.tabular.checks import WeakSegmentsPerformance

    data = X.copy()
    data["y"] = y
    dataset = Dataset(data, label="y", cat_features=list(categorical))
    # One-hot "probabilities" from the hard predictions: the check scores samples by cross-entropy and refuses
    # to run without y_proba. Its column order is model_classes, here 0..classes-1.
    proba = np.zeros((len(pred), classes))
    proba[np.arange(len(pred)), pred] = 1.0
    check = WeakSegmentsPerformance()
    # SingleDatasetCheck.run(dataset, y_pred=, y_proba=) in 0.19.1 (y_pred_test/y_proba_test are deprecated and
    # ignored there). with_display=False skips only the plotly heatmaps: the result value (the weak segments
    # list) is computed identically, and the timing then counts the search, not chart rendering.
    result = check.run(dataset, y_pred=pred, y_proba=proba, model_classes=list(range(classes)), with_display=False)
    return result.value["weak_segments_list"], check


def deepchecks_condition(X, feature, value_range, categorical, check):
    """Row mask and text for one (feature, range) of a weak segment."""
    col = X[feature]
    if feature in categorical:
        # The result value gives the categories (after deepchecks merged those under
        # categorical_aggregation_threshold into 'Other'). 'Other' is mapped back to those rare categories,
        # recomputed on the full CSV (deepchecks computes them on its sample of n_samples rows, equal when the
        # CSV has at most n_samples rows).
        values = [str(v) for v in value_range]
        chosen = set(values)
        if "Other" in chosen and "Other" not in set(col.unique()):
            freq = col.value_counts() / len(col)
            chosen |= set(freq[freq < check.categorical_aggregation_threshold].index)
        if "None" in chosen and "None" not in set(col.unique()):
            chosen.add(MISSING_CATEGORY)  # deepchecks fills a missing category with the text 'None'
        return col.isin(chosen).to_numpy(), f"{feature} in {{{', '.join(values)}}}"
    low, high = float(value_range[0]), float(value_range[1])
    # DeepchecksBaseFilter: left child `x <= threshold`, right child `x > threshold`; range = (low, high].
    mask = np.ones(len(col), dtype=bool)
    parts = []
    if np.isfinite(low):
        mask &= (col > low).to_numpy()
        parts.append(f"{feature} > {fmt(low)}")
    if np.isfinite(high):
        mask &= (col <= high).to_numpy()
        parts.append(f"{feature} <= {fmt(high)}")
    mask &= col.notna().to_numpy()  # the check drops rows with NaN in the segment's features before searching
    return mask, " AND ".join(parts) if parts else f"{feature} any"


def deepchecks_regions(segments, check, X, categorical):
    regions = []
    for _, segment in segments.iterrows():
        mask = np.ones(len(X), dtype=bool)
        texts = []
        for feature_key, range_key in (("Feature1", "Feature1 Range"), ("Feature2", "Feature2 Range")):
            feature = segment[feature_key]
            if feature is None or feature == "":
                continue
            part, text = deepchecks_condition(X, feature, segment[range_key], categorical, check)
            mask &= part
            texts.append(text)
        regions.append({"text": " AND ".join(texts), "rows": mask_to_rows(mask)})
    return regions


def run_deepchecks(X, y, pred, categorical, classes):
    start = time.perf_counter()
    segments, check = deepchecks_result(X, y, pred, categorical, classes)
    seconds = time.perf_counter() - start
    return deepchecks_regions(segments, check, X, categorical), seconds


# ----------------------------------------------------------------------------------------------------------------
# sliceline
# ----------------------------------------------------------------------------------------------------------------


def sliceline_discretise(X, categorical):
    """Coarse discrete copy of X for sliceline, plus per column the text of each discrete value.

    Numeric columns -> int bin codes 0..4 of 5 quantile bins (fewer if quantiles tie; a column with at most 5
    distinct values keeps one bin per value), NaN -> -1; categorical columns -> their text as is (sliceline
    one-hot encodes any discrete value, text included).
    """
    columns, labels = {}, {}
    for col in X.columns:
        if col in categorical:
            columns[col] = X[col].to_numpy(dtype=object)
            labels[col] = {v: f"{col} == {v}" for v in pd.unique(X[col])}
            continue
        values = X[col]
        labels[col] = {-1: f"{col} is missing"}
        distinct = np.sort(values.dropna().unique())
        if len(distinct) <= SLICELINE_BINS:
            # Already at most 5 values (flags, small counts): one bin per value. Quantile bins would merge them
            # (a 0/1 column's quintile edges collapse to the single bin [0, 1]).
            codes = pd.Series(np.searchsorted(distinct, values.fillna(np.inf)), index=values.index)
            codes[values.isna()] = -1
            for b, v in enumerate(distinct):
                labels[col][b] = f"{col} == {fmt(v)}"
        else:
            codes, edges = pd.qcut(values, SLICELINE_BINS, labels=False, retbins=True, duplicates="drop")
            codes = codes.fillna(-1)
            for b in range(len(edges) - 1):
                # qcut bins are (edge_b, edge_b+1], the first one closed on the left too.
                left = "[" if b == 0 else "("
                labels[col][b] = f"{col} in {left}{fmt(edges[b])}, {fmt(edges[b + 1])}]"
        columns[col] = codes.astype(int).to_numpy(dtype=object)
    discrete = np.empty((len(X), len(X.columns)), dtype=object)
    for j, col in enumerate(X.columns):
        discrete[:, j] = columns[col]
    return discrete, labels


def sliceline_regions(top_slices, discrete, labels, columns):
    regions = []
    for slice_values in top_slices:
        mask = np.ones(len(discrete), dtype=bool)
        texts = []
        for j, value in enumerate(slice_values):
            # None (or NaN) = the slice does not constrain this column.
            if value is None or (isinstance(value, float) and np.isnan(value)):
                continue
            mask &= discrete[:, j] == value
            texts.append(labels[columns[j]].get(value, f"{columns[j]} == {value}"))
        regions.append({"text": " AND ".join(texts) if texts else "all rows", "rows": mask_to_rows(mask)})
    return regions


def run_sliceline(X, y, pred, categorical, classes):
    from sliceline.slicefinder import Slicefinder

    discrete, labels = sliceline_discretise(X, categorical)
    errors = (pred != y).astype(float)
    start = time.perf_counter()
    finder = Slicefinder()  # defaults: alpha=0.6, k=1, max_l=4, min_sup=10, verbose=True
    finder.fit(discrete, errors)
    seconds = time.perf_counter() - start
    return sliceline_regions(finder.top_slices_, discrete, labels, list(X.columns)), seconds


# ----------------------------------------------------------------------------------------------------------------
# Driver
# ----------------------------------------------------------------------------------------------------------------

RUNNERS = {"erroranalysis": run_erroranalysis, "deepchecks": run_deepchecks, "sliceline": run_sliceline}

# Modules each runner imports lazily (so one peer's broken install cannot stop the others). They are imported
# before the timer starts, so a peer's first case is not charged its import time.
PEER_MODULES = {
    "erroranalysis": ("erroranalysis._internal.error_analyzer", "erroranalysis._internal.surrogate_error_tree"),
    "deepchecks": ("deepchecks.tabular", "deepchecks.tabular.checks"),
    "sliceline": ("sliceline.slicefinder",),
}


def run_peer(peer, X, y, pred, categorical, classes):
    """One peer on one case; never raises."""
    start = time.perf_counter()
    try:
        for module in PEER_MODULES[peer]:
            importlib.import_module(module)
        regions, seconds = RUNNERS[peer](X, y, pred, categorical, classes)
        return {"regions": regions, "seconds": round(seconds, 4), "error": None}
    except Exception as exc:  # noqa: BLE001 - a peer's failure is data, not a reason to stop
        traceback.print_exc(file=sys.stderr)
        return {
            "regions": [],
            "seconds": round(time.perf_counter() - start, 4),
            "error": f"{type(exc).__name__}: {exc}",
        }


def run_case(in_dir, case):
    try:
        X, y, pred = load_case(in_dir, case)
    except Exception as exc:  # noqa: BLE001
        error = f"loading failed: {type(exc).__name__}: {exc}"
        return {peer: {"regions": [], "seconds": 0.0, "error": error} for peer in PEERS}
    categorical = [c for c in case.get("categorical", []) if c in X.columns]
    classes = max(int(case.get("classes", 2)), int(max(y.max(), pred.max())) + 1)
    out = {}
    for peer in PEERS:
        out[peer] = run_peer(peer, X, y, pred, categorical, classes)
        result = out[peer]
        first = result["regions"][0]["text"] if result["regions"] else "-"
        print(
            f"[{case['name']}] {peer}: {len(result['regions'])} regions in {result['seconds']:.2f}s"
            f"{' ERROR ' + result['error'] if result['error'] else ''}; first: {first}",
            file=sys.stderr,
        )
    return out


def main(argv):
    if len(argv) != 3:
        sys.exit(f"usage: {argv[0]} IN_DIR OUT_JSON")
    in_dir, out_json = Path(argv[1]), Path(argv[2])
    cases = json.loads((in_dir / "cases.json").read_text())
    results = {case["name"]: run_case(in_dir, case) for case in cases}
    out_json.parent.mkdir(parents=True, exist_ok=True)
    out_json.write_text(json.dumps(results))


if __name__ == "__main__":
    main(sys.argv)
