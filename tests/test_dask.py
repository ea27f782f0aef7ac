"""Scale-out on Dask (tasks/runner.py): a fan-out of cached tasks on a LocalCluster of 2 worker processes gives the
sequential run's results; a task whose worker process dies is resubmitted, then reported by name; the gad stage on
Dask writes byte-identical metrics. The `execution` section is validated and is no stage's DVC param."""

import contextlib
import io
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
DASK2 = {"runner": "dask", "n_workers": 2, "threads_per_worker": 1, "retries": 1}


@pytest.fixture(scope="module")
def prefect_env(tmp_path_factory):
    """A temporary Prefect server and result store (the workers reach the server through the settings Prefect hands
    to every task it submits), the cache bypassed so every run computes."""
    from prefect.settings import (
        PREFECT_LOCAL_STORAGE_PATH,
        PREFECT_LOGGING_LEVEL,
        PREFECT_TASKS_REFRESH_CACHE,
        temporary_settings,
    )
    from prefect.settings import PREFECT_API_URL

    from tasks.server import temporary_server

    store = tmp_path_factory.mktemp("prefect-results")
    # `prefect server start` (tasks/server.py), not prefect.testing's harness: the harness drains Prefect's log and
    # event workers at its exit with no time limit, and hung there once for 20 minutes (pytest-timeout's limit)
    import prefect_db

    with temporary_server(prefect_db.fresh_home(tmp_path_factory.mktemp("prefect-home"), os.environ)) as url:
        with temporary_settings(
            updates={
                PREFECT_API_URL: url,
                PREFECT_LOCAL_STORAGE_PATH: str(store),
                PREFECT_TASKS_REFRESH_CACHE: True,
                PREFECT_LOGGING_LEVEL: "WARNING",
            }
        ):
            yield


@pytest.fixture(autouse=True)
def _no_env_address(monkeypatch):
    monkeypatch.delenv("WEAKSPOT_DASK_ADDRESS", raising=False)


def _printed(fn, *args, **kwargs):
    """(fn's value, what it printed). Not capsys: Prefect's console log handler would keep capsys's stream, closed
    after the test."""
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        value = fn(*args, **kwargs)
    return value, buf.getvalue()


@contextlib.contextmanager
def _stage_threads():
    """Torch on the thread count a stage's process (and a Dask worker) starts with: conftest sets this test process
    to 1 thread, and a sum split over 1 thread or 2 rounds differently."""
    import torch

    default = int(
        subprocess.run(
            [sys.executable, "-c", "import torch; print(torch.get_num_threads())"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    )
    n = torch.get_num_threads()
    torch.set_num_threads(default)
    try:
        yield
    finally:
        torch.set_num_threads(n)


@pytest.mark.pipeline  # a Prefect server and a Dask cluster of worker processes
def test_a_local_cluster_of_two_workers_gives_the_sequential_results(prefect_env):
    import dask_tasks
    from tasks.runner import run_flow

    with _stage_threads():
        t0 = time.time()
        seq, out = _printed(run_flow, dask_tasks.draws, [0, 1, 2, 3], params={"runner": "sequential"})
        t1 = time.time()
    dsk, out2 = _printed(run_flow, dask_tasks.draws, [0, 1, 2, 3], params=DASK2)
    t2 = time.time()
    out += out2
    print(f"sequential {t1 - t0:.1f} s, Dask LocalCluster (2 workers, started at the fan-out) {t2 - t1:.1f} s")
    strip = lambda rs: [{k: v for k, v in r.items() if k != "pid"} for r in rs]  # noqa: E731
    assert strip(dsk) == strip(seq)  # the same floats, in the same order
    assert {r["pid"] for r in seq} == {os.getpid()}  # sequential: in this process
    pids = {r["pid"] for r in dsk}
    assert os.getpid() not in pids and len(pids) == 2, pids  # Dask: two worker processes, both used
    assert "weakspot: task runner: sequential" in out
    assert "weakspot: task runner: Dask, a LocalCluster: 2 workers (2 threads), scheduler tcp://" in out
    for s in range(4):
        assert f"weakspot: task draw (seed {s}) ran on Dask worker tcp://" in out


@pytest.mark.pipeline  # a Prefect server and a Dask cluster of worker processes
def test_an_existing_cluster_by_address_and_its_workers_checkout(prefect_env, tmp_path, monkeypatch):
    """execution.address: the tasks run on that scheduler's workers (here a cluster started beside the test, its
    workers started with the stage's thread settings as docs/guide/dask.md says); a stage whose checkout is not the
    workers' stops with a message saying so."""
    import dask_tasks
    from distributed import LocalCluster
    from tasks.runner import _same_threads_as_this_process, run_flow
    from weakspot.errors import ConfigError

    _same_threads_as_this_process()
    with LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None, resources={"GPU": 1}
    ) as cluster:  # as `dask worker --resources GPU=1` declares a GPU
        seen = dask_tasks.Restrictions(cluster.scheduler)
        cluster.scheduler.add_plugin(seen)
        params = {"runner": "dask", "address": cluster.scheduler_address, "resources": {"GPU": 1}}
        with _stage_threads():
            seq, _ = _printed(run_flow, dask_tasks.draws, [5, 6], params={"runner": "sequential"})
        dsk, out = _printed(run_flow, dask_tasks.draws, [5, 6], params=params)
        assert [r["checksum"] for r in dsk] == [r["checksum"] for r in seq]
        assert f"weakspot: task runner: Dask, the existing cluster at {cluster.scheduler_address}: 2 workers" in out
        asked = [v for k, v in seen.seen.items() if k.startswith("draw")]
        assert asked == [{"GPU": 1}, {"GPU": 1}], seen.seen  # execution.resources: every task asked for a GPU
        monkeypatch.chdir(tmp_path)  # the stage elsewhere than the workers
        with pytest.raises(ConfigError, match="start every `dask worker` in the repository root at the same path"):
            run_flow(dask_tasks.draws, [7], params=params)


@pytest.mark.pipeline  # a Prefect server and a Dask cluster of worker processes
def test_a_dead_worker_is_retried_by_the_task(prefect_env, tmp_path):
    import dask_tasks
    from tasks.runner import run_flow

    marker = tmp_path / "died"
    value, out = _printed(run_flow, dask_tasks.crash, str(marker), params=DASK2)
    assert value == [42]
    assert marker.is_file() and int(marker.read_text()) != os.getpid()  # the first attempt killed a worker
    assert (
        "weakspot: task dies_once (the crashing one): its Dask worker process died; resubmitting it (retry 1 of 1)"
        in out
    )


@pytest.mark.pipeline  # a Prefect server and a Dask cluster of worker processes
def test_a_task_that_always_kills_its_worker_is_reported_by_name(prefect_env, tmp_path):
    import dask_tasks
    from prefect.client.orchestration import get_client
    from tasks.runner import WorkerDied, run_flow
    from weakspot.errors import WeakspotError

    marker = tmp_path / "attempts"
    with pytest.raises(WorkerDied) as err:
        run_flow(dask_tasks.crash, str(marker), True, params=DASK2)
    msg = str(err.value)
    assert isinstance(err.value, WeakspotError)  # a stage prints it as `weakspot: error: ...` and exits 2
    assert msg.startswith(
        "task always_dies (the crashing one): its Dask worker process died while running it, on 2 attempts"
    ), msg
    assert "execution.retries" in msg and "workers died while running it" in msg
    assert marker.read_text() == "2"  # the first attempt and one resubmission, no more
    # both dead attempts are Crashed in Prefect (not left Running), and the flow run Failed with the message
    deadline, states = time.time() + 30, []
    while time.time() < deadline and len(states) < 2:
        with get_client(sync_client=True) as client:
            runs = [r for r in client.read_task_runs() if r.name.startswith("always_dies")]
            flow_runs = [f for f in client.read_flow_runs() if f.name and f.state and f.state.is_failed()]
        states = sorted((r.state.type.value, r.state.message or "") for r in runs if r.state is not None)
        time.sleep(0.5)
    assert [t for t, _ in states] == ["CRASHED", "CRASHED"], states
    assert all(m.startswith("its Dask worker process died") for _, m in states), states
    assert any("task always_dies (the crashing one)" in (f.state.message or "") for f in flow_runs)


def test_the_runner_follows_the_params_and_the_environment(monkeypatch):
    from prefect.task_runners import ThreadPoolTaskRunner
    from prefect_dask import DaskTaskRunner
    from tasks.runner import execution, task_runner
    from weakspot.errors import ConfigError

    r = task_runner({"runner": "sequential"})
    assert isinstance(r, ThreadPoolTaskRunner) and r._max_workers == 1 and r.duplicate()._max_workers == 1
    r = task_runner({"execution": {"runner": "dask", "n_workers": 3, "threads_per_worker": 2}})
    assert isinstance(r, DaskTaskRunner) and r.address is None
    assert r.cluster_kwargs["n_workers"] == 3 and r.cluster_kwargs["threads_per_worker"] == 2
    assert r.cluster_kwargs["processes"] is True and r.duplicate().retries == r.retries == 1
    r = task_runner({"runner": "dask", "address": "tcp://10.0.0.5:8786", "retries": 2, "resources": {"GPU": 1}})
    assert r.address == "tcp://10.0.0.5:8786" and r.retries == 2 and r.duplicate().address == r.address
    assert r.duplicate().resources == {"GPU": 1}
    with pytest.raises(ConfigError, match="execution.resources .* needs an existing Dask cluster"):
        execution({"runner": "dask", "resources": {"GPU": 1}})  # a local cluster's workers declare none
    monkeypatch.setenv("WEAKSPOT_DASK_ADDRESS", "tcp://sched:8786")  # implies dask, wins over params.yaml
    p = execution({"runner": "sequential"})
    assert (p.runner, p.address) == ("dask", "tcp://sched:8786")
    assert task_runner(None).address == "tcp://sched:8786"


def test_a_remote_cluster_needs_a_prefect_api_it_can_reach(monkeypatch):
    from prefect.settings import PREFECT_API_URL, temporary_settings
    from tasks.runner import execution, prefect_api_for_workers
    from weakspot.errors import ConfigError

    with temporary_settings(updates={PREFECT_API_URL: "http://127.0.0.1:4200/api"}):
        with pytest.raises(ConfigError, match="set PREFECT_API_URL to a Prefect server the workers reach"):
            with prefect_api_for_workers(execution({"runner": "dask", "address": "tcp://10.0.0.5:8786"})):
                pass
    with temporary_settings(updates={PREFECT_API_URL: "http://10.0.0.1:4200/api"}):
        with prefect_api_for_workers(execution({"runner": "dask", "address": "tcp://10.0.0.5:8786"})):
            pass


@pytest.mark.pipeline  # starts a Prefect server
def test_a_local_cluster_with_no_prefect_api_gets_a_server_of_its_own_through_the_cli(monkeypatch, tmp_path):
    """Issue 48: no private Prefect class; `prefect server start` on a free port, up for the flow, down after it."""
    from prefect.settings import PREFECT_API_URL, temporary_settings
    from tasks.runner import execution, prefect_api_for_workers
    from tasks.server import healthy

    monkeypatch.setenv("PREFECT_HOME", str(tmp_path))
    monkeypatch.delenv("PREFECT_API_URL", raising=False)
    with temporary_settings(restore_defaults={PREFECT_API_URL}):
        assert not PREFECT_API_URL.value()
        with prefect_api_for_workers(execution({"runner": "dask"})):
            url = PREFECT_API_URL.value()
            assert url and url.startswith("http://127.0.0.1:") and healthy(url)
        assert not healthy(url) and not PREFECT_API_URL.value()


def test_the_execution_section_is_validated(tmp_path):
    import tasks.settings  # noqa: F401  (registers the section)
    from weakspot.config import check_params, load_section
    from weakspot.errors import ConfigError

    base = yaml.safe_load((ROOT / "params.yaml").read_text())
    assert check_params(ROOT / "params.yaml")["execution"] == {
        "runner": "sequential",
        "address": None,
        "n_workers": 2,
        "threads_per_worker": 1,
        "retries": 1,
        "heartbeat_seconds": 30,
        "resources": {},
        "workers": 3,
        "in_checkout": False,
        "gpu_workers": None,
        "pools": {},
    }
    p = tmp_path / "params.yaml"
    for bad, words in [
        ({"runner": "ray"}, "execution.runner = 'ray'"),
        ({"n_workers": 0}, "execution.n_workers = 0"),
        ({"heartbeat_seconds": 10}, "execution.heartbeat_seconds = 10"),
        ({"workers": -1}, "execution.workers = -1"),
        ({"pools": {"tpu": ["intrinsic"]}}, "the pools are cpu and gpu"),
        ({"adress": "tcp://x:1"}, "unknown key 'execution.adress'"),
        ({"address": "tcp://x:1"}, "set runner: dask"),
        ({"runner": "dask", "address": "tcp://x:1", "resources": {"GPU": 0}}, "a positive amount"),
    ]:
        p.write_text(yaml.safe_dump({**base, "execution": bad}))
        with pytest.raises(ConfigError, match=words.replace("(", r"\(").replace(".", r"\.")):
            load_section("execution", p)
    p.write_text(yaml.safe_dump({k: v for k, v in base.items() if k != "execution"}))
    assert load_section("execution", p)[1].runner == "sequential"  # absent: sequential


def test_the_runner_is_no_stage_dependency():
    """Changing the runner, its settings or the cluster reruns nothing: no stage reads `execution` as a DVC param or
    lists tasks/runner.py as a dep (the flows load it by name), and dvc.yaml is what params.yaml generates."""
    from ops.engine.pipeline import dvc_yaml
    from weakspot.config import read_yaml

    stages = yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"]
    for name, st in stages.items():
        assert not any(str(p).startswith("execution") for p in st.get("params", [])), name
        assert "tasks/runner.py" not in st["deps"], name
    assert (ROOT / "dvc.yaml").read_text() == dvc_yaml(read_yaml(ROOT / "params.yaml"))


# ------------------------------------------------------------------------------------------ the gad stage on Dask


@pytest.mark.ops  # on the shared ops_repo
def test_the_gad_stage_on_a_local_dask_cluster_writes_the_sequential_metrics(ops_repo):
    """ops_repo was audited sequentially; rerun gad-phoneme with the cache bypassed on a LocalCluster of 2 workers:
    both split seeds run as tasks on the workers, and the metrics are byte-identical. The repository is then put
    back as it was (params.yaml and the stage's outputs), and DVC sees nothing to do."""
    r = ops_repo
    metrics = r.path / "metrics/gad/phoneme.json"
    outs = [metrics, r.path / "findings/phoneme/gad_to_label.csv"]
    before = {p: p.read_bytes() for p in outs}
    keep = {
        p: p.read_bytes()
        for d in ("plots/gad/phoneme", "findings/phoneme")
        for p in (r.path / d).rglob("*")
        if p.is_file()
    }
    params_text = (r.path / "params.yaml").read_bytes()
    assert yaml.safe_load(params_text)["gad"]["seeds"] == [0, 1]
    try:
        raw = yaml.safe_load(params_text)
        raw["execution"] = {"runner": "dask", "n_workers": 2}
        (r.path / "params.yaml").write_text(yaml.safe_dump(raw, sort_keys=False))
        env = {**r.env, "PREFECT_TASKS_REFRESH_CACHE": "true"}
        t0 = time.time()
        proc = subprocess.run(
            [sys.executable, "-m", "flows.method", "gad", "phoneme"],
            cwd=r.path,
            env=env,
            capture_output=True,
            text=True,
        )
        took = time.time() - t0
        log = proc.stdout + proc.stderr
        assert proc.returncode == 0, log[-3000:]
        print(f"gad-phoneme on a Dask LocalCluster of 2 workers, cache bypassed: {took:.0f} s")
        assert "weakspot: task runner: Dask, a LocalCluster: 2 workers (2 threads), scheduler tcp://" in log, log
        for s in (0, 1):  # each seed recomputed (its progress lines come from a worker) as a task on a worker
            assert f"gad-phoneme: phoneme seed {s}: replicates 3/3" in log, log
            assert f"weakspot: task seed_outcome (phoneme, split seed {s}) ran on Dask worker tcp://" in log, log
        after = {p: p.read_bytes() for p in outs}
        assert after[metrics] == before[metrics], "metrics/gad/phoneme.json differs from the sequential run"
        assert after == before
    finally:
        (r.path / "params.yaml").write_bytes(params_text)
        for p, b in keep.items():  # plots/.../section.json carries the run's time and Prefect flow run
            p.write_bytes(b)
    status = r.dvc("status", "gad-phoneme").stdout
    assert "changed" not in status and "modified" not in status, status
