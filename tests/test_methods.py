"""Methods as plug-ins (weakspot/methods.py): found without importing them, each loaded alone, each declaring what it
needs of a target, and run through one entry point whatever the method. No test here names the list of methods."""

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from weakspot import methods
from weakspot.data.dataset import Dataset
from weakspot.errors import ConfigError, WeakspotError
from weakspot.runtime import Runtime
from weakspot.targets import TargetParams

ROOT = Path(__file__).resolve().parents[1]

TARGETS = {
    "image_white": {"data": {"source": "digits"}, "model": {"kind": "builtin", "arch": "lenet"}},
    "image_black": {"data": {"source": "digits"}, "model": {"kind": "sklearn", "weights": "m.pkl"}},
    "image_black_parts": {
        "data": {"train": "npz:a.npz", "test": "npz:b.npz"},
        "model": {"kind": "sklearn", "weights": "m.pkl"},
    },
    "image_user_net": {"data": {"source": "imagefolder:imgs"}, "model": {"kind": "torch", "factory": "m:f"}},
    "table_black": {"data": {"source": "csv:x.csv", "label": "y"}, "model": {"kind": "sklearn", "weights": "m.pkl"}},
    "scene_white": {"data": {"source": "scenes"}, "model": {"kind": "builtin", "arch": "small_cnn"}},
}


def _loaded_after(code: str) -> list:
    """The weakspot modules loaded by ``code`` in a fresh interpreter."""
    out = subprocess.run(
        [
            sys.executable,
            "-c",
            code + "\nimport sys, json; print(json.dumps(sorted(m for m in sys.modules if m.startswith('weakspot'))))",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return json.loads(out.splitlines()[-1])


def test_methods_are_found_without_importing_any():
    names = methods.available()
    assert len(names) >= 2
    loaded = _loaded_after("from weakspot import methods; methods.available()")
    assert not [m for m in loaded if m.split(".")[1:2] and m.split(".")[1] in names]


def test_getting_one_method_loads_its_package_and_no_other_method():
    names = methods.available()
    for name in names:
        loaded = _loaded_after(f"from weakspot import methods; methods.get({name!r})")
        others = {m.split(".")[1] for m in loaded if m.count(".") >= 1} & (set(names) - {name})
        assert not others, f"methods.get({name!r}) loaded other methods: {others}"
        assert f"weakspot.{name}" in loaded


def test_every_method_declares_a_complete_plug_in():
    for m in methods.all_methods():
        assert m.name in methods.available() and methods.package_of(m.name).endswith(m.name)
        assert m.params.model_config.get("extra") == "forbid", f"{m.name}: an unknown key must be an error"
        m.params()  # every default valid
        for ref in filter(None, (m.run, m.report, m.figures)):
            assert callable(methods.resolve(ref)), ref
        assert set(m.modalities) <= {"image", "tabular"} and m.modalities


@pytest.mark.parametrize("name", sorted(TARGETS))
def test_a_method_runs_exactly_where_its_declared_needs_are_met(name):
    t = TargetParams.model_validate(TARGETS[name])
    for m in methods.all_methods():
        needs_met = (
            t.modality in m.modalities
            and (t.white_box or not m.white_box)
            and (t.renderable or not m.scene)
            and (t.has_train or not m.needs_train)
        )
        assert (methods.fits(t)[m.name] is None) == needs_met, (m.name, name, methods.fits(t)[m.name])


def test_an_unknown_method_lists_the_methods():
    with pytest.raises(ConfigError, match=r"unknown method 'nope'; methods: .+"):
        methods.get("nope")


# ------------------------------------------------------------------------------------------ a toy plug-in

TOY = """
from pydantic import BaseModel, ConfigDict
from weakspot.methods import Method, MethodReport, register_method
from weakspot.result import StageResult


class ToyParams(BaseModel):
    model_config = ConfigDict(extra="forbid")
    threshold: float = 0.5


def run(target, params, runtime):
    p = target.model.predict_proba(target.test.X)
    n = int((p.max(axis=1) < params.threshold).sum())
    sq = runtime.cached(pow, n, 2, key={{"n": n}})
    return MethodReport(section=StageResult(metrics={{"unsure": n, "squared": sq}}, title="Toy"), {extras})


register_method(Method("{name}", "Toy", "none", params=ToyParams, run="{name}:run", modalities=("tabular",)))
"""


class _Half:
    n_classes = 2

    def predict_proba(self, X):
        p = 1 / (1 + np.exp(-X[:, 0]))
        return np.stack([1 - p, p], axis=1)


def _target():
    X = np.linspace(-3, 3, 61, dtype=np.float32)[:, None]
    ds = Dataset(X=X, y=(X[:, 0] > 0).astype(np.int64), classes=["a", "b"], feature_names=["x"])
    return methods.AuditTarget(name="toy", model=_Half(), classes=["a", "b"], test=ds)


def _toy(tmp_path, monkeypatch, name, extras=""):
    (tmp_path / f"{name}.py").write_text(textwrap.dedent(TOY.format(name=name, extras=extras)))
    monkeypatch.syspath_prepend(str(tmp_path))
    __import__(name)
    return methods.METHODS.get(name)


def test_a_toy_method_runs_through_the_one_entry_point(tmp_path, monkeypatch):
    m = _toy(tmp_path, monkeypatch, "toy_plugin_a")
    out = methods.run_method(m, _target(), m.params(threshold=0.9), Runtime(device="cpu"))
    p = _Half().predict_proba(_target().test.X).max(axis=1)
    assert out.section.metrics == {"unsure": int((p < 0.9).sum()), "squared": int((p < 0.9).sum()) ** 2}


def test_an_extra_product_a_method_did_not_declare_is_an_error(tmp_path, monkeypatch):
    m = _toy(tmp_path, monkeypatch, "toy_plugin_b", extras='extras={"secret.csv": b"x"}')
    with pytest.raises(WeakspotError, match=r"extra products \['secret.csv'\] are not declared"):
        methods.run_method(m, _target(), m.params(), Runtime(device="cpu"))


def test_the_in_process_runtime_gives_other_sections_only_when_declared():
    rt = Runtime(device="cpu", sections={"a": 1})
    assert rt.section("a") == 1
    with pytest.raises(ConfigError, match=r"params section 'b' was not given.*Method.reads"):
        rt.section("b")
    assert rt.map(divmod, [((7, 2), {}), ((9, 4), {})], keys=[{}, {}]) == [(3, 1), (2, 1)]


# ------------------------------------------------------------------------------------------ a toy shared stage

TOY_SHARED = """
from pydantic import BaseModel, ConfigDict
from weakspot.methods import Method, MethodReport, SharedStage, StageSpec, register_method
from weakspot.result import StageResult


class StudyParams(BaseModel):
    model_config = ConfigDict(extra="forbid")
    enabled: bool = True
    n: int = 3


class ToyParams(BaseModel):
    model_config = ConfigDict(extra="forbid")
    budget: int = 5
    study: StudyParams = StudyParams()


def run(target, params, runtime):
    return MethodReport(section=StageResult(metrics={{"budget": params.budget}}, title="Toy"))


def study(inputs, params, runtime):
    return list(range(params.study.n))


def study_report(result, params):
    return StageResult(metrics={{"total": sum(result)}}, title="Toy study")


STUDY = SharedStage("{name}_study", key="study", run="{name}:study", report="{name}:study_report",
                    skip_keys=("budget",), order=7, headline=("total",))
register_method(Method("{name}", "Toy", "none", params=ToyParams, run="{name}:run", modalities=("tabular",),
                       stage=StageSpec(skip_keys=("study",), shared=(STUDY,))))
"""


def _toy_shared(tmp_path, monkeypatch, name):
    (tmp_path / f"{name}.py").write_text(textwrap.dedent(TOY_SHARED.format(name=name)))
    monkeypatch.syspath_prepend(str(tmp_path))
    __import__(name)
    monkeypatch.setattr(methods, "_entry_points", lambda: {name: name})  # an installed plug-in, as far as any lookup
    return methods.METHODS.get(name)


def test_a_toy_shared_stage_runs_through_its_one_entry_point(tmp_path, monkeypatch):
    m = _toy_shared(tmp_path, monkeypatch, "toy_plugin_s")
    out = methods.run_shared(m, "toy_plugin_s_study", methods.SharedInputs(), m.params(study={"n": 4}), Runtime())
    assert out.metrics == {"total": 6} and out.title == "Toy study"
    assert (m, m.stage.shared[0]) in methods.shared_stages()
    with pytest.raises(ConfigError, match=r"no shared stage 'nope'; shared stages: toy_plugin_s_study"):
        m.stage.shared_stage("nope")


def test_the_pipeline_builds_a_shared_stage_from_its_declaration_alone(tmp_path, monkeypatch):
    from ops.engine.pipeline import stages
    from weakspot.config import read_yaml

    _toy_shared(tmp_path, monkeypatch, "toy_plugin_p")
    raw = read_yaml(ROOT / "params.yaml")
    raw["toy_plugin_p"] = {"budget": 2, "study": {"n": 4}}
    st = stages(raw)
    shared = st["toy_plugin_p_study"]
    assert shared["cmd"] == "python -m flows.shared toy_plugin_p toy_plugin_p_study"
    # its key, not the skipped budget; then the versions of the packages it computes with
    assert shared["params"][:-1] == ["device", "threads", "toy_plugin_p.study"]
    assert list(shared["params"][-1]) == ["packages.yaml"]
    assert shared["outs"] == ["plots/toy_plugin_p_study"] and shared["metrics"] == ["metrics/toy_plugin_p_study.json"]
    assert "flows/shared.py" in shared["deps"] and "data/render" not in shared["deps"]
    assert "metrics/toy_plugin_p_study.json" in st["report"]["deps"]
    per_target = st["toy_plugin_p-phoneme"]["params"]  # the method's own stage skips the study's key
    assert "toy_plugin_p.budget" in per_target and "toy_plugin_p.study" not in per_target
    raw["toy_plugin_p"]["study"]["enabled"] = False
    assert "toy_plugin_p_study" not in stages(raw)


def test_a_plug_in_that_passes_a_stage_field_to_method_is_told_where_it_moved():
    """``order``, ``headline`` and the other pipeline fields were Method's own before StageSpec: a plug-in written
    for that gets an error naming StageSpec, not Python's bare "unexpected keyword argument"."""
    import pytest

    from weakspot.methods import Method, StageSpec

    with pytest.raises(TypeError, match=r"'toy'.*headline, order .*stage=StageSpec\(headline=\.\.\., order=\.\.\.\)"):
        Method("toy", "Toy", "none", params=dict, run="m:run", order=60, headline=("x",))
    assert Method("toy", "Toy", "none", params=dict, run="m:run", stage=StageSpec(order=60)).stage.order == 60
    with pytest.raises(TypeError, match="unexpected keyword argument 'colour'"):
        Method("toy", "Toy", "none", params=dict, run="m:run", colour="red")  # any other mistake: Python's message
