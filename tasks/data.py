"""Tasks of the ``prepare`` stage: load a data source, split it, write Parquet."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, Optional

from prefect import task

from weakspot.data import Dataset, load_source, read_split_parquet, split_dataset, to_frame, write_split_parquet
from weakspot.io import write_json

PREPARED = Path("data/prepared")
SPLITS = ("train", "val", "test")


@task(retries=0)
def load_dataset(source: str, label: Optional[str], root: Optional[str]) -> Dataset:
    return load_source(source, label=label, root=root)


@task
def split(ds: Dataset, fractions, seed: int) -> Dict[str, Any]:
    return split_dataset(ds.y, fractions=tuple(fractions), seed=seed)


@task
def write_prepared(ds: Dataset, splits: Dict[str, Any], lin: Dict[str, Any]) -> Dict[str, int]:
    counts = {}
    for name in SPLITS:
        df = to_frame(ds, splits[name])
        write_split_parquet(PREPARED / f"{name}.parquet", df)
        counts[name] = int(len(df))
    write_json(PREPARED / "lineage.json", {**lin, "counts": counts, "provenance": ds.provenance})
    return counts


def read_prepared(name: str) -> Dataset:
    return read_split_parquet(PREPARED / f"{name}.parquet")
