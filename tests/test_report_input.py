"""The library knows no pipeline: ``weakspot.audit`` describes its in-memory target without a forged params.yaml
entry, and one library function (:func:`weakspot.report.inputs.report_input`) assembles the report's input for both
the pipeline's report stage (from the files the stages wrote) and ``weakspot.audit`` (from memory)."""

import inspect
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

import weakspot
from weakspot.report import inputs


@pytest.fixture(scope="module")
def forest():
    """A forest trained without the class 'yes' rows where b > 0.5 (it calls them 'no'), its test rows and its
    training rows."""
    from sklearn.ensemble import RandomForestClassifier

    rng = np.random.default_rng(0)

    def rows(n):
        X = pd.DataFrame(rng.uniform(-1, 1, (n, 3)), columns=["a", "b", "c"])
        return X, np.where(X["a"] + 0.3 * X["c"] > 0, "yes", "no")

    X_train, y_train = rows(2000)
    keep = ~((y_train == "yes") & (X_train["b"] > 0.5))
    model = RandomForestClassifier(n_estimators=20, max_depth=5, random_state=0)
    model.fit(X_train[keep].to_numpy(), y_train[keep])
    X_test, y_test = rows(1200)
    return model, X_test, y_test, X_train[keep], y_train[keep]


def test_the_api_describes_its_target_in_memory_and_never_validates_a_params_entry(forest, monkeypatch):
    import weakspot.api as api
    from weakspot.models.spec import ModelSpec
    from weakspot.targets import DataParams, InMemoryTarget, TargetParams

    def refuse(*args, **kwargs):
        raise AssertionError("weakspot.audit validated a params.yaml entry")

    for cls in (TargetParams, DataParams, ModelSpec):  # nothing may reach the params parser
        monkeypatch.setattr(cls, "__init__", refuse)
        monkeypatch.setattr(cls, "model_validate", classmethod(refuse))
    model, X_test, y_test, X_train, y_train = forest
    res = weakspot.audit(model, X_test, y_test, X_train, y_train, methods=[], name="forest")
    t = res.target.params
    assert isinstance(t, InMemoryTarget) and (t.modality, t.model.kind, t.has_train) == ("tabular", "sklearn", True)
    assert not t.white_box and t.model_label == "sklearn RandomForestClassifier (in memory)"
    assert t.described.startswith(f"Data 1200 test rows, {len(X_train)} training rows given to weakspot.audit; model")
    assert "spec" not in res.target.test.provenance  # no source spec: the rows were given, not read
    assert "needs image data" in res.skipped["corner"] and "not asked for" in res.skipped["segments"]
    source = inspect.getsource(api)
    assert "in_memory:" not in source and "csv:" not in source and "npz:" not in source and "TargetParams" not in source


def test_a_torch_module_and_a_function_are_described_by_their_kind():
    import torch

    from weakspot.api import as_classifier, as_dataset, describe_target

    images = as_dataset(np.zeros((4, 8, 8)), [0, 1, 0, 1], [0, 1], what="X_test")
    net = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(64, 2))
    t = describe_target(as_classifier(net, 2, "cpu"), images, None, None)
    assert (t.modality, t.model.kind, t.white_box, t.has_train) == ("image", "torch", True, False)
    assert t.model.name == "Sequential" and "4 test images" in t.described

    def probabilities(x):
        return np.full((len(x), 2), 0.5)

    t = describe_target(as_classifier(probabilities, 2), images, images, None)
    assert (t.model.kind, t.model.name, t.white_box, t.has_train) == ("callable", "probabilities", False, True)


def test_the_report_input_gives_each_method_its_findings_or_why_it_did_not_run():
    from weakspot.findings import normalise
    from weakspot.targets import TargetParams

    t = TargetParams.model_validate({"data": {"source": "keel:phoneme"}, "model": {"kind": "builtin", "arch": "mlp"}})
    found = normalise(None)
    inp = inputs.report_input(
        {"phoneme": t},
        sections=[{"stage": "segments", "target": "phoneme", "sample": "all 100 rows"}],
        figures={},
        tables={},
        metrics={"train/phoneme": {"test_accuracy": 0.9, "ece": 0.05}},
        findings={("phoneme", "segments"): found, ("phoneme", "gad"): found},
        not_run={("phoneme", "gad"): "its stage failed: boom"},
        groups={"render": "Rendered scenes"},
    )
    (entry,) = inp.targets
    assert entry["intro"] == "Data keel:phoneme; model builtin mlp; test accuracy 90.0%, ECE 0.050."
    assert entry["model"] == "builtin mlp" and entry["accuracy"] == 0.9
    cards = {c["name"]: c for c in entry["methods"]}
    assert cards["segments"]["sample"] == "all 100 rows" and "findings" in cards["segments"]
    assert cards["gad"]["reason"] == "its stage failed: boom" and "findings" not in cards["gad"]
    assert cards["corner"]["reason"].startswith("needs image data")  # it does not fit: that reason comes first
    assert inp.groups["render"] == "Rendered scenes" and inp.groups["segments"].startswith("Weak segments")


def test_the_pipeline_and_the_api_assemble_the_report_input_with_the_same_function(forest, tmp_path, monkeypatch):
    """The same results, in memory (``weakspot.audit``) and as the pipeline's stages write them (read back by the
    report stage), go through one function and give the same weak spots."""
    from flows import report as report_flow
    from tasks.common import write_stage_result
    from weakspot.targets import TargetParams

    calls = []
    original = inputs.report_input

    def spy(*args, **kwargs):
        calls.append(out := original(*args, **kwargs))
        return out

    monkeypatch.setattr(inputs, "report_input", spy)
    model, X_test, y_test, X_train, y_train = forest
    res = weakspot.audit(model, X_test, y_test, X_train, y_train, methods=["segments"], name="forest")
    page = res.to_html(tmp_path / "api.html").read_text()
    assert len(calls) == 1 and "Weak spots of forest" in page

    from conftest import declare

    monkeypatch.chdir(tmp_path)  # the pipeline's files, written as its stages write them, and declared by dvc.yaml
    for stage in res.results:
        declare(tmp_path, f"plots/{stage}/forest", f"metrics/{stage}/forest.json", f"findings/forest/{stage}.parquet")
    for order, (stage, result) in enumerate(res.results.items()):
        found = (
            res.findings[res.findings["method"] == stage].drop(columns=["method", "rank"]) if stage != "train" else None
        )
        write_stage_result(stage, result, {}, target="forest", findings=found, order=order)
    t = TargetParams.model_validate(
        {
            "data": {"train": "csv:train.csv", "test": "csv:test.csv"},
            "model": {"kind": "sklearn", "weights": "forest.joblib"},
            "methods": ["segments"],
        }
    )
    p = SimpleNamespace(title="weakspot audit", max_table_rows=20)
    piped = report_flow.report_input(report_flow.collect.fn(), {"forest": t}, p)
    assert len(calls) == 2 and piped is calls[1]
    api, pipe = calls[0].targets[0], piped.targets[0]
    a, b = ({c["name"]: c for c in x["methods"]} for x in (api, pipe))
    assert a.keys() == b.keys() and a["segments"]["sample"] == b["segments"]["sample"] != ""
    assert a["segments"]["findings"]["confirmed"].any()  # the planted blind spot: the comparison is not of nothing
    pd.testing.assert_frame_equal(
        a["segments"]["findings"].reset_index(drop=True), b["segments"]["findings"].reset_index(drop=True)
    )
    assert api["accuracy"] == pipe["accuracy"]
    assert api["intro"].split("; test accuracy")[1] == pipe["intro"].split("; test accuracy")[1]
    assert sorted(s["stage"] for s in calls[0].sections) == sorted(s["stage"] for s in piped.sections)
    failures = [
        {"stage": "segments-forest", "failed": True, "error": "Traceback ...", "message": "boom"},
        {"stage": "gad-forest", "failed": False, "error": "not run: it needs train-forest, which failed"},
        {"stage": "train-forest", "failed": True, "error": "e", "message": "train failed"},  # no method's stage
    ]
    assert report_flow.not_run({"forest": t}, failures) == {
        ("forest", "segments"): "its stage failed: boom",
        ("forest", "gad"): "not run: it needs train-forest, which failed",
    }
