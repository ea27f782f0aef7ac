"""dvc.yaml cannot rot: it is what params.yaml generates, and every stage's deps cover every project module its flow
imports (found here independently of the generator: by importing the flow in a fresh interpreter)."""

import json
import subprocess
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]


def _stages():
    return yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"]


def test_committed_dvc_yaml_is_what_params_generate():
    from tasks.pipeline import dvc_yaml
    from weakspot.config import read_yaml

    assert (ROOT / "dvc.yaml").read_text() == dvc_yaml(read_yaml(ROOT / "params.yaml")), \
        "dvc.yaml is stale: run `weakspot pipeline`"


def _runtime_imports(module: str) -> set:
    """Project files loaded by importing ``module`` in a fresh interpreter."""
    code = ("import json, sys, importlib; importlib.import_module(%r); "
            "print(json.dumps(sorted(m.__file__ for m in list(sys.modules.values()) if getattr(m, '__file__', None))))"
            % module)
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    files = set()
    for f in json.loads(out.splitlines()[-1]):
        p = Path(f).resolve()
        if ROOT in p.parents and p.parts[len(ROOT.parts)] in ("weakspot", "flows", "tasks"):
            files.add(str(p.relative_to(ROOT)))
    return files


def _covered(file: str, deps: list) -> bool:
    return any(file == d or file.startswith(d.rstrip("/") + "/") for d in deps)


def test_every_stage_depends_on_every_project_module_its_flow_imports():
    stages = _stages()
    checked = {}
    for name, st in stages.items():
        module = st["cmd"].split()[2]  # python -m flows.<stage> [target]
        if module not in checked:
            checked[module] = _runtime_imports(module)
        missing = [f for f in sorted(checked[module]) if not _covered(f, st["deps"])]
        assert not missing, f"stage {name}: deps miss {missing}"
    assert {"flows.prepare", "flows.train", "flows.gad", "flows.examine", "flows.report"} <= set(checked)


def test_stages_are_per_target_and_only_where_a_method_fits():
    stages = _stages()
    for t in ("digits", "phoneme", "scenes"):
        assert f"prepare-{t}" in stages and f"train-{t}" in stages
    assert "gad-phoneme" in stages and "gad-digits" not in stages and "gad-scenes" not in stages
    assert "examine-scenes" in stages and "examine-digits" not in stages
    # a target's stages read that target's params only
    assert stages["train-digits"]["params"] == ["device", "targets.digits.model", "targets.digits.train"]
    assert "examine.T" in stages["examine-scenes"]["params"]
    assert not any(p.startswith("examine") for p in stages["train-scenes"]["params"])
    assert "examine.T" not in stages["examine_study"]["params"]


def test_the_study_reads_the_scene_targets_model_it_reuses():
    import pytest

    from tasks.pipeline import stages
    from weakspot.config import read_yaml
    from weakspot.errors import ConfigError

    raw = read_yaml(ROOT / "params.yaml")
    name = raw["examine"]["study"].get("full_model")
    if name:  # a retrained scenes model reruns the study
        assert f"data/targets/{name}/model" in stages(raw)["examine_study"]["deps"]
    raw["examine"]["study"]["full_model"] = "digits"
    with pytest.raises(ConfigError, match="full_model: 'digits' is not a scene target; scene targets: scenes"):
        stages(raw)
