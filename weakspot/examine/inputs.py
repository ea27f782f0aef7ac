"""What the examiner is given and what it examines: the checks of its inputs, the classifier as a scene classifier,
the class order and the unseen instance examined per class (paper Sec. 4.1).

Caveats first:

* A classifier here is anything with ``predict_proba(x) -> (n, k)`` taking float32 images ``(n, 3, H, W)`` in
  [0, 1] (:func:`weakspot.scene.dataset.images_to_input` of the rendered uint8 images); ``classes[i]`` names its
  output ``i`` with a scene class.
* Each class is examined on the unseen instance (a row with ``split != "train"``) the model is most sure of (Sec.
  4.1: a validation instance); a class without one is a DataError, never skipped silently.

Reference: M. Shu, C. Liu, W. Qiu, A. Yuille, "Identifying Model Weakness with Adversarial Examiner", AAAI 2020
(``seeds/000``), Sec. 4.1.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Sequence

import numpy as np

from weakspot.errors import ConfigError, DataError, ModelError
from weakspot.examine.config import ExamineParams
from weakspot.scene.dataset import images_to_input

#: The metadata columns every rendered data set has (besides the factors).
REQUIRED_COLUMNS = ("class", "label", "instance", "split")


@dataclass
class ExaminedModel:
    """A classifier (``predict_proba`` on [0, 1] images) and the scene class name of each of its outputs."""

    clf: Any
    classes: List[str]

    def proba(self, images: np.ndarray) -> np.ndarray:
        """Class probabilities ``(n, len(classes))`` of uint8 images ``(n, H, W, 3)``; a wrong shape is a ModelError."""
        p = np.asarray(self.clf.predict_proba(images_to_input(images)), dtype=np.float64)
        if p.shape != (len(images), len(self.classes)):
            raise ModelError(
                f"predict_proba returned shape {p.shape} for {len(images)} images; expected "
                f"({len(images)}, {len(self.classes)}) (one column per name in classes)"
            )
        return p


def check_meta(images: np.ndarray, meta, factor: Optional[str] = None) -> None:
    """Raise DataError unless ``meta`` has :data:`REQUIRED_COLUMNS` (and ``factor``) and ``images`` are uint8
    ``(n, H, W, 3)``, one per row."""
    missing = [c for c in REQUIRED_COLUMNS if c not in meta.columns]
    if factor is not None and factor not in meta.columns:
        missing.append(factor)
    if missing:
        raise DataError(f"metadata: missing column(s) {missing}; need {list(REQUIRED_COLUMNS)} and the factors")
    images = np.asarray(images) if not hasattr(images, "shape") else images
    if images.ndim != 4 or images.shape[-1] != 3 or images.dtype != np.uint8:
        raise DataError(f"images: expected uint8 (n, H, W, 3), got {images.dtype} {tuple(images.shape)}")
    if len(images) != len(meta):
        raise DataError(f"images ({len(images)}) and metadata ({len(meta)} rows) differ in length")


def as_params(params: Any) -> ExamineParams:
    """``params`` as :class:`ExamineParams` (a dict of the ``examine`` section is validated)."""
    if isinstance(params, ExamineParams):
        return params
    from pydantic import ValidationError

    try:
        return ExamineParams.model_validate(params.model_dump() if hasattr(params, "model_dump") else dict(params))
    except ValidationError as exc:
        raise ConfigError(f"examine params are not valid: {exc}") from None


def check_space(space) -> None:
    """Raise ConfigError for a fixed or searched factor of ``space`` that has no bounds."""
    for k in list(space.fixed) + list(space.searched):
        if k not in space.bounds:
            raise ConfigError(f"space: factor {k!r} has no bounds")


def examined_model(clf: Any, classes: Sequence[str]) -> ExaminedModel:
    """``clf`` with its output names, checked: ``predict_proba``, unique names, as many as its outputs."""
    if not callable(getattr(clf, "predict_proba", None)):
        raise ModelError(f"clf: {type(clf).__name__} has no predict_proba")
    classes = [str(c) for c in classes]
    if len(set(classes)) != len(classes):
        raise ConfigError(f"classes: names must be unique, got {classes}")
    n = getattr(clf, "n_classes", None)
    if n is not None and int(n) != len(classes):
        raise ConfigError(f"classes: the classifier has {n} outputs but {len(classes)} class names were given")
    return ExaminedModel(clf=clf, classes=classes)


def class_order(meta) -> List[str]:
    """Class names ordered by their integer label."""
    pairs = meta[["label", "class"]].drop_duplicates().sort_values("label")
    if pairs["label"].duplicated().any() or pairs["class"].duplicated().any():
        raise DataError("metadata: 'label' and 'class' are not one-to-one")
    labels = pairs["label"].to_numpy()
    if not np.array_equal(labels, np.arange(len(labels))):
        raise DataError(f"metadata 'label': expected 0..k-1, got {labels.tolist()}")
    return [str(c) for c in pairs["class"]]


def unseen_rows(meta):
    """The rows of instances the model never trained on (``split != "train"``)."""
    return meta[meta["split"].astype(str) != "train"]


def select_instances(
    clf: Any, classes: Sequence[str], images: np.ndarray, meta, examined: Optional[Sequence[str]] = None
) -> Dict[str, int]:
    """For each examined class, the unseen instance (``split != "train"``) with the highest mean true-class
    probability (paper Sec. 4.1: "the validation instance the model is most sure of"); ties go to the lower id.

    Parameters
    ----------
    clf : classifier with ``predict_proba`` on [0, 1] images ``(n, 3, H, W)``
    classes : list of str
        Scene class name of each output of ``clf``.
    images, meta :
        The rendered data set and its metadata (``class``, ``instance``, ``split``).
    examined : list of str, optional
        The classes to choose for; default every name in ``classes`` that has an unseen instance.
    """
    m = clf if isinstance(clf, ExaminedModel) else examined_model(clf, classes)
    unseen = unseen_rows(meta)
    if len(unseen) == 0:
        raise DataError("metadata: no rows with split != 'train' to choose the examined instances from")
    if examined is None:
        examined = [c for c in m.classes if c in set(unseen["class"].astype(str))]
    rows = unseen[unseen["class"].astype(str).isin(list(examined))]
    pos = meta.index.get_indexer(rows.index)
    p_all = m.proba(images[pos]) if len(pos) else np.zeros((0, len(m.classes)))
    cols = np.array([m.classes.index(c) for c in rows["class"].astype(str)], dtype=np.int64)
    p = p_all[np.arange(len(pos)), cols] if len(pos) else np.zeros(0)
    df = rows[["class", "instance"]].assign(p=p, **{"class": rows["class"].astype(str)})
    df = df.groupby(["class", "instance"])["p"].mean().reset_index()
    out = {}
    for c in examined:
        d = df[df["class"] == c]
        if len(d) == 0:
            raise DataError(f"metadata: class {c!r} has no unseen instance (split != 'train') to examine")
        out[c] = int(d.sort_values(["p", "instance"], ascending=[False, True]).iloc[0]["instance"])
    return out


def worst_recalled(model: ExaminedModel, images: np.ndarray, meta, n: int) -> List[str]:
    """The ``n`` classes of the model (with an unseen instance in the scene data) it recalls worst on the unseen
    renders (``split != "train"``), worst first; ties in the model's order."""
    unseen = unseen_rows(meta)
    names = unseen["class"].astype(str).to_numpy()
    known = np.isin(names, model.classes)
    pos = meta.index.get_indexer(unseen.index[known])
    pred = model.proba(images[pos]).argmax(axis=1) if len(pos) else np.zeros(0, np.int64)
    label = np.array([model.classes.index(c) for c in names[known]], np.int64)
    recall = {c: float((pred[label == k] == k).mean()) for k, c in enumerate(model.classes) if (label == k).any()}
    return sorted(recall, key=lambda c: (recall[c], model.classes.index(c)))[:n]


def examined_classes(
    wanted: "Optional[Sequence[str] | int]", model: ExaminedModel, meta, images: Optional[np.ndarray] = None
) -> List[str]:
    """``wanted`` (checked); an int: that many classes the model recalls worst on the unseen renders, worst first
    (:func:`worst_recalled`, which needs ``images``); None: every class of the model with an unseen instance in the
    scene data, model order."""
    if isinstance(wanted, int):
        if images is None:
            raise ConfigError(f"classes: {wanted} (the worst-recalled classes) needs the rendered images")
        return worst_recalled(model, images, meta, wanted)
    in_scene = set(unseen_rows(meta)["class"].astype(str))
    if wanted is None:
        classes = [c for c in model.classes if c in in_scene]
        if not classes:
            raise DataError(
                f"no class of the model ({model.classes}) has an unseen instance (split != 'train') "
                f"in the scene data (classes there: {sorted(in_scene)})"
            )
        return classes
    unknown = [c for c in wanted if c not in model.classes]
    if unknown:
        raise ConfigError(f"classes: unknown {unknown}; the model knows {model.classes}")
    absent = [c for c in wanted if c not in in_scene]
    if absent:
        raise DataError(f"classes: {absent} have no unseen instance (split != 'train') in the scene data")
    return list(wanted)
