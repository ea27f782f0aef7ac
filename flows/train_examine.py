"""Stage ``train_examine``: the examiner paper's target models (ResNet34, AlexNet; seeds/000 Sec. 4.1), the
training-set-size variants (Sec. 4.3) and the artificially weak model (Sec. 4.4), trained on the rendered scenes."""

from __future__ import annotations

import time

import flows  # noqa: F401
import numpy as np
import pandas as pd
from prefect import flow

from tasks.common import combined_digest, digest, lineage, run_main, source_digest, stage_params, write_stage_result
from tasks.examine import MODELS, load_models, save_models, train_models
from tasks.scene import RENDER, read_render
from weakspot.examine import predict_proba
from weakspot.result import StageResult


@flow(name="train_examine")
def train_examine_flow() -> dict:
    top, p = stage_params("examine")
    t0 = time.time()
    models = train_models(p.model_dump(mode="json"), combined_digest(digest([RENDER])),
                          source_digest("weakspot.examine"), top["device"])
    lin = lineage("train_examine", top, p, [RENDER], section="examine")
    save_models(models, lin)
    # accuracy of each model on the validation instances' random views (the unexamined baseline)
    images, table, _ = read_render()
    val = (table["split"] != "train").to_numpy()
    labels = table["label"].to_numpy()
    rows = []
    for name, t in load_models(top["device"]).items():
        proba = predict_proba(t.model, images[val])
        rows.append({"model": name, "arch": t.arch, "n_train": t.info.get("n_train"), "role": t.info.get("role"),
                     "val_accuracy": float((proba.argmax(1) == labels[val]).mean()),
                     "val_true_class_p": float(proba[np.arange(len(proba)), labels[val]].mean())})
    df = pd.DataFrame(rows)
    metrics = {r["model"]: {"val_accuracy": r["val_accuracy"], "val_true_class_p": r["val_true_class_p"]} for r in rows}
    result = StageResult(
        metrics=metrics, tables={"models": df}, title="Examiner target models",
        summary=[f"{len(rows)} classifiers trained on the rendered training views in {time.time() - t0:.0f} s and "
                 "measured on random views of the held-out validation instances: the average-case picture that the "
                 "adversarial examiner then challenges."],
        headline=[", ".join(f"{r['model']} {r['val_accuracy']:.0%}" for r in rows if r["role"] == "main")
                  + " accuracy on random views of unseen object instances."],
        items=[{"table": "models", "caption": "Target models: accuracy and mean true-class probability on random "
                "validation views."}],
    )
    write_stage_result("train_examine", result, lin)
    print(f"train_examine: {len(rows)} models -> {MODELS}/ ({time.time() - t0:.0f} s)")
    return metrics


if __name__ == "__main__":
    run_main(train_examine_flow, "examine")
