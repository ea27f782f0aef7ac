"""Render a labelled training (and validation) set: m random views of every instance, each traceable to its scene.

Caveats first:

* Views are drawn uniformly over *all 12* factors of the given space (paper Sec. 4.1: "we randomly select a value
  for each of the 12 factors, and render m = 10 images per 3D object"). Pass a narrower :class:`SceneSpace` to plant
  a weakness, e.g. ``SceneSpace({"view_elevation": (-30, 30)})`` for paper Sec. 4.4.
* Instance ids come from :func:`~weakspot.scene.objects.split_instances` with the same ``seed``, so the train and
  validation objects are disjoint and the same for every run with that seed.
* The factor draws are seeded per (split, class, instance), so adding a class does not change the views of another.

Reference: M. Shu, C. Liu, W. Qiu, A. Yuille, "Identifying Model Weakness with Adversarial Examiner", AAAI 2020
(``seeds/000``), Sec. 4.1 (m = 10) and Table 3 (m in {1, 2, 5, 10}).

Example
-------
>>> from weakspot.scene.renderer import BlenderRenderer
>>> from weakspot.scene.space import SceneSpace
>>> with BlenderRenderer(resolution=32, samples=4, workers=2) as r:  # doctest: +SKIP
...     images, table = render_dataset(r, ["mug", "bowl"], 4, 10, SceneSpace(), seed=0)
>>> images.shape, list(table.columns)[:5]  # doctest: +SKIP
((80, 32, 32, 3), ['class', 'label', 'instance', 'split', 'view'])
"""

from __future__ import annotations

import zlib
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

from weakspot.errors import ConfigError, DataError, RenderError
from weakspot.progress import Progress
from weakspot.scene.objects import class_index, split_instances
from weakspot.scene.space import FACTORS, SceneSpace


def images_to_input(images: np.ndarray) -> np.ndarray:
    """Rendered images as a model's input: uint8 ``(n, H, W, 3)`` -> float32 ``(n, 3, H, W)`` in [0, 1].

    The built-in image architectures (``weakspot.models.ARCHS``: ``small_cnn``, ``alexnet``, ``resnet34``) normalise
    inside the module, so white-box attacks work in this [0, 1] pixel space.

    Examples
    --------
    >>> images_to_input(np.full((2, 4, 4, 3), 255, np.uint8)).shape
    (2, 3, 4, 4)
    """
    a = np.asarray(images)
    if a.ndim != 4 or a.shape[-1] != 3 or a.dtype != np.uint8:
        raise DataError(f"images_to_input: expected uint8 images (n, H, W, 3), got {a.dtype} {a.shape}")
    out = np.empty((a.shape[0], 3, a.shape[1], a.shape[2]), np.float32)
    np.multiply(a.transpose(0, 3, 1, 2), np.float32(1.0 / 255.0), out=out, casting="unsafe")
    return out


def scene_plan(
    classes: Sequence[str],
    instances_per_class: int,
    views_per_instance: int = 10,
    space: Optional[SceneSpace] = None,
    seed: int = 0,
    *,
    val_instances_per_class: int = 0,
    val_views_per_instance: Optional[int] = None,
) -> List[Dict[str, Any]]:
    """The scene params of a data set, without rendering: one dict per image (factors, class, instance, ...).

    Same parameters as :func:`render_dataset`; each dict also holds ``label``, ``split`` and ``view``.
    """
    labels = class_index(list(classes))
    for name, v, lo in (
        ("instances_per_class", instances_per_class, 1),
        ("views_per_instance", views_per_instance, 1),
        ("val_instances_per_class", val_instances_per_class, 0),
    ):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < lo:
            raise ConfigError(f"render_dataset: {name} must be an int >= {lo}, got {v!r}")
    val_views = views_per_instance if val_views_per_instance is None else val_views_per_instance
    space = space or SceneSpace()
    train_ids, val_ids = split_instances(int(instances_per_class), int(val_instances_per_class), seed=seed)
    plan: List[Dict[str, Any]] = []
    for split, ids, m in (("train", train_ids, views_per_instance), ("val", val_ids, val_views)):
        for cls in classes:
            for inst in ids:
                rng = np.random.default_rng([int(seed), zlib.crc32(f"{split}/{cls}".encode()), inst])
                for view, p in enumerate(space.sample(rng, int(m))):
                    plan.append(
                        {**p, "class": cls, "instance": int(inst), "label": labels[cls], "split": split, "view": view}
                    )
    return plan


def render_dataset(
    renderer: Any,
    classes: Sequence[str],
    instances_per_class: int,
    views_per_instance: int = 10,
    space: Optional[SceneSpace] = None,
    seed: int = 0,
    *,
    val_instances_per_class: int = 0,
    val_views_per_instance: Optional[int] = None,
    batch_size: int = 64,
    progress: Optional[Progress] = None,
) -> Tuple[np.ndarray, "Any"]:
    """Render ``views_per_instance`` random views of each of ``instances_per_class`` instances of every class.

    Parameters
    ----------
    renderer : Renderer
        Anything with ``render(list of scene params) -> (n, H, W, 3) uint8`` (e.g. :class:`BlenderRenderer`).
    classes : list of str
        Class names; the label of a class is its position in this list.
    instances_per_class : int
        Training instances per class.
    views_per_instance : int, default 10
        m, the number of random views per instance (paper Sec. 4.1: m = 10; Table 3 tries 1, 2, 5, 10).
    space : SceneSpace, optional
        The factor ranges to draw from; default ``SceneSpace()`` (Table 1 in Blender units).
    seed : int, default 0
        Seeds the instance split and every factor draw.
    val_instances_per_class : int, default 0
        Validation instances per class, disjoint from the training ones (``split == "val"`` rows).
    val_views_per_instance : int, optional
        Views per validation instance; default ``views_per_instance``.
    batch_size : int, default 64
        Scenes per ``renderer.render`` call (one progress step each).
    progress : callable(what, done, total), optional
        :data:`weakspot.progress.Progress`, called as ``progress("render", done, total)`` after each batch;
        without it a tqdm bar is shown.

    Returns
    -------
    images : (n, H, W, 3) uint8
    table : pandas.DataFrame
        One row per image, in image order: ``class``, ``label``, ``instance``, ``split``, ``view`` and the 12
        factor values (Table 1 order), so every image can be re-rendered from its row.
    """
    import pandas as pd

    if isinstance(batch_size, bool) or not isinstance(batch_size, (int, np.integer)) or batch_size < 1:
        raise ConfigError(f"render_dataset: batch_size must be a positive int, got {batch_size!r}")
    plan = scene_plan(
        classes,
        instances_per_class,
        views_per_instance,
        space,
        seed,
        val_instances_per_class=val_instances_per_class,
        val_views_per_instance=val_views_per_instance,
    )
    total = len(plan)
    if progress is None:
        from weakspot.progress import tqdm_progress

        progress = tqdm_progress("render dataset", unit="img")
    chunks = []
    for start in range(0, total, batch_size):
        batch = plan[start : start + batch_size]
        images = np.asarray(renderer.render([{k: p[k] for k in (*FACTORS, "class", "instance")} for p in batch]))
        if images.ndim != 4 or images.shape[0] != len(batch) or images.shape[-1] != 3 or images.dtype != np.uint8:
            raise RenderError(
                f"render_dataset: the renderer returned {images.dtype} {images.shape} for "
                f"{len(batch)} scenes; expected uint8 ({len(batch)}, H, W, 3)"
            )
        chunks.append(images)
        progress("render", min(start + batch_size, total), total)
    images = np.concatenate(chunks) if chunks else np.empty((0, 0, 0, 3), np.uint8)
    table = pd.DataFrame(
        {
            "class": pd.Series([p["class"] for p in plan], dtype="string"),
            "label": np.array([p["label"] for p in plan], dtype=np.int64),
            "instance": np.array([p["instance"] for p in plan], dtype=np.int64),
            "split": pd.Series([p["split"] for p in plan], dtype="string"),
            "view": np.array([p["view"] for p in plan], dtype=np.int64),
            **{f: np.array([p[f] for p in plan], dtype=np.float64) for f in FACTORS},
        }
    )
    return images, table


def scenes_from_table(table: "Any") -> List[Dict[str, Any]]:
    """The renderer's scene params of each row of a table from :func:`render_dataset` (to re-render an image)."""
    missing = [c for c in (*FACTORS, "class", "instance") if c not in table.columns]
    if missing:
        raise ConfigError(f"scenes_from_table: the table lacks columns {missing}")
    rows = table[[*FACTORS, "class", "instance"]].to_dict("records")
    return [
        {**{f: float(r[f]) for f in FACTORS}, "class": str(r["class"]), "instance": int(r["instance"])} for r in rows
    ]


def contact_sheet(images: np.ndarray, ncols: int, *, pad: int = 2, value: int = 255) -> np.ndarray:
    """Tile ``images`` (n, H, W, 3) into one uint8 image, ``ncols`` per row, with ``pad`` pixels between tiles."""
    images = np.asarray(images)
    if images.ndim != 4 or images.shape[-1] != 3:
        raise ConfigError(f"contact_sheet: expected images of shape (n, H, W, 3), got {images.shape}")
    n, h, w, _ = images.shape
    nrows = -(-n // ncols)
    sheet = np.full((nrows * (h + pad) + pad, ncols * (w + pad) + pad, 3), value, np.uint8)
    for i in range(n):
        r, c = divmod(i, ncols)
        sheet[pad + r * (h + pad) : pad + r * (h + pad) + h, pad + c * (w + pad) : pad + c * (w + pad) + w] = images[i]
    return sheet
