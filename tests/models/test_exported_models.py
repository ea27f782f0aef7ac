"""Exported models (weakspot.models.exported): ONNX graphs from skl2onnx and torch, TorchScript archives, loaded from a
ModelSpec as params.yaml names them; the same answers as the original models, and errors that name the problem."""

from __future__ import annotations

import copy

import numpy as np
import pandas as pd
import pytest
import torch

from tests.user_models import digits_images, fit_briefly, small_cnn, write_sklearn_onnx, write_torch_exports
from weakspot.data.dataset import Dataset
from weakspot.errors import ConfigError, ModelError
from weakspot.models import ModelSpec, OnnxClassifier, TorchClassifier, load_model
from weakspot.models.exported import load_torchscript
from weakspot.models.rescale import scaled_last_layer
from weakspot.models.table import TableClassifier, for_data


CITY = {"city": ["east", "north", "west"]}


def _table(n=400, seed=0):
    """A table with two numeric columns and a text column, its labels, and the Dataset weakspot holds it as."""
    rng = np.random.default_rng(seed)
    X = pd.DataFrame(
        {
            "age": rng.normal(40, 10, n).round(1),
            "income": rng.gamma(2.0, 1.5, n).round(2),
            "city": rng.choice(["east", "north", "west"], n),
        }
    )
    y = np.where((X["age"] > 40) ^ (X["city"] == "west"), "yes", "no")
    texts = CITY["city"]
    codes = X["city"].map({t: i for i, t in enumerate(texts)}).to_numpy()
    ds = Dataset(
        X=np.column_stack([X["age"], X["income"], codes]).astype(np.float32),
        y=(y == "yes").astype(np.int64),
        classes=["no", "yes"],
        feature_names=["age", "income", "city"],
        categories=CITY,
    )
    return X, y, ds


def _spec_clf(kind, path, ds, **kw):
    """The classifier the pipeline builds for a target ``{kind, weights: path}`` on ``ds`` (tasks.target)."""
    clf = load_model(
        ModelSpec(kind=kind, weights=str(path), **kw), n_classes=ds.n_classes, input_shape=ds.input_shape, device="cpu"
    )
    return for_data(clf, ds, trained_here=False)


@pytest.mark.parametrize("zipmap", [False, True])
def test_a_skl2onnx_pipeline_with_a_text_column_answers_as_the_pickle(tmp_path, zipmap):
    X, y, ds = _table()
    files = write_sklearn_onnx(tmp_path, X, y, zipmap=zipmap)
    onnx = _spec_clf("onnx", files["onnx"], ds)
    pickled = _spec_clf("sklearn", files["pickle"], ds)
    assert isinstance(onnx, TableClassifier) and isinstance(onnx.inner, OnnxClassifier)  # columns by name, as text
    assert onnx.inner.per_column and onnx.inner.outputs == "probs"  # the probability output, whatever `outputs` says
    p = onnx.predict_proba(ds.X)
    assert np.allclose(p, pickled.predict_proba(ds.X), atol=1e-5)
    assert np.allclose(p, files["model"].predict_proba(X), atol=1e-5)
    # the same graph from Python, given the DataFrame itself
    assert np.allclose(OnnxClassifier(onnx.inner.session, n_classes=2).predict_proba(X), p)


def test_a_gradient_boosted_pipeline_exported_with_skl2onnx_answers_as_the_pickle(tmp_path):
    from sklearn.ensemble import HistGradientBoostingClassifier

    X, y, ds = _table(600, seed=1)
    files = write_sklearn_onnx(tmp_path, X, y, estimator=HistGradientBoostingClassifier(max_iter=30, random_state=0))
    p = _spec_clf("onnx", files["onnx"], ds).predict_proba(ds.X)
    assert np.allclose(p, files["model"].predict_proba(X), atol=1e-5)


def test_a_zipmap_with_class_names_is_placed_in_the_classes_order(tmp_path):
    X, y, ds = _table()
    files = write_sklearn_onnx(tmp_path, X, np.where(y == "yes", "b_yes", "a_no"), zipmap=True)
    clf = _spec_clf("onnx", files["onnx"], ds)
    assert np.allclose(clf.predict_proba(ds.X), files["model"].predict_proba(X), atol=1e-5)


@pytest.fixture(scope="module")
def cnn(tmp_path_factory):
    """A small CNN trained briefly on digits, its exports, and 60 digits it is audited on."""
    X, y = digits_images(300)
    module = fit_briefly(small_cnn(10, (1, 8, 8)), X[:240], y[:240])
    folder = tmp_path_factory.mktemp("cnn")
    files = write_torch_exports(folder, module)
    files["fixed"] = write_torch_exports(folder, module, fixed_batch=1, stem="cnn_b1")["onnx"]
    ds = Dataset(X=X[240:], y=y[240:], classes=[str(i) for i in range(10)], image_shape=(1, 8, 8))
    return files, ds


def test_a_torch_cnn_exported_to_onnx_answers_as_the_module(cnn):
    files, ds = cnn
    want = TorchClassifier(files["module"], n_classes=10, device="cpu").predict_proba(ds.X)
    for graph in (files["onnx"], files["fixed"]):  # a dynamic batch dimension, and a fixed batch of 1
        clf = _spec_clf("onnx", graph, ds)
        assert isinstance(clf, OnnxClassifier) and clf.outputs == "logits"
        assert np.allclose(clf.predict_proba(ds.X), want, atol=1e-5)
    assert not hasattr(clf, "input_gradient")  # a black box


def test_a_channels_last_graph_gets_the_images_transposed(tmp_path, cnn):
    files, ds = cnn

    class ChannelsLast(torch.nn.Module):
        def __init__(self, inner):
            super().__init__()
            self.inner = inner

        def forward(self, x):
            return self.inner(x.permute(0, 3, 1, 2))

    exports = write_torch_exports(tmp_path, ChannelsLast(files["module"]), input_shape=(8, 8, 1), stem="nhwc")
    want = TorchClassifier(files["module"], n_classes=10, device="cpu").predict_proba(ds.X)
    assert np.allclose(_spec_clf("onnx", exports["onnx"], ds).predict_proba(ds.X), want, atol=1e-5)


def test_torchs_default_exporter_gives_a_graph_that_answers_as_the_module(tmp_path, cnn):
    files, ds = cnn
    exports = write_torch_exports(tmp_path, files["module"], dynamo=True)
    want = TorchClassifier(files["module"], n_classes=10, device="cpu").predict_proba(ds.X)
    assert np.allclose(_spec_clf("onnx", exports["onnx"], ds).predict_proba(ds.X), want, atol=1e-5)


def test_a_torchscript_archive_is_a_white_box_that_answers_as_the_module(cnn):
    files, ds = cnn
    clf = _spec_clf("torchscript", files["torchscript"], ds)
    assert isinstance(clf, TorchClassifier) and isinstance(clf.module.script, torch.jit.ScriptModule)
    twin = copy.deepcopy(clf.module)  # what intrinsic robustness and HDA fine-tune: its own leaf parameters
    assert all(p.is_leaf for p in twin.parameters()) and twin.script is not clf.module.script
    torch.optim.Adam(twin.parameters())
    x = torch.as_tensor(ds.X[:4])
    assert torch.allclose(scaled_last_layer(clf.module, 100.0)(x), 100 * clf.module(x), atol=1e-3)  # intrinsic's
    want = TorchClassifier(files["module"], n_classes=10, device="cpu")
    assert np.allclose(clf.predict_proba(ds.X), want.predict_proba(ds.X), atol=1e-6)
    g = clf.input_gradient(ds.X[:5], ds.y[:5])
    assert g.shape == (5, 1, 8, 8) and np.abs(g).sum(axis=(1, 2, 3)).min() > 0
    assert np.allclose(g, want.input_gradient(ds.X[:5], ds.y[:5]), atol=1e-5)


def test_which_methods_run_on_an_exported_model():
    from weakspot.methods import get
    from weakspot.targets import TargetParams

    def target(kind):
        return TargetParams.model_validate({"data": {"test": "npz:t.npz"}, "model": {"kind": kind, "weights": "m"}})

    assert target("torchscript").white_box and not target("onnx").white_box
    why = get("robustness").misfit(target("onnx"))
    assert why is not None and "needs gradients" in why and "onnx model is a black box" in why
    assert get("robustness").misfit(target("torchscript")) is None and get("segments").misfit(target("onnx")) is None
    for bad in ({"kind": "onnx"}, {"kind": "torchscript", "weights": "m.pt", "factory": "a:b"}):
        with pytest.raises(ValueError, match="takes weights"):
            ModelSpec(**bad)


# --- errors that name the problem ------------------------------------------------------------------------------
def _graph(path, width=3, rows=None, batch=None):
    """An ONNX graph whose one output is its input ``x`` of shape ``[batch, width]`` (an Identity)."""
    from onnx import TensorProto, helper, save

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, width])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [batch, width])
    graph = helper.make_graph([helper.make_node("Identity", ["x"], ["y"])], "identity", [x], [y])
    save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    return path


def test_a_file_that_is_not_a_graph_or_an_archive_is_named(tmp_path, cnn):
    files, ds = cnn
    (tmp_path / "model.onnx").write_bytes(b"not a graph")
    with pytest.raises(ModelError, match=r"model.onnx: not a valid ONNX graph .*Protobuf parsing failed"):
        _spec_clf("onnx", tmp_path / "model.onnx", ds)
    with pytest.raises(ModelError, match=r"cnn.pt: not a TorchScript archive .*a state_dict needs kind 'torch'"):
        _spec_clf("torchscript", files["state_dict"], ds)  # a state_dict, not an archive
    with pytest.raises(ModelError, match="weights file not found"):
        _spec_clf("onnx", tmp_path / "missing.onnx", ds)


def test_a_wrong_input_shape_names_both_shapes(cnn):
    files, ds = cnn
    rgb = Dataset(X=np.zeros((4, 3, 8, 8), np.float32), y=np.zeros(4, np.int64), classes=ds.classes)
    with pytest.raises(ModelError, match=r"input 'image' takes shape \[N, 1, 8, 8\], but the data's rows have shape "):
        _spec_clf("onnx", files["onnx"], rgb)
    clf = _spec_clf("onnx", files["onnx"], ds)  # a batch of another shape, given later
    with pytest.raises(ModelError, match=r"rows have shape \(3, 8, 8\) \(a batch is \(2, 3, 8, 8\)\)"):
        clf.predict_proba(np.zeros((2, 3, 8, 8), np.float32))
    assert clf.predict_proba(np.zeros((2, 64), np.float32)).shape == (2, 10)  # the same values flattened: reshaped
    assert clf.predict_proba(np.zeros((2, 8, 8, 1), np.float32)).shape == (2, 10)  # channels last: transposed


def test_a_table_graph_refuses_missing_columns_and_text_in_a_tensor(tmp_path):
    X, y, ds = _table()
    graph = write_sklearn_onnx(tmp_path, X, y)["onnx"]
    other = Dataset(X=ds.X, y=ds.y, classes=ds.classes, feature_names=["age", "salary", "town"])
    clf = _spec_clf("onnx", graph, other)
    with pytest.raises(ModelError, match=r"input\(s\) \['income', 'city'\] name no column of the data"):
        clf.predict_proba(other.X)
    with pytest.raises(ModelError, match=r"graph takes 3 column inputs, but the data's rows have shape \(2,\)"):
        _spec_clf("onnx", graph, Dataset(X=ds.X[:, :2], y=ds.y, classes=ds.classes, feature_names=["age", "income"]))
    with pytest.raises(ModelError, match=r"input\(s\) \['city'\] take text, but the rows came as numbers"):
        clf.inner.predict_proba(ds.X)
    three = Dataset(X=ds.X, y=ds.y, classes=["no", "yes", "maybe"], feature_names=ds.feature_names, categories=CITY)
    tensor = _spec_clf("onnx", _graph(tmp_path / "id.onnx", width=3), three, outputs="probs")
    with pytest.raises(
        ModelError, match=r"graph takes one numeric tensor 'x', but the table has text column\(s\) \['city'\]"
    ):
        tensor.predict_proba(three.X)


def test_an_output_that_is_not_a_probability_per_class_is_named(tmp_path):
    graph = _graph(tmp_path / "id.onnx", width=3)
    with pytest.raises(
        ModelError, match=r"output 'y' has shape \[N, 3\]: 3 values per row, but the data have 2 classes"
    ):
        load_model(ModelSpec(kind="onnx", weights=str(graph)), n_classes=2, input_shape=(3,))
    probs = load_model(ModelSpec(kind="onnx", weights=str(graph), outputs="probs"), n_classes=3, input_shape=(3,))
    assert np.allclose(probs.predict_proba(np.array([[0.2, 0.3, 0.5]], np.float32)), [[0.2, 0.3, 0.5]])
    with pytest.raises(ModelError, match="negative values in 1 of 2 rows"):
        probs.predict_proba(np.array([[0.2, 0.3, 0.5], [-1.0, 1.0, 1.0]], np.float32))
    with pytest.raises(ModelError, match="rows must sum to 1.*are these logits"):
        probs.predict_proba(np.array([[0.2, 0.3, 0.9]], np.float32))
    logits = load_model(ModelSpec(kind="onnx", weights=str(graph)), n_classes=3, input_shape=(3,))
    z = np.array([[0.2, -1.0, 3.0]], np.float32)
    assert np.allclose(logits.predict_proba(z), torch.softmax(torch.as_tensor(z, dtype=torch.float64), 1).numpy())
    unknown = _graph(tmp_path / "unknown_width.onnx", width=None)  # the width shows only when it runs
    clf = load_model(ModelSpec(kind="onnx", weights=str(unknown)), n_classes=2, input_shape=(3,))
    with pytest.raises(ModelError, match=r"output 'y' has shape \(1, 3\) for 1 rows, expected \(n, k\) = \(1, 2\)"):
        clf.predict_proba(np.zeros((1, 3), np.float32))


def test_an_exported_models_weights_are_deps_of_its_train_stage():
    import yaml

    from ops.engine.pipeline import dvc_yaml

    raw = {
        "targets": {
            "table": {
                "data": {"test": "csv:data/t.csv", "label": "y"},
                "model": {"kind": "onnx", "weights": "m/a.onnx"},
            },
            "net": {"data": {"test": "npz:data/t.npz"}, "model": {"kind": "torchscript", "weights": "m/n.ts.pt"}},
        },
    }
    stages = yaml.safe_load(dvc_yaml(raw))["stages"]
    assert "m/a.onnx" in stages["train-table"]["deps"] and "m/n.ts.pt" in stages["train-net"]["deps"]
    assert "robustness-net" in stages and "robustness-table" not in stages and "segments-table" in stages


# --- from Python ---------------------------------------------------------------------------------------------------
def test_weakspot_audit_takes_a_path_or_a_session_and_finds_what_the_pickle_finds(tmp_path):
    import onnxruntime

    import weakspot

    X, y, _ = _table(600, seed=2)
    files = write_sklearn_onnx(tmp_path, X, y)
    want = weakspot.audit(files["model"], X, y, methods=["segments"], name="m").findings
    session = onnxruntime.InferenceSession(str(files["onnx"]))
    for model in (str(files["onnx"]), files["onnx"], session):
        res = weakspot.audit(model, X, y, methods=["segments"], name="m")
        name = "InferenceSession" if model is session else "model.onnx"
        assert res.target.params.model_label == f"onnx {name} (in memory)"
        pd.testing.assert_frame_equal(res.findings, want)
    numeric = write_sklearn_onnx(tmp_path, X[["age", "income"]], y, stem="numeric")["onnx"]
    with pytest.raises(ModelError, match=r"input\(s\) \['age', 'income'\] name no column of the data"):
        weakspot.audit(str(numeric), X[["age", "income"]].to_numpy(), y, methods=["segments"])  # no names given
    with pytest.raises(ModelError, match=r"a path names an ONNX graph \(.onnx\) or a TorchScript archive"):
        weakspot.audit(str(files["pickle"]), X, y, methods=["segments"])


def test_weakspot_audit_says_an_onnx_cnn_is_a_black_box_and_a_torchscript_one_is_not(cnn):
    from weakspot.api import as_classifier, describe_target
    from weakspot.methods import fits

    files, ds = cnn
    for model, white in ((str(files["onnx"]), False), (str(files["torchscript"]), True)):
        t = describe_target(as_classifier(model, 10, "cpu"), ds, None, None)
        assert t.white_box is white
        why = fits(t)["robustness"]
        assert (why is None) if white else ("needs gradients" in why and "onnx model is a black box" in why)
    script = load_torchscript(files["torchscript"])
    assert isinstance(as_classifier(script, 10, "cpu"), TorchClassifier)  # a white box, as from a path


def _tiny_graph(path, inp, dtype, shape, nodes, out_width=2):
    """A hand-built ONNX graph: input ``inp`` of ``dtype`` and ``shape``, ``nodes`` ending in output ``p``."""
    import onnx
    from onnx import TensorProto, helper

    graph = helper.make_graph(
        nodes,
        "tiny",
        [helper.make_tensor_value_info(inp, dtype, shape)],
        [helper.make_tensor_value_info("p", TensorProto.FLOAT, ["N", out_width])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, str(path))
    return path


def test_a_missing_value_never_reaches_an_integer_input(tmp_path):
    """NumPy turns NaN cast to int64 into an arbitrary number: the input is named instead, and nothing is scored."""
    from onnx import TensorProto, helper

    from weakspot.models.exported import load_onnx

    nodes = [helper.make_node("Cast", ["x"], ["f"], to=TensorProto.FLOAT), helper.make_node("Softmax", ["f"], ["p"])]
    clf = load_onnx(_tiny_graph(tmp_path / "int.onnx", "x", TensorProto.INT64, ["N", 2], nodes), n_classes=2)
    assert np.allclose(clf.predict_proba(np.array([[1.0, 3.0]])).sum(1), 1)
    with pytest.raises(ModelError, match=r"input 'x' takes tensor\(int64\), which cannot hold a missing value"):
        clf.predict_proba(np.array([[1.0, np.nan]]))


def test_a_channels_last_graph_with_free_height_and_width_gets_the_images_transposed(tmp_path, cnn):
    from onnx import TensorProto, helper

    from weakspot.models.exported import load_onnx

    nodes = [
        helper.make_node("Transpose", ["image"], ["t"], perm=[0, 3, 1, 2]),
        helper.make_node("ReduceMean", ["t"], ["m"], axes=[2, 3], keepdims=0),
        helper.make_node("Concat", ["m", "m"], ["p"], axis=1),
    ]
    path = _tiny_graph(tmp_path / "free.onnx", "image", TensorProto.FLOAT, ["N", "h", "w", 1], nodes)
    _, ds = cnn
    clf = load_onnx(path, n_classes=2, input_shape=ds.input_shape)
    p = clf.predict_proba(ds.X[:5])
    assert p.shape == (5, 2) and np.allclose(p, 0.5)  # two equal logits: the images reached the graph


def test_weakspot_audit_reads_a_probability_output_as_it_is_with_outputs_probs(tmp_path):
    """A graph whose single output is already a probability per class (a Softmax inside): ``outputs="probs"`` takes
    them as they are, as ``outputs: probs`` does in params.yaml; the default (logits) would softmax them again, which
    keeps the predicted class and flattens every confidence towards 1/k."""
    import onnxruntime
    from onnx import helper

    import weakspot
    from weakspot.api import as_classifier

    nodes = [helper.make_node("Softmax", ["x"], ["p"])]
    path = _tiny_graph(tmp_path / "softmax.onnx", "x", 1, ["N", 2], nodes)  # 1: TensorProto.FLOAT
    x = np.array([[4.0, 0.0], [0.0, 1.0]])
    want = torch.softmax(torch.as_tensor(x), 1).numpy()
    for model in (str(path), onnxruntime.InferenceSession(str(path))):
        probs = as_classifier(model, 2, "cpu", outputs="probs").predict_proba(x)
        assert np.allclose(probs, want, atol=1e-6)
        twice = as_classifier(model, 2, "cpu").predict_proba(x)
        assert np.allclose(twice, torch.softmax(torch.as_tensor(want), 1).numpy(), atol=1e-6)
        assert (twice.argmax(1) == probs.argmax(1)).all() and twice.max() < probs.max()
    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 2))
    y = ((X[:, 1] > X[:, 0]) ^ (rng.random(300) < 0.2)).astype(int)  # the graph's argmax, 20% of labels flipped
    res = weakspot.audit(str(path), X, y, methods=["segments"], outputs="probs", name="softmax")
    assert res.metrics["train"]["test_accuracy"] == float(np.mean((X[:, 1] > X[:, 0]) == y))
    with pytest.raises(ConfigError, match="outputs must be 'logits' or 'probs'"):
        weakspot.audit(str(path), X, y, methods=["segments"], outputs="probabilities")
