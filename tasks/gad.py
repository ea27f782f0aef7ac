"""Tasks of the per-target ``gad`` stage: GAD on the target's test split, the target's model seen only through
``predict_proba``, once per split seed (``gad.seeds``): seed 0 is the prepared split and the trained model, every
other seed re-draws the split and retrains the model (:func:`weakspot.gad.seeds.reseeded_target`)."""

from __future__ import annotations

from typing import Any, Dict

from tasks.common import cached_task


@cached_task
def gad_target(target: str, params: Dict[str, Any], prepared_digest: str, model_digest: str, code_digest: str,
               device: str, split_seed: int = 0, target_spec: Dict[str, Any] | None = None):
    """GAD (seeds/001) on one target and one split seed; the key holds the gad params (without ``seeds``, so a run
    is reused when the list grows), the split seed, the target's spec, the prepared data's and the model's digests
    and the library code's digest. Returns the :class:`~weakspot.gad.experiment.DatasetOutcome` (arrays, no
    weights)."""
    from tasks.data import read_prepared, read_prepared_info
    from tasks.target import load_target_model
    from weakspot.gad.config import GadParams
    from weakspot.gad.datasets import Split
    from weakspot.gad.experiment import dataset_seed, run_target
    from weakspot.progress import printer

    p = GadParams.model_validate(params)
    seed = dataset_seed(p.seed, target, split_seed)
    progress = printer(f"gad-{target}")
    if split_seed:
        from weakspot.gad.seeds import reseeded_target
        from weakspot.targets import TargetParams

        clf, split, info = reseeded_target(TargetParams.model_validate(target_spec), split_seed, name=target,
                                           device=device)
        return run_target(clf, split, p, class_index=int(split.info.get("class_of_interest", 1)), device=device,
                          progress=progress, seed=seed, model_info=info, split_seed=split_seed)
    train, test = read_prepared(target, "train"), read_prepared(target, "test")
    info = read_prepared_info(target).get("split", {})
    clf, spec = load_target_model(target, device)
    split = Split(name=target, X_train=train.X.astype("float64"), y_train=train.y, X_test=test.X.astype("float64"),
                  y_test=test.y, feature_names=list(test.feature_names or []), log_mae=bool(info.get("log_mae", True)),
                  description=str(info.get("description", "")),
                  info={**info.get("bias", {}), **info, "n_train": len(train), "n_test": len(test)}, classes=list(test.classes))
    return run_target(clf, split, p, class_index=int(info.get("class_of_interest", 1)), device=device,
                      progress=progress, seed=seed,
                      model_info=spec.get("info") or {"arch": spec.get("arch") or spec.get("kind")})
