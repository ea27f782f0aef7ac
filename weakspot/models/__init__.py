"""Models under audit: one protocol (``predict_proba``), adapters, built-in architectures, training, loading.

Caveats first: every probability output is checked (:func:`check_probabilities`); only torch models are
white-box; pickled scikit-learn models are read only from the path the user names (see :mod:`weakspot.models.spec`).

Examples
--------
>>> from weakspot.models import ModelSpec, load_model
>>> clf = load_model(ModelSpec(), n_classes=10, input_shape=(1, 8, 8), device="cpu")
>>> type(clf).__name__
'TorchClassifier'
"""

from weakspot.models.adapters import CallableClassifier, SklearnClassifier, TorchClassifier
from weakspot.models.archs import ARCHS, MLP, PAPER_LR, LeNet, Normalize, register_arch
from weakspot.models.sklearn_archs import SKLEARN_ARCHS, register_sklearn_arch
from weakspot.models.protocol import Classifier, WhiteBoxClassifier, check_probabilities, is_white_box
from weakspot.models.spec import ModelSpec, load_model, load_state_dict, resolve_factory
from weakspot.models.train import fit_builtin, train_torch_classifier

__all__ = [
    "ARCHS",
    "CallableClassifier",
    "SKLEARN_ARCHS",
    "Classifier",
    "LeNet",
    "MLP",
    "ModelSpec",
    "Normalize",
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
