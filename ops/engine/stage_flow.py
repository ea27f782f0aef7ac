"""The flow a worker runs for one stage of an audit: the audit's commit checked out in the worker's own clone
(kept between stages: ``git fetch`` and ``git checkout``, not a new clone), one DVC command there, and nothing else.

On this machine (the audit passes its DVC cache folder, ``cache``): the clone's DVC cache is the checkout's
(``dvc cache dir --local``, set once per clone), so ``dvc repro <stage>`` finds the stages it needs in the
run-cache and leaves what it made there, for the audit's final ``dvc repro`` to restore: one DVC command per
stage. Elsewhere (no ``cache``, or a folder this machine lacks): ``dvc repro --pull <stage>`` from the DVC remote,
then ``dvc push --run-cache`` of what it made.

Caveats first: DVC is driven through its CLI only. The stage's own command (``python -m flows...``) runs with the
clone first on PYTHONPATH, so the code that runs is the audit's commit, whatever this worker has installed. A stage
that fails raises with the last lines of its output (the message names the stage and the problem). The clones go
under WEAKSPOT_WORKDIR (default: the system's temporary folder), one per flow run this worker runs at once, each
held by a file lock while a stage uses it; a clone's log is beside it.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Dict, List, Optional

from prefect import flow

from ops.engine.dvc import configure_remote, dvc, use_cache


class StageFailed(RuntimeError):
    """A stage's command (or the checkout, pull or push around it) failed; the message names it."""


def _run(cmd: List[str], cwd: Path, env: Dict[str, str], log: Path, what: str) -> None:
    """``cmd`` in ``cwd``; its output goes to ``log`` and, line by line, to this process's standard output (a local
    worker's output is the audit's terminal)."""
    with open(log, "a") as out:
        out.write(f"$ {' '.join(cmd)}\n")
        out.flush()
        proc = subprocess.Popen(
            cmd,
            cwd=cwd,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            errors="replace",
            bufsize=1,
        )
        assert proc.stdout is not None
        logger = _run_logger()
        for line in proc.stdout:
            out.write(line)
            sys.stdout.write(line)
            sys.stdout.flush()
            if logger is not None and line.strip():
                logger.info(line.rstrip())
        rc = proc.wait()
    if rc != 0:
        tail = "\n".join(log.read_text(errors="replace").splitlines()[-25:])
        raise StageFailed(f"{what} failed (exit {rc}) in {cwd}:\n{tail}")


def _run_logger():
    """The flow run's logger (its lines are the run's log in Prefect's UI), or None outside a flow run."""
    from prefect.exceptions import MissingContextError
    from prefect.logging import get_run_logger

    try:
        return get_run_logger()
    except MissingContextError:
        return None


def lower_priority(nice: int) -> List[str]:
    """The stage's command at CPU priority ``nice``: the ``nice -n`` prefix for its command, and this flow run's own
    scheduling group lowered too. A Prefect process worker starts each flow run in a session of its own, and where the
    kernel groups sessions (Linux's autogroup, on by default) a process's nice only ranks it within its session: the
    session's priority (``/proc/self/autogroup``) is what ranks one stage against another."""
    if not nice:
        return []
    try:
        Path("/proc/self/autogroup").write_text(str(nice))
    except OSError:  # no autogroup here (or not Linux): the process's own nice below is what counts
        pass
    return ["nice", "-n", str(nice)] if shutil.which("nice") else []


def where() -> Dict[str, Any]:
    """This flow run's pool (from its deployment's name, ``stage-<pool>``), host and id."""
    from prefect.runtime import deployment, flow_run

    name = str(deployment.name or "")
    return {
        "pool": name.split("-", 1)[1] if name.startswith("stage-") else None,
        "host": socket.gethostname(),
        "flow_run": str(flow_run.id) if flow_run.id else None,
    }


def copy_ignored_inputs(repo: Path, work: Path) -> List[str]:
    """The stage inputs the clone lacks because git ignores them (a user's data or weights under an ignored folder),
    copied from the checkout ``repo`` on this machine: the deps of dvc.yaml that no stage makes."""
    import yaml

    from ops.engine.graph import entry_paths as paths

    stages = (yaml.safe_load((work / "dvc.yaml").read_text()) or {}).get("stages", {})
    made = {o for s in stages.values() for key in ("outs", "metrics", "plots") for o in paths(s.get(key))}
    copied = []
    for dep in sorted({d for s in stages.values() for d in paths(s.get("deps"))}):
        src, dst = repo / dep, work / dep
        if dst.exists() or not src.exists() or any(dep == o or dep.startswith(o + "/") for o in made):
            continue
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copytree(src, dst) if src.is_dir() else shutil.copy2(src, dst)
        copied.append(dep)
    return copied


def _clone(repo: str, base: Path, env: Dict[str, str]) -> "tuple[Path, Any]":
    """A clone of ``repo`` this flow run holds (its lock taken): the first of this worker's kept clones that no other
    flow run holds, made when there is none."""
    import hashlib

    from filelock import FileLock, Timeout

    key = hashlib.sha1(repo.encode()).hexdigest()[:10]
    for i in range(256):
        work = base / f"weakspot-clone-{key}-{i}"
        lock = FileLock(str(work) + ".lock")
        try:
            lock.acquire(timeout=0)
        except Timeout:
            continue
        if not (work / ".git").is_dir():
            shutil.rmtree(work, ignore_errors=True)
            local = "://" not in repo
            log = work.with_name(work.name + ".log")
            _run(
                ["git", "clone", "-q", "--no-checkout", *(["--shared"] if local else []), repo, str(work)],
                base,
                env,
                log,
                f"git clone {repo}",
            )
        return work, lock
    raise StageFailed(f"no free clone of {repo} under {base}: 256 flow runs hold one")


@flow(name="weakspot-stage", flow_run_name="{stage}", validate_parameters=False)
def run_stage(
    stage: str,
    repo: str,
    ref: str,
    commit: str,
    remote: str,
    force: bool = False,
    needs: Optional[List[str]] = None,
    nice: int = 0,
    cache: Optional[str] = None,
) -> Dict[str, Any]:
    """Run ``stage`` of the audit at ``commit`` (reachable in ``repo`` by ``ref``); where it ran and how long it
    took. ``cache``: the audit's DVC cache folder, shared when this machine has it; else the stages it needs are
    pulled from ``remote`` and what it made is pushed there. ``force``: run its command even when the run-cache has
    its result (the stages it needs, ``needs``, are restored first). ``nice``: the CPU priority of its command (0
    normal, up to 19 lowest), as ``nice -n`` sets it where the system has it."""
    t0 = time.time()
    base = Path(os.environ.get("WEAKSPOT_WORKDIR") or tempfile.gettempdir())
    base.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "PATH": str(Path(sys.executable).parent) + os.pathsep + os.environ.get("PATH", "")}
    env.pop("WEAKSPOT_PARAMS", None)
    work, lock = _clone(repo, base, env)
    try:
        log = work.with_name(work.name + ".log")
        log.write_text("")
        env.update(
            {
                # the clone's code first; the worker's own path after it (a user's module or plug-in folder outside
                # the checkout, absolute deps of the stage: the same path on every worker)
                "PYTHONPATH": os.pathsep.join(
                    [str(work), *[p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]]
                ),
                "WEAKSPOT_ROOT": str(work),
                "WEAKSPOT_WORKER": json.dumps(where()),  # the stage's lineage records where it ran
            }
        )
        _run(["git", "fetch", "-q", repo, ref], work, env, log, f"{stage}: git fetch {ref}")
        _run(["git", "checkout", "-q", "--force", "--detach", commit], work, env, log, f"{stage}: git checkout")
        if "://" not in repo:
            copied = copy_ignored_inputs(Path(repo), work)
            if copied:
                print(f"{stage}: copied {len(copied)} input(s) git ignores from {repo}: {', '.join(copied[:5])}")
        shared = bool(cache) and Path(str(cache)).is_dir()
        if shared:
            use_cache(str(cache), work)
        else:
            configure_remote(remote, work)
        pull = [] if shared else ["--pull"]
        lower = lower_priority(nice)
        print(
            f"{stage}: dvc repro {' '.join(pull + [stage])} at {commit[:12]} on {socket.gethostname()}"
            + (f" (nice {nice})" if nice else ""),
            flush=True,
        )
        if force:
            if needs:
                _run(dvc() + ["repro", *pull, *needs], work, env, log, f"{stage}: restoring {', '.join(needs)}")
            _run(lower + dvc() + ["repro", "--force", "--single-item", stage], work, env, log, f"stage {stage}")
        else:
            _run(lower + dvc() + ["repro", *pull, stage], work, env, log, f"stage {stage}")
        if not shared:
            _run(dvc() + ["push", "--run-cache", "-r", "weakspot", stage], work, env, log, f"{stage}: dvc push")
    finally:
        lock.release()
    seconds = round(time.time() - t0, 1)
    print(f"{stage}: done in {seconds} s", flush=True)
    return {"stage": stage, **where(), "seconds": seconds}
