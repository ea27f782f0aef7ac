"""Stage ``intrinsic-<target>``: intrinsic robustness (seeds/002) of a white-box image target: psi, reference attacks
(FGSM, PGD-30, CW-30, AutoAttack through IBM ART), defended copies of the model (cached tasks), Table 4's
reparameterisation, Fig. 6's stability and the decision surfaces.

Writes ``metrics/intrinsic/<t>.json``, the report section under ``plots/intrinsic/<t>/`` and
``findings/<t>/intrinsic.parquet``.
"""

from __future__ import annotations

import flows  # noqa: F401
from prefect import flow

from tasks import paths
from tasks.common import lineage, run_main, stage_params, target_params, write_stage_result
from tasks.intrinsic import defended_modules


@flow(name="intrinsic")
def intrinsic_flow(target: str) -> dict:
    import numpy as np

    from tasks.data import image_range, read_prepared
    from tasks.target import load_target_model
    from weakspot.device import resolve_device
    from weakspot.errors import DataError
    from weakspot.intrinsic.config import default_eps, init_of
    from weakspot.intrinsic.experiment import run_intrinsic
    from weakspot.progress import printer

    top, t = target_params(target)
    _, p = stage_params("intrinsic")
    dev = resolve_device(top["device"])
    clf, spec = load_target_model(target, top["device"])
    classes = [str(c) for c in spec["classes"]]
    splits = [read_prepared(target, s) for s in ("test", "val", "train")]
    X_pool = np.concatenate([np.asarray(s.X, np.float32) for s in splits])
    y_pool = np.concatenate([np.asarray(s.y, np.int64) for s in splits])
    if not np.isfinite(X_pool).all():
        raise DataError(f"{paths.prepared(target)}: the inputs hold NaN or infinite values")
    train_X = np.asarray(splits[2].X)
    clip = image_range(train_X)
    names = list(p.defences if t.defences is None else t.defences)
    init = init_of(p, target)
    defended, info, eps_d = defended_modules(target, names, clf)
    eps = eps_d if names else float(p.eps.get(target, default_eps(X_pool.shape[1], *clip)))
    models = {"none": clf.module, **defended}
    result, found = run_intrinsic(models, X_pool, y_pool, classes, p, eps=eps, clip=clip, n_test=len(splits[0].X),
                                  defence_info=info, init=init, device=dev, progress=printer(f"intrinsic-{target}"))
    result.title = f"{result.title} ({target})"
    lin = lineage("intrinsic", top, p, [paths.prepared(target), paths.model_dir(target)])
    lin["defences"] = info  # what ran, its settings and training time (timings stay out of the metrics)
    write_stage_result("intrinsic", result, lin, target=target, findings=found)
    m = result.metrics
    print(f"intrinsic-{target}: psi {m['psi']:.1f}, PGD-30 {m['pgd30_acc']:.1%}, CW-30 {m['cw30_acc']:.1%} at eps "
          f"{eps:.4g} -> {paths.findings(target, 'intrinsic')}")
    return m


if __name__ == "__main__":
    run_main(intrinsic_flow, "intrinsic", per_target=True)
