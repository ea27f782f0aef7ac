"""The study's models (paper Sec. 4.3-4.6): trained on the rendered training split, on its first m views per
instance, or on a training set rendered with one factor's range limited (the planted weakness).

Caveats first:

* The models are ``params.study.arch`` from ``weakspot.models.ARCHS``, trained with
  ``weakspot.models.train_torch_classifier`` (``study.epochs``, ``study.lr`` or the paper's, ``study.batch_size``,
  ``study.augment``), each seeded from ``params.seed`` (full: ``seed``, ``_m<m>``: ``seed + 100 + m``, limited:
  ``seed + 200``).
* ``study.full_model`` (a scene target's audited model) stands in for the full model instead of training one; a model
  of m >= the views per instance is the full model itself, not trained again.
* Each model's accuracy is measured on random views of the unseen instances (the standard protocol).

Reference: M. Shu, C. Liu, W. Qiu, A. Yuille, "Identifying Model Weakness with Adversarial Examiner", AAAI 2020
(``seeds/000``): Sec. 4.1 (training), Sec. 4.3 (Table 3, m views), Sec. 4.4 (limited training range).
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

from weakspot.errors import ConfigError, DataError
from weakspot.examine.config import ExamineParams
from weakspot.examine.inputs import ExaminedModel, as_params, class_order, unseen_rows
from weakspot.progress import Progress
from weakspot.scene.dataset import images_to_input


class _ModelSet:
    """The study's models by name, and one row per model for the ``models`` table."""

    def __init__(self, images: np.ndarray, meta, params: ExamineParams, device: Any, progress: Optional[Progress]):
        self.images, self.meta, self.params, self.device, self.progress = images, meta, params, device, progress
        self.classes = class_order(meta)
        self.trained: Dict[str, ExaminedModel] = {}
        self.rows: List[dict] = []
        self.unseen = unseen_rows(meta)
        self.unseen_pos = meta.index.get_indexer(self.unseen.index)

    def add(self, name: str, model: ExaminedModel, role: str, n_train: int) -> None:
        self.trained[name] = model
        row = {"model": name, "role": role, "n_train": int(n_train)}
        if len(self.unseen_pos):  # accuracy on random views of the unseen instances (the standard protocol)
            pv = model.proba(self.images[self.unseen_pos])
            lab = np.array([model.classes.index(c) for c in self.unseen["class"].astype(str)])
            row["unseen_accuracy"] = float((pv.argmax(1) == lab).mean())
            row["unseen_true_class_proba"] = float(pv[np.arange(len(lab)), lab].mean())
        self.rows.append(row)

    def alias(self, name: str, of: str, role: str) -> None:
        """``name`` is the model ``of`` (not trained again)."""
        self.trained[name] = self.trained[of]
        self.rows.append({**next(r for r in self.rows if r["model"] == of), "model": name, "role": role})

    def fit(self, name: str, imgs: np.ndarray, labels: np.ndarray, seed: int, role: str) -> None:
        clf = train_study_model(
            imgs,
            labels,
            len(self.classes),
            self.params,
            seed=seed,
            device=self.device,
            name=name,
            progress=self.progress,
        )
        self.add(name, ExaminedModel(clf=clf, classes=self.classes), role, len(labels))

    def fit_rows(self, name: str, rows, seed: int, role: str) -> None:
        pos = self.meta.index.get_indexer(rows.index)
        self.fit(name, self.images[pos], self.meta["label"].to_numpy()[pos], seed, role)


def train_study_models(
    renderer,
    space,
    images: np.ndarray,
    meta,
    params: ExamineParams,
    *,
    device: Any = "auto",
    progress: Optional[Progress] = None,
    full_model: Optional[Tuple[Any, Sequence[str], str]] = None,
) -> Tuple[Dict[str, ExaminedModel], List[dict]]:
    """The models the enabled experiments examine, by name, and one row per model (``model``, ``role``,
    ``n_train``, ``unseen_accuracy``, ``unseen_true_class_proba``).

    * ``<arch>``: all training images (for the factor order check and strength mode, and m >= the views per
      instance), or ``full_model`` (classifier, classes, target name) when given;
    * ``<arch>_m<m>``: the first m views of each training instance (``study.m_study.values``; Sec. 4.3);
    * ``<arch>_limited``: a training set *rendered* with ``artificial_weakness.factor`` inside ``train_range``
      (Sec. 4.4; see :func:`render_limited_training_set`).
    """
    params = as_params(params)
    st = params.study
    aw, ms = st.artificial_weakness, st.m_study
    models = _ModelSet(images, meta, params, device, progress)
    train = meta[meta["split"].astype(str) == "train"]
    if len(train) == 0:
        raise DataError("metadata: no rows with split == 'train' to train the study's models on")
    arch = st.arch
    view = train["view"] if "view" in train.columns else train.groupby(["class", "instance"]).cumcount()
    m_max = int(view.max()) + 1
    need_full = st.order_check or st.strength or (ms.enabled and any(m >= m_max for m in ms.values))
    if need_full and full_model is not None:
        clf, names, source = full_model
        models.add(
            arch,
            ExaminedModel(clf=clf, classes=list(names)),
            f"full: the audited model of target {source!r} (not retrained)",
            len(train),
        )
    elif need_full:
        models.fit_rows(arch, train, params.seed, "full")
    if ms.enabled:
        for m in ms.values:
            if m >= m_max:  # every view: the full model
                models.alias(f"{arch}_m{m}", arch, "m_study")
            else:
                models.fit_rows(f"{arch}_m{m}", train[view.to_numpy() < m], params.seed + 100 + m, "m_study")
    if aw.enabled:
        lim_images, lim_meta = render_limited_training_set(
            renderer,
            space,
            train,
            aw.factor,
            aw.train_range,
            seed=params.seed,
            chunk=params.render_chunk,
            progress=progress,
        )
        models.fit(f"{arch}_limited", lim_images, lim_meta["label"].to_numpy(), params.seed + 200, "artificial")
    return models.trained, models.rows


def render_limited_training_set(
    renderer,
    space,
    train,
    factor: str,
    train_range: Sequence[float],
    *,
    seed: int = 0,
    chunk: int = 512,
    progress: Optional[Progress] = None,
):
    """Render the training set of the artificial-weakness model (paper Sec. 4.4): one image per row of ``train``
    (same class, instance and view), every factor drawn uniformly from ``space`` with ``factor`` limited to
    ``train_range``; returns ``(images, table)`` with the drawn factors in the table.

    The draws are seeded per (class, instance, view) by ``seed``, so the set is the same on every run and does not
    depend on the row order. A range that does not lie inside the factor's bounds is a ConfigError.
    """
    import zlib

    import pandas as pd

    from weakspot.scene.space import FACTORS, SceneSpace

    lo, hi = (float(v) for v in train_range)
    full_lo, full_hi = space.bounds[factor]
    if not (full_lo <= lo < hi <= full_hi):
        raise ConfigError(
            f"artificial_weakness.train_range: [{lo:g}, {hi:g}] must lie inside {factor}'s bounds "
            f"[{full_lo:g}, {full_hi:g}]"
        )
    limited = SceneSpace({**space.bounds, factor: (lo, hi)})
    rows = train[["class", "label", "instance"]].copy()
    rows["class"] = rows["class"].astype(str)
    view = train["view"].to_numpy() if "view" in train.columns else train.groupby(["class", "instance"]).cumcount()
    rows["view"] = np.asarray(view, dtype=np.int64)
    drawn = []
    for c, i, v in zip(rows["class"], rows["instance"], rows["view"]):
        rng = np.random.default_rng([int(seed), zlib.crc32(f"limited/{factor}/{c}".encode()), int(i), int(v)])
        drawn.append(limited.sample(rng, 1)[0])
    scenes = [{**d, "class": c, "instance": int(i)} for d, c, i in zip(drawn, rows["class"], rows["instance"])]
    out = []
    for a in range(0, len(scenes), chunk):
        out.append(np.asarray(renderer.render(scenes[a : a + chunk])))
        if progress is not None:
            progress(
                f"render the training set with {factor} in [{lo:g}, {hi:g}]", min(a + chunk, len(scenes)), len(scenes)
            )
    images = np.concatenate(out) if out else np.empty((0, 0, 0, 3), np.uint8)
    table = pd.concat(
        [rows.reset_index(drop=True), pd.DataFrame([[d[f] for f in FACTORS] for d in drawn], columns=list(FACTORS))],
        axis=1,
    )
    return images, table


def train_study_model(
    images: np.ndarray,
    labels: np.ndarray,
    n_classes: int,
    params: ExamineParams,
    *,
    seed: int,
    device: Any = "auto",
    name: Optional[str] = None,
    progress: Optional[Progress] = None,
):
    """Build ``params.study.arch`` (weights seeded by ``seed``) and train it on rendered uint8 images with
    ``train_torch_classifier``; returns a ``weakspot.models.TorchClassifier`` in eval mode."""
    import torch

    from weakspot.device import resolve_device
    from weakspot.models import ARCHS, TorchClassifier, train_torch_classifier

    params = as_params(params)
    st = params.study
    name = name or st.arch
    x = images_to_input(images)
    labels = np.asarray(labels)
    if labels.shape != (len(x),) or (len(labels) and (labels.min() < 0 or labels.max() >= n_classes)):
        raise DataError(f"labels: expected {len(x)} class codes in [0, {n_classes}), got shape {labels.shape}")
    dev = resolve_device(device) if isinstance(device, str) else device
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(int(seed))
        module = ARCHS.get(st.arch)(tuple(x.shape[1:]), int(n_classes))

    cb = None
    if progress is not None:

        def cb(what: str, done: int, total: int) -> None:
            progress(f"train {name}: {what}", done, total)

    train_torch_classifier(
        module,
        x,
        labels.astype(np.int64),
        epochs=st.epochs,
        lr=st.learning_rate(),
        batch_size=st.batch_size,
        seed=int(seed),
        device=dev,
        augment=st.augment,
        lr_schedule=st.lr_schedule,
        progress=cb,
    )
    return TorchClassifier(module, n_classes=int(n_classes), device=dev)
