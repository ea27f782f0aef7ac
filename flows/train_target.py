"""Stage ``train_target``: train the built-in target model (or load the user's) and measure accuracy and calibration.

Writes ``data/target/model.pt`` (a state_dict) and ``model.json`` (how to rebuild it), ``metrics/train_target.json``
(train_accuracy, val_accuracy, test_accuracy, ece) and a reliability diagram.
"""

from __future__ import annotations

import flows  # noqa: F401
from prefect import flow

from tasks.common import combined_digest, digest, lineage, run_main, source_digest, stage_params, write_stage_result
from tasks.data import PREPARED, read_prepared
from tasks.target import TARGET, evaluate, save_target, train_builtin
from weakspot.metrics import accuracy, expected_calibration_error, reliability_diagram, reliability_table
from weakspot.models import ARCHS, TorchClassifier, load_model
from weakspot.result import StageResult


@flow(name="train_target")
def train_target_flow() -> dict:
    top, p = stage_params("train_target")
    train, val, test = read_prepared("train"), read_prepared("val"), read_prepared("test")
    inputs = digest([PREPARED])
    input_shape = tuple(train.image_shape) if train.image_shape else (train.X.shape[1],)
    m = p.model
    spec = {**m.model_dump(mode="json"), "n_classes": train.n_classes, "input_shape": list(input_shape),
            "classes": train.classes}
    history = None
    if m.kind == "builtin" and m.weights is None:
        hyper = {k: getattr(p, k) for k in ("epochs", "lr", "batch_size", "weight_decay", "seed")}
        out = train_builtin(combined_digest(inputs), source_digest("weakspot.models"), m.arch, input_shape, train.n_classes, hyper, top["device"], train, val)
        module = ARCHS.get(m.arch)(input_shape=input_shape, n_classes=train.n_classes)
        module.load_state_dict(out["state_dict"])
        clf = TorchClassifier(module, n_classes=train.n_classes, device=top["device"])
        state, history = out["state_dict"], out["history"]
        spec.update(weights=str(TARGET / "model.pt"))
    else:
        clf = load_model(m, n_classes=train.n_classes,
                         input_shape=input_shape, device=top["device"])
        state = None
    lin = lineage("train_target", top, p, [PREPARED])
    p_train, p_val, p_test = evaluate(clf, train), evaluate(clf, val), evaluate(clf, test)
    metrics = {
        "train_accuracy": accuracy(p_train, train.y),
        "val_accuracy": accuracy(p_val, val.y),
        "test_accuracy": accuracy(p_test, test.y),
        "ece": expected_calibration_error(p_test, test.y, n_bins=p.calibration_bins),
        "n_test": int(len(test.y)),
    }
    save_target(state, spec, lin)
    rel = reliability_table(p_test, test.y, n_bins=p.calibration_bins)
    result = StageResult(
        metrics=metrics,
        tables={"reliability": rel[rel["count"] > 0]},
        figures={"reliability": reliability_diagram(p_test, test.y, n_bins=p.calibration_bins,
                                                   title="Target model on the test split")},
        title="Target model",
        summary=[
            f"The model under audit ({m.arch or m.factory}) on {train.provenance.get('spec', 'the data')}: "
            f"train accuracy {metrics['train_accuracy']:.3f}, test accuracy {metrics['test_accuracy']:.3f} on "
            f"{metrics['n_test']} held-out samples, expected calibration error (ECE, {p.calibration_bins} bins) "
            f"{metrics['ece']:.3f}.",
            "The reliability diagram compares the model's confidence with its accuracy in each confidence bin; bars "
            "below the diagonal are overconfident bins, the first place to look for weak spots.",
        ],
        headline=[f"The model under audit scores {metrics['test_accuracy']:.1%} on {metrics['n_test']} held-out samples "
                  f"(train {metrics['train_accuracy']:.1%}); expected calibration error {metrics['ece']:.3f}."],
        items=[{"figure": "reliability", "caption": "Reliability diagram (test split)."},
               {"table": "reliability", "caption": "Confidence and accuracy per non-empty bin (test split)."}],
    )
    if history:
        import pandas as pd

        result.tables["history"] = pd.DataFrame(history)
    write_stage_result("train_target", result, lin)
    print(f"train_target: test accuracy {metrics['test_accuracy']:.4f}, ECE {metrics['ece']:.4f} -> metrics/train_target.json")
    return metrics


if __name__ == "__main__":
    run_main(train_target_flow, "train_target")
