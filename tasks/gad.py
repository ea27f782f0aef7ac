"""Tasks of the ``gad`` stage: one cached task per data set (black box, extraction, attacks, LOESS, searches)."""

from __future__ import annotations

from typing import Any, Dict

from tasks.common import cached_task

from weakspot.gad.config import GadDatasetParams, GadParams
from weakspot.gad.datasets import split_from_params
from weakspot.gad.experiment import dataset_seed, run_dataset


@cached_task
def gad_dataset(ds: Dict[str, Any], params: Dict[str, Any], inputs_digest: str, code_digest: str, device: str):
    """GAD on one data set; the key holds its params, the input files' digest and the library code's digest."""
    p = GadParams.model_validate(params)
    d = GadDatasetParams.model_validate(ds)
    seed = dataset_seed(p.seed, d.name)
    split = split_from_params(d, keel_root=p.keel_root, seed=seed)
    last = {"msg": None}

    def progress(message: str, done: int, total: int) -> None:
        if message != last["msg"] or done == total:
            print(f"  gad[{d.name}]: {message} {done}/{total}", flush=True)
            last["msg"] = message

    return run_dataset(split, p, device=device, progress=progress, seed=seed)
