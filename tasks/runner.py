"""Where a stage's fan-outs run: one task at a time in the stage's process, or on Dask workers (params.yaml
``execution``; README "Scale-out on Dask").

Caveats first:

* The runner decides where tasks run, never what they compute: a fan-out (:func:`fan_out`) submits every task, then
  takes the results in submission order, so a stage's artifacts are byte-identical under either runner
  (tests/test_dask.py checks it on the gad stage). Hence neither this module nor the ``execution`` section is a DVC
  dependency of any stage (tasks/closure.py's ``WHERE_NOT_WHAT`` leaves it out of every stage's deps, by name), and
  changing the runner or the cluster reruns nothing.
* ``sequential`` is Prefect's ThreadPoolTaskRunner with ONE thread: tasks run one after the other, in submission
  order, while the flow waits for them, so torch's global RNG and thread settings are never shared by two tasks at
  once; the same computation as calling the tasks in a loop.
* ``dask`` (prefect-dask's DaskTaskRunner) runs each task in a worker process: a LocalCluster of ``n_workers``
  processes started at the stage's first fan-out (a stage without one never starts a cluster), or the existing
  scheduler at ``address`` (or the environment variable ``WEAKSPOT_DASK_ADDRESS``, which implies ``dask``). A worker
  needs what the stage's process has: the same checkout at the same path (tasks read and write repository-relative
  paths), the same environment, a Prefect API it can reach (with no PREFECT_API_URL the stage starts Prefect's
  temporary server and hands its address to local workers; a remote cluster needs PREFECT_API_URL set to a server
  the workers reach) and PREFECT_LOCAL_STORAGE_PATH on a disk the workers share (the cached task results).
* A worker that dies while running a task (killed, out of memory, a crash in native code) is reported by Dask as
  KilledWorker. The local cluster's scheduler does not reschedule it by itself (``allowed_failures=0``); the fan-out
  marks that Prefect task run Crashed and resubmits the task, ``execution.retries`` times, then fails the stage with
  :class:`WorkerDied` naming the task. An existing cluster first reschedules on its own (its
  ``distributed.scheduler.allowed-failures``, 3 by default).
* ``execution.resources`` (an existing cluster only), e.g. ``{GPU: 1}``: every fan-out task asks for them, so only
  workers started with ``dask worker --resources GPU=1`` run them, one per GPU at a time.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
from typing import Any, Dict, Iterator, List, Mapping, Optional, Sequence, Tuple
from urllib.parse import urlparse

from tasks._env import THREAD_VARS
from weakspot.errors import ConfigError, WeakspotError

#: An existing Dask scheduler; overrides ``execution.address`` and implies ``execution.runner: dask``.
ENV_ADDRESS = "WEAKSPOT_DASK_ADDRESS"
_LOCAL_HOSTS = ("127.0.0.1", "localhost", "::1", "0.0.0.0")


class WorkerDied(WeakspotError, RuntimeError):
    """A task's Dask worker process died on every attempt (the first and ``execution.retries`` resubmissions)."""


# ------------------------------------------------------------------------------------------ settings


def execution(params: Any = None) -> Any:
    """The validated ``execution`` section with ``WEAKSPOT_DASK_ADDRESS`` applied. ``params``: None (read
    params.yaml), an ExecutionParams, or a mapping: the whole params.yaml content (its ``execution`` section, defaults
    when absent) or the section itself."""
    from weakspot.config import load_section

    from tasks.settings import ExecutionParams  # and the section, registered

    if params is None:
        from tasks.paths import PARAMS

        _, params = load_section("execution", PARAMS)
    elif isinstance(params, Mapping):
        from weakspot.config import validate_section

        params = validate_section("execution", params if "execution" in params else {"execution": dict(params)})
    elif not isinstance(params, ExecutionParams):
        raise ConfigError(f"execution: expected the params.yaml section, got {type(params).__name__}")
    address = os.environ.get(ENV_ADDRESS, "").strip()
    if address:
        params = params.model_copy(update={"runner": "dask", "address": address})
    if params.resources and not (params.runner == "dask" and params.address):
        raise ConfigError(
            f"execution.resources {params.resources} needs an existing Dask cluster (execution.address "
            f"or {ENV_ADDRESS}) whose workers declare them (`dask worker --resources GPU=1`); a local "
            f"cluster's workers have none, so the tasks would wait forever"
        )
    return params


# ------------------------------------------------------------------------------------------ the task runners


def _quiet_dask() -> None:
    """Dask's INFO lines (every worker start and stop) at WARNING, here and in the workers it spawns (they read the
    environment at import); a user's DASK_LOGGING__DISTRIBUTED wins."""
    os.environ.setdefault("DASK_LOGGING__DISTRIBUTED", "warning")
    level = os.environ["DASK_LOGGING__DISTRIBUTED"].upper()
    logging.getLogger("distributed").setLevel(getattr(logging, level, logging.WARNING))


#: Dask's nanny starts every worker with these at 1 (its pre-spawn-environ); weakspot's workers keep the stage's own
#: values instead (params.yaml's ``threads``, tasks/_env.py), so torch and BLAS split their work as in the sequential
#: run: a reduction split over 1 thread or 2 rounds differently (measured: the intrinsic stage's defended models, psi
#: in the 7th digit). The variables: tasks._env.THREAD_VARS.


def _same_threads_as_this_process() -> None:
    import dask

    dask.config.set({f"distributed.nanny.pre-spawn-environ.{k}": None for k in THREAD_VARS})


def task_runner(params: Any = None) -> Any:
    """The Prefect task runner of the ``execution`` section (see :func:`execution` for ``params``):
    ``ThreadPoolTaskRunner(max_workers=1)`` for ``sequential``, prefect-dask's ``DaskTaskRunner`` on ``address`` or on
    a ``distributed.LocalCluster`` of ``n_workers`` processes x ``threads_per_worker`` threads for ``dask``."""
    params = execution(params)
    if params.runner == "sequential":
        return _sequential_class()(max_workers=1)
    _quiet_dask()
    _same_threads_as_this_process()
    if params.threads_per_worker > 1 and not params.address:
        print(
            f"weakspot: warning: execution.threads_per_worker {params.threads_per_worker}: tasks then run side by "
            f"side in one worker process and share torch's global random state and thread settings, so a result "
            f"may differ from the sequential run's; 1 keeps them apart",
            file=sys.stderr,
            flush=True,
        )
    cls = _dask_class()
    if params.address:
        return cls(address=params.address, retries=params.retries, resources=params.resources)
    return cls(
        cluster_class="distributed.LocalCluster",
        cluster_kwargs={
            "n_workers": params.n_workers,
            "threads_per_worker": params.threads_per_worker,
            "processes": True,
            # a dead worker's task is resubmitted by fan_out (execution.retries), not silently
            # rescheduled by the scheduler: every attempt is seen and counted
            "scheduler_kwargs": {"allowed_failures": 0},
        },
        retries=params.retries,
    )


_CLASSES: Dict[str, type] = {}


def _sequential_class() -> type:
    if "sequential" not in _CLASSES:
        from prefect.task_runners import ThreadPoolTaskRunner

        class SequentialTaskRunner(ThreadPoolTaskRunner):
            """One task at a time, in submission order, in one thread of the stage's process."""

            retries = 0

            def __enter__(self):
                out = super().__enter__()
                print("weakspot: task runner: sequential (one task at a time, in this process)", flush=True)
                return out

        _CLASSES["sequential"] = SequentialTaskRunner
    return _CLASSES["sequential"]


def _dask_class() -> type:
    if "dask" not in _CLASSES:
        from prefect_dask import DaskTaskRunner

        class WeakspotDaskTaskRunner(DaskTaskRunner):
            """prefect-dask's runner that says where it runs (one line, when the cluster is up), checks that the
            workers run in this checkout, and carries ``execution.retries`` for :func:`fan_out`."""

            def __init__(
                self, *args: Any, retries: int = 1, resources: Optional[Mapping[str, float]] = None, **kwargs: Any
            ):
                super().__init__(*args, **kwargs)
                self.retries = int(retries)
                self.resources = dict(resources or {})

            def duplicate(self):
                return type(self)(
                    address=self.address,
                    cluster_class=self.cluster_class,
                    cluster_kwargs=self.cluster_kwargs,
                    adapt_kwargs=self.adapt_kwargs,
                    client_kwargs=self.client_kwargs,
                    performance_report_path=self.performance_report_path,
                    retries=self.retries,
                    resources=self.resources,
                )

            @property
            def client(self):
                client = DaskTaskRunner.client.fget(self)  # made on first access
                if not getattr(self, "announced", False):  # our own flag: no private attribute of Prefect's
                    self.announced = True
                    _announce(self, client)
                return client

        _CLASSES["dask"] = WeakspotDaskTaskRunner
    return _CLASSES["dask"]


def _announce(runner: Any, client: Any) -> None:
    """Print the one line saying where the tasks run; an existing cluster's workers must run in this checkout."""
    info = client.scheduler_info()
    workers = info.get("workers", {})
    threads = sum(int(w.get("nthreads", 0)) for w in workers.values())
    if runner.address:
        where = f"the existing cluster at {runner.address}"
        cwds = client.run(os.getcwd) if workers else {}
        elsewhere = {w: d for w, d in cwds.items() if os.path.realpath(d) != os.path.realpath(os.getcwd())}
        if elsewhere:
            w, d = next(iter(elsewhere.items()))
            raise ConfigError(
                f"Dask worker {w} runs in {d}, this stage in {os.getcwd()}: the tasks read and write "
                f"paths relative to the repository, so start every `dask worker` in the repository "
                f"root at the same path (a shared filesystem); {len(elsewhere)} of {len(workers)} "
                f"workers are elsewhere"
            )
    else:
        where = "a LocalCluster"
    dashboard = ""
    if "dashboard" in (info.get("services") or {}):
        dashboard = f", dashboard {client.dashboard_link}"
        if not runner.address:  # the local scheduler serves its pages only with bokeh installed
            import importlib.util

            if importlib.util.find_spec("bokeh") is None:
                dashboard += " (its pages need `pip install bokeh`)"
    print(
        f"weakspot: task runner: Dask, {where}: {len(workers)} worker{'s' if len(workers) != 1 else ''} "
        f"({threads} thread{'s' if threads != 1 else ''}), scheduler {client.scheduler.address}{dashboard}"
        + ("" if workers else " (no worker yet: the tasks wait for one)"),
        flush=True,
    )


# ------------------------------------------------------------------------------------------ running a flow


@contextlib.contextmanager
def prefect_api_for_workers(params: Any) -> Iterator[None]:
    """A Prefect API the Dask workers can reach. With no PREFECT_API_URL a stage runs on Prefect's temporary server,
    which only the stage's process would know about (each worker would start one of its own): start it here and run
    the flow with its address, which Prefect hands to the tasks it submits. A remote cluster needs PREFECT_API_URL
    set to a server its workers reach."""
    from prefect.settings import PREFECT_API_URL, temporary_settings

    api = PREFECT_API_URL.value()
    if params.runner != "dask":
        yield
        return
    remote = (
        bool(params.address)
        and (urlparse(params.address if "://" in params.address else f"tcp://{params.address}").hostname or "")
        not in _LOCAL_HOSTS
    )
    if remote and (not api or (urlparse(api).hostname or "") in _LOCAL_HOSTS):
        raise ConfigError(
            f"the Dask cluster at {params.address} cannot reach a Prefect API on this machine's "
            f"loopback ({api or 'the temporary server'}): set PREFECT_API_URL to a Prefect server "
            f"the workers reach (e.g. `prefect server start --host 0.0.0.0` on this machine)"
        )
    if api:
        yield
        return
    from tasks.server import temporary_server

    with temporary_server() as url, temporary_settings(updates={PREFECT_API_URL: url}):  # `prefect server start`
        yield


def run_flow(flow_fn: Any, *args: Any, params: Any = None) -> Any:
    """Run a stage's flow with the task runner of the ``execution`` section."""
    params = execution(params)
    with prefect_api_for_workers(params):
        return flow_fn.with_options(task_runner=task_runner(params))(*args)


# ------------------------------------------------------------------------------------------ fan-outs


Call = Tuple[Sequence[Any], Mapping[str, Any]]


def _worker_died(exc: BaseException) -> bool:
    try:
        from distributed import KilledWorker
    except ImportError:  # pragma: no cover - no Dask, no Dask workers
        return False
    return isinstance(exc, KilledWorker)


def _mark_crashed(future: Any, message: str) -> None:
    """Best effort: the dead attempt's Prefect task run would otherwise stay Running in the UI."""
    task_run_id = getattr(future, "task_run_id", None)
    if task_run_id is None:
        return
    try:
        from prefect.client.orchestration import get_client
        from prefect.states import Crashed

        with get_client(sync_client=True) as client:
            client.set_task_run_state(task_run_id, Crashed(message=message), force=True)
    except Exception:  # the server may not know the run yet (its events died with the worker): the log says it  # noqa: BLE001
        pass


def _where(future: Any, name: str) -> None:
    """On Dask, one line per finished task saying which worker ran it (the worker that holds its result)."""
    wrapped = getattr(future, "wrapped_future", None)
    if wrapped is None or not hasattr(wrapped, "client"):
        return
    try:
        workers = wrapped.client.who_has([wrapped]).get(wrapped.key) or []
    except Exception:  # the cluster is going away: the result is in hand, the line is only information  # noqa: BLE001
        return
    if workers:
        print(f"weakspot: {name} ran on Dask worker {', '.join(sorted(workers))}", flush=True)


def _current_runner() -> Any:
    from prefect.context import FlowRunContext

    ctx = FlowRunContext.get()
    return getattr(ctx, "task_runner", None) if ctx is not None else None


def _is_dask(runner: Any) -> bool:
    return any(c.__name__ == "DaskTaskRunner" for c in type(runner).__mro__)


def fan_out(task: Any, calls: Sequence[Call], labels: Optional[Sequence[str]] = None) -> List[Any]:
    """Run ``task`` once per ``(args, kwargs)`` of ``calls`` on the flow's task runner: every call submitted at once,
    the results returned in submission order (so the stage computes the same under any runner). Outside a flow the
    calls run one by one. A call whose Dask worker died is resubmitted ``execution.retries`` times, then
    :class:`WorkerDied` names it."""
    calls = [(tuple(a), dict(kw)) for a, kw in calls]
    labels = list(labels) if labels is not None else [f"#{i}" for i in range(len(calls))]
    runner = _current_runner()
    if runner is None or not _is_dask(runner):
        # sequential: in the flow's own thread, as before there were fan-outs (a worker thread would start torch's
        # intra-op pool afresh: measured slower, and nothing to gain with one task at a time)
        return [task(*a, **kw) for a, kw in calls]
    retries = int(getattr(runner, "retries", 0))
    resources = getattr(runner, "resources", None)

    def submit(a: tuple, kw: dict) -> Any:
        if not resources:
            return task.submit(*a, **kw)
        import dask

        with dask.annotate(resources=resources):  # only workers that declare them run the task
            return task.submit(*a, **kw)

    futures = [submit(a, kw) for a, kw in calls]
    out = []
    for (a, kw), label, future in zip(calls, labels, futures):
        name = f"task {task.name} ({label})"
        attempt = 0
        while True:
            try:
                out.append(future.result())
                _where(future, name)
                break
            except Exception as exc:
                if not _worker_died(exc):
                    raise
                attempt += 1
                _mark_crashed(future, f"its Dask worker process died: {exc}")
                if attempt > retries:
                    raise WorkerDied(
                        f"{name}: its Dask worker process died while running it, on {attempt} attempt"
                        f"{'s' if attempt > 1 else ''} (the task was resubmitted {retries} time"
                        f"{'s' if retries != 1 else ''}: execution.retries); a worker dies when it is killed, runs "
                        f"out of memory or crashes in native code: the Dask workers' log says which. Dask: {exc}"
                    ) from None
                print(
                    f"weakspot: {name}: its Dask worker process died; resubmitting it (retry {attempt} of {retries})",
                    flush=True,
                )
                future = submit(a, kw)
    return out
