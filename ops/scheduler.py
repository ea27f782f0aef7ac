"""The audit's stages as flow runs on work pools: each stage submitted once every stage it needs has finished, a
failed stage failing only the stages that need it, a stage whose worker died submitted again.

Caveats first: the loop (:func:`schedule`) knows nothing of Prefect; :class:`PrefectRuns` submits a stage as a flow
run of the stage deployment on its pool (:mod:`ops.workers`) and reads its state back. A flow run that Prefect marks
Crashed, or whose process on this machine is gone while Prefect still says Running (its worker was killed), is
marked Crashed and submitted again, up to ``retries`` times; a stage that Failed (its command exited non-zero) is
not retried: it would fail the same way.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Protocol, Sequence, Tuple


class Runs(Protocol):
    def submit(self, stage: str, pool: str, priority: int = 0, nice: int = 0) -> str: ...

    def statuses(self, run_ids: Sequence[str]) -> Dict[str, Tuple[str, str, Optional[int]]]:
        """Each run's (one of pending, running, completed, failed, crashed; the state's message; the process id), read
        at once"""
        ...

    def crashed(self, run_id: str, message: str) -> None: ...


@dataclass
class Outcome:
    """What became of the audit's stages: done, failed (with the error), not run (with the failed stage they
    needed), and every flow run (stage, pool, run id, final state)."""

    done: List[str] = field(default_factory=list)
    failed: Dict[str, str] = field(default_factory=dict)
    not_run: Dict[str, str] = field(default_factory=dict)
    runs: List[Dict[str, str]] = field(default_factory=list)

    @property
    def complete(self) -> bool:
        return not self.failed and not self.not_run


#: The CPU priority (``nice``) of a stage no other stage of the audit waits for. Local workers can outnumber the cores
#: (a stage's start-up, its clone and DVC's checks leave a core idle otherwise); the kernel then gives the cores to the
#: stages more stages wait for first (the scenes' render, data and model), and the leaves take what is left.
LEAF_NICE = 10


def niceness(after: int, most: int) -> int:
    """The ``nice`` of a stage with ``after`` stages waiting for it when the audit's first stage has ``most``: 0 for
    that one, :data:`LEAF_NICE` for a stage nothing waits for, in proportion between. It changes when a stage's
    command gets a core, never what it computes (each stage's threads are pinned)."""
    return round(LEAF_NICE * (1 - after / most)) if most > 0 else 0


def _alive(pid: Optional[int]) -> bool:
    if not pid:
        return True  # nothing to check (not started yet, or on another machine)
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def schedule(
    stages: Sequence[str],
    needs: Dict[str, List[str]],
    runs: Runs,
    pool_of: Callable[[str], str],
    *,
    retries: int = 1,
    local_pids: bool = True,
    poll: float = 1.0,
    say: Callable[[str], None] = print,
) -> Outcome:
    """Run ``stages`` (in dvc.yaml's order) through ``runs``; ``needs[s]``: the stages ``s`` needs (only those among
    ``stages`` are waited for: the others are up to date). ``local_pids``: the workers run on this machine, so a
    running flow run whose process is gone has lost its worker. Every ``poll`` seconds the states of all the running
    stages are read in one call (a call per stage every 0.25 s cost the Prefect server more CPU than any stage's
    own compute in the smoke audit: ``benchmarks/bench_tiny_audit.py --smoke --cpu``)."""
    out = Outcome()
    # the stages with the most stages after them go first (a pool's workers take the runs in order): the longest
    # chain (the rendered scenes, their model, their methods) is not left waiting behind quick stages
    from ops.graph import upstream

    before = {t: set(upstream(needs, [t])) - {t} for t in stages}
    after = {s: sum(s in before[t] for t in stages) for s in stages}
    todo = sorted(stages, key=lambda s: -after[s])
    most = max(after.values(), default=0)
    active: Dict[str, Tuple[str, int, str]] = {}  # stage -> (run id, attempt, pool)
    t0 = time.time()
    while todo or active:
        for s in list(todo):
            bad = [n for n in needs.get(s, []) if n in out.failed or n in out.not_run]
            if bad:
                todo.remove(s)
                out.not_run[s] = bad[0] if bad[0] in out.failed else out.not_run[bad[0]]
                say(
                    f"weakspot: {s} not run: it needs {bad[0]}, which "
                    + ("failed" if bad[0] in out.failed else "was not run")
                )
            elif all(n in out.done or n not in stages for n in needs.get(s, [])):
                todo.remove(s)
                pool = pool_of(s)
                active[s] = (runs.submit(s, pool, after[s], niceness(after[s], most)), 1, pool)
                say(f"weakspot: {s} submitted to the {pool} pool")
        states = runs.statuses([rid for rid, _, _ in active.values()]) if active else {}
        for s, (rid, attempt, pool) in list(active.items()):
            state, message, pid = states[rid]
            if state == "running" and local_pids and not _alive(pid):
                runs.crashed(rid, f"its process {pid} is gone (the worker died)")
                state, message = "crashed", f"its process {pid} is gone (the worker died)"
            if state in ("pending", "running"):
                continue
            out.runs.append({"stage": s, "pool": pool, "flow_run": rid, "state": state, "attempt": str(attempt)})
            del active[s]
            if state == "completed":
                out.done.append(s)
                say(f"weakspot: {s} done ({len(out.done)} of {len(stages)}, {time.time() - t0:.0f} s)")
            elif state == "crashed" and attempt <= retries:
                say(f"weakspot: {s} crashed ({message}); submitted again (attempt {attempt + 1})")
                pool = pool_of(s)
                active[s] = (runs.submit(s, pool, after[s], niceness(after[s], most)), attempt + 1, pool)
            else:
                out.failed[s] = message or state
                say(f"weakspot: {s} FAILED: {(message or state).strip()}")
        if todo or active:
            time.sleep(poll)
    return out


class PrefectRuns:
    """Stages as flow runs of the stage deployments (:func:`ops.workers.ensure_pools`), with the parameters every
    stage of one audit shares."""

    STATES = {
        "SCHEDULED": "pending",
        "PENDING": "pending",
        "PAUSED": "pending",
        "RUNNING": "running",
        "CANCELLING": "running",
        "COMPLETED": "completed",
        "FAILED": "failed",
        "CRASHED": "crashed",
        "CANCELLED": "failed",
    }

    def __init__(self, parameters: Dict[str, object], audit: str, needs: Optional[Dict[str, List[str]]] = None):
        from prefect.client.orchestration import get_client

        self.parameters = parameters
        self.audit = audit
        self.needs = needs or {}
        import datetime

        self.began = datetime.datetime.now(datetime.timezone.utc)
        self.submitted = 0
        self.deployments: Dict[str, Any] = {}  # pool -> its stage deployment's id
        self.client = get_client(sync_client=True)
        self.client.__enter__()

    def close(self) -> None:
        self.client.__exit__(None, None, None)

    def submit(self, stage: str, pool: str, priority: int = 0, nice: int = 0) -> str:
        """A flow run of the stage on ``pool``, scheduled ``priority`` hours before the audit began (a pool's workers
        take the runs with the earliest scheduled time first; among equal priorities, in the order submitted); a
        command runs at CPU priority ``nice`` (:func:`niceness`)."""
        import datetime

        from prefect.states import Scheduled

        from ops.workers import deployment_name

        self.submitted += 1
        when = self.began - datetime.timedelta(hours=priority) + datetime.timedelta(milliseconds=self.submitted)
        if pool not in self.deployments:  # what run_deployment does, on the client this object holds
            self.deployments[pool] = self.client.read_deployment_by_name(deployment_name(pool)).id
        fr = self.client.create_flow_run_from_deployment(
            self.deployments[pool],
            parameters={
                **self.parameters,
                "stage": stage,
                "needs": self.needs.get(stage, []),
                "nice": nice,
            },
            state=Scheduled(scheduled_time=when),
            name=f"{stage}",
            tags=["weakspot", f"audit:{self.audit}"],
        )
        return str(fr.id)

    def statuses(self, run_ids: Sequence[str]) -> Dict[str, Tuple[str, str, Optional[int]]]:
        from uuid import UUID

        from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterId

        found = self.client.read_flow_runs(
            flow_run_filter=FlowRunFilter(id=FlowRunFilterId(any_=[UUID(r) for r in run_ids])), limit=len(run_ids)
        )
        out: Dict[str, Tuple[str, str, Optional[int]]] = {r: ("pending", "", None) for r in run_ids}
        for fr in found:
            kind = str(getattr(fr.state.type, "value", fr.state.type)) if fr.state else "SCHEDULED"
            msg = (fr.state.message or "") if fr.state else ""
            if kind == "FAILED":
                msg = _failure_message(fr.state) or msg
            pid = int(fr.infrastructure_pid) if str(fr.infrastructure_pid or "").isdigit() else None
            out[str(fr.id)] = (self.STATES.get(kind, "pending"), msg, pid)
        return out

    def crashed(self, run_id: str, message: str) -> None:
        from uuid import UUID

        from prefect.states import Crashed

        self.client.set_flow_run_state(UUID(run_id), Crashed(message=message), force=True)


def _failure_message(state) -> str:
    """The exception a failed flow run raised (the stage's error, with its output's last lines), where Prefect kept
    it."""
    try:
        exc = state.result(raise_on_failure=False)
    except Exception:  # the result is not retrievable (not persisted): the state's message says what it can  # noqa: BLE001
        return ""
    return str(exc) if isinstance(exc, BaseException) else ""
