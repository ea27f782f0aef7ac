"""Intrinsic robustness's entry point on a white-box image target: psi, the reference attacks and the same for the
defended copies of the model (``intrinsic.defences``, trained through the runtime: cached, shared with HDA)."""

from __future__ import annotations

from typing import Any

import numpy as np

from weakspot.adversarial.defended import defended_models, target_eps
from weakspot.data.dataset import image_range
from weakspot.device import resolve_device
from weakspot.errors import DataError
from weakspot.intrinsic.config import IntrinsicParams
from weakspot.intrinsic.experiment import run_intrinsic
from weakspot.methods import AuditTarget, MethodReport


def run(target: AuditTarget, params: IntrinsicParams, runtime: Any) -> MethodReport:
    splits = [target.test, target.val, target.train]
    X_pool = np.concatenate([np.asarray(s.X, np.float32) for s in splits])
    y_pool = np.concatenate([np.asarray(s.y, np.int64) for s in splits])
    if not np.isfinite(X_pool).all():
        raise DataError(f"{target.name}: the inputs hold NaN or infinite values")
    clip = image_range(np.asarray(target.train.X))
    names = list(params.defences)
    defended, info, eps = defended_models(target, names, params, runtime)
    eps = eps if names else target_eps(target, params)
    models = {"none": target.model.module, **defended}
    section, found = run_intrinsic(models, X_pool, y_pool, [str(c) for c in target.classes], params, eps=eps,
                                   clip=clip, n_test=len(target.test.X), defence_info=info,
                                   init=params.defence_init, device=resolve_device(runtime.device),
                                   progress=runtime.progress)
    section.title = f"{section.title} ({target.name})"
    # what ran, its settings and training time (timings stay out of the metrics)
    return MethodReport(section=section, findings=found, lineage={"defences": info})
