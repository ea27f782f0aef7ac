"""Tasks of the per-target ``corner`` stage: the generator, trained once per data set and shared between targets.

The generator depends on the training images and the generator's params only, never on the model under audit, so
its cache key leaves the target's name out: two targets on the same training data (same content digest) share one
generator. Like model weights it never travels through Prefect's result store: the task writes it to a
content-addressed blob (``.prefect/blobs/<sha256>.gen``) and returns the path; a cache hit whose blob is gone is
recomputed.
"""

from __future__ import annotations

from typing import Any, Dict

from prefect import task
from prefect.cache_policies import INPUTS, TASK_SOURCE

from tasks.common import run_blob_task


@task(cache_policy=(INPUTS - "target") + TASK_SOURCE, persist_result=True)
def train_generator_blob(target: str, generator_params: Dict[str, Any], train_digest: str, code_digest: str,
                         device: str) -> Dict[str, Any]:
    """Train the corner-case generator on ``target``'s training images; keyed on the images' digest (not on the
    target), the generator params and the library code. Returns ``{"blob": path, "seconds": s}``."""
    import numpy as np

    from tasks.data import read_prepared
    from tasks.target import _blob
    from weakspot.corner.experiment import train_generator
    from weakspot.corner.config import CornerParams
    from weakspot.device import resolve_device, single_thread
    from weakspot.progress import printer

    p = CornerParams.model_validate(generator_params)
    train = read_prepared(target, "train")
    dev = resolve_device(device)
    with single_thread(dev):
        g = train_generator(np.asarray(train.X, np.float32), p, device=dev, progress=printer(f"corner-{target}"))
    return {"blob": _blob(g.to_bytes(), ".gen"), "seconds": float(g.history.get("seconds", 0.0))}


def generator_for(target: str, generator_params: Dict[str, Any], train_digest: str, code_digest: str,
                  device: str) -> Dict[str, Any]:
    return run_blob_task(train_generator_blob, target, generator_params, train_digest, code_digest, device)
