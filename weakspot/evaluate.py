"""The average-case picture of a model under audit: accuracy per split and per class, and calibration.

Caveat first: this is what every method's weak spots are measured against; it is not itself an audit method.
"""

from __future__ import annotations

from typing import Any, Dict, Optional


from weakspot.data.dataset import Dataset
from weakspot.metrics import accuracy, expected_calibration_error, reliability_diagram, reliability_table
from weakspot.result import StageResult


def describe_model(spec: Dict[str, Any]) -> str:
    """One phrase naming the model: "built-in lenet (trained here)", "your sklearn model models/m.pkl", "your torch
    model Net (in memory)" (a model given in process: its ``name``)..."""
    if spec.get("trained_arch"):
        return f"built-in {spec['trained_arch']} (trained here)"
    if spec.get("kind") == "builtin":
        return f"built-in {spec.get('arch')} with weights {spec.get('weights')}"
    what = spec.get("weights") or spec.get("factory") or spec.get("name")
    return f"your {spec.get('kind')} model" + (f" {what}" if what else "")


def _acc(value: Optional[float], pct: bool = False) -> str:
    if value is None:
        return "not given (no rows of that part)"
    return f"{value:.1%}" if pct else f"{value:.3f}"


def _recalled_worse(worse: Any) -> str:
    if not len(worse):
        return "No class is recalled worse than the others after the correction over the classes."
    names = ", ".join(f"{c} ({r:.1%})" for c, r in zip(worse["class"], worse["recall"]))
    return f"Recalled worse than the other classes (confirmed after the correction over the classes): {names}."


def target_section(
    target: str,
    clf: Any,
    train: Dataset,
    val: Dataset,
    test: Dataset,
    *,
    spec: Dict[str, Any],
    bins: int = 15,
    history: Optional[Dict[str, Any]] = None,
) -> StageResult:
    """Metrics, per-class table, reliability diagram and prose for the ``train-<target>`` report section."""
    import pandas as pd

    p = {name: clf.predict_proba(ds.X) for name, ds in (("train", train), ("val", val), ("test", test)) if len(ds)}
    metrics: Dict[str, Any] = {
        # a split the target does not give (a model weakspot did not train: no train or validation rows) is null
        "train_accuracy": accuracy(p["train"], train.y) if "train" in p else None,
        "val_accuracy": accuracy(p["val"], val.y) if "val" in p else None,
        "test_accuracy": accuracy(p["test"], test.y),
        "ece": expected_calibration_error(p["test"], test.y, n_bins=bins),
        "n_test": int(len(test.y)),
    }
    from weakspot.recall import class_recall

    per_class = class_recall(p["test"], test.y, test.classes)
    per_class["mean_confidence"] = [
        float(p["test"][test.y == k].max(axis=1).mean()) if (test.y == k).any() else float("nan")
        for k in range(test.n_classes)
    ]
    metrics["per_class_test_accuracy"] = {
        c: round(float(a), 6) for c, a in zip(per_class["class"], per_class["recall"])
    }
    worse = per_class[per_class["recalled_worse"]].sort_values("recall")
    metrics["classes_recalled_worse"] = [str(c) for c in worse["class"]]
    worst = per_class.sort_values("recall").iloc[0]
    model = describe_model(spec)
    rel = reliability_table(p["test"], test.y, n_bins=bins)
    result = StageResult(
        metrics=metrics,
        tables={"per_class": per_class, "reliability": rel[rel["count"] > 0]},
        figures={
            "reliability": reliability_diagram(p["test"], test.y, n_bins=bins, title=f"{target} on its test split")
        },
        title=f"Model under audit: {target}",
        summary=[
            f"{model}: train accuracy {_acc(metrics['train_accuracy'])}, validation {_acc(metrics['val_accuracy'])}, "
            f"test {metrics['test_accuracy']:.3f} on {metrics['n_test']} held-out samples; expected calibration error "
            f"(ECE, {bins} bins) {metrics['ece']:.3f}. Weakest class on the test split: {worst['class']} "
            f"(recall {worst['recall']:.1%}). " + _recalled_worse(worse),
            "The reliability diagram compares confidence with accuracy per confidence bin; red gaps are overconfident "
            "bins, the first place to look for weak spots.",
        ],
        headline=[
            f"{target}: {model} scores {metrics['test_accuracy']:.1%} on {metrics['n_test']} held-out samples "
            f"(train {_acc(metrics['train_accuracy'], pct=True)}, ECE {metrics['ece']:.3f}); weakest class "
            f"{worst['class']} at {worst['recall']:.1%}."
        ],
        items=[
            {
                "table": "per_class",
                "caption": f"Recall per class on the test split ({target}): its 90% interval, the other classes' "
                "recall, and whether it is recalled worse than they are (its failure rate's lift over theirs, "
                "confirmed after the correction over the classes). A class is known only with the label: this is "
                "no weak spot a user can flag before the answer, so it is not ranked with them.",
            },
            {"figure": "reliability", "caption": f"Reliability diagram, test split ({target})."},
        ],
    )
    if history:
        result.tables["history"] = pd.DataFrame(history).drop(columns=["seconds"], errors="ignore")
    return result
