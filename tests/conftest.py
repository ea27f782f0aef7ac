import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Callable, Dict, List, Tuple

import pytest

ROOT = Path(__file__).resolve().parents[1]
os.environ.setdefault("MPLBACKEND", "Agg")


@pytest.fixture(autouse=True)
def _one_torch_thread():
    """The tests' tensors are tiny; on a shared 2-core machine extra intra-op threads only spin-wait."""
    import torch

    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


def _copy_repo(dst: Path) -> Path:
    """A fresh git checkout-like copy of the working tree's tracked and new (non-ignored) files."""
    files = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    for f in files:
        src = ROOT / f
        if src.is_file():
            (dst / f).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dst / f)
    for extra in (".dvc/config", ".dvc/.gitignore", ".dvcignore"):
        if (ROOT / extra).is_file() and not (dst / extra).exists():
            (dst / extra).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / extra, dst / extra)
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@t",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@t",
    }
    subprocess.run(["git", "init", "-q"], cwd=dst, check=True)
    subprocess.run(["git", "add", "-A"], cwd=dst, check=True)
    subprocess.run(["git", "commit", "-qm", "copy"], cwd=dst, check=True, env=env)
    return dst


class Repo:
    """A throwaway copy of the repository in which stages and `dvc repro` run as a user would run them."""

    def __init__(self, path: Path):
        self.path = path
        # PYTHONPATH: every process runs the copy's code (the venv's editable install points at the checkout), so a
        # test may change the copy's code (add a method, edit a module) and the CLI and stages see it
        self.env = {
            **os.environ,
            "PATH": str(Path(sys.executable).parent) + os.pathsep + os.environ["PATH"],
            "WEAKSPOT_ROOT": str(path),
            "PYTHONPATH": str(path),
        }
        self.env.pop("WEAKSPOT_PARAMS", None)
        self.env.pop("PREFECT_HOME", None)
        self.env.pop("PREFECT_LOCAL_STORAGE_PATH", None)
        # the migrated Prefect database, so that the audit's server starts in seconds (tests/prefect_db.py)
        import prefect_db

        if prefect_db.prepare(self.env):
            (path / ".prefect").mkdir(exist_ok=True)
            prefect_db.seed(path / ".prefect", self.env)

    def run(self, *args, check=True):
        proc = subprocess.run(list(args), cwd=self.path, env=self.env, capture_output=True, text=True)
        if check and proc.returncode != 0:
            raise AssertionError(f"{args} failed ({proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
        return proc

    def dvc(self, *args, check=True):
        return self.run(str(Path(sys.executable).parent / "dvc"), *args, check=check)

    def stage(self, name, target=None, check=False):
        from weakspot.methods import available

        flow = ["flows.method", name] if name in available() else [f"flows.{name}"]
        return self.run(sys.executable, "-m", *flow, *([target] if target else []), check=check)

    def audit(self, *args):
        """`weakspot audit` as a user runs it (regenerates dvc.yaml, one shared Prefect server, dvc repro): ``python -m
        ops.cli`` is the console script's code, this copy's own."""
        return self.run(sys.executable, "-m", "ops.cli", "audit", *args)

    def set_params(self, **sections):
        import yaml

        from weakspot.config import deep_merge

        p = self.path / "params.yaml"
        p.write_text(yaml.safe_dump(deep_merge(yaml.safe_load(p.read_text()), sections), sort_keys=False))


def declare(root: Path, *outputs: str) -> Path:
    """Add a stage declaring ``outputs`` to ``root/dvc.yaml`` (made if missing): the audit's manifest
    (tasks/manifest.py) of a test's planted files, since every reader reads only what dvc.yaml declares."""
    import yaml

    f = Path(root) / "dvc.yaml"
    raw = (yaml.safe_load(f.read_text()) or {}) if f.is_file() else {}
    stages = raw.setdefault("stages", {})
    stages[f"planted-{len(stages)}"] = {"cmd": "true", "outs": list(outputs)}
    f.write_text(yaml.safe_dump(raw, sort_keys=False))
    return f


@pytest.fixture(scope="session")
def repo_factory(tmp_path_factory):
    def make(name="repo") -> Repo:
        return Repo(_copy_repo(tmp_path_factory.mktemp(name)))

    return make


#: The operations tests' audit: one tabular target (Phoneme's SVM, one C) and GAD on tiny budgets, so that a whole
#: `weakspot audit` (prepare, train, gad, report) takes well under a minute and can be run, killed, rerun, scheduled.
TINY_TARGET = {
    "data": {"source": "keel:phoneme", "bias": {"preset": "phoneme", "seed": 0}},
    "model": {"kind": "builtin", "arch": "svm_grid"},
    "train": {"seed": 0, "options": {"kernels": ["rbf"], "C": [0.1], "gamma": ["scale"], "cv": 2}},
}
TINY_GAD = {
    "seeds": [0, 1],
    "design_points": 1000,
    "epochs": 3,
    "max_steps": 60,
    "replicates": 3,
    "pool_size": 100,
    "budget": 10,
}


def set_targets(raw: dict, targets: dict) -> dict:
    """params.yaml's content ``raw`` with exactly these targets; every ``per_target`` override of another target
    is dropped (an override of an unknown target is an error)."""
    raw["targets"] = targets
    for section in raw.values():
        if isinstance(section, dict) and isinstance(section.get("per_target"), dict):
            section["per_target"] = {t: v for t, v in section["per_target"].items() if t in targets}
            if not section["per_target"]:
                del section["per_target"]
    return raw


def write_tiny_params(r: "Repo") -> "Repo":
    import yaml

    from weakspot.config import deep_merge

    p = r.path / "params.yaml"
    raw = set_targets(yaml.safe_load(p.read_text()), {"phoneme": TINY_TARGET})
    raw["gad"] = deep_merge(raw["gad"], TINY_GAD)
    raw.pop("examine", None)  # the examiner's study needs a scene target
    # one stage at a time but for the two leaves (segments, gad): a third worker would only start and wait
    raw["execution"] = {**(raw.get("execution") or {}), "workers": 2}
    p.write_text(yaml.safe_dump(raw, sort_keys=False))
    return r


def built_once(tmp_path_factory: pytest.TempPathFactory, name: str, build: Callable[[Path], None]) -> Path:
    """The folder ``name`` that ``build(folder)`` fills, built once for the whole test run: under pytest-xdist, by the
    first worker that asks (the others wait for it on a file lock: pytest-xdist's documented recipe), shared read-only.
    A test that changes it works on :func:`copy_repo` of it."""
    root = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        root = root.parent  # the run's base folder, above each worker's own
    from filelock import FileLock

    folder, done, failed = root / name, root / f"{name}.built", root / f"{name}.failed"
    with FileLock(str(root / f"{name}.lock")):
        if failed.exists():  # a build failed once: every test that needs it errors at once, with its reason
            raise AssertionError(f"building {name} failed earlier in this run:\n{failed.read_text()}")
        if not done.exists():
            shutil.rmtree(folder, ignore_errors=True)
            folder.mkdir(parents=True)
            try:
                build(folder)
            except BaseException as e:
                failed.write_text(f"{type(e).__name__}: {e}"[-5000:])
                raise
            done.touch()
    return folder


def copy_repo(src: Path, dst: Path) -> Repo:
    """A copy of the audited repository ``src`` (its git history, DVC cache and remote, Prefect results and history
    included) at ``dst``, its own from then on: the DVC remote of its config points into the copy."""
    shutil.copytree(src, dst, symlinks=True, dirs_exist_ok=True)
    local = dst / ".dvc" / "config.local"
    if local.is_file():
        local.write_text(local.read_text().replace(str(src), str(dst)))
    return Repo(dst)


def _tiny_audit(folder: Path) -> None:
    """The tiny audit, its stages run in the checkout (``execution.in_checkout``): the tests on it are about the
    history, gates, locks, kills, reruns and the schedule; those about workers audit on workers (test_workers.py,
    test_worker_killed.py, which compares its bytes with these)."""
    r = write_tiny_params(Repo(_copy_repo(folder)))
    r.set_params(execution={"in_checkout": True})
    r.audit()


@pytest.fixture(scope="module")
def ops_repo(tmp_path_factory):
    """A tiny repository audited once (``weakspot audit``, history recorded; its stages in the checkout) for the
    operations tests: history and regressions, exact reruns, Dask, kill -9, the schedule. The audit runs once for the whole test run; each test
    module gets a copy of its own (so the modules run on separate pytest-xdist workers), in which its tests run in
    the file's order. Tests that change it put it back as they found it."""
    src = built_once(tmp_path_factory, "ops-audited", _tiny_audit)
    return copy_repo(src, tmp_path_factory.mktemp("ops"))


# ------------------------------------------------------------------------------------------------ what a test costs

#: The cost markers (pyproject.toml's [tool.pytest.ini_options] markers): ``unit`` is given here to every test that
#: carries neither of the other two, so ``-m unit`` is the fast, in-process loop.
COSTS = ("ops", "pipeline", "unit")
#: Session fixtures that build nothing themselves (a factory): sharing them is no reason to run tests on one worker.
CHEAP_SHARED = {"repo_factory"}
#: The test files whose groups are handed out first, in this order (``make test`` keeps it: --no-loadscope-reorder):
#: the long groups first, each worker taking the next whenever it finishes one (pytest-xdist gives each two at the
#: start): the smoke audit, the pool audits, the users' audit, then the tiny audit's build (test_audit.py) before the
#: groups that copy it, and last the tests that copy the smoke audit (taken once a worker is free, by when it is
#: built: they waited 200 s for it at 521b28c; on the smoke audit's own worker, after it, they made the longest
#: chain at e320670). The unit tests fill the gaps at the end. Measured: docs/results/test-suite.md.
FIRST = (
    "test_pipeline.py",
    "ops/test_workers.py",
    "ops/test_worker_killed.py",  # mostly waits (90 s of missed heartbeats): started early, it overlaps the others
    "test_user_targets.py",
    "ops/test_identity.py",
    "ops/test_audit.py",
    "ops/test_two_machines.py",
    "ops/test_resume.py",
    "ops/test_serve.py",
    "ops/test_rerun.py",
    "test_dask.py",
    "test_pipeline_changes.py",
)


def _shared_fixtures(item: pytest.Item) -> List[str]:
    """The project's module- and session-scoped fixtures ``item`` uses (each built once per pytest-xdist worker)."""
    info = getattr(item, "_fixtureinfo", None)
    out = []
    for name, defs in info.name2fixturedefs.items() if info else ():
        d = defs[-1]
        if d.scope not in ("module", "session", "package") or not d.baseid or name in CHEAP_SHARED:
            continue
        if d.scope == "module":  # one per test module, wherever it is defined (a conftest's serves many modules)
            out.append(f"{item.path.relative_to(ROOT)}::{name}")
        elif d.scope == "package":
            out.append(f"{item.path.parent.relative_to(ROOT)}::{name}")
        else:
            out.append(name)
    return out


def _name(item: pytest.Item) -> str:
    """The test file's path below tests/ (as :data:`FIRST` names it)."""
    return item.path.relative_to(ROOT / "tests").as_posix() if (ROOT / "tests") in item.path.parents else str(item.path)


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist's own hook, which reads the groups, and before -m selects
def pytest_collection_modifyitems(config: pytest.Config, items: List[pytest.Item]) -> None:
    """Each test's cost marker, and its pytest-xdist group: the tests that share an expensive fixture (an audited
    repository, a trained model) run on one worker (``--dist loadgroup``), so it is built once, not once per worker.
    The order hands out :data:`FIRST` first, then the other operations tests, the other pipeline tests and the unit
    tests, so that the longest work starts first."""
    for item in items:
        if not any(item.get_closest_marker(m) for m in COSTS[:2]):
            item.add_marker(pytest.mark.unit)
    parent: Dict[str, str] = {}

    def find(x: str) -> str:
        while parent.setdefault(x, x) != x:
            x = parent[x]
        return x

    shared = {item.nodeid: _shared_fixtures(item) for item in items}
    for names in shared.values():
        for a, b in zip(names, names[1:]):
            parent[find(a)] = find(b)
    for item in items:
        if shared[item.nodeid]:
            item.add_marker(pytest.mark.xdist_group(find(shared[item.nodeid][0]).replace("/", ".")))

    def rank(item: pytest.Item) -> Tuple[int, int]:
        if shared[item.nodeid] and _name(item) in FIRST:  # the groups of FIRST, in its order
            return 0, FIRST.index(_name(item))
        return 1, next(i for i, m in enumerate(COSTS) if item.get_closest_marker(m))

    items.sort(key=rank)  # stable: within a cost, the files' order


# ------------------------------------------------------------------------------------------ what a test costs, measured

#: WEAKSPOT_TEST_CPU=FILE: each test's CPU seconds appended to FILE as a JSON line, with its wall time, when it
#: started and on which pytest-xdist worker (FILE is emptied when the run starts); ``python benchmarks/suite_cpu.py FILE`` sums them by file. The seconds are this
#: pytest process's and those of every descendant reaped meanwhile (the audits' Prefect servers, workers, DVC and
#: stages among them, each counted when its parent waits for it): a process orphaned by a kill is not counted, and a
#: long-lived one (a module's server or cluster) counts towards the test during which it ended. Setup counts towards
#: the test that ran it (a shared audit's build towards the first test that needed it).
CPU_FILE = os.environ.get("WEAKSPOT_TEST_CPU")


def _cpu_seconds() -> float:
    import resource

    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


if CPU_FILE:

    def pytest_configure(config: pytest.Config) -> None:
        if not hasattr(config, "workerinput"):  # the controller (or a run without xdist), before any worker starts
            open(str(CPU_FILE), "w").close()

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_protocol(item: pytest.Item, nextitem: object):
        import json
        import time

        cpu, wall, start = _cpu_seconds(), time.perf_counter(), time.time()
        yield
        row = {
            "test": item.nodeid,
            "cpu": round(_cpu_seconds() - cpu, 2),
            "wall": round(time.perf_counter() - wall, 2),
            "start": round(start, 2),
            "worker": os.environ.get("PYTEST_XDIST_WORKER", "main"),
        }
        with open(CPU_FILE, "a") as out:
            out.write(json.dumps(row) + "\n")
