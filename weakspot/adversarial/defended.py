"""Defended copies of a target's model, one cached runtime call each, shared by every method that asks for one.

Caveats first: a defended model depends on the audited model's weights (its starting point; only its architecture
when trained from scratch), the training data, the defence, its options, eps and the training settings. All of it is
in the call's key (:attr:`AuditTarget.digest <weakspot.methods.AuditTarget>` stands for the data and the weights), so
two methods asking for the same defended model with the same settings get one training. The weights travel as
``state_dict`` bytes.
"""

from __future__ import annotations

import copy
import io
import time
from typing import Any, Dict, List, Tuple, cast

import numpy as np

from weakspot.data.dataset import image_range
from weakspot.intrinsic.config import IntrinsicParams, default_eps
from weakspot.methods import AuditTarget


def fresh_copy(module: Any, seed: int) -> Any:
    """A copy of ``module`` with every layer's parameters re-initialised from ``seed`` (the architecture and seed the
    target's training would start from, for a user's torch model too)."""
    import torch

    from weakspot.errors import ModelError

    m = copy.deepcopy(module)
    resettable = [layer for layer in m.modules() if hasattr(layer, "reset_parameters") and layer is not m]
    if list(m.parameters()) and not resettable:  # a TorchScript module: its trained weights would be kept, not re-drawn
        raise ModelError(
            f"intrinsic.defence_init: scratch re-initialises the model's layers, but no layer of this "
            f"{type(module).__name__} can be re-initialised (no reset_parameters; a TorchScript module has none): use "
            "defence_init: target (fine-tune a copy of the audited model), or give the model as kind: torch with its "
            "factory"
        )
    with torch.random.fork_rng():
        torch.manual_seed(int(seed))
        for layer in resettable:
            layer.reset_parameters()
    return m


def train_defended(
    module: Any,
    X: np.ndarray,
    y: np.ndarray,
    defence: str,
    options: Dict[str, Any],
    eps: float,
    clip: List[float],
    init: str,
    train: Dict[str, Any],
    epochs: int,
    device: str,
    progress: Any = None,
) -> Dict[str, Any]:
    """Train the defended copy ``defence`` of ``module`` on ``(X, y)``; ``{"state_dict": bytes, "label",
    "settings", "seconds"}``."""
    import torch

    from weakspot.device import resolve_device
    from weakspot.adversarial.defences import train_defence

    dev = resolve_device(device)
    module = fresh_copy(module, train["seed"]) if init == "scratch" else copy.deepcopy(module)
    if defence == "distillation" and init == "target":  # fine-tuning a trained model: start at temperature T
        options = {"warm_start": True, **options}
    t0 = time.perf_counter()
    pair = cast(Tuple[float, float], tuple(clip))  # a list through the runtime's call; train_defence checks it
    module, info = train_defence(
        defence,
        module,
        X,
        y,
        eps=float(eps),
        clip=pair,
        epochs=int(epochs),
        lr=float(train["lr"]),
        batch_size=int(train["batch_size"]),
        seed=int(train["seed"]),
        device=dev,
        lr_schedule=train.get("lr_schedule", "constant"),
        augment=train.get("augment"),
        weight_decay=float(train.get("weight_decay", 0.0)),
        options=options,
        progress=progress,
    )
    seconds = time.perf_counter() - t0
    buf = io.BytesIO()
    torch.save({k: v.detach().cpu() for k, v in module.state_dict().items()}, buf)
    return {
        "state_dict": buf.getvalue(),
        "label": info.get("label", defence),
        "settings": info.get("settings", {}),
        "seconds": round(seconds, 2),
    }


def target_eps(target: AuditTarget, params: IntrinsicParams) -> float:
    """``params.eps``, else Sec. 5.1's for the target's data (0.3 grey-scale, 8/255 colour, times the range)."""
    X = np.asarray(target.train.X)
    return float(
        params.eps if params.eps is not None else default_eps(X.shape[1] if X.ndim == 4 else 1, *image_range(X))
    )


def defended_models(
    target: AuditTarget, names: List[str], params: IntrinsicParams, runtime: Any
) -> Tuple[Dict[str, Any], Dict[str, Dict[str, Any]], float]:
    """The target's defended models ``names`` with the ``intrinsic`` section's settings: ``({name: module},
    {name: what ran}, eps)``; one runtime call per defence (cached; side by side on Dask)."""
    import torch

    from weakspot.device import resolve_device

    dev = resolve_device(runtime.device)
    X, y = np.asarray(target.train.X), np.asarray(target.train.y)
    clip = list(image_range(X))
    eps = target_eps(target, params)
    init = params.defence_init
    train = target.params.train.model_dump(mode="json")
    epochs = params.defence_epochs if init == "target" else int(train["epochs"])
    module = target.model.module
    calls, keys = [], []
    for d in names:
        options = params.defence_options.get(d, {})
        calls.append(
            (
                (module, X, y, d, options, eps, clip, init, train, int(epochs), runtime.device),
                {"progress": runtime.progress},
            )
        )
        keys.append({"defence": d})  # the call's own argument; the runtime adds what the stage depends on
    outs = runtime.map(train_defended, calls, keys=keys, labels=[f"{target.name}, {d}" for d in names])
    models, info = {}, {}
    for d, out in zip(names, outs):
        m = copy.deepcopy(module)
        m.load_state_dict(torch.load(io.BytesIO(out["state_dict"]), map_location=dev, weights_only=True))
        models[d] = m.to(dev).eval()
        info[d] = {
            "label": out["label"] + (" from scratch" if init == "scratch" else " fine-tuned from the audited model"),
            "settings": out["settings"],
            "training_seconds": out["seconds"],
            "eps": eps,
        }
    return models, info, eps
