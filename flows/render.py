"""Stage ``render``: render m random views of every training and validation instance with Blender (seeds/000 Sec. 4.1).

Writes ``data/render/images.npy`` (uint8, n x H x W x 3), ``views.parquet`` (class, label, instance, split, view and
the 12 factor values of every image, so any image traces to its scene) and a contact sheet for the report.
"""

from __future__ import annotations

import time

import flows  # noqa: F401
import numpy as np
import pandas as pd
from prefect import flow

from tasks.common import lineage, run_main, source_digest, stage_params, write_stage_result
from tasks.scene import render_views, write_render
from weakspot.result import StageResult


def _contact_figure(images: np.ndarray, table: pd.DataFrame, classes):
    import matplotlib.pyplot as plt

    cols = min(8, int(table.groupby("class").size().min()))
    fig, axes = plt.subplots(len(classes), cols, figsize=(cols * 0.9, len(classes) * 0.95), squeeze=False)
    for r, cls in enumerate(classes):
        idx = np.flatnonzero((table["class"] == cls).to_numpy() & (table["split"] == "train").to_numpy())[:cols]
        for c in range(cols):
            ax = axes[r, c]
            ax.axis("off")
            if c < len(idx):
                ax.imshow(images[idx[c]], interpolation="nearest")
        axes[r, 0].text(-0.1, 0.5, cls, transform=axes[r, 0].transAxes, ha="right", va="center", fontsize=9)
    fig.subplots_adjust(wspace=0.05, hspace=0.05, left=0.15)
    return fig


@flow(name="render")
def render_flow() -> dict:
    top, p = stage_params("scene")
    t0 = time.time()
    scene = p.model_dump(mode="json")
    images, table = render_views(scene, source_digest("weakspot.scene"), top["device"])
    lin = lineage("render", top, p, section="scene")
    write_render(images, table, scene, lin)
    counts = table.groupby(["split"]).size().to_dict()
    secs = time.time() - t0
    metrics = {"n_images": int(len(images)), "n_train": int(counts.get("train", 0)), "n_val": int(counts.get("val", 0)),
               "resolution": p.resolution, "classes": len(p.classes), "seconds": round(secs, 1)}
    result = StageResult(
        metrics=metrics,
        figures={"contact_sheet": _contact_figure(images, table, p.classes)},
        tables={"views": table.head(200)},
        title="Rendered scenes",
        summary=[
            f"{len(images)} images of {len(p.classes)} procedural object classes rendered with Blender Cycles at "
            f"{p.resolution}x{p.resolution} px, {p.samples} samples: {p.views_per_instance} random views (m) of each of "
            f"{p.train_instances} training and {p.val_instances} validation instances per class, the 12 rendering "
            "factors of the Adversarial Examiner paper's Table 1 drawn uniformly. Every image's factor values are in "
            "data/render/views.parquet.",
        ],
        items=[{"figure": "contact_sheet", "caption": "Training views, one row per class."},
               {"table": "views", "caption": "The first rendered views with their factor values (Blender units)."}],
    )
    write_stage_result("render", result, lin)
    print(f"render: {len(images)} images in {secs:.0f} s -> data/render/")
    return metrics


if __name__ == "__main__":
    run_main(render_flow, "scene")
