"""A target's data, split for the audit: stratified, or biased as the GAD paper builds its black boxes.

Caveats first:

* With a ``bias`` (seeds/001 Sec. V-A), the test split is a uniform draw of ``n_test`` rows and the training split the
  other rows that pass every rule; the *validation* split is what the bias or the subsampling left out -- not a
  uniform sample, but exactly the region the model never saw in training (its accuracy there is telling).
* For scene data (the rendered objects), the split follows the render: the training instances' views train, the
  held-out instances are divided by instance between validation and test (so test objects are never seen).
* A model weakspot did not train is never judged on its training rows: one source given for it is all evaluation
  data, a torchvision set keeps its official train/test parts, named parts are read as given
  (:mod:`weakspot.data.parts`).
* A class of interest (GAD) is resolved to a class code here: a name, a code, the bias preset's, or code 1.
"""

from __future__ import annotations

from typing import Any, Dict, Optional, Tuple

import numpy as np

from weakspot.data.dataset import Dataset
from weakspot.errors import ConfigError, DataError


def resolve_class(value: Any, classes: list, *, what: str = "class_of_interest") -> int:
    """A class name or code -> its code in ``classes``."""
    if isinstance(value, str) and value in classes:
        return classes.index(value)
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool) and 0 <= int(value) < len(classes):
        return int(value)
    if isinstance(value, str) and value.lstrip("-").isdigit() and 0 <= int(value) < len(classes):
        return int(value)
    raise ConfigError(f"{what} = {value!r} is neither a class name nor a code of {classes}")


def select_features(ds: Dataset, features: Optional[list]) -> Dataset:
    if not features:
        return ds
    if ds.feature_names is None:
        raise ConfigError("data.features selects tabular columns, but the data are images")
    missing = [f for f in features if f not in ds.feature_names]
    if missing:
        raise ConfigError(f"data.features {missing} not found; columns: {', '.join(ds.feature_names)}")
    idx = [ds.feature_names.index(f) for f in features]
    return Dataset(
        X=ds.X[:, idx],
        y=ds.y,
        classes=ds.classes,
        feature_names=list(features),
        provenance=dict(ds.provenance),
        categories={c: v for c, v in ds.categories.items() if c in features},
    )


def scene_dataset(images: np.ndarray, table: Any, scene: Dict[str, Any]) -> Tuple[Dataset, Dict[str, np.ndarray]]:
    """The rendered views as a Dataset (float ``(n, 3, H, W)`` in [0, 1]) and the instance-wise split."""
    from weakspot.scene.dataset import images_to_input

    classes = list(scene["classes"])
    ds = Dataset(
        X=images_to_input(images),
        y=table["label"].to_numpy(np.int64),
        classes=classes,
        image_shape=(3, images.shape[1], images.shape[2]),
        provenance={
            "spec": "scenes",
            "description": (
                f"Blender renders of {len(classes)} procedural object classes at {images.shape[1]} px "
                "(the render stage), m random views per instance"
            ),
        },
    )
    train = np.flatnonzero((table["split"] == "train").to_numpy())
    held = table[table["split"] != "train"]
    val_rows, test_rows = [], []
    for _, g in held.groupby("class", sort=True):
        inst = np.sort(g["instance"].unique())
        first = set(inst[: max(1, len(inst) // 2)].tolist()) if len(inst) > 1 else set()
        in_val = g["instance"].isin(first).to_numpy()
        val_rows.append(g.index.to_numpy()[in_val])
        test_rows.append(g.index.to_numpy()[~in_val] if len(inst) > 1 else g.index.to_numpy())
    splits = {
        "train": train,
        "val": np.sort(np.concatenate(val_rows)).astype(np.int64),
        "test": np.sort(np.concatenate(test_rows)).astype(np.int64),
    }
    if len(splits["val"]) == 0:
        splits["val"] = splits["test"]
    return ds, splits


def _add_unlabelled(
    ds: Dataset, splits: Dict[str, np.ndarray], info: Dict[str, Any], p: Any
) -> Tuple[Dataset, Dict[str, np.ndarray]]:
    """The ``unlabelled`` part appended (:mod:`weakspot.data.unlabelled`), less rows that are training inputs."""
    from weakspot.data.parts import overlapping
    from weakspot.data.unlabelled import with_unlabelled

    ds, rows = with_unlabelled(ds, p.unlabelled, root=p.root)
    dup = overlapping(ds.X, rows, splits["train"])
    if len(dup):
        info["dropped"] = {**info.get("dropped", {}), "unlabelled": int(len(dup))}
        rows = np.setdiff1d(rows, dup)
    return ds, {**splits, "unlabelled": rows}


def prepare_target_data(
    p: Any, *, class_of_interest: Any = None, scene: Any = None, trains: bool = True
) -> Tuple[Dataset, Dict[str, np.ndarray], Dict[str, Any]]:
    """Load and split a target's data (a :class:`~weakspot.targets.DataParams`).

    ``trains``: weakspot trains the model (so it may split the data for training); a model it did not train is
    judged only on rows outside its training part (:mod:`weakspot.data.parts`).

    Returns
    -------
    (Dataset, {"train", "val", "test"} (and "unlabelled" when given) -> index arrays, info)
        ``info`` says how the split was made: ``kind`` (stratified, biased, scene, official, named, evaluation),
        the class of interest's code, the bias rules with their cuts, ``log_mae`` (GAD's LOESS target), what each
        split is (``parts``), rows left out of the evaluation as training inputs (``dropped``), a table's share of
        missing values per column that has any (``missing``, over all its rows) and a description.
    """
    from weakspot.data.parts import EMPTY, check_parts, concat_parts, model_splits
    from weakspot.data.sources import load_source
    from weakspot.data.split import split_dataset

    info: Dict[str, Any] = {"kind": "stratified", "log_mae": True, "trains": bool(trains)}
    if p.kind == "scenes":
        if scene is None:
            raise DataError("data source 'scenes' needs the rendered data set (run the render stage first)")
        ds, splits = scene_dataset(*scene)
        info["kind"] = "scene"
    elif p.named_parts:
        loaded = {
            name: select_features(load_source(spec, label=p.label, root=p.root, size=p.image_size), p.features)
            for name, spec in p.named_parts.items()
        }
        ds, parts = concat_parts(loaded)
        splits, done = model_splits(ds, parts, trains=trains, fractions=p.fractions, seed=p.seed)
        info.update(kind="named", **done)
    else:
        ds = load_source(p.source, label=p.label, root=p.root, size=p.image_size)
        preset = None
        if p.bias is not None and p.bias.preset is not None:
            from weakspot.data.bias import BIAS_PRESETS

            if p.bias.preset not in BIAS_PRESETS:
                raise ConfigError(
                    f"data.bias.preset {p.bias.preset!r} unknown; valid: {', '.join(sorted(BIAS_PRESETS))}"
                )
            preset = BIAS_PRESETS[p.bias.preset]
        if p.bias is not None and not trains:
            raise ConfigError(
                "data.bias builds the training split of a model weakspot trains; this model comes with "
                "its own weights (give its evaluation rows as data.source, or data.train and data.test)"
            )
        features = p.features or (list(preset.features) if preset is not None and preset.features else None)
        ds = select_features(ds, features)
        official = ds.provenance.get("parts")
        if p.bias is None and official:
            n_tr = int(official["train"])
            parts = {"train": np.arange(n_tr, dtype=np.int64), "test": np.arange(n_tr, len(ds), dtype=np.int64)}
            splits, done = model_splits(ds, parts, trains=trains, fractions=p.fractions, seed=p.seed)
            info.update(kind="official", **done)
        elif p.bias is None and trains:
            splits = split_dataset(ds.y, fractions=p.fractions, seed=p.seed)
        elif p.bias is None:
            splits = {"train": EMPTY, "val": EMPTY, "test": np.arange(len(ds), dtype=np.int64)}
            info.update(kind="evaluation", val="none (the model is not weakspot's to tune)")
        else:
            import pandas as pd

            from weakspot.data.bias import BiasRule, biased_split_indices

            if ds.feature_names is None:
                raise ConfigError("data.bias needs tabular data (its rules name feature columns)")
            if p.bias.rules is not None:
                rules = tuple(
                    BiasRule(
                        feature=r.feature,
                        label=resolve_class(r.label, ds.classes, what="bias rule label"),
                        keep=r.keep,
                        threshold=r.threshold,
                        quantile=r.quantile,
                    )
                    for r in p.bias.rules
                )
            else:
                rules = tuple(preset.rules) if preset is not None else ()
            n_train = p.bias.n_train if p.bias.n_train is not None else (preset.n_train if preset else None)
            n_test = p.bias.n_test if p.bias.n_test is not None else (preset.n_test if preset else None)
            if class_of_interest is None and preset is not None:
                class_of_interest = preset.class_of_interest
            X = pd.DataFrame(ds.X.astype(np.float64), columns=ds.feature_names)
            train, test, binfo = biased_split_indices(
                X,
                ds.y,
                class_of_interest=class_of_interest if class_of_interest is not None else 1,
                rules=rules,
                n_train=n_train,
                n_test=n_test,
                seed=p.bias.seed,
                name=p.source,
            )
            rest = np.setdiff1d(np.arange(len(ds)), np.concatenate([train, test]))
            splits = {
                "train": np.asarray(train, np.int64),
                "val": rest.astype(np.int64) if len(rest) else np.asarray(test, np.int64),
                "test": np.asarray(test, np.int64),
            }
            info.update(kind="biased", bias=binfo, val="rows the bias or subsampling left out of training")
            if preset is not None:
                info.update(log_mae=bool(preset.log_mae), description=preset.description, preset=p.bias.preset)
    if getattr(p, "unlabelled", None):
        ds, splits = _add_unlabelled(ds, splits, info, p)
    coi = resolve_class(1 if class_of_interest is None else class_of_interest, ds.classes)
    info["class_of_interest"] = coi
    info["class_of_interest_name"] = ds.classes[coi]
    check_parts(splits, trains=trains, what=p.described)
    info["counts"] = {k: int(len(v)) for k, v in splits.items()}
    if ds.feature_names is not None and not ds.is_image:
        from weakspot.data.missing import missing_shares

        shares = missing_shares(ds.X, ds.feature_names)
        if shares:  # kept as they are: the report's data section says how many
            info["missing"] = {c: round(v, 6) for c, v in shares.items()}
    return ds, splits, info
