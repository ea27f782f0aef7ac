"""Tasks of the ``train_target`` stage: train (or load) the model under audit and measure it."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, Optional

import numpy as np
from prefect import task

from prefect.cache_policies import INPUTS, TASK_SOURCE
from weakspot.data import Dataset
from weakspot.io import save_torch, write_json

TARGET = Path("data/target")


# The key is the prepared data's digest (not the arrays themselves), the hyper-parameters and this code.
@task(cache_policy=(INPUTS - "train" - "val") + TASK_SOURCE, persist_result=True)
def train_builtin(
    prepared_digest: str, code_digest: str, arch: str, input_shape: tuple, n_classes: int, hyper: Dict[str, Any], device: str,
    train: Dataset, val: Dataset,
) -> Dict[str, Any]:
    """Train a built-in architecture; cached on the prepared data's digest, the hyper-parameters and this code."""
    from weakspot.device import resolve_device, seed_everything
    from weakspot.models import ARCHS, train_torch_classifier

    seed_everything(hyper["seed"])
    module = ARCHS.get(arch)(input_shape=input_shape, n_classes=n_classes)
    history = train_torch_classifier(
        module, train.X, train.y, X_val=val.X, y_val=val.y, epochs=hyper["epochs"], lr=hyper["lr"],
        batch_size=hyper["batch_size"], weight_decay=hyper["weight_decay"], seed=hyper["seed"],
        device=resolve_device(device),
    )
    return {"state_dict": {k: v.detach().cpu() for k, v in module.state_dict().items()}, "history": history}


@task
def save_target(state_dict: Optional[Dict[str, Any]], spec: Dict[str, Any], lin: Dict[str, Any]) -> None:
    if state_dict is not None:
        save_torch(TARGET / "model.pt", state_dict)
    write_json(TARGET / "model.json", {**spec, "lineage": lin})


def evaluate(clf: Any, ds: Dataset) -> np.ndarray:
    """Probabilities of a classifier on a data set (checked for shape, NaNs and normalisation by the adapter)."""
    return clf.predict_proba(ds.X)
