"""Work pools, the stage deployments on them and local process workers: where an audit's stages run.

Caveats first: Prefect is driven through its public client (work pools, deployments, flow runs) and its CLI
(``prefect worker start``). Two pools, ``weakspot-cpu`` and ``weakspot-gpu``, each with a deployment of the stage flow
(:mod:`ops.engine.stage_flow`, entrypoint ``ops.engine.stage_flow.run_stage``: a worker imports it from its own install). A local
worker runs one stage at a time (``--limit 1``) in its own process session, so stopping it stops its stage; its log
is ``.prefect/worker-<name>.log``. Another machine joins with ``weakspot worker --pool gpu`` pointed at the same
Prefect server (PREFECT_API_URL) and DVC remote.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from pathlib import Path
from typing import Dict, Iterator, List, Sequence

POOLS = ("cpu", "gpu")
FLOW = "weakspot-stage"
ENTRYPOINT = "ops.engine.stage_flow.run_stage"
#: how often a worker asks its pool for work (Prefect's default is 10 s: a stage would wait that long to start). Each
#: ask costs the Prefect server CPU for as long as the audit lasts: three workers asking every second cost an idle
#: server 6.4 s of CPU in 90 s, every 3 s 2.5 s (docs/results/test-suite.md); every 2 s, a stage waits 1 s on average
POLL_SECONDS = "2"


def pool_name(pool: str) -> str:
    """The Prefect work pool of ``pool`` (cpu | gpu)."""
    return f"weakspot-{pool}"


def deployment_name(pool: str) -> str:
    """``flow/deployment`` of the stage flow on ``pool``, as :func:`prefect.deployments.run_deployment` names it."""
    return f"{FLOW}/stage-{pool}"


def ensure_pools(pools: Sequence[str] = POOLS) -> None:
    """Create the process work pools and the stage deployment on each (kept when they exist: deployments are
    updated in place), on the server at PREFECT_API_URL."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.actions import WorkPoolCreate
    from prefect.exceptions import ObjectNotFound
    from prefect.workers.process import ProcessWorker

    with get_client(sync_client=True) as client:
        for pool in pools:
            try:
                client.read_work_pool(pool_name(pool))
            except ObjectNotFound:
                client.create_work_pool(
                    WorkPoolCreate(
                        name=pool_name(pool),
                        type="process",
                        base_job_template=ProcessWorker.get_default_base_job_template(),
                    )
                )
        flow_id = client.create_flow_from_name(FLOW)
        for pool in pools:
            client.create_deployment(
                flow_id=flow_id,
                name=f"stage-{pool}",
                work_pool_name=pool_name(pool),
                entrypoint=ENTRYPOINT,
                pull_steps=[],
                enforce_parameter_schema=False,
                description=f"one stage of a weakspot audit on the {pool} pool "
                "(dvc repro --pull STAGE in a clone at the audit's commit)",
            )


def online_workers(pool: str) -> List[str]:
    """The names of the workers of ``pool`` that Prefect sees online."""
    from prefect.client.orchestration import get_client
    from prefect.exceptions import ObjectNotFound

    with get_client(sync_client=True) as client:
        try:
            workers = client.read_workers_for_work_pool(pool_name(pool))
        except ObjectNotFound:
            return []
    return [w.name for w in workers if str(getattr(w.status, "value", w.status)).upper() == "ONLINE"]


def worker_command(pool: str, name: str) -> List[str]:
    """``prefect worker start`` for one local process worker of ``pool``, one stage at a time."""
    prefect = Path(sys.executable).parent / "prefect"
    exe = [str(prefect)] if prefect.exists() else [sys.executable, "-m", "prefect"]
    return exe + ["worker", "start", "--pool", pool_name(pool), "--type", "process", "--limit", "1", "--name", name]


def worker_env(env: Dict[str, str]) -> Dict[str, str]:
    """A worker's environment: ``env`` with this interpreter first on PATH and a short polling interval."""
    return {
        **env,
        "PATH": str(Path(sys.executable).parent) + os.pathsep + env.get("PATH", ""),
        "PREFECT_WORKER_QUERY_SECONDS": env.get("PREFECT_WORKER_QUERY_SECONDS", POLL_SECONDS),
        # the stages' lines go to Prefect's log of their flow runs (INFO); the terminal shows the worker's warnings
        "PREFECT_LOGGING_LEVEL": env.get("PREFECT_LOGGING_LEVEL", "INFO"),
        "PREFECT_LOGGING_HANDLERS_CONSOLE_LEVEL": env.get("PREFECT_LOGGING_HANDLERS_CONSOLE_LEVEL", "WARNING"),
    }


@contextlib.contextmanager
def local_workers(counts: Dict[str, int], env: Dict[str, str]) -> Iterator[List[subprocess.Popen]]:
    """``counts[pool]`` local process workers per pool for the ``with`` block (each in its own session; their output,
    the stages' own, is this process's), stopped when it ends (SIGTERM, then SIGKILL 5 s later: every stage of the
    audit is over by then, so the workers are idle)."""
    procs: List[subprocess.Popen] = []
    try:
        for pool, n in counts.items():
            for i in range(n):
                name = f"local-{pool}-{os.getpid()}-{i + 1}"
                procs.append(subprocess.Popen(worker_command(pool, name), env=worker_env(env), start_new_session=True))
        yield procs
    finally:
        from tasks.server import stop_sessions

        stop_sessions(procs, grace=5.0)
