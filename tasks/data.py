"""Tasks of the per-target ``prepare`` stage: load a target's data source, split it, write Parquet."""

from __future__ import annotations

from typing import Any, Dict, Tuple

import numpy as np

from tasks import paths
from tasks.common import cached_task
from tasks.scene import read_render
from weakspot.data import Dataset, read_split_parquet, to_frame, write_split_parquet
from weakspot.io import write_json

SPLITS = ("train", "val", "test")
UNLABELLED = "unlabelled"  # written only when the target's data name an unlabelled part


@cached_task
def load_and_split(
    data: Dict[str, Any], class_of_interest: Any, trains: bool = True
) -> Tuple[Dataset, Dict[str, np.ndarray], Dict[str, Any]]:
    """Load a target's data source and split it (stratified, or biased as the GAD paper does; a model weakspot did
    not train is never judged on its training rows); cached on the stage's identity (the input files, the params,
    the code and packages: :mod:`tasks.identity`) and its arguments."""
    from weakspot.data.prepare import prepare_target_data
    from weakspot.targets import DataParams

    p = DataParams.model_validate(data)
    scene = None
    if p.kind == "scenes":
        scene = read_render()
    return prepare_target_data(p, class_of_interest=class_of_interest, scene=scene, trains=trains)


def write_prepared(
    target: str, ds: Dataset, splits: Dict[str, Any], lin: Dict[str, Any], info: Dict[str, Any]
) -> Dict[str, int]:
    counts = {}
    for name in SPLITS + (UNLABELLED,):
        if name not in splits:  # no unlabelled part (any more): no stale file of it
            (paths.prepared(target) / f"{name}.parquet").unlink(missing_ok=True)
            continue
        df = to_frame(ds, splits[name])
        write_split_parquet(paths.prepared(target) / f"{name}.parquet", df)
        counts[name] = int(len(df))
    write_json(
        paths.prepared(target) / "lineage.json", {**lin, "counts": counts, "provenance": ds.provenance, "split": info}
    )
    return counts


def read_prepared(target: str, name: str) -> Dataset:
    return read_split_parquet(paths.prepared(target) / f"{name}.parquet")


def read_unlabelled(target: str) -> Any:
    """The target's unlabelled rows, or None when its data name none."""
    f = paths.prepared(target) / f"{UNLABELLED}.parquet"
    return read_split_parquet(f) if f.is_file() else None


def read_prepared_info(target: str) -> Dict[str, Any]:
    import json

    f = paths.prepared(target) / "lineage.json"
    return json.loads(f.read_text()) if f.is_file() else {}
