"""The flow a worker runs for one stage of an audit: the audit's commit checked out in a clone of its own, plain
``dvc repro --pull <stage>`` there (the stages it needs are restored from the DVC remote's run-cache, never
recomputed when a worker already ran them), then ``dvc push --run-cache`` of what it made, and the clone removed.

Caveats first: DVC is driven through its CLI only. The stage's own command (``python -m flows...``) runs with the
clone first on PYTHONPATH, so the code that runs is the audit's commit, whatever this worker has installed. A stage
that fails raises with the last lines of its output (the message names the stage and the problem); its clone is
kept for inspection (its path is in the message). The clones go under WEAKSPOT_WORKDIR (default: the system's
temporary folder).
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

from ops.dvc import configure_remote, dvc


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
        for line in proc.stdout:
            out.write(line)
            sys.stdout.write(line)
            sys.stdout.flush()
        rc = proc.wait()
    if rc != 0:
        tail = "\n".join(log.read_text(errors="replace").splitlines()[-25:])
        raise StageFailed(f"{what} failed (exit {rc}) in {cwd}:\n{tail}")


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

    from ops.graph import entry_paths as paths

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
) -> Dict[str, Any]:
    """Run ``stage`` of the audit at ``commit`` (reachable in ``repo`` by ``ref``) and push its outputs and run-cache
    to ``remote``; where it ran and how long it took. ``force``: run its command even when the run-cache has its
    result (the stages it needs, ``needs``, are restored first). ``nice``: the CPU priority of its command (0 normal,
    up to 19 lowest), as ``nice -n`` sets it where the system has it."""
    t0 = time.time()
    base = Path(os.environ.get("WEAKSPOT_WORKDIR") or tempfile.gettempdir())
    base.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f"weakspot-{stage}-", dir=base))
    log = work.with_name(work.name + ".log")
    env = {
        **os.environ,
        "PATH": str(Path(sys.executable).parent) + os.pathsep + os.environ.get("PATH", ""),
        # the clone's code first; the worker's own path after it (a user's module or plug-in folder outside the
        # checkout, absolute deps of the stage: the same path on every worker)
        "PYTHONPATH": os.pathsep.join(
            [str(work), *[p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]]
        ),
        "WEAKSPOT_ROOT": str(work),
    }
    env.pop("WEAKSPOT_PARAMS", None)
    env["WEAKSPOT_WORKER"] = json.dumps(where())  # the stage's lineage records where it ran
    local = "://" not in repo
    _run(
        ["git", "clone", "-q", "--no-checkout", *(["--shared"] if local else []), repo, str(work)],
        base,
        env,
        log,
        f"{stage}: git clone {repo}",
    )
    _run(["git", "fetch", "-q", repo, ref], work, env, log, f"{stage}: git fetch {ref}")
    _run(["git", "checkout", "-q", "--detach", commit], work, env, log, f"{stage}: git checkout {commit[:12]}")
    if local:
        copied = copy_ignored_inputs(Path(repo), work)
        if copied:
            print(
                f"{stage}: copied {len(copied)} input(s) git ignores from {repo}: {', '.join(copied[:5])}", flush=True
            )
    configure_remote(remote, work)
    lower = lower_priority(nice)
    print(
        f"{stage}: dvc repro --pull {stage} at {commit[:12]} on {socket.gethostname()}"
        + (f" (nice {nice})" if nice else ""),
        flush=True,
    )
    if force:
        if needs:
            _run(dvc() + ["repro", "--pull", *needs], work, env, log, f"{stage}: restoring {', '.join(needs)}")
        _run(lower + dvc() + ["repro", "--force", "--single-item", stage], work, env, log, f"stage {stage}")
    else:
        _run(lower + dvc() + ["repro", "--pull", stage], work, env, log, f"stage {stage}")
    _run(dvc() + ["push", "--run-cache", "-r", "weakspot", stage], work, env, log, f"{stage}: dvc push --run-cache")
    shutil.rmtree(work, ignore_errors=True)
    log.unlink(missing_ok=True)
    seconds = round(time.time() - t0, 1)
    print(f"{stage}: done in {seconds} s", flush=True)
    return {"stage": stage, **where(), "seconds": seconds}
