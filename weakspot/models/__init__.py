"""Models under audit: one protocol (``predict_proba``), adapters, built-in architectures, training, loading.

Caveats first: every probability output is checked (:func:`check_probabilities`); only torch models (a TorchScript
module too) are white-box, an ONNX graph is a black box; pickled scikit-learn models are read only from the path the
user names (see :mod:`weakspot.models.spec`).

Examples
--------
>>> from weakspot.models import ModelSpec, load_model
>>> clf = load_model(ModelSpec(), n_classes=10, input_shape=(1, 8, 8), device="cpu")
>>> type(clf).__name__
'TorchClassifier'
"""

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from weakspot.models.adapters import CallableClassifier, SklearnClassifier, TorchClassifier
    from weakspot.models.archs import ARCHS, PAPER_LR, register_arch
    from weakspot.models.exported import OnnxClassifier
    from weakspot.models.nets import MLP, LeNet, Normalize
    from weakspot.models.protocol import Classifier, WhiteBoxClassifier, check_probabilities, is_white_box
    from weakspot.models.sklearn_archs import SKLEARN_ARCHS, register_sklearn_arch
    from weakspot.models.spec import ModelSpec, load_model, load_state_dict, resolve_factory
    from weakspot.models.train import fit_builtin, train_torch_classifier

#: Each name's module, imported when the name is first asked for (PEP 562): validating params.yaml (which reads
#: :class:`ModelSpec` and the architectures' names) then imports neither torch nor scikit-learn.
_WHERE = {
    "CallableClassifier": "adapters",
    "SklearnClassifier": "adapters",
    "TorchClassifier": "adapters",
    "ARCHS": "archs",
    "PAPER_LR": "archs",
    "register_arch": "archs",
    "OnnxClassifier": "exported",
    "LeNet": "nets",
    "MLP": "nets",
    "Normalize": "nets",
    "Classifier": "protocol",
    "WhiteBoxClassifier": "protocol",
    "check_probabilities": "protocol",
    "is_white_box": "protocol",
    "SKLEARN_ARCHS": "sklearn_archs",
    "register_sklearn_arch": "sklearn_archs",
    "ModelSpec": "spec",
    "load_model": "spec",
    "load_state_dict": "spec",
    "resolve_factory": "spec",
    "fit_builtin": "train",
    "train_torch_classifier": "train",
}


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(f"{__name__}.{_WHERE[name]}"), name)
    globals()[name] = value
    return value


def __dir__() -> list:
    return sorted(set(globals()) | set(_WHERE))


__all__ = [
    "ARCHS",
    "CallableClassifier",
    "SKLEARN_ARCHS",
    "Classifier",
    "LeNet",
    "MLP",
    "ModelSpec",
    "Normalize",
    "OnnxClassifier",
    "PAPER_LR",
    "SklearnClassifier",
    "TorchClassifier",
    "WhiteBoxClassifier",
    "check_probabilities",
    "is_white_box",
    "load_model",
    "load_state_dict",
    "register_arch",
    "register_sklearn_arch",
    "resolve_factory",
    "fit_builtin",
    "train_torch_classifier",
]
