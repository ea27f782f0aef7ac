"""GAD's entry point on a target: the protocol of Sec. V-C once per split seed (``gad.seeds``).

Seed 0 is the audited model on its own split; every other seed re-draws the split and retrains the black box from
the target's params (:func:`weakspot.gad.seeds.reseeded_target`), so a user's own model (which weakspot cannot
retrain) runs seed 0 only. Each seed is one call of the runtime (cached, fanned out on Dask by the pipeline).
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional

from weakspot.gad.config import GadParams
from weakspot.gad.datasets import Split
from weakspot.gad.protocol import DatasetOutcome, dataset_seed, run_target
from weakspot.methods import AuditTarget


def _unlabelled_X(target: AuditTarget) -> Any:
    rows = getattr(target, "unlabelled", None)
    return None if rows is None else rows.X.astype("float64")


def target_split(target: AuditTarget) -> Split:
    """The target's prepared split as GAD's :class:`~weakspot.gad.datasets.Split` (train for Table I, test audited)."""
    info = target.info
    train, test = target.train, target.test
    return Split(
        name=target.name,
        X_train=train.X.astype("float64"),
        y_train=train.y,
        X_test=test.X.astype("float64"),
        y_test=test.y,
        feature_names=list(test.feature_names or []),
        log_mae=bool(info.get("log_mae", True)),
        description=str(info.get("description", "")),
        info={**info.get("bias", {}), **info, "n_train": len(train), "n_test": len(test)},
        classes=list(test.classes),
        categories=dict(test.categories),
        X_unlabelled=_unlabelled_X(target),
    )


def seed_outcome(
    target: Optional[AuditTarget],
    params: Dict[str, Any],
    split_seed: int,
    *,
    name: str,
    device: str,
    target_params: Optional[Dict[str, Any]] = None,
    progress: Any = None,
) -> DatasetOutcome:
    """GAD on one split seed: the audited model and split for seed 0, else a re-drawn split and retrained model."""
    p = GadParams.model_validate(params)
    seed = dataset_seed(p.seed, name, split_seed)
    if split_seed:
        from weakspot.gad.seeds import reseeded_target
        from weakspot.targets import TargetParams

        clf, split, info = reseeded_target(
            TargetParams.model_validate(target_params), split_seed, name=name, device=device
        )
        return run_target(
            clf,
            split,
            p,
            class_index=int(split.info.get("class_of_interest", 1)),
            device=device,
            progress=progress,
            seed=seed,
            model_info=info,
            split_seed=split_seed,
        )
    assert target is not None  # split seed 0 audits the given target
    spec = target.spec
    return run_target(
        target.model,
        target_split(target),
        p,
        class_index=int(target.info.get("class_of_interest", 1)),
        device=device,
        progress=progress,
        seed=seed,
        model_info=spec.get("info") or {"arch": spec.get("arch") or spec.get("kind")},
    )


def run(target: AuditTarget, params: GadParams, runtime: Any) -> List[DatasetOutcome]:
    """One :class:`~weakspot.gad.protocol.DatasetOutcome` per split seed (seed 0 only for a model weakspot did
    not train, or data given as named parts), in seed order."""
    trains = bool(getattr(target.params, "trains", False))
    fixed = bool(getattr(getattr(target.params, "data", None), "named_parts", None))  # the user's split
    seeds = params.seeds if trains and not fixed else [0]
    key = params.model_dump(mode="json", exclude={"seeds"})
    spec = target.params.model_dump(mode="json") if trains else None  # a seed's split is prepared from params.yaml
    calls = [
        (
            (target if s == 0 else None, key, s),
            {
                "name": target.name,
                "device": runtime.device,
                "target_params": spec if s else None,
                "progress": runtime.progress,
            },
        )
        for s in seeds
    ]
    keys = [{"split_seed": s} for s in seeds]  # the call's own argument; the runtime adds what the stage depends on
    return runtime.map(seed_outcome, calls, keys=keys, labels=[f"{target.name}, split seed {s}" for s in seeds])
