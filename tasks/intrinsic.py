"""Tasks of the per-target ``intrinsic`` stage: the defended models, one cached training task each.

A defended model depends on the audited model's weights (its starting point, or only its architecture when trained
from scratch), the training data, the defence, its options and eps, and the library code; its cache key holds all
of them (digests, not the arrays). Like every model's weights it never travels through Prefect's result store: the
task writes a content-addressed blob (``.prefect/blobs/<sha256>.pt``) and returns its path; a cache hit whose blob is
gone is recomputed.
"""

from __future__ import annotations

import io
from typing import Any, Dict

from tasks.common import cached_task, run_blob_task


def fresh_copy(module: Any, seed: int) -> Any:
    """A copy of ``module`` with every layer's parameters re-initialised from ``seed`` (the architecture and seed the
    target's training would start from, for a user's torch model too)."""
    import copy

    import torch

    m = copy.deepcopy(module)
    with torch.random.fork_rng():
        torch.manual_seed(int(seed))
        for layer in m.modules():
            if hasattr(layer, "reset_parameters") and layer is not m:
                layer.reset_parameters()
    return m


@cached_task
def train_defence_blob(target: str, defence: str, options: Dict[str, Any], eps: float, clip: list, init: str,
                       train: Dict[str, Any], epochs: int, prepared_digest: str, model_digest: str, code_digest: str,
                       device: str) -> Dict[str, Any]:
    """Train the defended copy ``defence`` of ``target``'s model; returns ``{"blob", "label", "settings",
    "seconds", "val_accuracy"}``."""
    import copy
    import time

    import torch

    from tasks.data import image_range, read_prepared
    from tasks.target import _blob, load_target_model
    from weakspot.device import resolve_device
    from weakspot.intrinsic.defences import train_defence
    from weakspot.progress import printer

    dev = resolve_device(device)
    clf, _ = load_target_model(target, device)
    module = clf.module
    module = fresh_copy(module, train["seed"]) if init == "scratch" else copy.deepcopy(module)
    if defence == "distillation" and init == "target":  # fine-tuning a trained model: start at temperature T
        options = {"warm_start": True, **options}
    tr = read_prepared(target, "train")
    t0 = time.perf_counter()
    module, info = train_defence(defence, module, tr.X, tr.y, eps=float(eps), clip=tuple(clip), epochs=int(epochs),
                                 lr=float(train["lr"]), batch_size=int(train["batch_size"]), seed=int(train["seed"]),
                                 device=dev, lr_schedule=train.get("lr_schedule", "constant"),
                                 augment=train.get("augment"), weight_decay=float(train.get("weight_decay", 0.0)),
                                 options=options, progress=printer(f"intrinsic-{target}"))
    seconds = time.perf_counter() - t0
    buf = io.BytesIO()
    torch.save({k: v.detach().cpu() for k, v in module.state_dict().items()}, buf)
    return {"blob": _blob(buf.getvalue(), ".pt"), "label": info.get("label", defence),
            "settings": info.get("settings", {}), "seconds": round(seconds, 2)}


def defended_model(*args: Any) -> Dict[str, Any]:
    return run_blob_task(train_defence_blob, *args)


def defended_modules(target: str, names: "list[str]", clf: Any = None) -> "tuple[Dict[str, Any], Dict[str, Any], Any]":
    """The target's defended models as the ``intrinsic`` stage trains them (same cached tasks, so a stage that asks
    for one the intrinsic stage already trained gets it from the cache): ``({name: module}, {name: info}, eps)``."""
    import copy
    from pathlib import Path

    import numpy as np
    import torch

    from tasks import paths
    from tasks.common import combined_digest, digest, fan_out, source_digest, stage_params, target_params
    from tasks.data import image_range, read_prepared
    from tasks.target import load_target_model
    from weakspot.device import resolve_device
    from weakspot.intrinsic.config import default_eps, init_of

    top, t = target_params(target)
    _, p = stage_params("intrinsic")
    dev = resolve_device(top["device"])
    if clf is None:
        clf, _ = load_target_model(target, top["device"])
    train_X = np.asarray(read_prepared(target, "train").X)
    clip = image_range(train_X)
    n_channels = int(train_X.shape[1]) if train_X.ndim == 4 else 1
    eps = float(p.eps.get(target, default_eps(n_channels, *clip)))
    init = init_of(p, target)
    epochs = p.defence_epochs if init == "target" else t.train.epochs
    pdig = combined_digest(digest([paths.prepared(target)]))
    mdig = combined_digest(digest([paths.model_dir(target)]))
    # the defended models depend on the training code only (not on how they are measured)
    code = source_digest("weakspot.intrinsic.defences", "weakspot.intrinsic.attacks", "weakspot.intrinsic.psi",
                         "weakspot.models")
    calls = [(target, d, p.defence_options.get(d, {}), eps, list(clip), init, t.train.model_dump(mode="json"),
              int(epochs), pdig, mdig, code, top["device"]) for d in names]
    # independent trainings: one task each, all submitted at once (on Dask they train side by side), in `names` order
    outs = fan_out(train_defence_blob, [(a, {}) for a in calls], labels=[f"{target}, {d}" for d in names])
    models, info = {}, {}
    for d, args, out in zip(names, calls, outs):
        if not Path(out["blob"]).is_file():  # a cached result whose blob is gone (a cleaned .prefect/blobs)
            out = train_defence_blob.with_options(refresh_cache=True)(*args)
        m = copy.deepcopy(clf.module)
        m.load_state_dict(torch.load(out["blob"], map_location=dev, weights_only=True))
        models[d] = m.to(dev).eval()
        info[d] = {"label": out["label"] + (" from scratch" if init == "scratch" else " fine-tuned from the audited model"),
                   "settings": out["settings"], "training_seconds": out["seconds"], "eps": eps}
    return models, info, eps
