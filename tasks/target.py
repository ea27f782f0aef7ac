"""Tasks of the per-target ``train`` stage, and how every later stage loads the model under audit.

Weights never travel through Prefect's result store: a cached training task writes them to a content-addressed
blob (``.prefect/blobs/<sha256>``) and returns its path; the flow copies the blob into ``data/targets/<t>/model/``.
A cache hit whose blob is gone is recomputed.
"""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any, Dict, Tuple

from tasks import paths
from tasks.common import cached_task, run_blob_task
from weakspot.errors import DataError
from weakspot.io import write_bytes, write_json


def _blob(data: bytes, suffix: str) -> str:
    import hashlib

    path = paths.BLOBS / f"{hashlib.sha256(data).hexdigest()}{suffix}"
    if not path.is_file():
        write_bytes(path, data)
    return str(path)


@cached_task
def train_builtin(target: str, arch: str, train_params: Dict[str, Any], device: str) -> Dict[str, Any]:
    """Train a built-in architecture on the target's training split; cached on the stage's identity (the prepared
    data, the params, the code and packages: :mod:`tasks.identity`) and its arguments. Returns ``{"blob", "file",
    "history" | "info"}``."""
    import torch

    from tasks.data import read_prepared
    from weakspot.models import fit_builtin
    from weakspot.progress import printer
    from weakspot.targets import TrainParams

    p = TrainParams.model_validate(train_params)
    train, val = read_prepared(target, "train"), read_prepared(target, "val")
    model, record = fit_builtin(
        arch,
        train.X,
        train.y,
        train.n_classes,
        p,
        seed=p.seed,
        X_val=val.X,
        y_val=val.y,
        device=device,
        progress=printer(f"train-{target}"),
    )
    buf = io.BytesIO()
    if isinstance(model, torch.nn.Module):
        torch.save({k: v.detach().cpu() for k, v in model.state_dict().items()}, buf)
        return {"blob": _blob(buf.getvalue(), ".pt"), "file": "model.pt", **record}
    import joblib

    joblib.dump(model, buf)
    return {"blob": _blob(buf.getvalue(), ".joblib"), "file": "model.joblib", **record}


def train_cached(*args: Any) -> Dict[str, Any]:
    return run_blob_task(train_builtin, *args)


def save_model(target: str, blob: str, file: str) -> Path:
    dest = paths.model_dir(target) / file
    write_bytes(dest, Path(blob).read_bytes())
    return dest


def write_spec(target: str, spec: Dict[str, Any], lin: Dict[str, Any]) -> None:
    write_json(paths.model_dir(target) / "model.json", {**spec, "lineage": lin})


def model_from_spec(spec: Dict[str, Any], device: str = "auto", data: Any = None) -> Any:
    """The classifier a model.json spec describes (its ModelSpec fields, classes and input shape); given the
    ``data`` it is called on, a user's table model gets its rows as a DataFrame (:func:`weakspot.models.table.for_data`)."""
    from weakspot.models import ModelSpec, load_model
    from weakspot.models.table import for_data

    ms = ModelSpec.model_validate({k: spec[k] for k in ModelSpec.model_fields if k in spec})
    clf = load_model(ms, n_classes=spec["n_classes"], input_shape=spec["input_shape"], device=device)
    if data is None:
        return clf
    return for_data(clf, data, trained_here=bool(spec.get("trained_arch")) or spec.get("kind") == "builtin")


def load_target_model(target: str, device: str = "auto", data: Any = None) -> Tuple[Any, Dict[str, Any]]:
    """The model under audit, as the ``train`` stage left it: (classifier, its spec with classes and input shape),
    called as it should be on ``data`` (see :func:`model_from_spec`)."""
    f = paths.model_dir(target) / "model.json"
    if not f.is_file():
        raise DataError(f"{f} not found; run the 'train-{target}' stage first (weakspot audit)")
    spec = json.loads(f.read_text())
    return model_from_spec(spec, device, data), spec
