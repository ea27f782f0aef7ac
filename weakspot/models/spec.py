"""A user's model from params.yaml: ``kind``, ``factory: "pkg.module:fn"``, ``weights: path``.

Caveats first, about safety:

- torch weights are read with ``torch.load(weights_only=True)`` as a ``state_dict``: no code in the file runs.
  A file holding a whole pickled module is refused with a message saying to save ``module.state_dict()``.
- scikit-learn models have no safe format: unpickling runs code. They are read only from the one path the user
  names in ``weights`` (never from a searched or downloaded location), and the error and docs say so.
- A factory is imported with ``importlib``: it runs the user's own module, which is what naming it asks for.
- ONNX graphs (``kind: onnx``, run by onnxruntime) and TorchScript archives (``kind: torchscript``,
  ``torch.jit.load``) hold no Python code and need no factory: see :mod:`weakspot.models.exported`.

A factory is called with whichever of the keyword arguments ``n_classes`` and ``input_shape`` its signature
accepts (a factory with ``**kwargs`` gets both), so ``def build(): ...`` and ``def build(n_classes): ...`` both work.
"""

from __future__ import annotations

import importlib
import inspect
import os
from pathlib import Path
from typing import Any, Callable, Literal, Mapping, Optional, Sequence

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from weakspot.errors import ConfigError, ModelError


class ModelSpec(BaseModel):
    """Where the model under audit comes from.

    Parameters
    ----------
    kind : {"builtin", "torch", "sklearn", "callable", "onnx", "torchscript"}, default "builtin"
        ``builtin``: an architecture of :data:`weakspot.models.ARCHS` (trained by the ``train_target`` stage unless
        ``weights`` is given); ``torch``: ``factory`` builds an ``nn.Module`` (white-box); ``sklearn``: a fitted
        estimator from ``weights`` (a pickle/joblib file) or returned by ``factory``; ``callable``: ``factory``
        returns a function ``x -> probabilities`` (black-box); ``onnx``: an ONNX graph in ``weights``, run by
        onnxruntime (black-box); ``torchscript``: a ``torch.jit.save`` archive in ``weights`` (white-box).
    factory : str, optional
        ``"pkg.module:function"``.
    weights : str, optional
        A ``state_dict`` file (torch, builtin), a pickle/joblib file (sklearn), a ``.onnx`` graph (onnx) or a
        TorchScript archive (torchscript).
    arch : str, optional
        For ``builtin``: ``lenet`` (default) or ``mlp``; not read for other kinds.
    n_classes : int, optional
        When given, must equal the data set's number of classes (a guard against auditing on the wrong data).
    outputs : {"logits", "probs"}, default "logits"
        What a torch module (or TorchScript module, or single-output ONNX graph) returns; an ONNX classifier graph's
        probability output (skl2onnx) is probabilities whatever this says.

    Examples
    --------
    >>> ModelSpec(kind="torch", factory="mypkg.nets:build", weights="models/net.pt").kind
    'torch'
    """

    model_config = ConfigDict(extra="forbid")

    kind: Literal["torch", "sklearn", "callable", "builtin", "onnx", "torchscript"] = "builtin"
    factory: Optional[str] = Field(None, description="'pkg.module:fn' building the model (torch, sklearn, callable)")
    weights: Optional[str] = Field(
        None, description="state_dict (torch, builtin), pickle/joblib (sklearn), .onnx (onnx) or TorchScript path"
    )
    arch: Optional[str] = Field(None, description="for kind=builtin: lenet | mlp (default lenet)")
    n_classes: Optional[int] = Field(None, ge=2, description="expected number of classes (checked against the data)")
    outputs: Literal["logits", "probs"] = "logits"

    @model_validator(mode="after")
    def _fields_fit_kind(self) -> "ModelSpec":
        if self.factory is not None and (self.factory.count(":") != 1 or not all(self.factory.split(":"))):
            raise ValueError(f"factory {self.factory!r} must look like 'pkg.module:function'")
        if self.kind == "builtin":
            if self.factory is not None:
                raise ValueError("kind 'builtin' takes arch, not factory (use kind 'torch' for your own module)")
            if self.arch is None:
                self.arch = "lenet"
        else:
            if self.kind in ("torch", "callable") and self.factory is None:
                raise ValueError(f"kind {self.kind!r} needs factory: 'pkg.module:function'")
            if self.kind == "sklearn" and (self.factory is None) == (self.weights is None):
                raise ValueError("kind 'sklearn' needs exactly one of weights (a pickle/joblib path) or factory")
            if self.kind == "callable" and self.weights is not None:
                raise ValueError("kind 'callable' takes no weights (the factory returns the ready function)")
            if self.kind in ("onnx", "torchscript") and (self.weights is None or self.factory is not None):
                raise ValueError(f"kind {self.kind!r} takes weights (the exported file) and no factory")
        return self


def resolve_factory(factory: Optional[str]) -> Callable[..., Any]:
    """Import ``"pkg.module:attr"`` and return the attribute; a ModelError names what did not resolve."""
    if not isinstance(factory, str) or factory.count(":") != 1 or not all(factory.split(":")):
        raise ModelError(f"factory {factory!r} must look like 'pkg.module:function'")
    module_name, attr_path = factory.split(":")
    try:
        obj: Any = importlib.import_module(module_name)
    except ImportError as exc:
        raise ModelError(
            f"factory {factory!r}: cannot import module {module_name!r} ({exc}); is it on PYTHONPATH?"
        ) from None
    for part in attr_path.split("."):
        if not hasattr(obj, part):
            raise ModelError(f"factory {factory!r}: module {module_name!r} has no attribute {attr_path!r}")
        obj = getattr(obj, part)
    if not callable(obj):
        raise ModelError(f"factory {factory!r}: {attr_path!r} is a {type(obj).__name__}, not callable")
    return obj


def call_factory(fn: Callable[..., Any], factory: Optional[str], *, n_classes: int, input_shape: Sequence[int]) -> Any:
    """Call ``fn`` with the keyword arguments among ``n_classes``/``input_shape`` that its signature accepts."""
    offered = {"n_classes": int(n_classes), "input_shape": tuple(int(s) for s in input_shape)}
    try:
        params: Mapping[str, inspect.Parameter] = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        params = {}
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        kwargs = offered
    else:
        kwargs = {k: v for k, v in offered.items() if k in params}
    try:
        return fn(**kwargs)
    except TypeError as exc:
        raise ModelError(f"factory {factory!r} could not be called with {sorted(kwargs)}: {exc}") from None


def _weights_path(weights: str) -> Path:
    path = Path(weights).expanduser()
    if not path.is_file():
        raise ModelError(f"model weights file not found: {path} (weights: {weights!r})")
    return path


def load_state_dict(module: Any, weights: "str | os.PathLike", *, source: str) -> Any:
    """Load a ``state_dict`` file into ``module`` with ``weights_only=True``; a ModelError explains any mismatch."""
    import pickle

    import torch

    path = _weights_path(str(weights))
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except (pickle.UnpicklingError, RuntimeError, EOFError, ValueError) as exc:
        raise ModelError(
            f"{source}: cannot load {path} with torch.load(weights_only=True): {str(exc).splitlines()[0]}; "
            "save the weights with torch.save(module.state_dict(), path), not the whole module"
        ) from None
    if isinstance(state, dict) and "state_dict" in state and isinstance(state["state_dict"], dict):
        state = state["state_dict"]  # a checkpoint dict wrapping the state_dict
    if not isinstance(state, dict):
        raise ModelError(f"{source}: {path} holds a {type(state).__name__}, not a state_dict")
    try:
        module.load_state_dict(state, strict=True)
    except RuntimeError as exc:
        raise ModelError(f"{source}: {path} does not fit the module: {str(exc).strip()}") from None
    return module


def load_model(spec: ModelSpec, *, n_classes: int, input_shape: Sequence[int], device: Any = "auto") -> Any:
    """Build the :class:`~weakspot.models.Classifier` a :class:`ModelSpec` describes.

    Parameters
    ----------
    spec : ModelSpec, or a dict or pydantic model with its fields
    n_classes : int
        The data set's number of classes; every output is checked against it.
    input_shape : sequence of int
        Shape of one input, e.g. ``(1, 8, 8)`` or ``(5,)``; passed to builtin builders and factories.
    device : {"auto", "cpu", "cuda"}, default "auto"
        Where a torch model runs.

    Returns
    -------
    TorchClassifier (kinds builtin, torch, torchscript), SklearnClassifier, CallableClassifier or OnnxClassifier

    Raises
    ------
    ModelError
        Bad factory string, module or attribute not found, missing or unfitting weights file, a factory that
        returns the wrong kind of object, ``spec.n_classes`` differing from ``n_classes``, a file that is not an
        ONNX graph or TorchScript archive, or an ONNX graph whose input or output does not fit the data.

    Examples
    --------
    >>> clf = load_model(ModelSpec(kind="builtin", arch="lenet"), n_classes=10, input_shape=(1, 8, 8), device="cpu")
    >>> clf.n_classes
    10
    """
    from weakspot.models.adapters import CallableClassifier, SklearnClassifier, TorchClassifier

    if not isinstance(spec, ModelSpec):  # a dict, or another pydantic model with the same fields
        data = spec.model_dump() if hasattr(spec, "model_dump") else dict(spec)
        try:
            spec = ModelSpec.model_validate(data)
        except ValidationError as exc:
            raise ConfigError(f"model spec {data!r} is not valid: {exc.errors()[0]['msg']}") from None
    if spec.n_classes is not None and spec.n_classes != n_classes:
        raise ModelError(f"model n_classes is {spec.n_classes} but the data set has {n_classes} classes")
    if spec.kind == "builtin":
        from weakspot.models.archs import ARCHS

        module = ARCHS.get(spec.arch or "lenet")(tuple(input_shape), int(n_classes))
        source = f"builtin model {spec.arch!r}"
        if spec.weights is not None:
            load_state_dict(module, spec.weights, source=source)
        return TorchClassifier(module, n_classes=n_classes, device=device, outputs=spec.outputs)
    if spec.kind == "torch":
        import torch

        module = call_factory(resolve_factory(spec.factory), spec.factory, n_classes=n_classes, input_shape=input_shape)
        if not isinstance(module, torch.nn.Module):
            raise ModelError(f"factory {spec.factory!r} returned {type(module).__name__}, expected a torch.nn.Module")
        if spec.weights is not None:
            load_state_dict(module, spec.weights, source=f"factory {spec.factory!r}")
        return TorchClassifier(module, n_classes=n_classes, device=device, outputs=spec.outputs)
    if spec.kind in ("onnx", "torchscript"):
        from weakspot.models import exported

        assert spec.weights is not None  # the validator
        if spec.kind == "onnx":
            return exported.load_onnx(
                spec.weights, n_classes=n_classes, input_shape=input_shape, outputs=spec.outputs, device=device
            )
        module = exported.load_torchscript(spec.weights)
        return TorchClassifier(module, n_classes=n_classes, device=device, outputs=spec.outputs)
    if spec.kind == "sklearn":
        if spec.weights is not None:
            # Unpickling runs arbitrary code, and scikit-learn has no safe format. We therefore read only the file
            # the user named explicitly in params.yaml (their own artifact), never a path found or fetched for them.
            path = _weights_path(spec.weights)
            try:
                import joblib

                estimator = joblib.load(path)
            except Exception as exc:  # joblib/pickle raise many kinds for a bad file  # noqa: BLE001
                raise ModelError(f"sklearn model {path}: cannot unpickle it with joblib: {exc}") from None
        else:
            estimator = call_factory(
                resolve_factory(spec.factory), spec.factory, n_classes=n_classes, input_shape=input_shape
            )
        return SklearnClassifier(estimator, n_classes=n_classes)
    # callable
    fn = call_factory(resolve_factory(spec.factory), spec.factory, n_classes=n_classes, input_shape=input_shape)
    if not callable(fn):
        raise ModelError(
            f"factory {spec.factory!r} returned {type(fn).__name__}, expected a function x -> probabilities"
        )
    return CallableClassifier(fn, n_classes=n_classes)
