"""One identity (issue 46): what DVC reruns, what Prefect's cache serves and what the lineage records are the same
thing, a stage's deps (the project's modules, the user's model modules, a plug-in's files, data, weights), its params
(device and threads included) and the versions of the packages it computes with.

The unit tests check the parts on problems whose answer is known; the audit tests change what a user changes in a
small audit of their own (a torch factory and a ``callable`` model on the digits, a plug-in method installed from a
folder of its own, with a cached call) and watch DVC and Prefect: what reruns, what is served from the cache, what
the report says.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]


# ------------------------------------------------------------------------------------------------ the parts


def test_committed_packages_yaml_is_what_this_environment_and_dvc_yaml_generate():
    from ops.engine.pipeline import packages_of
    from tasks.packages import packages_yaml

    stages = yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"]
    assert (ROOT / "packages.yaml").read_text() == packages_yaml(packages_of(stages)), (
        "packages.yaml is stale: run `weakspot pipeline`"
    )


def test_modules_are_located_without_running_them():
    from tasks.closure import locate

    assert locate("weakspot").kind == "file" and locate("tasks").base == ROOT
    assert locate("numpy").kind == "dist" and locate("sklearn").kind == "dist"
    assert locate("json").kind == "stdlib" and locate("sys").kind == "stdlib"
    assert locate("no_such_module_anywhere").kind == "missing"


def test_a_distributions_identity_holds_what_it_requires_and_no_orchestrator():
    from tasks.packages import distributions, requires

    sk = distributions(["sklearn"])
    # scikit-learn's own metadata requires these four
    assert {"python", "scikit-learn", "numpy", "scipy", "joblib", "threadpoolctl"} <= set(sk)
    assert requires("scikit-learn") <= set(sk)
    assert "torch" not in sk and "pandas" not in sk  # nothing it does not need
    assert distributions(["prefect"]) == ["python"]  # where a stage runs is no part of what it computes


def test_a_users_package_is_followed_and_an_installed_one_is_not(tmp_path, monkeypatch):
    from tasks import closure

    pkg = tmp_path / "mypkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "nets.py").write_text("import numpy\nfrom . import helpers\n\ndef build():\n    import helper2\n")
    (pkg / "helpers.py").write_text("import json\n")
    (pkg / "sub" / "unused.py").write_text("")
    (tmp_path / "helper2.py").write_text("from weakspot import errors\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    closure.locate.cache_clear()
    try:
        files = closure.user_package("mypkg.nets")
        dists = closure.distributions_imported("mypkg.nets")
    finally:
        closure.locate.cache_clear()
    # the package it sits in (every file), what it imports from outside installed distributions (a module beside it,
    # the project's own modules), not numpy's files: numpy is identified by its version
    assert {str(pkg / f) for f in ("__init__.py", "nets.py", "helpers.py", "sub/__init__.py", "sub/unused.py")} <= set(
        files
    )
    assert str(tmp_path / "helper2.py") in files and "weakspot/errors.py" in files
    assert not any("site-packages" in f for f in files)
    assert "numpy" in dists


def test_a_users_folder_without_init_is_followed_as_a_package(tmp_path, monkeypatch):
    from tasks import closure

    (tmp_path / "mymodels").mkdir()  # a namespace package (PEP 420): modules, no __init__.py
    (tmp_path / "mymodels" / "nets.py").write_text("import numpy\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    closure.locate.cache_clear()
    try:
        assert closure.locate("mymodels").kind == "file"
        assert closure.user_package("mymodels.nets") == [str(tmp_path / "mymodels" / "nets.py")]
        assert closure.distributions_imported("mymodels.nets") == ["numpy"]
    finally:
        closure.locate.cache_clear()


def test_the_extras_a_distribution_asks_of_another_are_followed():
    from tasks.packages import _installed, _requires, distributions

    # torch asks cuda-toolkit for [cublas, cufft, ...]: those extras bring the CUDA libraries it computes with
    wants = {(n, e) for n, e in _requires("torch", frozenset()) if e}
    if not wants:
        pytest.skip("this torch build asks no distribution for extras")
    name, extras = sorted(wants)[0]
    brought = {n for n, _ in _requires(name, extras)} - {n for n, _ in _requires(name, frozenset())}
    assert brought and brought <= set(distributions(["torch"])) and brought <= set(_installed())


def test_a_rerun_names_the_packages_an_audit_computed_with_at_other_versions(tmp_path):
    from ops.provenance.rerun import package_drift
    from tasks.packages import entry

    here = {n: entry(n) for n in ("numpy", "python")}
    lock = {"stages": {"a": {"params": {"packages.yaml": {**here, "torch": "0.0.1"}}}, "b": {"params": {}}}}
    (tmp_path / "dvc.lock").write_text(yaml.safe_dump(lock))
    assert package_drift(tmp_path / "dvc.lock") == [f"torch 0.0.1 -> {entry('torch')}"]


def test_an_entry_changes_with_the_version_of_anything_its_distribution_requires(monkeypatch):
    from tasks import packages

    torch = packages.entry("torch")
    assert torch.startswith(packages.versions(["torch"])["torch"] + " with ")
    dep = packages.required("torch")[0]
    real = packages.versions
    monkeypatch.setattr(
        packages, "versions", lambda names: {n: ("0.0" if n == dep else v) for n, v in real(names).items()}
    )
    assert packages.entry("torch") != torch  # one requirement upgraded: the entry of what requires it changes
    assert packages.entry("python") == real(["python"])["python"]


def _stage_repo(tmp_path: Path) -> Path:
    (tmp_path / "code.py").write_text("x = 1\n")
    (tmp_path / "data.txt").write_text("rows\n")
    (tmp_path / "params.yaml").write_text("device: cpu\nthreads: 1\nm: {a: 1, b: 2}\nother: 5\n")
    (tmp_path / "packages.yaml").write_text("python: 3.11.7\nnumpy: 1.26.4\n")
    stages = {
        "s": {
            "cmd": "python -m flows.nothing",
            "deps": ["code.py", "data.txt"],
            "params": ["device", "threads", "m.a", {"packages.yaml": ["python", "numpy"]}],
            "outs": ["out"],
        }
    }
    (tmp_path / "dvc.yaml").write_text(yaml.safe_dump({"stages": stages}))
    return tmp_path


def test_the_stage_identity_changes_with_each_dep_param_and_package_and_with_nothing_else(tmp_path):
    from tasks.identity import digest, stage_identity

    root = _stage_repo(tmp_path)
    base = digest(stage_identity("s", root))
    changes = {
        "code.py": "x = 2\n",
        "data.txt": "rows!\n",
        "params.yaml": "device: cuda\nthreads: 1\nm: {a: 1, b: 2}\nother: 5\n",
        "packages.yaml": "python: 3.11.7\nnumpy: 1.26.5\n",
    }
    for f, text in changes.items():
        old = (root / f).read_text()
        (root / f).write_text(text)
        assert digest(stage_identity("s", root)) != base, f
        (root / f).write_text(old)
        assert digest(stage_identity("s", root)) == base, f
    for text in ("device: cpu\nthreads: 2\nm: {a: 1, b: 2}\nother: 5\n", "device: cpu\nthreads: 1\nm: {a: 3, b: 2}\n"):
        (root / "params.yaml").write_text(text)
        assert digest(stage_identity("s", root)) != base
    # a param the stage does not read (m.b, other) changes nothing
    (root / "params.yaml").write_text("device: cpu\nthreads: 1\nm: {a: 1, b: 9}\nother: 6\n")
    assert digest(stage_identity("s", root)) == base


def test_a_cached_calls_key_is_the_stage_identity_and_its_own_arguments(monkeypatch):
    from tasks.identity import ENV, call_key
    from tasks.method import PipelineRuntime

    monkeypatch.setenv(ENV, "a")
    k = PipelineRuntime.key("m:f", {"seed": 0})
    assert k == call_key("m:f", {"seed": 0}) != PipelineRuntime.key("m:f", {"seed": 1})
    monkeypatch.setenv(ENV, "b")
    assert PipelineRuntime.key("m:f", {"seed": 0}) != k
    # outside a stage: a key of this process alone (no other process's result under other params or code is served)
    monkeypatch.delenv(ENV)
    here = PipelineRuntime.key("m:f", {"seed": 0})
    assert here != k and here == PipelineRuntime.key("m:f", {"seed": 0})
    code = "from tasks.identity import call_key; print(call_key('m:f', {'seed': 0}))"
    env = {k: v for k, v in os.environ.items() if k != ENV}
    other = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, check=True)
    assert other.stdout.strip() != here
    # the arguments are not in the key, so two calls of one function with one key in a stage are refused
    rt = PipelineRuntime(device="cpu")
    rt._claim("m:f", {"seed": 0})
    with pytest.raises(ValueError, match="same key"):
        rt._claim("m:f", {"seed": 0})


# ------------------------------------------------------------------------------------------------ a user's audit

USERNETS = """
import torch

SWAP = False  # the output of classes 0 and 1 exchanged


class Net(torch.nn.Module):
    def __init__(self, n_classes, input_shape):
        super().__init__()
        c, h, w = (int(s) for s in input_shape)
        self.body = torch.nn.Sequential(
            torch.nn.Conv2d(c, 8, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2), torch.nn.Flatten(),
            torch.nn.Linear(8 * (h // 2) * (w // 2), n_classes),
        )

    def forward(self, x):
        out = self.body(x)
        return out[:, [1, 0, *range(2, out.shape[1])]] if SWAP else out


def build(n_classes, input_shape):
    return Net(n_classes, input_shape).eval()
"""

USERFNS = """
import numpy as np

SWAP = False


def make():
    centroids = np.load("data/user/centroids.npy")

    def predict(x):
        x = np.asarray(x, dtype=np.float64).reshape(len(x), -1)
        logits = -((x[:, None, :] - centroids[None]) ** 2).sum(-1) * 5
        p = np.exp(logits - logits.max(1, keepdims=True))
        p = p / p.sum(1, keepdims=True)
        return p[:, [1, 0, *range(2, p.shape[1])]] if SWAP else p

    return predict
"""

PLUGIN = {
    "toyplug/__init__.py": """
from weakspot.methods import Method, StageSpec, register_method
from toyplug.config import ToyParams

register_method(Method("toyplug", "Toy plug-in: least confident rows", "none (a test plug-in)", params=ToyParams,
                       run="toyplug.run:run", stage=StageSpec(order=60, headline=("least_confidence",))))
""",
    "toyplug/config.py": """
from pydantic import BaseModel, ConfigDict, Field


class ToyParams(BaseModel):
    model_config = ConfigDict(extra="forbid")
    top: int = Field(3, ge=1)
""",
    "toyplug/run.py": """
import humanize
import numpy as np
import pandas as pd

from weakspot.methods import MethodReport
from weakspot.result import StageResult


def confidences(p):
    return np.asarray(p).max(axis=1)


def run(target, params, runtime):
    p = target.model.predict_proba(target.test.X)
    conf = runtime.cached(confidences, p, key={"call": 0}, label="test rows")
    worst = np.argsort(conf, kind="stable")[: params.top]
    found = pd.DataFrame({"weak_spot": [f"test row {i}" for i in worst], "kind": "input",
                          "severity": 1 - conf[worst], "severity_meaning": "1 - the model's top probability",
                          "label": [target.classes[target.test.y[i]] for i in worst],
                          "prediction": [target.classes[p[i].argmax()] for i in worst], "confidence": conf[worst]})
    section = StageResult(metrics={"least_confidence": float(conf.min())}, title=f"Toy plug-in ({target.name})",
                          summary=[f"{humanize.apnumber(params.top)} least confident test rows."])
    return MethodReport(section=section, findings=found)
""",
    "toyplug-0.1.dist-info/METADATA": "Metadata-Version: 2.1\nName: toyplug\nVersion: 0.1\n",
    "toyplug-0.1.dist-info/entry_points.txt": "[weakspot.methods]\ntoyplug = toyplug\n",
}

TARGETS = ("net", "fn")


def _build_users_audit(folder: Path) -> None:
    import numpy as np
    import torch
    from sklearn.datasets import load_digits

    from conftest import Repo, _copy_repo, set_targets

    r = Repo(_copy_repo(folder))
    plugins = _plugins(r.path)  # a package folder of its own, outside the checkout
    for f, text in PLUGIN.items():
        (plugins / f).parent.mkdir(parents=True, exist_ok=True)
        (plugins / f).write_text(text.lstrip())
    (r.path / "usernets.py").write_text(USERNETS.lstrip())
    (r.path / "userfns.py").write_text(USERFNS.lstrip())
    d = load_digits()
    pixels = (d.images * 255 / 16).astype(np.uint8)
    (r.path / "data/user").mkdir(parents=True)
    np.savez(r.path / "data/user/train.npz", x=pixels[:1000], y=d.target[:1000])
    np.savez(r.path / "data/user/test.npz", x=pixels[1000:1400], y=d.target[1000:1400])
    X = pixels[:1000].astype(np.float32)[:, None] / 255
    np.save(r.path / "data/user/centroids.npy", np.stack([X[d.target[:1000] == k].mean(0).ravel() for k in range(10)]))
    spec = importlib.util.spec_from_file_location("usernets_for_training", r.path / "usernets.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    torch.manual_seed(0)
    net = mod.build(10, (1, 8, 8)).train()
    opt = torch.optim.Adam(net.parameters(), lr=0.02)
    xt, yt = torch.as_tensor(X), torch.as_tensor(d.target[:1000].astype(np.int64))
    for _ in range(60):
        opt.zero_grad()
        torch.nn.functional.cross_entropy(net(xt), yt).backward()
        opt.step()
    torch.save(net.state_dict(), r.path / "data/user/net.pt")
    data = {"train": "npz:data/user/train.npz", "test": "npz:data/user/test.npz"}
    targets = {
        "net": {
            "data": data,
            "model": {"kind": "torch", "factory": "usernets:build", "weights": "data/user/net.pt"},
            "methods": ["segments", "toyplug"],
        },
        "fn": {"data": data, "model": {"kind": "callable", "factory": "userfns:make"}, "methods": ["toyplug"]},
    }
    raw = set_targets(yaml.safe_load((r.path / "params.yaml").read_text()), targets)
    raw.pop("examine", None)  # the examiner's study needs a scene target
    raw["execution"] = {**(raw.get("execution") or {}), "in_checkout": True}
    (r.path / "params.yaml").write_text(yaml.safe_dump(raw, sort_keys=False))
    _repo(r.path).audit()


def _plugins(folder: Path) -> Path:
    """The plug-in's package folder of the users' checkout ``folder``: beside it, outside it."""
    return folder.parent / f"{folder.name}-plugins"


def _repo(folder: Path):
    from conftest import Repo

    r = Repo(folder)
    r.env["PYTHONPATH"] += f"{':'}{_plugins(folder)}"
    return r


@pytest.fixture(scope="module")
def users(tmp_path_factory):
    """The users' audit, built once; this module is its only user, so its tests change it in place, in order (a copy
    would need an audit of its own: the plug-in's deps are absolute paths, outside the checkout)."""
    from conftest import built_once

    return _repo(built_once(tmp_path_factory, "identity-audited", _build_users_audit))


def _audit(r, *stages: str) -> None:
    """``weakspot audit``: a dropped accuracy is a regression or a failed gate (exit 3), not an error."""
    proc = r.run(sys.executable, "-m", "ops.cli", "audit", *stages, check=False)
    assert proc.returncode in (0, 3), (proc.returncode, proc.stdout[-3000:], proc.stderr[-3000:])


def _status(r) -> set:
    from test_pipeline import _stages

    return _stages(r.dvc("status").stdout)


def _accuracy(r, t: str) -> float:
    return json.loads((r.path / f"metrics/train/{t}.json").read_text())["test_accuracy"]


def _edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text, (path, old)
    path.write_text(text.replace(old, new))


def _every_stage_of(r, t: str) -> set:
    stages = yaml.safe_load((r.path / "dvc.yaml").read_text())["stages"]
    return {n for n, st in stages.items() if st["cmd"].split()[2:] and st["cmd"].split()[-1] == t} - {f"prepare-{t}"}


@pytest.mark.pipeline
@pytest.mark.timeout(3600)
def test_the_users_modules_and_the_plugins_files_are_deps_and_the_audit_is_current(users):
    r = users
    stages = yaml.safe_load((r.path / "dvc.yaml").read_text())["stages"]
    assert "usernets.py" in stages["train-net"]["deps"] and "usernets.py" in stages["segments-net"]["deps"]
    assert "userfns.py" in stages["toyplug-fn"]["deps"] and "usernets.py" not in stages["toyplug-fn"]["deps"]
    plugin = str(_plugins(r.path) / "toyplug" / "run.py")  # every file of it it loads, by its absolute path
    assert plugin in stages["toyplug-net"]["deps"] and plugin not in stages["segments-net"]["deps"]
    assert _status(r) == set()
    assert 0.8 < _accuracy(r, "net") and 0.8 < _accuracy(r, "fn")


@pytest.mark.pipeline
@pytest.mark.timeout(3600)
def test_the_lineage_of_a_number_names_the_users_module_its_hash_the_params_and_the_package_versions(users):
    from weakspot.hashing import file_digest

    r = users
    out = r.run(sys.executable, "-m", "ops.cli", "lineage", "metrics/train/net.json", "test_accuracy").stdout
    assert f"metrics/train/net.json  test_accuracy = {_accuracy(r, 'net')}" in out
    assert f"your code usernets.py  md5 {file_digest(r.path / 'usernets.py', 'md5')}" in out
    versions = yaml.safe_load((r.path / "packages.yaml").read_text())
    assert f"torch {versions['torch']}" in out and f"python {versions['python']}" in out
    assert 'targets.net.model.factory = "usernets:build"' in out
    data = json.loads(r.run(sys.executable, "-m", "ops.cli", "lineage", "metrics/train/net.json", "--json").stdout)
    first = data["chain"][0]
    assert first["stage"] == "train-net" and first["packages"]["numpy"] == versions["numpy"]
    assert len(first["identity_sha256"]) == 64


@pytest.mark.pipeline
@pytest.mark.timeout(3600)
def test_the_users_factory_a_callable_models_module_and_a_plugins_file_each_rerun_their_stages_only(users):
    """Each edit alone: ``dvc status`` names the stages that load the file, nothing else; then one audit of the
    three: the swapped classes change both models' accuracy and the plug-in's new text is in the report."""
    r = users
    factory, fn, plugin = r.path / "usernets.py", r.path / "userfns.py", _plugins(r.path) / "toyplug/run.py"
    edits = [
        (factory, "SWAP = False", "SWAP = True", _every_stage_of(r, "net")),
        (fn, "SWAP = False", "SWAP = True", _every_stage_of(r, "fn")),
        (plugin, "least confident test rows", "least sure test rows", {"toyplug-net", "toyplug-fn"}),
    ]
    assert edits[0][3] == {"train-net", "segments-net", "toyplug-net"} and edits[1][3] == {"train-fn", "toyplug-fn"}
    for path, old, new, stages in edits:
        _edit(path, old, new)
        assert _status(r) == stages, path.name
        _edit(path, new, old)
        assert _status(r) == set(), path.name
    before = {t: _accuracy(r, t) for t in TARGETS}
    for path, old, new, _ in edits:
        _edit(path, old, new)
    _audit(r)
    after = {t: _accuracy(r, t) for t in TARGETS}
    for t in TARGETS:  # classes 0 and 1 are a fifth of the test rows
        assert after[t] < before[t] - 0.1, (t, before, after)
    assert "least sure test rows" in (r.path / "reports/index.html").read_text()
    assert _status(r) == set()


@pytest.mark.pipeline
@pytest.mark.timeout(3600)
def test_a_new_version_of_a_package_reruns_the_stages_that_import_it_and_no_others(users):
    r = users
    # simulated in the identity, not reinstalled: only the plug-in's run module imports humanize
    stages = yaml.safe_load((r.path / "dvc.yaml").read_text())["stages"]
    importers = {
        n for n, st in stages.items() for e in st["params"] if isinstance(e, dict) and "humanize" in e["packages.yaml"]
    }
    assert importers == {"toyplug-net", "toyplug-fn"}
    assert _status(r) == set()
    f = r.path / "packages.yaml"
    version = yaml.safe_load(f.read_text())["humanize"]
    _edit(f, f"humanize: {version}", "humanize: 999.0")
    assert _status(r) == importers
    _edit(f, "humanize: 999.0", f"humanize: {version}")
    assert _status(r) == set()


def _repro_alone(r, env: dict, stage: str) -> None:
    """``dvc repro --force --single-item <stage>`` on the audit's Prefect server (``env``) and result store, as an
    audit runs it, without the stages before it."""
    import subprocess

    dvc = str(Path(sys.executable).parent / "dvc")
    proc = subprocess.run(
        [dvc, "repro", "--force", "--single-item", stage], cwd=r.path, env=env, capture_output=True, text=True
    )
    assert proc.returncode == 0, (proc.stdout[-3000:], proc.stderr[-3000:])


def _call_states(env: dict, since) -> list:
    """The states of the plug-in's cached call (``confidences``) made after ``since``, newest first."""
    import asyncio

    from prefect.client.orchestration import PrefectClient
    from prefect.client.schemas.filters import TaskRunFilter, TaskRunFilterName
    from prefect.client.schemas.sorting import TaskRunSort

    async def read(url):
        async with PrefectClient(url) as client:
            return await client.read_task_runs(
                task_run_filter=TaskRunFilter(name=TaskRunFilterName(like_="confidences")),
                sort=TaskRunSort.EXPECTED_START_TIME_DESC,
            )

    runs = asyncio.run(read(env["PREFECT_API_URL"]))
    # a run served from the cache never starts: told apart by when it was created
    return [t.state.name for t in runs if t.created is not None and t.created >= since]


@pytest.mark.pipeline
@pytest.mark.timeout(3600)
def test_a_changed_param_device_or_threads_misses_every_cached_call_and_an_unchanged_stage_hits(users):
    import datetime

    from ops.engine.server import prefect_server

    r = users
    now = lambda: datetime.datetime.now(datetime.timezone.utc)  # noqa: E731
    with prefect_server({**r.env, "PREFECT_HOME": str(r.path / ".prefect")}) as env:
        env = {**env, "PREFECT_LOCAL_STORAGE_PATH": str(r.path / ".prefect/results")}
        # the stage run again unchanged (forced: DVC would restore its outputs from its cache) is served from Prefect's
        t0 = now()
        _repro_alone(r, env, "toyplug-net")
        assert _call_states(env, t0) == ["Cached"]
        # each change alone (the stage alone: its model's stage rerun would change its deps too): DVC sees it, and
        # the call is computed again
        for i, change in enumerate(({"threads": 2}, {"device": "cpu"}, {"toyplug": {"top": 4}})):
            t0 = now()
            r.set_params(**change)
            r.run(sys.executable, "-m", "ops.cli", "pipeline")  # as an audit does first (a new section's keys)
            assert "toyplug-net" in _status(r), change
            _repro_alone(r, env, "toyplug-net")
            assert _call_states(env, t0) == ["Completed"], change
            if i == 0:
                t0 = now()
                _repro_alone(r, env, "toyplug-net")  # and the new identity's result is cached in turn
                assert _call_states(env, t0) == ["Cached"], change
