"""Corner cases' entry point on a white-box image target: the generator (trained once per training data set: its
runtime call is keyed on the images and the generator's params, not on the target, so targets on the same data share
it), then the latent search through the target's gradients."""

from __future__ import annotations

import hashlib
from typing import Any, Dict

import numpy as np

from weakspot.corner.autoencoder import Generator
from weakspot.corner.config import CornerParams
from weakspot.corner.experiment import GENERATOR_KEYS, run_corner, train_generator
from weakspot.device import resolve_device, single_thread
from weakspot.methods import AuditTarget, MethodReport


def generator_bytes(X: np.ndarray, generator_params: Dict[str, Any], device: str, progress: Any = None) -> Dict[str, Any]:
    """Train the generator on images ``X``; ``{"generator": bytes, "seconds": s}``."""
    p = CornerParams.model_validate(generator_params)
    dev = resolve_device(device)
    with single_thread(dev):
        g = train_generator(np.asarray(X, np.float32), p, device=dev, progress=progress)
    return {"generator": g.to_bytes(), "seconds": float(g.history.get("seconds", 0.0))}


def run(target: AuditTarget, params: CornerParams, runtime: Any) -> MethodReport:
    train = target.train
    X = np.ascontiguousarray(train.X, np.float32)
    gp = {k: v for k, v in params.model_dump(mode="json").items() if k in GENERATOR_KEYS}
    # keyed on the pixels, not the target: two targets on the same training images share one generator
    pixels = hashlib.sha256(str(X.shape).encode() + X.tobytes()).hexdigest()
    gen = runtime.cached(generator_bytes, X, gp, runtime.device, key={"pixels": pixels, "generator": gp},
                         label=f"generator for {target.name}'s training images", progress=runtime.progress)
    dev = resolve_device(runtime.device)
    g = Generator.from_bytes(gen["generator"], device=dev)
    section, found = run_corner(target.model, X, train.y, [str(c) for c in target.classes], params, device=dev,
                                generator=g, progress=runtime.progress)
    section.title = f"{section.title} ({target.name})"
    return MethodReport(section=section, findings=found,
                        lineage={"generator": {"pixels": pixels, "training_seconds": round(gen["seconds"], 2)}})
