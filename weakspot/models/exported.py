"""Exported models: an ONNX graph run by onnxruntime (black-box) and a TorchScript module (white-box).

Caveats first:

- An ONNX graph is a black box: onnxruntime gives no gradients, so the white-box methods do not run on it (the report
  says why). Its input name, shape and element type are read from the graph: one tensor of the data's shape (images
  as ``(n, C, H, W)`` float32, as a torch model gets them; a channels-last graph gets them transposed), or, as
  skl2onnx exports a ``ColumnTransformer`` pipeline, one input per table column, each fed by name as ``(n, 1)``
  (numbers as the graph's float or integer type, text as strings; a missing text cell as ``"nan"``, the category skl2onnx exports for it). A graph whose batch
  dimension is fixed is run in chunks of that size.
- Which output holds the answer: the graph's only output, or, for a classifier graph with a label and a probability
  output (skl2onnx, onnxmltools), the probability output (a tensor, or the list of per-row dicts a ZipMap gives),
  which is probabilities whatever ``outputs`` says. A single output is read per ``outputs`` (``logits``: softmaxed,
  ``probs``: as they are), and every answer passes :func:`~weakspot.models.protocol.check_probabilities`.
- A TorchScript file is read with ``torch.jit.load``: it holds a TorchScript program, which runs in torch's
  interpreter, not Python code, and needs no factory. It is a ``torch.nn.Module``, so it is audited as a torch model
  (white-box), wrapped in :class:`~weakspot.models.scripted.ScriptedModule` so that a copy of it trains; a method
  part that hooks a module's layers (HDA's neuron coverage) finds no ``nn.ReLU`` in it, as forward hooks are not
  supported on TorchScript modules.
"""

from __future__ import annotations

import os
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

from weakspot.errors import ConfigError, ModelError
from weakspot.models.protocol import check_probabilities

if TYPE_CHECKING:  # pragma: no cover
    from weakspot.models.adapters import Outputs

#: onnxruntime's element types -> NumPy's (strings are fed as NumPy str arrays)
_NUMPY_TYPES = {
    "tensor(float)": np.float32,
    "tensor(double)": np.float64,
    "tensor(float16)": np.float16,
    "tensor(int64)": np.int64,
    "tensor(int32)": np.int32,
    "tensor(int8)": np.int8,
    "tensor(uint8)": np.uint8,
    "tensor(bool)": np.bool_,
}
#: output names of a classifier graph's probabilities (skl2onnx: ``probabilities`` / ``output_probability``)
_PROBABILITY_NAMES = ("probabilities", "output_probability", "probability", "probs")


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def _existing(weights: "str | os.PathLike") -> Path:
    """The file ``weights`` names (as :mod:`weakspot.models.spec` reads every weights file)."""
    path = Path(weights).expanduser()
    if not path.is_file():
        raise ModelError(f"model weights file not found: {path} (weights: {str(weights)!r})")
    return path


def _dims(shape: Any) -> List[Optional[int]]:
    """A graph's shape with every symbolic or unknown dimension as ``None``."""
    return [d if isinstance(d, int) and d >= 0 else None for d in (shape or [])]


def _shown(dims: Sequence[Optional[int]]) -> str:
    return "[" + ", ".join("N" if d is None else str(d) for d in dims) + "]"


def onnx_session(path: "str | os.PathLike", device: Any = "cpu") -> Any:
    """An ``onnxruntime.InferenceSession`` of the file at ``path`` (CUDA when ``device`` resolves to it and this
    onnxruntime has it; the CPU threads of ``OMP_NUM_THREADS``, the count params.yaml pins)."""
    import onnxruntime as ort

    from weakspot.device import resolve_device

    options = ort.SessionOptions()
    threads = os.environ.get("OMP_NUM_THREADS", "")
    if threads.isdigit() and int(threads) > 0:
        options.intra_op_num_threads = int(threads)
        options.inter_op_num_threads = 1
    providers = ["CPUExecutionProvider"]
    if str(resolve_device(device)).startswith("cuda") and "CUDAExecutionProvider" in ort.get_available_providers():
        providers.insert(0, "CUDAExecutionProvider")
    try:
        return ort.InferenceSession(str(path), sess_options=options, providers=providers)
    except Exception as exc:  # onnxruntime raises its own classes (InvalidProtobuf, Fail, ...)  # noqa: BLE001
        raise ModelError(
            f"ONNX model {path}: not a valid ONNX graph that onnxruntime can load ({_first_line(exc)})"
        ) from None


def _numbers(values: Any, kind: str, graph: str, name: str) -> np.ndarray:
    """``values`` as the element type ``kind`` of the graph's input ``name``; a missing value (NaN) cannot reach an
    integer or boolean input (NumPy would turn it into an arbitrary number): a ModelError names the input."""
    dtype = _NUMPY_TYPES.get(kind, np.float32)
    if not np.issubdtype(dtype, np.floating):
        arr = np.asarray(values)
        if arr.dtype.kind in "fc" and np.isnan(arr).any() or arr.dtype == object and _has_missing(arr):
            raise ModelError(
                f"{graph}: the graph's input {name!r} takes {kind}, which cannot hold a missing value, but the data "
                "have missing values there; export that input as a float type (skl2onnx: FloatTensorType)"
            )
    return np.asarray(values, dtype=dtype)


def _has_missing(arr: np.ndarray) -> bool:
    """Whether an object array holds a missing value (None or NaN)."""
    return any(v is None or (isinstance(v, float) and v != v) for v in arr.ravel().tolist())


class OnnxClassifier:
    """Black-box adapter for an ONNX graph run by an ``onnxruntime.InferenceSession``.

    Parameters
    ----------
    session : onnxruntime.InferenceSession
    n_classes : int
        The data set's number of classes; the graph's output must give one probability (or logit) per class.
    outputs : {"logits", "probs"}, default "logits"
        What a graph with a single output returns (a classifier graph's probability output is probabilities).
    batch_size : int, default 512
        Rows per run when the graph's batch dimension is dynamic.
    name : str, optional
        Names the model in messages (default: the graph's file name or "graph").

    Examples
    --------
    >>> import numpy as np
    >>> from weakspot.models.exported import OnnxClassifier  # doctest: +SKIP
    >>> clf = OnnxClassifier(onnxruntime.InferenceSession("model.onnx"), n_classes=2)  # doctest: +SKIP
    >>> clf.predict_proba(np.zeros((3, 4), np.float32)).shape  # doctest: +SKIP
    (3, 2)
    """

    def __init__(
        self,
        session: Any,
        *,
        n_classes: int,
        outputs: str = "logits",
        batch_size: int = 512,
        name: Optional[str] = None,
    ):
        from weakspot.models.adapters import _check_batch_size, _check_n_classes

        if not (callable(getattr(session, "run", None)) and callable(getattr(session, "get_inputs", None))):
            raise ModelError(f"OnnxClassifier needs an onnxruntime.InferenceSession, got {type(session).__name__}")
        if outputs not in ("logits", "probs"):
            raise ConfigError(f"outputs must be 'logits' or 'probs', got {outputs!r}")
        self.session = session
        self.n_classes = _check_n_classes(n_classes)
        self.batch_size = _check_batch_size(batch_size)
        self.inputs: List[Tuple[str, List[Optional[int]], str]] = [
            (i.name, _dims(i.shape), i.type) for i in session.get_inputs()
        ]
        self.source = name or "graph"  # the file name, for a person
        self.name = f"OnnxClassifier({self.source})"
        if not self.inputs:
            raise ModelError(f"{self.name}: the graph has no input")
        #: one input per table column (skl2onnx's ColumnTransformer export): fed by column name
        self.per_column = len(self.inputs) > 1 and all(
            len(dims) == 2 and dims[1] in (1, None) for _, dims, _ in self.inputs
        )
        if len(self.inputs) > 1 and not self.per_column:
            raise ModelError(
                f"{self.name}: the graph has {len(self.inputs)} inputs "
                f"({', '.join(n + ' ' + _shown(d) for n, d, _ in self.inputs)}); weakspot feeds one tensor of the "
                "data, or one (n, 1) input per table column"
            )
        if not self.per_column and self.inputs[0][2] == "tensor(string)":
            raise ModelError(f"{self.name}: the graph's one input {self.inputs[0][0]!r} takes strings, not numbers")
        self.output, self.probabilities = self._pick_output(session.get_outputs(), outputs)
        self.outputs = "probs" if self.probabilities else outputs

    # --- the graph's answer ------------------------------------------------------------------------------------
    def _pick_output(self, outs: Sequence[Any], outputs: str) -> Tuple[str, bool]:
        """The output holding the answer and whether it is probabilities; a fixed width other than ``k`` is refused."""
        described = ", ".join(f"{o.name} {o.type}" for o in outs)
        if len(outs) == 1:
            out, probs = outs[0], outputs == "probs" or str(outs[0].type).startswith("seq(map(")
        else:
            maps = [o for o in outs if str(o.type).startswith("seq(map(")]
            named = [o for o in outs if o.name.lower() in _PROBABILITY_NAMES]
            picked = named or maps
            if len(picked) != 1:
                raise ModelError(
                    f"{self.name}: cannot tell which of the graph's outputs ({described}) holds the class "
                    "probabilities; export the classifier with a probability output"
                )
            out, probs = picked[0], True
        dims = _dims(out.shape)
        if str(out.type).startswith("tensor(") and len(dims) == 2 and dims[1] is not None and dims[1] != self.n_classes:
            raise ModelError(
                f"{self.name}: the graph's output {out.name!r} has shape {_shown(dims)}: {dims[1]} values per row, "
                f"but the data have {self.n_classes} classes (one probability per class is needed)"
            )
        return out.name, probs

    def _answer(self, raw: Any, n: int) -> np.ndarray:
        """The chosen output of one run as an ``(n, k)`` float64 array (a ZipMap's dicts placed by class)."""
        if isinstance(raw, list) and (not raw or isinstance(raw[0], dict)):  # ZipMap: one {class: p} per row
            arr = np.zeros((len(raw), self.n_classes), np.float64)
            for i, row in enumerate(raw):
                keys = list(row)
                if len(keys) != self.n_classes:
                    raise ModelError(
                        f"{self.name}: the graph's output {self.output!r} scores {len(keys)} classes "
                        f"({keys[:5]}), but the data have {self.n_classes}"
                    )
                codes = keys if all(isinstance(k, (int, np.integer)) for k in keys) else range(len(keys))
                if set(codes) != set(range(self.n_classes)):
                    codes = range(len(keys))  # labels, not codes: their order in the graph is the classes' order
                arr[i, list(codes)] = [row[k] for k in keys]
            return arr
        arr = np.asarray(raw, dtype=np.float64)
        if arr.ndim != 2 or arr.shape != (n, self.n_classes):
            raise ModelError(
                f"{self.name}: the graph's output {self.output!r} has shape {arr.shape} for {n} rows, expected "
                f"(n, k) = ({n}, {self.n_classes}): one {'probability' if self.probabilities else 'logit'} per class"
            )
        return arr

    # --- the graph's input -------------------------------------------------------------------------------------
    def _tensor(self, x: Any) -> np.ndarray:
        """``x`` as the graph's one input wants it: its element type, its row shape (flattened, or channels-last)."""
        name, dims, kind = self.inputs[0]
        if hasattr(x, "columns"):  # a DataFrame (a table with text columns): numbers only reach one tensor
            import pandas as pd

            text = [str(c) for c in x.columns if not pd.api.types.is_numeric_dtype(x[c])]
            if text:
                raise ModelError(
                    f"{self.name}: the graph takes one numeric tensor {name!r}, but the table has text column(s) "
                    f"{text}; export it with one input per column (skl2onnx: an initial type per column)"
                )
            x = x.to_numpy()
        arr = np.asarray(x)
        n, row = arr.shape[0], tuple(arr.shape[1:])
        want = dims[1:]
        fits = len(want) == len(row) and all(w is None or w == r for w, r in zip(want, row))
        if (
            not fits
            and len(want) == 3
            and len(row) == 3
            and all(w is None or w == r for w, r in zip(want, (row[1], row[2], row[0])))
        ):
            arr, fits = arr.transpose(0, 2, 3, 1), True  # channels-last graph: (n, H, W, C)
        fixed = [int(w) for w in want if w is not None]
        if not fits and want and len(fixed) == len(want) and int(np.prod(fixed)) == int(np.prod(row)):
            arr, fits = arr.reshape((n, *fixed)), True  # the same values in another row shape, e.g. flattened
        if not fits or len(dims) == 0:
            raise ModelError(
                f"{self.name}: the graph's input {name!r} takes shape {_shown(dims)}, but the data's rows have shape "
                f"{row} (a batch is {(n, *row)})"
            )
        return np.ascontiguousarray(_numbers(arr, kind, self.name, name))

    def _columns(self, x: Any) -> Dict[str, np.ndarray]:
        """One ``(n, 1)`` array per graph input, by column name (by position when ``x`` is an array)."""
        names = [n for n, _, _ in self.inputs]
        if hasattr(x, "columns"):
            missing = [c for c in names if c not in x.columns]
            if missing:
                raise ModelError(
                    f"{self.name}: the graph's input(s) {missing} name no column of the data "
                    f"(columns: {[str(c) for c in x.columns][:10]})"
                )
            cols = [x[c].to_numpy() for c in names]
        else:
            arr = np.asarray(x)
            if arr.ndim != 2 or arr.shape[1] != len(names):
                raise ModelError(
                    f"{self.name}: the graph takes {len(names)} column inputs ({names[:10]}), but the data's rows "
                    f"have shape {tuple(arr.shape[1:])}; give the rows as a DataFrame with these columns"
                )
            text = [name for name, _, kind in self.inputs if kind == "tensor(string)"]
            if text:
                raise ModelError(
                    f"{self.name}: the graph's input(s) {text} take text, but the rows came as numbers without "
                    f"column names; give them as a DataFrame with the columns {names[:10]}"
                )
            cols = [arr[:, j] for j in range(arr.shape[1])]
        feed = {}
        for (name, _, kind), col in zip(self.inputs, cols):
            if kind == "tensor(string)":
                # a missing cell as "nan": the category skl2onnx writes for the NaN a scikit-learn encoder saw in fit
                # (str(np.nan)); to a graph that never saw one it is an unknown category, as "" would be
                texts = ["nan" if v is None or (isinstance(v, float) and v != v) else str(v) for v in col.tolist()]
                feed[name] = np.asarray(texts, dtype=str).reshape(-1, 1)
            else:
                try:
                    feed[name] = _numbers(col, kind, self.name, name).reshape(-1, 1)
                except ModelError:
                    raise
                except (TypeError, ValueError):
                    raise ModelError(
                        f"{self.name}: the graph's input {name!r} takes {kind}, but the column holds text "
                        f"(e.g. {col[:3].tolist()})"
                    ) from None
        return feed

    def check_input_shape(self, input_shape: Sequence[int]) -> None:
        """Refuse data whose rows cannot reach the graph: ``input_shape`` is one row's shape."""
        if self.per_column:
            if len(input_shape) != 1 or input_shape[0] < len(self.inputs):
                raise ModelError(
                    f"{self.name}: the graph takes {len(self.inputs)} column inputs, but the data's rows have shape "
                    f"{tuple(input_shape)}"
                )
            return
        self._tensor(np.zeros((1, *input_shape), np.float32))

    # --- the classifier protocol -------------------------------------------------------------------------------
    def _run(self, feed: Dict[str, np.ndarray], n: int) -> np.ndarray:
        batch = self.inputs[0][1][0] if self.inputs[0][1] else None
        step = self.batch_size if batch is None else batch
        chunks = []
        for start in range(0, n, step):
            part = {k: v[start : start + step] for k, v in feed.items()}
            m = len(next(iter(part.values())))
            if batch is not None and m < batch:  # a fixed batch: pad the last chunk with its last row
                part = {k: np.concatenate([v, np.repeat(v[-1:], batch - m, axis=0)]) for k, v in part.items()}
            try:
                (raw,) = self.session.run([self.output], part)
            except Exception as exc:  # onnxruntime's own classes (InvalidArgument, Fail, ...)  # noqa: BLE001
                shapes = {k: tuple(v.shape) for k, v in part.items()}
                raise ModelError(f"{self.name}: onnxruntime could not run the graph on {shapes}: {exc}") from None
            chunks.append(self._answer(raw, len(raw) if isinstance(raw, list) else len(np.asarray(raw)))[:m])
        return np.concatenate(chunks) if chunks else np.zeros((0, self.n_classes))

    def predict_proba(self, x: Any) -> np.ndarray:
        """``(n, k)`` checked probabilities of the graph for ``x`` (an array, or a table's DataFrame)."""
        n = len(x)
        feed = self._columns(x) if self.per_column else {self.inputs[0][0]: self._tensor(x)}
        out = self._run(feed, n)
        if not self.probabilities:
            z = out - out.max(axis=1, keepdims=True) if len(out) else out
            e = np.exp(z)
            out = e / e.sum(axis=1, keepdims=True)
        return check_probabilities(out, n, self.n_classes, self.name)

    def predict(self, x: Any) -> np.ndarray:
        return self.predict_proba(x).argmax(axis=1).astype(np.int64)

    @property
    def feature_names_in_(self) -> Optional[List[str]]:
        """The table columns a per-column graph reads (so :func:`weakspot.models.table.for_data` gives it a
        DataFrame), else None."""
        return [n for n, _, _ in self.inputs] if self.per_column else None

    def __repr__(self) -> str:
        return f"{self.name}(n_classes={self.n_classes}, output={self.output!r}, outputs={self.outputs!r})"


def load_onnx(
    weights: "str | os.PathLike",
    *,
    n_classes: int,
    input_shape: Optional[Sequence[int]] = None,
    outputs: str = "logits",
    device: Any = "cpu",
) -> OnnxClassifier:
    """The :class:`OnnxClassifier` of the graph in ``weights``; with ``input_shape``, data whose rows do not fit the
    graph's input are refused here, before anything runs."""
    path = _existing(weights)
    clf = OnnxClassifier(onnx_session(path, device), n_classes=n_classes, outputs=outputs, name=Path(path).name)
    if input_shape is not None:
        clf.check_input_shape(tuple(int(s) for s in input_shape))
    return clf


def load_torchscript(weights: "str | os.PathLike") -> Any:
    """The ``torch.jit.ScriptModule`` saved in ``weights`` (``torch.jit.save``), on the CPU, as a
    :class:`~weakspot.models.scripted.ScriptedModule` (a copy of it can be trained)."""
    import torch

    from weakspot.models.scripted import ScriptedModule

    path = _existing(weights)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)  # torch.jit is deprecated in favour of torch.export
            return ScriptedModule(torch.jit.load(str(path), map_location="cpu"))
    except (RuntimeError, ValueError, OSError) as exc:
        raise ModelError(
            f"TorchScript model {path}: not a TorchScript archive ({_first_line(exc)}); save one with "
            "torch.jit.save(torch.jit.script(model), path) or torch.jit.trace; a state_dict needs kind 'torch' "
            "and its factory"
        ) from None


def exported_classifier(model: Any, n_classes: int, device: Any = "auto", outputs: Outputs = "logits") -> Any:
    """The classifier of an exported model given from Python (``weakspot.audit``), or None for any other object: a
    path to a ``.onnx`` graph or a ``.pt``/``.pth`` TorchScript archive, an ``onnxruntime.InferenceSession``, or a
    ``torch.jit.ScriptModule`` (as a :class:`~weakspot.models.scripted.ScriptedModule`: white-box). ``outputs``: what
    a single output holds, ``logits`` (softmaxed) or ``probs`` (taken as they are), as params.yaml's ``outputs:``."""
    import torch

    from weakspot.models.adapters import TorchClassifier
    from weakspot.models.scripted import ScriptedModule

    if isinstance(model, OnnxClassifier):
        return model
    if isinstance(model, torch.jit.ScriptModule):
        return TorchClassifier(ScriptedModule(model), n_classes=n_classes, device=device, outputs=outputs)
    if isinstance(model, (str, os.PathLike)):
        suffix = Path(model).suffix.lower()
        if suffix == ".onnx":
            return load_onnx(model, n_classes=n_classes, device=device, outputs=outputs)
        if suffix in (".pt", ".pth"):
            return TorchClassifier(load_torchscript(model), n_classes=n_classes, device=device, outputs=outputs)
        raise ModelError(
            f"weakspot.audit: the model is the path {str(model)!r}; a path names an ONNX graph (.onnx) or a "
            "TorchScript archive (.pt, .pth); give any other model as a Python object"
        )
    if type(model).__module__.startswith("onnxruntime") and callable(getattr(model, "get_inputs", None)):
        return OnnxClassifier(model, n_classes=n_classes, outputs=outputs, name="InferenceSession")
    return None
