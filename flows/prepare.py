"""Stage ``prepare``: load the data source named in params.yaml and write stratified splits as Parquet."""

from __future__ import annotations

import flows  # noqa: F401  (Prefect settings before Prefect is imported)
from prefect import flow

from tasks.common import lineage, run_main, stage_params
from tasks.data import load_dataset, split, write_prepared


@flow(name="prepare")
def prepare_flow() -> dict:
    top, p = stage_params("prepare")
    ds = load_dataset(p.source, p.label, p.root)
    splits = split(ds, p.fractions, p.seed)
    counts = write_prepared(ds, splits, lineage("prepare", top, p))
    print(f"prepare: {p.source}: {counts['train']} train, {counts['val']} val, {counts['test']} test rows -> data/prepared/")
    return counts


if __name__ == "__main__":
    run_main(prepare_flow, "prepare")
