"""The report section of the rendered scene data set: a contact sheet and what was rendered."""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from weakspot.result import StageResult


def contact_figure(images: np.ndarray, table: Any, classes: Sequence[str]):
    """One row of training views per class."""
    from matplotlib.figure import Figure

    cols = max(1, min(8, int(table.groupby("class").size().min())))
    fig = Figure(figsize=(cols * 0.9, len(classes) * 0.95))
    axes = fig.subplots(len(classes), cols, squeeze=False)
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


def render_section(images: np.ndarray, table: Any, p: Any, views_file: str = "") -> StageResult:
    """Metrics, contact sheet and prose of the ``render`` stage (``p``: the scene params; ``views_file``: where the
    caller wrote the per-image factor table, named in the prose)."""
    counts = table.groupby(["split"]).size().to_dict()
    metrics = {
        "n_images": int(len(images)),
        "n_train": int(counts.get("train", 0)),
        "n_val": int(counts.get("val", 0)),
        "resolution": p.resolution,
        "classes": len(p.classes),
    }
    return StageResult(
        metrics=metrics,
        figures={"contact_sheet": contact_figure(images, table, p.classes)},
        tables={"views": table.head(200)},
        title="Rendered scenes",
        summary=[
            f"{len(images)} images of {len(p.classes)} procedural object classes rendered with Blender Cycles at "
            f"{p.resolution}x{p.resolution} px, {p.samples} samples: {p.views_per_instance} random views (m) of each of "
            f"{p.train_instances} training and {p.val_instances} held-out instances per class, the 12 rendering "
            "factors of the Adversarial Examiner paper's Table 1 drawn uniformly."
            + (f" Every image's factor values are in {views_file}." if views_file else ""),
        ],
        items=[
            {"figure": "contact_sheet", "caption": "Training views, one row per class."},
            {"table": "views", "caption": "The first rendered views with their factor values (Blender units)."},
        ],
    )
