"""Models as users ship them, written into a folder: a scikit-learn pipeline pickled and exported with skl2onnx, and a
small torch CNN saved as a state_dict, exported to ONNX and to TorchScript.

The unit tests (tests/models/test_exported_models.py) and the pipeline tests that audit these files through
params.yaml share them. Every function returns the paths it wrote and the fitted model, so a test can compare the
exported model's answers with the original's.
"""

from __future__ import annotations

import warnings
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Dict, Iterator, Optional, Sequence, Tuple

import numpy as np


# --- scikit-learn ------------------------------------------------------------------------------------------------
def text_columns_of(X: Any) -> list:
    """The columns of DataFrame ``X`` that are not numeric (they reach the model as text)."""
    import pandas as pd

    return [str(c) for c in X.columns if not pd.api.types.is_numeric_dtype(X[c])]


def sklearn_pipeline(X: Any, estimator: Any = None) -> Any:
    """An unfitted ``Pipeline``: a ``ColumnTransformer`` (text columns one-hot encoded, dense; numeric columns scaled
    for the default ``LogisticRegression``, passed as they are to another ``estimator``: a tree's thresholds then
    compare the very float32 values an ONNX graph gets) and the estimator; ``X`` is the DataFrame it is fitted on."""
    from sklearn.compose import ColumnTransformer
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import Pipeline
    from sklearn.preprocessing import OneHotEncoder, StandardScaler

    text = text_columns_of(X)
    numeric = [str(c) for c in X.columns if str(c) not in text]
    steps: list = [("num", StandardScaler() if estimator is None else "passthrough", numeric)] if numeric else []
    if text:
        steps.append(("text", OneHotEncoder(handle_unknown="ignore", sparse_output=False), text))
    model = LogisticRegression(max_iter=1000) if estimator is None else estimator
    return Pipeline([("columns", ColumnTransformer(steps)), ("model", model)])


def onnx_initial_types(X: Any) -> list:
    """skl2onnx's initial types for DataFrame ``X``: one ``[None, 1]`` input per column, named by it (float for a
    numeric column, string for a text column), as skl2onnx documents for a ``ColumnTransformer``."""
    from skl2onnx.common.data_types import FloatTensorType, StringTensorType

    text = set(text_columns_of(X))
    return [(str(c), StringTensorType([None, 1]) if str(c) in text else FloatTensorType([None, 1])) for c in X.columns]


@contextmanager
def _tree_missing_flags_as_ints() -> Iterator[None]:
    """skl2onnx 1.20 writes a HistGradientBoosting tree's ``nodes_missing_value_tracks_true`` as NumPy uint8 for its
    splits and Python ``False`` for its leaves, a mix onnx 1.23's ``make_attribute`` refuses ("Expected an int, got a
    boolean"); while converting, every flag is passed as an int (the NaN routing is kept: the graph answers as the
    model does on rows with missing values)."""
    from skl2onnx.common import tree_ensemble

    original = tree_ensemble.add_node

    def add_node(*args: Any, nodes_missing_value_tracks_true: Any = 0, **kwargs: Any) -> Any:
        return original(*args, nodes_missing_value_tracks_true=int(nodes_missing_value_tracks_true), **kwargs)

    tree_ensemble.add_node = add_node
    try:
        yield
    finally:
        tree_ensemble.add_node = original


def write_sklearn_onnx(
    folder: "str | Path",
    X: Any,
    y: Any,
    *,
    model: Any = None,
    estimator: Any = None,
    zipmap: bool = False,
    stem: str = "model",
) -> Dict[str, Any]:
    """Fit a scikit-learn pipeline on DataFrame ``X`` (or take the fitted ``model``), pickle it to ``<stem>.pkl`` and
    export it with skl2onnx to ``<stem>.onnx`` (one input per column; ``zipmap=True`` keeps skl2onnx's default list
    of per-row dicts as the probability output).

    Returns
    -------
    dict
        ``{"pickle": Path, "onnx": Path, "model": the fitted pipeline}``.
    """
    import joblib
    from skl2onnx import convert_sklearn

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    if model is None:
        model = sklearn_pipeline(X, estimator).fit(X, y)
    options = None if zipmap else {id(model): {"zipmap": False}}
    with _tree_missing_flags_as_ints():
        graph = convert_sklearn(model, initial_types=onnx_initial_types(X), options=options, target_opset=17)
    out = {"pickle": folder / f"{stem}.pkl", "onnx": folder / f"{stem}.onnx", "model": model}
    joblib.dump(model, out["pickle"])
    out["onnx"].write_bytes(graph.SerializeToString())
    return out


# --- torch ---------------------------------------------------------------------------------------------------------
def small_cnn(n_classes: int = 10, input_shape: Sequence[int] = (1, 8, 8), seed: int = 0) -> Any:
    """A small CNN (conv, ReLU, pool, linear) for images ``input_shape``; usable as a ``kind: torch`` factory
    (``tests.user_models:small_cnn``)."""
    import torch

    c, h, w = (int(s) for s in input_shape)
    torch.manual_seed(int(seed))
    return torch.nn.Sequential(
        torch.nn.Conv2d(c, 8, 3, padding=1),
        torch.nn.ReLU(),
        torch.nn.MaxPool2d(2),
        torch.nn.Flatten(),
        torch.nn.Linear(8 * (h // 2) * (w // 2), n_classes),
    ).eval()


def fit_briefly(module: Any, X: np.ndarray, y: np.ndarray, *, epochs: int = 30, lr: float = 0.01, seed: int = 0) -> Any:
    """Train ``module`` on ``(X, y)`` with Adam, full batch, for ``epochs`` steps; returns it in eval mode."""
    import torch

    torch.manual_seed(int(seed))
    opt = torch.optim.Adam(module.parameters(), lr=lr)
    xt, yt = torch.as_tensor(np.asarray(X, np.float32)), torch.as_tensor(np.asarray(y, np.int64))
    module.train()
    for _ in range(int(epochs)):
        opt.zero_grad()
        torch.nn.functional.cross_entropy(module(xt), yt).backward()
        opt.step()
    return module.eval()


def write_torch_exports(
    folder: "str | Path",
    module: Any = None,
    *,
    input_shape: Sequence[int] = (1, 8, 8),
    n_classes: int = 10,
    fixed_batch: Optional[int] = None,
    dynamo: bool = False,
    stem: str = "cnn",
) -> Dict[str, Any]:
    """Save ``module`` (default :func:`small_cnn`) as a state_dict ``<stem>.pt``, an ONNX graph ``<stem>.onnx`` (input
    ``image``, output ``logits``; a dynamic batch dimension unless ``fixed_batch``; ``dynamo=True``: torch's default
    exporter, else the faster TorchScript-based one) and a TorchScript archive ``<stem>.ts.pt``.

    Returns
    -------
    dict
        ``{"state_dict": Path, "onnx": Path, "torchscript": Path, "module": the module}``.
    """
    import torch

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    module = (small_cnn(n_classes, input_shape) if module is None else module).eval()
    out = {
        "state_dict": folder / f"{stem}.pt",
        "onnx": folder / f"{stem}.onnx",
        "torchscript": folder / f"{stem}.ts.pt",
        "module": module,
    }
    torch.save(module.state_dict(), out["state_dict"])
    example = torch.zeros((fixed_batch or 2, *input_shape))
    dynamic = None if fixed_batch else {"image": {0: "batch"}}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the TorchScript-based exporter and torch.jit are deprecated
        kwargs: Dict[str, Any] = {"dynamo": dynamo, "verbose": False}
        if dynamo and dynamic:
            kwargs["dynamic_shapes"] = ({0: torch.export.Dim("batch")},)
        elif dynamic:
            kwargs["dynamic_axes"] = dynamic
        torch.onnx.export(
            module, (example,), str(out["onnx"]), input_names=["image"], output_names=["logits"], **kwargs
        )
        torch.jit.save(torch.jit.script(module), str(out["torchscript"]))
    return out


def digits_images(n: int = 300, seed: int = 0) -> Tuple[np.ndarray, np.ndarray]:
    """``n`` of scikit-learn's 8x8 digits as ``(n, 1, 8, 8)`` float32 in [0, 1] and their labels."""
    from sklearn.datasets import load_digits

    d = load_digits()
    idx = np.random.default_rng(seed).permutation(len(d.images))[:n]
    return (d.images[idx] / 16.0).astype(np.float32)[:, None], d.target[idx].astype(np.int64)
