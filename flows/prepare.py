"""Stage ``prepare``: load the data source named in params.yaml and write stratified splits as Parquet."""

from __future__ import annotations

import flows  # noqa: F401  (Prefect settings before Prefect is imported)
from prefect import flow

import pandas as pd

from tasks.common import lineage, run_main, stage_params, write_stage_result
from tasks.data import SPLITS, load_dataset, split, write_prepared
from weakspot.result import StageResult


@flow(name="prepare")
def prepare_flow() -> dict:
    top, p = stage_params("prepare")
    ds = load_dataset(p.source, p.label, p.root)
    splits = split(ds, p.fractions, p.seed)
    lin = lineage("prepare", top, p, dict(ds.provenance.get("files") or {}))
    counts = write_prepared(ds, splits, lin)
    table = pd.DataFrame({"class": ds.classes})
    for name in SPLITS:
        table[name] = [int((ds.y[splits[name]] == k).sum()) for k in range(ds.n_classes)]
    files = ", ".join(f"{f} (sha256 {h[:12]}…)" for f, h in (ds.provenance.get("files") or {}).items())
    write_stage_result("prepare", StageResult(
        metrics={f"n_{k}": v for k, v in counts.items()} | {"n_classes": ds.n_classes},
        tables={"class_counts": table},
        title="Data",
        summary=[f"Source {p.source}: {len(ds)} samples, {ds.n_classes} classes"
                 + (f", images of shape {tuple(ds.image_shape)}" if ds.image_shape else f", {ds.X.shape[1]} features")
                 + f". Stratified split with seed {p.seed} into {counts['train']} train, {counts['val']} validation and "
                 f"{counts['test']} test samples." + (f" Files: {files}." if files else ""),
                 str(ds.provenance.get("description", ""))],
        items=[{"table": "class_counts", "caption": "Samples per class and split."}],
    ), lin)
    print(f"prepare: {p.source}: {counts['train']} train, {counts['val']} val, {counts['test']} test rows -> data/prepared/")
    return counts


if __name__ == "__main__":
    run_main(prepare_flow, "prepare")
