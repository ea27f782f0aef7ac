"""The report section of a target's data: where they came from, how they were split and what is missing."""

from __future__ import annotations

from typing import Any, Dict

import numpy as np

from weakspot.data.dataset import Dataset
from weakspot.data.missing import describe_missing, missing_shares
from weakspot.result import StageResult


def data_section(
    target: str, source: str, ds: Dataset, splits: Dict[str, np.ndarray], info: Dict[str, Any]
) -> StageResult:
    """Class counts per split, the split's kind (stratified, biased, scene) and the files' sha256."""
    import pandas as pd

    table = pd.DataFrame({"class": ds.classes})
    for name in ("train", "val", "test"):
        table[name] = np.bincount(ds.y[splits[name]], minlength=ds.n_classes).astype(int)
    counts = {k: int(len(v)) for k, v in splits.items()}
    files = ", ".join(f"{f} (sha256 {h[:12]}…)" for f, h in (ds.provenance.get("files") or {}).items())
    shape = f"images of shape {tuple(ds.image_shape)}" if ds.image_shape else f"{ds.X.shape[1]} features"
    how = {
        "stratified": "a stratified random split",
        "scene": "the render's instances: training instances train, held-out instances split between validation "
        "and test (no test object was seen in training)",
        "biased": "the GAD paper's biased split (seeds/001 Sec. V-A): a uniform test draw, a training split that "
        "keeps only the rows passing the bias rules, and as validation the rows the bias left out",
        "official": "the source's official parts: its train part is what the model trained on, its test part what "
        f"it is judged on; validation rows: {info.get('val', 'none')}",
        "named": f"the parts as given (data.train / data.val / data.test); validation rows: {info.get('val', 'none')}",
        "evaluation": "all rows are evaluation data (one source for a model weakspot did not train: nothing of it "
        "is trained on or tuned on)",
    }[info["kind"]]
    summary = [
        f"Target {target}: source {source}, {len(ds)} samples, {ds.n_classes} classes, {shape}; {how}: "
        f"{counts['train']} train, {counts['val']} validation, {counts['test']} test rows."
        + (f" Files: {files}." if files else "")
    ]
    if "unlabelled" in counts:
        summary.append(
            f"Unlabelled rows (data.unlabelled, no labels): {counts['unlabelled']}; GAD's to-label list "
            "ranks them for labelling."
        )
    if info.get("dropped"):
        left = ", ".join(f"{n} {k}" for k, n in info["dropped"].items())
        summary.append(
            f"Left out of the evaluation: {left} rows whose input is byte-identical to a training row "
            "(a model is never judged on an input it trained on)."
        )
    if info.get("trains") is False:
        summary.append(
            "The model came trained: weakspot judges it on the test rows only"
            + (
                ", and the methods that model the data distribution (corner cases, HDA, intrinsic robustness) fit "
                f"their generators on the {counts['train']} train rows, never judging on them."
                if counts["train"]
                else "; the methods that need its training rows (corner cases, HDA, intrinsic "
                "robustness) do not run (give data.train to run them)."
            )
        )
    if info.get("bias"):
        rules = "; ".join(
            f"class {ds.classes[int(r['label'])] if str(r['label']).isdigit() else r['label']} kept only with "
            f"{r['feature']} {r['keep']} {r['cut']:.4g}"
            for r in info["bias"].get("rules", [])
        )
        summary.append(f"Bias rules: {rules or 'none'}. Class of interest (GAD): {info['class_of_interest_name']}.")
    if ds.provenance.get("description"):
        summary.append(str(ds.provenance["description"]))
    tables = {"class_counts": table}
    items = [{"table": "class_counts", "caption": f"Samples per class and split ({target})."}]
    missing = missing_table(ds, splits)
    if missing is not None:
        shares = missing_shares(ds.X, ds.feature_names or [])
        summary.append(
            f"Missing values, kept as they are and given to the model as it was fitted on them (NaN; never "
            f"imputed): {describe_missing(shares)}. Weak segments name a column's missingness as a condition of its "
            "own ('<column> is missing'), and a condition on a column's value holds only where the value is "
            "observed; GAD keeps a missing cell missing in its design and its attack, and measures a row's "
            "adversarial distance over its observed columns."
        )
        tables["missing_values"] = missing
        items.append(
            {
                "table": "missing_values",
                "caption": f"Share of rows with a missing value, per column and split ({target}).",
            }
        )
    return StageResult(
        metrics={f"n_{k}": v for k, v in counts.items()} | {"n_classes": ds.n_classes},
        tables=tables,
        title=f"Data of {target}",
        summary=summary,
        items=items,
    )


def missing_table(ds: Dataset, splits: Dict[str, np.ndarray]) -> Any:
    """The share of rows with a missing value per split (columns) of each column that has any (rows), or None for
    images and tables with no missing value."""
    import pandas as pd

    if ds.is_image or not ds.feature_names:
        return None
    shares = missing_shares(ds.X, ds.feature_names)
    if not shares:
        return None
    cols = [ds.feature_names.index(c) for c in shares]
    out = pd.DataFrame({"column": list(shares)})
    for name in ("train", "val", "test", "unlabelled"):
        rows = splits.get(name)
        if rows is not None and len(rows):
            out[name] = np.isnan(ds.X[np.asarray(rows)][:, cols]).mean(axis=0).round(4)
    return out
