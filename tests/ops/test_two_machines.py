"""Issue 48's two-machine case: the audit's checkout runs no worker (``--workers 0``); the only worker is a second
checkout with an environment of its own (a virtual environment that has the third-party packages but not this
checkout's weakspot), joined with ``weakspot worker --pool cpu`` to a shared Prefect server. The audit's commit
travels through a bare git remote (WEAKSPOT_GIT_REMOTE), the artifacts through a DVC remote folder
(WEAKSPOT_DVC_REMOTE). The audit completes, one flow run with its stages as children, and its bytes are those of the
same params audited in the checkout (``ops_repo``). Marked ``ops``."""

import json
import os
import signal
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest
from test_workers import WEAKSPOT, _lock

from conftest import Repo, _copy_repo, write_tiny_params


def _own_environment(folder: Path) -> Path:
    """A virtual environment whose site-packages sees this one's third-party packages (a ``.pth`` line) but not its
    editable install of weakspot: the worker's weakspot is its own checkout's."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(folder)], check=True)
    site = next((folder / "lib").glob("python*/site-packages"))
    (site / "third_party.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return folder / "bin" / "python"


@pytest.mark.ops
def test_a_second_checkout_as_the_only_worker_audits_with_the_bytes_of_the_checkout(ops_repo, tmp_path):
    from tasks.server import temporary_server

    audit = write_tiny_params(Repo(_copy_repo(tmp_path / "audit")))
    bare = tmp_path / "remote.git"
    subprocess.run(["git", "init", "-q", "--bare", str(bare)], check=True)
    store = tmp_path / "dvc-store"
    second = tmp_path / "second"
    subprocess.run(["git", "clone", "-q", str(audit.path), str(second)], check=True)
    python = _own_environment(tmp_path / "venv")
    probe = subprocess.run(
        [str(python), "-c", "import weakspot, prefect; print(weakspot.__file__)"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
    )
    assert probe.returncode != 0 or str(ROOT_MAIN) not in probe.stdout, probe.stdout  # not this checkout's weakspot
    import prefect_db

    with temporary_server(prefect_db.fresh_home(tmp_path / "prefect-home", os.environ)) as url:
        common = {"PREFECT_API_URL": url, "PREFECT_LOGGING_LEVEL": "WARNING"}
        worker_env = {
            k: v for k, v in os.environ.items() if not k.startswith(("PREFECT_", "WEAKSPOT_")) and k != "PYTHONPATH"
        }
        worker_env.update(
            common,
            PATH=str(python.parent) + os.pathsep + os.environ["PATH"],
            PYTHONPATH=str(second),
            WEAKSPOT_WORKDIR=str(tmp_path / "second-work"),
            PREFECT_FLOWS_HEARTBEAT_FREQUENCY="30",
        )
        worker = subprocess.Popen(
            [str(python), "-m", "ops.cli", "worker", "--pool", "cpu", "--name", "second-machine"],
            cwd=second,
            env=worker_env,
            stdout=open(tmp_path / "worker.log", "w"),
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        try:
            audit.env.update(common, WEAKSPOT_GIT_REMOTE=str(bare), WEAKSPOT_DVC_REMOTE=str(store))
            proc = audit.run(*WEAKSPOT, "audit", "--workers", "0", "--gpu-workers", "0", check=False)
        finally:
            os.killpg(worker.pid, signal.SIGTERM)
            worker.wait(timeout=60)
        text = proc.stdout + proc.stderr
        worker_log = (tmp_path / "worker.log").read_text()
        assert proc.returncode == 0, text[-3000:] + worker_log[-3000:]
        assert "DVC remote" in text and "(shared)" not in text  # elsewhere: through the DVC remote, not a cache
        assert "dvc repro --pull gad-phoneme" in worker_log, worker_log[-3000:]
        # its bytes are the in-checkout audit's
        for f in ("prepare/phoneme.json", "train/phoneme.json", "segments/phoneme.json", "gad/phoneme.json"):
            assert (audit.path / "metrics" / f).read_bytes() == (ops_repo.path / "metrics" / f).read_bytes(), f
        assert sorted(_lock(audit.path)) == sorted(_lock(ops_repo.path))
        lin = json.loads((audit.path / "plots/gad/phoneme/section.json").read_text())["lineage"]
        assert lin["worker"]["pool"] == "cpu"
        # one audit, one flow run: its stages are its children, each ran by the second checkout's worker
        runs = _audit_runs(url)
        assert runs["audits"] >= 1 and sorted(runs["children"]) == sorted(
            s for s in _lock(audit.path) if s != "report"
        ), runs
        assert set(runs["children"].values()) == {("COMPLETED", "weakspot-cpu")}, runs


ROOT_MAIN = Path(__file__).resolve().parents[2]


def _audit_runs(url: str) -> dict:
    """How many weakspot-audit flow runs the server has, and the children of the latest: stage -> (state, pool)."""
    import asyncio

    from prefect.client.orchestration import PrefectClient
    from prefect.client.schemas.filters import FlowFilter, FlowFilterName, FlowRunFilter, FlowRunFilterParentFlowRunId
    from prefect.client.schemas.sorting import FlowRunSort

    async def read():
        async with PrefectClient(url) as client:
            audits = await client.read_flow_runs(
                flow_filter=FlowFilter(name=FlowFilterName(any_=["weakspot-audit"])),
                sort=FlowRunSort.START_TIME_DESC,
            )
            children = await client.read_flow_runs(
                flow_run_filter=FlowRunFilter(parent_flow_run_id=FlowRunFilterParentFlowRunId(any_=[audits[0].id]))
            )
            return audits, children

    audits, children = asyncio.run(read())
    return {
        "audits": len(audits),
        "children": {c.name: (c.state.type.value, c.work_pool_name) for c in children},
    }
