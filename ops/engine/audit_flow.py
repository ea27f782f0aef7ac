"""The audit as one Prefect flow run, ``weakspot-audit``, whose children are its stages: each stage a task that runs
the stage deployment on its work pool (:func:`prefect.deployments.run_deployment`, linked as a child flow run) once
the tasks of the stages it needs completed (``wait_for``), so Prefect's UI shows the audit, its stages, their states,
logs and retries.

Caveats first: Prefect does the waiting, the ordering and the retries. A stage whose child flow run ends Crashed (its
worker was killed, or its machine vanished: Prefect's heartbeats stop and the automation of :mod:`ops.engine.lost`
marks it Crashed) is run again, up to ``retries`` times (task retries with a condition); a stage that Failed (its
command exited non-zero) is not: it would fail the same way. A stage whose needs did not complete ends NotReady
(Prefect's own state), and is reported as not run, naming the failed stage. A pool's workers take the runs scheduled
earliest first: a stage with more stages after it is scheduled that many hours before the audit began, so the
longest chain is not left waiting behind quick stages.
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Sequence

from prefect import task
from prefect.cache_policies import NO_CACHE

from ops.engine.graph import upstream

#: How often a stage's task asks Prefect for its child flow run's state (run_deployment's poll_interval; its default
#: of 5 s would add 2.5 s on average to each stage of a chain)
POLL_SECONDS = 1.0
#: The CPU priority (``nice``) of a stage no other stage of the audit waits for. Local workers can outnumber the cores
#: (a stage's start-up and DVC's checks leave a core idle otherwise); the kernel then gives the cores to the stages
#: more stages wait for first (the scenes' render, data and model), and the leaves take what is left.
LEAF_NICE = 10


class StageFailed(RuntimeError):
    """A stage's flow run Failed (its command exited non-zero): not retried."""


class StageCrashed(RuntimeError):
    """A stage's flow run Crashed (its worker or machine was lost): run again on a live worker."""


@dataclass
class Outcome:
    """What became of the audit's stages: done, failed (with the error), not run (with the failed stage they
    needed), and every child flow run (stage, pool, run id, final state, attempt)."""

    done: List[str] = field(default_factory=list)
    failed: Dict[str, str] = field(default_factory=dict)
    not_run: Dict[str, str] = field(default_factory=dict)
    runs: List[Dict[str, Any]] = field(default_factory=list)
    #: stage -> its estimate, its measured seconds and the work counted (:func:`ops.engine.estimate.record_row`)
    times: Dict[str, Dict[str, Any]] = field(default_factory=dict)

    @property
    def complete(self) -> bool:
        return not self.failed and not self.not_run


def niceness(after: int, most: int) -> int:
    """The ``nice`` of a stage with ``after`` stages waiting for it when the audit's first stage has ``most``: 0 for
    that one, :data:`LEAF_NICE` for a stage nothing waits for, in proportion between. It changes when a stage's
    command gets a core, never what it computes (each stage's threads are pinned)."""
    return round(LEAF_NICE * (1 - after / most)) if most > 0 else 0


def order(stages: Sequence[str], needs: Dict[str, List[str]]) -> Dict[str, int]:
    """Each stage's number of stages after it (among ``stages``), in the order the tasks are submitted: most first,
    what a stage needs always before it."""
    before = {t: set(upstream(needs, [t])) - {t} for t in stages}
    after = {s: sum(s in before[t] for t in stages) for s in stages}
    return {s: after[s] for s in sorted(stages, key=lambda s: -after[s])}


def _crashed(task: Any, task_run: Any, state: Any) -> bool:
    """Retry a stage's task only when its flow run crashed (a lost worker), never when its command failed."""
    try:
        state.result()
    except StageCrashed:
        return True
    except Exception:  # noqa: BLE001 - any other failure is the stage's own: not retried
        return False
    return False


@task(cache_policy=NO_CACHE, persist_result=False)
def run_stage(
    stage: str,
    deployment: str,
    parameters: Dict[str, Any],
    scheduled: datetime.datetime,
    tags: List[str],
    estimate: Optional[float] = None,
) -> Dict[str, Any]:
    """One stage: a child flow run of ``deployment`` on its pool, waited for; its id, state and seconds (the flow
    run's own, from its start to its end), or StageCrashed (retried) or StageFailed naming the stage and the error.
    ``estimate``: its expected seconds (:mod:`ops.engine.estimate`), said beside the time it took."""
    from prefect import deployments
    from prefect.runtime import task_run

    attempt = int(task_run.run_count or 1)
    if attempt > 1:
        print(f"weakspot: {stage}: its flow run crashed; running it again (attempt {attempt})", flush=True)
    fr = deployments.run_deployment(
        deployment,
        parameters=parameters,
        scheduled_time=scheduled,
        flow_run_name=stage,
        tags=tags,
        timeout=None,
        poll_interval=POLL_SECONDS,
    )
    kind = str(getattr(fr.state.type, "value", fr.state.type)) if fr.state else "UNKNOWN"
    message = (fr.state.message or kind) if fr.state else kind
    start, end = getattr(fr, "start_time", None), getattr(fr, "end_time", None)
    seconds = (end - start).total_seconds() if start and end else None
    if kind == "COMPLETED":
        if seconds is not None:
            print(
                f"weakspot: {stage} done in {seconds:.0f} s"
                + (f" (estimated {estimate:.0f} s)" if estimate is not None else ""),
                flush=True,
            )
        return {"flow_run": str(fr.id), "state": "completed", "seconds": seconds}
    if kind == "CRASHED":
        raise StageCrashed(f"{stage} crashed (flow run {fr.id}): {message}")
    raise StageFailed(f"{stage} failed (flow run {fr.id}): {message}")


def run_stages(
    stages: Sequence[str],
    needs: Dict[str, List[str]],
    pool_of: Callable[[str], str],
    deployment_of: Callable[[str], str],
    parameters: Dict[str, Any],
    *,
    audit: str,
    retries: int = 1,
    say: Callable[[str], None] = print,
    estimates: Optional[Dict[str, float]] = None,
) -> Outcome:
    """Run ``stages`` (``needs[s]``: what ``s`` needs; those not among ``stages`` are up to date) as tasks of the
    current flow run, each a child flow run of ``deployment_of(pool_of(s))`` with ``parameters`` and its own
    ``stage``, ``needs`` and ``nice``; wait for all and say what became of each. Call it inside a flow whose task
    runner runs as many tasks at once as there are stages (they mostly wait)."""
    from prefect.futures import wait

    after = order(stages, needs)
    most = max(after.values(), default=0)
    began = datetime.datetime.now(datetime.timezone.utc)
    futures: Dict[str, Any] = {}
    pools: Dict[str, str] = {}
    for i, s in enumerate(after):
        pools[s] = pool_of(s)
        when = began - datetime.timedelta(hours=after[s]) + datetime.timedelta(milliseconds=i)
        futures[s] = run_stage.with_options(
            name=s, task_run_name=s, retries=retries, retry_condition_fn=_crashed
        ).submit(
            s,
            deployment_of(pools[s]),
            {**parameters, "stage": s, "needs": needs.get(s, []), "nice": niceness(after[s], most)},
            when,
            ["weakspot", f"audit:{audit}"],
            (estimates or {}).get(s),
            wait_for=[futures[n] for n in needs.get(s, []) if n in futures],
        )
        say(f"weakspot: {s} submitted to the {pools[s]} pool")
    wait(list(futures.values()))
    out = Outcome()
    for s in stages:  # in dvc.yaml's order: what a stage needs comes before it
        state = futures[s].state
        if state.is_completed():
            out.done.append(s)
            result = futures[s].result()
            out.runs.append({"stage": s, "pool": pools[s], **result})
        elif state.is_failed() or state.is_crashed():
            try:
                futures[s].result()
                error = state.message or "failed"
            except Exception as e:  # noqa: BLE001 - the stage's error, as its task raised it
                error = str(e)
            out.failed[s] = error
            say(f"weakspot: {s} FAILED: {error.strip()}")
        else:  # NotReady: a stage it needs did not complete
            cause = next((n for n in upstream(needs, needs.get(s, [])) if n in out.failed or n in out.not_run), "?")
            out.not_run[s] = out.not_run.get(cause, cause)
            say(
                f"weakspot: {s} not run: it needs {cause}, which "
                + ("failed" if cause in out.failed else "was not run")
            )
    return out


def runner(n: int) -> Any:
    """The audit flow's task runner: a thread per stage (each waits on its child flow run)."""
    from prefect.task_runners import ThreadPoolTaskRunner

    return ThreadPoolTaskRunner(max_workers=max(1, n))
