"""dvc.yaml cannot rot: it is what params.yaml generates, and every stage's deps cover every project module its flow
imports (found here independently of the generator: by importing the flow in a fresh interpreter)."""

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]


def _stages():
    return yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"]


def test_committed_dvc_yaml_is_what_params_generate():
    from ops.engine.pipeline import dvc_yaml
    from weakspot.config import read_yaml

    assert (ROOT / "dvc.yaml").read_text() == dvc_yaml(read_yaml(ROOT / "params.yaml")), (
        "dvc.yaml is stale: run `weakspot pipeline`"
    )


def _runtime_imports(cmd: str) -> set:
    """Project files loaded by importing a stage's flow in a fresh interpreter (and, for the generic method stage, the
    method's entry points; for a shared stage, its declared entry points; for the report, every method's package, as
    the flows load them by name)."""
    parts = cmd.split()
    module, args = parts[2], parts[3:]
    code = f"import importlib; importlib.import_module({module!r}); from weakspot import methods; "
    if module == "flows.method":
        code += f"[importlib.import_module(m) for m in methods.get({args[0]!r}).modules()]; "
    if module == "flows.shared":
        code += f"[importlib.import_module(m) for m in methods.get({args[0]!r}).stage.shared_stage({args[1]!r}).modules()]; "
    if module == "flows.report":
        code += "methods.all_methods(); "
    code += (
        "import json, sys; print(json.dumps(sorted(m.__file__ for m in list(sys.modules.values()) "
        "if getattr(m, '__file__', None))))"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    files = set()
    for f in json.loads(out.splitlines()[-1]):
        p = Path(f).resolve()
        if ROOT in p.parents and p.parts[len(ROOT.parts)] in ("weakspot", "flows", "tasks", "ops"):
            files.add(str(p.relative_to(ROOT)))
    return files - {"tasks/runner.py"}  # where tasks run, never what they compute: no stage's dependency


def _covered(file: str, deps: list) -> bool:
    return any(file == d or file.startswith(d.rstrip("/") + "/") for d in deps)


@pytest.mark.pipeline  # a fresh interpreter per stage's flow
def test_every_stage_depends_on_every_project_module_its_flow_imports():
    from ops.engine.pipeline import stages as generate
    from weakspot.config import read_yaml

    raw = read_yaml(ROOT / "params.yaml")
    raw["examine"]["study"]["artificial_weakness"]["enabled"] = True  # the study's shared stage too (off by default)
    stages = generate(raw)
    checked = {}
    for name, st in stages.items():
        # a method stage: per method; a shared stage: per stage
        parts = {"flows.method": 4, "flows.shared": 5}.get(st["cmd"].split()[2], 3)
        key = " ".join(st["cmd"].split()[:parts])
        if key not in checked:
            checked[key] = _runtime_imports(st["cmd"])
        missing = [f for f in sorted(checked[key]) if not _covered(f, st["deps"])]
        assert not missing, f"stage {name}: deps miss {missing}"
    assert {"python -m flows.prepare", "python -m flows.train", "python -m flows.report"} <= set(checked)
    assert any(k.startswith("python -m flows.method ") for k in checked)
    assert any(k.startswith("python -m flows.shared ") for k in checked)


def test_a_method_stage_depends_on_no_other_methods_code():
    """...but the params model of a section it declares it reads (``Method.reads``)."""
    from weakspot.methods import available, get

    names = set(available())
    for name, st in _stages().items():
        if "flows.method" not in st["cmd"]:
            continue
        method = get(st["cmd"].split()[3])
        allowed = {f"weakspot/{r}/{f}" for r in method.reads for f in ("__init__.py", "config.py")}
        others = {
            d
            for d in st["deps"]
            if d.startswith("weakspot/")
            and d.count("/") >= 1
            and d.split("/")[1] in names - {method.name}
            and d not in allowed
        }
        assert not others, f"stage {name} depends on other methods' code: {sorted(others)}"


def test_another_targets_override_is_no_params_of_this_targets_stage():
    from ops.engine.pipeline import stages
    from weakspot.config import read_yaml
    from weakspot.methods import get

    raw = read_yaml(ROOT / "params.yaml")
    st = stages(raw)
    for name, s in st.items():
        if "flows.method" not in s["cmd"]:
            continue
        _, method, target = s["cmd"].split()[2:]
        for section in (method, *get(method).reads):
            for p in s["params"]:
                if isinstance(p, str) and p.startswith(f"{section}.per_target."):
                    assert p == f"{section}.per_target.{target}", (name, p)


def test_stages_are_per_target_and_only_where_a_method_fits():
    stages = _stages()
    for t in ("digits", "phoneme", "scenes"):
        assert f"prepare-{t}" in stages and f"train-{t}" in stages
    assert "gad-phoneme" in stages and "gad-digits" not in stages and "gad-scenes" not in stages
    assert "examine-scenes" in stages and "examine-digits" not in stages
    # a target's stages read that target's params only
    train = stages["train-digits"]["params"]
    assert train[:-1] == ["device", "threads", "targets.digits.model", "targets.digits.train"]
    # and the versions of the packages it computes with (tests/ops/test_identity.py)
    assert list(train[-1]) == ["packages.yaml"] and {"python", "torch", "numpy"} <= set(train[-1]["packages.yaml"])
    assert "examine.T" in stages["examine-scenes"]["params"]
    assert not any(str(p).startswith("examine") for p in stages["train-scenes"]["params"])
    assert "examine_study" not in stages  # the paper's study: profiles/paper.yaml
    from ops.engine.pipeline import stages as generate
    from weakspot.config import read_yaml

    raw = read_yaml(ROOT / "params.yaml")
    raw["examine"]["study"]["artificial_weakness"]["enabled"] = True
    assert "examine.T" not in generate(raw)["examine_study"]["params"]


def test_the_study_reads_the_scene_targets_model_it_reuses():
    import pytest

    from ops.engine.pipeline import stages
    from weakspot.config import read_yaml
    from weakspot.errors import ConfigError

    raw = read_yaml(ROOT / "params.yaml")
    raw["examine"]["study"]["artificial_weakness"]["enabled"] = True  # off by default: profiles/paper.yaml
    name = raw["examine"]["study"].get("full_model")
    if name:  # a retrained scenes model reruns the study
        assert f"data/targets/{name}/model" in stages(raw)["examine_study"]["deps"]
    raw["examine"]["study"]["full_model"] = "digits"
    with pytest.raises(ConfigError, match="full_model: 'digits' is not a scene target; scene targets: scenes"):
        stages(raw)


def test_no_stage_depends_on_operations_code():
    """Issue 48: no stage imports ``ops`` (the report reads what the verdict wrote into the history store; the
    pipeline's params sections are tasks.settings), so a change to the engine, the verdict or provenance reruns no
    stage; the report still depends on the history store and its trend figure's module."""
    for name, st in _stages().items():
        ops_deps = [d for d in st["deps"] if d == "ops" or d.startswith("ops/")]
        assert not ops_deps, f"stage {name} depends on {ops_deps}"
    assert {"tasks/trend.py", "history"} <= set(_stages()["report"]["deps"])


def test_a_modules_closure_holds_the_packages_python_runs_before_it():
    """Importing ``weakspot.gad.ranking`` runs ``weakspot/__init__`` and ``weakspot/gad/__init__`` first (the method's
    registration), though the module imports neither: a plug-in whose entry point never imports its own package still
    has its registration and params model among its stage's deps."""
    from tasks.closure import module_closure

    files = module_closure("weakspot.gad.ranking")
    assert {
        "weakspot/__init__.py",
        "weakspot/gad/__init__.py",
        "weakspot/gad/config.py",
        "weakspot/gad/ranking.py",
    } <= set(files)
