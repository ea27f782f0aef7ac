"""Another draw of a target's split and black box: what GAD's across-seed figures vary (``gad.seeds``).

Caveats first:

* Sec. V-C of seeds/001 repeats each search over 100 random pools of *one* split and *one* SVM; those pools overlap
  (on Phoneme, pools of 250 from about 350 eligible rows), so the interval over them says little about another
  split or another black box. Here the protocol is repeated over split seeds: seed offset ``s`` re-draws the
  target's split (``data.seed`` and ``data.bias.seed`` plus ``s``) and retrains its built-in model (``train.seed``
  plus ``s``) exactly as the ``prepare`` and ``train`` stages do (:func:`weakspot.data.prepare.prepare_target_data`,
  the architecture registries), so the grid search may pick another kernel or C on another split.
* Only a model the pipeline trains can be retrained (:attr:`weakspot.targets.TargetParams.trains`); for a user's
  weights :func:`reseeded_target` raises, and the caller runs the audited model alone.
* Offset 0 reproduces the prepared split; the caller uses the prepared split and the trained model for it, so the
  audited model is the one the ``train`` stage wrote.

Example
-------
>>> from weakspot.config import load_target                            # doctest: +SKIP
>>> _, t = load_target("phoneme", "params.yaml")                        # doctest: +SKIP
>>> clf, split, info = reseeded_target(t, 2, name="phoneme", device="cpu")  # doctest: +SKIP
"""

from __future__ import annotations

from typing import Any, Dict, Tuple

import numpy as np

from weakspot.errors import ConfigError


def reseeded_target(target: Any, offset: int, *, name: str, device: str = "auto") -> Tuple[Any, Any, Dict[str, Any]]:
    """The target's split and black box re-drawn with every seed shifted by ``offset`` (see the module's caveats).

    Parameters
    ----------
    target : weakspot.targets.TargetParams
        The target's validated params (its ``data``, ``model``, ``train`` and ``class_of_interest``).
    offset : int >= 0
        Added to the data's split seed (and bias seed) and to the training seed.
    name : str
        The target's name (names the :class:`~weakspot.gad.datasets.Split`).
    device : str
        Where a built-in torch model trains and runs.

    Returns
    -------
    (classifier, Split, info)
        The retrained model (``predict_proba``, ``n_classes``), the split (its ``info`` says how it was made, with
        ``class_of_interest`` the class code GAD searches), and the model's ``info`` for Table I (kernel, C ...).

    Raises
    ------
    ConfigError
        A negative offset, or a target whose model the pipeline does not train (a user's weights).
    """
    from weakspot.data.prepare import prepare_target_data
    from weakspot.gad.datasets import Split

    if isinstance(offset, bool) or not isinstance(offset, (int, np.integer)) or offset < 0:
        raise ConfigError(f"{name}: seed offset {offset!r} must be an integer >= 0")
    if not getattr(target, "trains", False):
        raise ConfigError(
            f"{name}: the model is the user's ({target.model.kind}), so another split seed cannot "
            "retrain it; run gad.seeds [0] for this target"
        )
    data = target.data.model_copy(deep=True)
    data.seed = int(data.seed) + int(offset)
    if data.bias is not None:
        data.bias.seed = int(data.bias.seed) + int(offset)
    ds, splits, info = prepare_target_data(data, class_of_interest=target.class_of_interest)
    X = np.asarray(ds.X, dtype=np.float64)  # as the prepared Parquet holds them
    tr, te = splits["train"], splits["test"]
    clf, model_info = _train(target, ds, splits, int(target.train.seed) + int(offset), device)
    split = Split(
        name=name,
        X_train=X[tr],
        y_train=ds.y[tr],
        X_test=X[te],
        y_test=ds.y[te],
        feature_names=list(ds.feature_names or []),
        log_mae=bool(info.get("log_mae", True)),
        description=str(info.get("description", "")),
        info={
            **info.get("bias", {}),
            **info,
            "n_train": int(len(tr)),
            "n_test": int(len(te)),
            "seed_offset": int(offset),
        },
        classes=list(ds.classes),
        categories=dict(ds.categories),
    )
    return clf, split, model_info


def _train(target: Any, ds: Any, splits: Dict[str, np.ndarray], seed: int, device: str) -> Tuple[Any, Dict[str, Any]]:
    """Train the target's built-in architecture on the training rows, as the ``train`` stage does."""
    import torch

    from weakspot.models import SklearnClassifier, TorchClassifier, fit_builtin

    tr, val = splits["train"], splits["val"]
    model, record = fit_builtin(
        target.model.arch,
        ds.X[tr],
        ds.y[tr],
        ds.n_classes,
        target.train,
        seed=seed,
        X_val=ds.X[val],
        y_val=ds.y[val],
        device=device,
    )
    if isinstance(model, torch.nn.Module):
        return TorchClassifier(model, n_classes=ds.n_classes, device=device), {"arch": target.model.arch}
    return SklearnClassifier(model, n_classes=ds.n_classes), record["info"]
