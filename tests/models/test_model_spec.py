"""weakspot.models.spec: ModelSpec validation and load_model for every kind, round trips and failures."""

from __future__ import annotations

import textwrap

import joblib
import numpy as np
import pytest
import torch
from pydantic import ValidationError

from weakspot.errors import ConfigError, ModelError
from weakspot.models import (
    CallableClassifier,
    LeNet,
    ModelSpec,
    SklearnClassifier,
    TorchClassifier,
    load_model,
    resolve_factory,
)


@pytest.fixture
def user_pkg(tmp_path, monkeypatch):
    """An importable module of user factories, as a user's own package would be."""
    (tmp_path / "ws_user_models.py").write_text(
        textwrap.dedent("""
        import numpy as np
        import torch
        from sklearn.linear_model import LogisticRegression

        class Tiny(torch.nn.Module):
            def __init__(self, d, k):
                super().__init__()
                self.fc = torch.nn.Linear(d, k)
            def forward(self, x):
                return self.fc(x.flatten(1))

        def build_tiny(n_classes, input_shape):
            torch.manual_seed(123)
            return Tiny(int(np.prod(input_shape)), n_classes)

        def build_no_args():
            return Tiny(4, 2)

        def fitted_logreg():
            X = np.array([[0.0, 0.0], [1.0, 1.0], [0.1, 0.0], [0.9, 1.0]])
            return LogisticRegression().fit(X, [0, 1, 0, 1])

        def make_fn(n_classes, **kwargs):
            def fn(x):
                return np.full((len(x), n_classes), 1.0 / n_classes)
            return fn

        NOT_CALLABLE = 3
    """)
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    return "ws_user_models"


def test_spec_defaults_and_validation():
    spec = ModelSpec()
    assert spec.kind == "builtin" and spec.arch == "lenet" and spec.outputs == "logits"
    assert ModelSpec(kind="torch", factory="a.b:c").factory == "a.b:c"
    for bad in (
        {"kind": "torch"},  # no factory
        {"kind": "callable"},
        {"kind": "sklearn"},  # neither weights nor factory
        {"kind": "sklearn", "weights": "m.pkl", "factory": "a:b"},
        {"kind": "torch", "factory": "no_colon"},
        {"kind": "builtin", "factory": "a:b"},
        {"kind": "onnx"},
        {"kind": "builtin", "n_classes": 1},
        {"kind": "builtin", "layers": 3},  # unknown key
    ):
        with pytest.raises(ValidationError):
            ModelSpec(**bad)


def test_builtin_state_dict_round_trip_identical_predictions(tmp_path):
    torch.manual_seed(0)
    net = LeNet(in_channels=1, n_classes=10, image_size=8)
    torch.save(net.state_dict(), tmp_path / "lenet.pt")
    x = np.random.default_rng(0).random((20, 1, 8, 8)).astype(np.float32)
    before = TorchClassifier(net, n_classes=10, device="cpu").predict_proba(x)
    clf = load_model(
        ModelSpec(kind="builtin", arch="lenet", weights=str(tmp_path / "lenet.pt")),
        n_classes=10,
        input_shape=(1, 8, 8),
        device="cpu",
    )
    assert isinstance(clf, TorchClassifier)
    assert np.array_equal(clf.predict_proba(x), before)
    # without the weights the fresh model predicts differently: the weights were really loaded
    fresh = load_model(ModelSpec(), n_classes=10, input_shape=(1, 8, 8), device="cpu")
    assert not np.allclose(fresh.predict_proba(x), before)


def test_torch_factory_with_weights_round_trip(tmp_path, user_pkg):
    import importlib

    mod = importlib.import_module(user_pkg)
    net = mod.build_tiny(3, (2, 2))
    with torch.no_grad():
        net.fc.weight.mul_(5.0)  # differs from what the factory builds
    torch.save(net.state_dict(), tmp_path / "tiny.pt")
    spec = ModelSpec(kind="torch", factory=f"{user_pkg}:build_tiny", weights=str(tmp_path / "tiny.pt"))
    clf = load_model(spec, n_classes=3, input_shape=(2, 2), device="cpu")
    x = np.random.default_rng(1).normal(size=(7, 2, 2)).astype(np.float32)
    assert np.array_equal(clf.predict_proba(x), TorchClassifier(net, n_classes=3, device="cpu").predict_proba(x))
    # a factory taking no arguments is called without any
    assert (
        load_model(
            ModelSpec(kind="torch", factory=f"{user_pkg}:build_no_args"), n_classes=2, input_shape=(4,), device="cpu"
        ).n_classes
        == 2
    )


def test_whole_pickled_module_is_refused(tmp_path, user_pkg):
    import importlib

    net = importlib.import_module(user_pkg).build_tiny(3, (4,))
    torch.save(net, tmp_path / "whole.pt")  # a pickled module, not a state_dict
    spec = ModelSpec(kind="torch", factory=f"{user_pkg}:build_tiny", weights=str(tmp_path / "whole.pt"))
    with pytest.raises(ModelError, match=r"weights_only=True.*state_dict"):
        load_model(spec, n_classes=3, input_shape=(4,), device="cpu")


def test_state_dict_that_does_not_fit(tmp_path):
    torch.save(LeNet(n_classes=5).state_dict(), tmp_path / "five.pt")
    with pytest.raises(ModelError, match="does not fit"):
        load_model(ModelSpec(weights=str(tmp_path / "five.pt")), n_classes=10, input_shape=(1, 8, 8), device="cpu")


def test_missing_weights_file_named(tmp_path):
    path = tmp_path / "nope.pt"
    with pytest.raises(ModelError, match="nope.pt"):
        load_model(ModelSpec(weights=str(path)), n_classes=10, input_shape=(1, 8, 8), device="cpu")
    with pytest.raises(ModelError, match="nope.pkl"):
        load_model(ModelSpec(kind="sklearn", weights=str(tmp_path / "nope.pkl")), n_classes=2, input_shape=(2,))


def test_sklearn_from_pickle_and_from_factory(tmp_path, user_pkg):
    import importlib

    est = importlib.import_module(user_pkg).fitted_logreg()
    joblib.dump(est, tmp_path / "logreg.joblib")
    x = np.array([[0.2, 0.1], [0.8, 0.9]])
    clf = load_model(ModelSpec(kind="sklearn", weights=str(tmp_path / "logreg.joblib")), n_classes=2, input_shape=(2,))
    assert isinstance(clf, SklearnClassifier)
    assert np.allclose(clf.predict_proba(x), est.predict_proba(x))
    clf2 = load_model(ModelSpec(kind="sklearn", factory=f"{user_pkg}:fitted_logreg"), n_classes=2, input_shape=(2,))
    assert np.allclose(clf2.predict_proba(x), est.predict_proba(x))
    (tmp_path / "junk.pkl").write_bytes(b"not a pickle")
    with pytest.raises(ModelError, match="junk.pkl"):
        load_model(ModelSpec(kind="sklearn", weights=str(tmp_path / "junk.pkl")), n_classes=2, input_shape=(2,))


def test_callable_factory(user_pkg):
    clf = load_model(ModelSpec(kind="callable", factory=f"{user_pkg}:make_fn"), n_classes=4, input_shape=(3,))
    assert isinstance(clf, CallableClassifier)
    assert np.allclose(clf.predict_proba(np.zeros((5, 3))), 0.25)


def test_factory_that_does_not_resolve(user_pkg):
    with pytest.raises(ModelError, match="cannot import module 'ws_no_such_module'"):
        resolve_factory("ws_no_such_module:build")
    with pytest.raises(ModelError, match=f"module '{user_pkg}' has no attribute 'missing'"):
        resolve_factory(f"{user_pkg}:missing")
    with pytest.raises(ModelError, match="not callable"):
        resolve_factory(f"{user_pkg}:NOT_CALLABLE")
    with pytest.raises(ModelError, match="pkg.module:function"):
        resolve_factory("just_a_name")
    with pytest.raises(ModelError, match="has no attribute 'missing'"):
        load_model(ModelSpec(kind="torch", factory=f"{user_pkg}:missing"), n_classes=2, input_shape=(4,))
    with pytest.raises(ModelError, match="expected a torch.nn.Module"):
        load_model(ModelSpec(kind="torch", factory=f"{user_pkg}:make_fn"), n_classes=2, input_shape=(4,))


def test_n_classes_guard_and_unknown_arch():
    with pytest.raises(ModelError, match="n_classes is 3 but the data set has 10"):
        load_model(ModelSpec(n_classes=3), n_classes=10, input_shape=(1, 8, 8))
    with pytest.raises(ConfigError, match="lenet, mlp"):
        load_model(ModelSpec(arch="resnet"), n_classes=10, input_shape=(1, 8, 8))
    with pytest.raises(ConfigError, match="square images"):
        load_model(ModelSpec(arch="lenet"), n_classes=2, input_shape=(5,))
    mlp = load_model(ModelSpec(arch="mlp"), n_classes=2, input_shape=(5,), device="cpu")
    assert mlp.predict_proba(np.zeros((3, 5), np.float32)).shape == (3, 2)


def test_load_model_accepts_dicts_and_other_pydantic_models():
    from pydantic import BaseModel

    class OtherParams(BaseModel):  # e.g. a params.yaml section with the same fields
        kind: str = "builtin"
        arch: str = "mlp"
        factory: str | None = None
        weights: str | None = None
        outputs: str = "logits"

    clf = load_model(OtherParams(), n_classes=3, input_shape=(4,), device="cpu")
    assert isinstance(clf.module, torch.nn.Module) and clf.n_classes == 3
    assert load_model({"arch": "mlp"}, n_classes=2, input_shape=(4,), device="cpu").n_classes == 2
    with pytest.raises(ConfigError, match="not valid"):
        load_model({"kind": "torch"}, n_classes=2, input_shape=(4,))
