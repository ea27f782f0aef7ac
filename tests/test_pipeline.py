"""The pipeline end to end, as a user runs it: `dvc repro` of Prefect flows, incremental reruns, bad inputs.

Runs in a throwaway copy of the repository with the `smoke` profile (every stage, tiny budgets).
"""

import hashlib
import json
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
STAGES = ["prepare", "train_target", "gad", "render", "train_examine", "examine", "report"]


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _snapshot(root: Path) -> dict:
    out = {}
    for d in ("data/prepared", "data/target", "data/render", "data/examine", "metrics", "plots", "reports"):
        for f in sorted((root / d).rglob("*")):
            if f.is_file():
                out[str(f.relative_to(root))] = _sha(f)
    return out


@pytest.fixture(scope="module")
def repo(repo_factory):
    import yaml

    r = repo_factory("pipeline")
    r.set_params(**yaml.safe_load((ROOT / "profiles/smoke.yaml").read_text()))
    r.dvc("repro")
    return r


def test_full_run_writes_model_metrics_and_report(repo):
    m = json.loads((repo.path / "metrics/train_target.json").read_text())
    assert m["test_accuracy"] >= 0.9  # a short run; the default profile's 0.95 is checked by `make audit`
    assert 0.0 <= m["ece"] <= 0.2
    page = (repo.path / "reports/index.html").read_text()
    assert "Target model" in page and "data:image/png;base64," in page
    for stage in STAGES[:-1]:  # every stage added its section through the same mechanism
        assert f"id='{stage}'" in page, stage
    gad = json.loads((repo.path / "metrics/gad.json").read_text())
    assert set(gad["phoneme"]["sdr"]) == {"gad", "random", "lakkaraju", "bansal_weld", "facility_location", "low_confidence"}
    ex = json.loads((repo.path / "metrics/examine.json").read_text())
    assert set(ex["small_cnn"]) == {"random", "bo", "rl"} and "artificial_weakness" in ex
    lin = json.loads((repo.path / "plots/train_target/section.json").read_text())["lineage"]
    assert lin["params"]["train_target"]["epochs"] == 25
    assert lin["code"]["git_commit"] and all(len(h) == 64 for h in lin["inputs"].values())
    assert (repo.path / "data/target/model.pt").is_file()


def test_changing_a_report_param_reruns_only_the_report(repo):
    before = _snapshot(repo.path)
    repo.set_params(report={"title": "nightly audit of the digits model"})
    status = repo.dvc("status").stdout
    assert "report:" in status and all(f"{s}:" not in status for s in STAGES[:-1]), status
    out = repo.dvc("repro").stdout
    assert "Running stage 'report'" in out
    assert all(f"Running stage '{s}'" not in out for s in STAGES[:-1]), out
    after = _snapshot(repo.path)
    changed = {k for k in after if before.get(k) != after[k]}
    assert changed == {"reports/index.html"}
    assert "nightly audit of the digits model" in (repo.path / "reports/index.html").read_text()


def _fails_cleanly(repo, stage, pattern):
    before = _snapshot(repo.path)
    proc = repo.stage(stage)
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert pattern in proc.stderr, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr
    assert _snapshot(repo.path) == before  # nothing earlier was lost or half-written
    return proc.stderr


@pytest.fixture
def restore_params(repo):
    p = repo.path / "params.yaml"
    text = p.read_text()
    yield
    p.write_text(text)


def test_malformed_yaml_stops_the_stage(repo, restore_params):
    (repo.path / "params.yaml").write_text("train_target:\n  epochs: [3\n")
    _fails_cleanly(repo, "train_target", "malformed YAML at line")


def test_unknown_key_stops_the_stage(repo, restore_params):
    repo.set_params(train_target={"epoch": 3})
    _fails_cleanly(repo, "train_target", "unknown key 'train_target.epoch'")


def test_wrong_type_stops_the_stage(repo, restore_params):
    repo.set_params(train_target={"epochs": "ten"})
    _fails_cleanly(repo, "train_target", "train_target.epochs = 'ten'")


def test_missing_data_file_stops_prepare(repo, restore_params):
    repo.set_params(prepare={"source": "csv:data/absent.csv", "label": "y"})
    _fails_cleanly(repo, "prepare", "data/absent.csv")


def _user_model(repo, body: str):
    pkg = repo.path / "usermodels.py"
    pkg.write_text("import numpy as np\n\n" + body)


def test_wrong_model_output_shape_stops_train_target(repo, restore_params):
    _user_model(repo, "def make():\n    return lambda x: np.full((len(x), 3), 1 / 3)\n")
    repo.set_params(train_target={"model": {"kind": "callable", "factory": "usermodels:make", "arch": None}})
    _fails_cleanly(repo, "train_target", "expected (n, k)")


def test_nan_probabilities_stop_train_target(repo, restore_params):
    _user_model(repo, "def make():\n    return lambda x: np.full((len(x), 10), np.nan)\n")
    repo.set_params(train_target={"model": {"kind": "callable", "factory": "usermodels:make", "arch": None}})
    _fails_cleanly(repo, "train_target", "NaN")
