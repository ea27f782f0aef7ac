"""Stage ``train-<target>``: train the target's built-in model (or load the user's) and measure it: accuracy per
split and per class, calibration (ECE and a reliability diagram).

Writes ``data/targets/<t>/model/`` (``model.pt`` state_dict or ``model.joblib``, and ``model.json``: how to rebuild it,
with its lineage) and ``metrics/train/<t>.json``.
"""

from __future__ import annotations

from prefect import flow

from tasks import paths
from tasks.common import lineage, one_target, stage_main, write_stage_result
from tasks.data import read_prepared
from tasks.target import model_from_spec, save_model, train_cached, write_spec
from weakspot.evaluate import target_section


@flow(name="train", flow_run_name="train-{target}", validate_parameters=False)
def train_flow(top: dict, target: str, t) -> dict:
    train, val, test = (read_prepared(target, s) for s in ("train", "val", "test"))
    spec = {
        **t.model.model_dump(mode="json"),
        "n_classes": train.n_classes,
        "input_shape": list(train.input_shape),
        "classes": train.classes,
        "feature_names": train.feature_names,
    }
    user_files = [f for f in (t.model.weights,) if f]
    lin = lineage(
        "train",
        top,
        {"model": t.model.model_dump(mode="json"), "train": t.train.model_dump(mode="json")},
        [paths.prepared(target), *user_files],
        section=f"targets.{target}",
    )
    history, out = None, None
    if t.trains:
        out = train_cached(
            target,
            t.model.arch,
            t.train.model_dump(mode="json"),
            top["device"],
        )
        history = out.get("history")
        spec.update(weights=out["blob"], trained_arch=t.model.arch)
        if out["file"].endswith(".joblib"):
            spec.update(kind="sklearn", arch=None, info=out.get("info"))
    # measure before writing anything: a model that answers wrongly stops here and leaves the old artifacts as they were
    clf = model_from_spec(spec, top["device"], test)
    result = target_section(target, clf, train, val, test, spec=spec, bins=t.train.calibration_bins, history=history)
    if out is not None:
        spec["weights"] = str(save_model(target, out["blob"], out["file"]))
    write_spec(target, spec, lin)
    write_stage_result(
        "train",
        result,
        lin,
        target=target,
        headline=("test_accuracy", "val_accuracy", "train_accuracy", "ece", "n_test"),
    )
    m = result.metrics
    print(f"train-{target}: test accuracy {m['test_accuracy']:.4f}, ECE {m['ece']:.4f} -> {paths.model_dir(target)}/")
    return m


if __name__ == "__main__":
    stage_main(train_flow, lambda raw, argv: one_target(raw, argv, "python -m flows.train"))
