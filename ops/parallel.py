"""``dvc repro`` with stages side by side: the stages that do not depend on each other run at the same time, up to
``jobs`` at once, each started as soon as the stages it needs have finished.

Caveats first: DVC reproduces a pipeline one stage at a time under its repository lock, and its stage objects are
not thread-safe. This module holds that lock once, in one process, and does every DVC step in the main thread, as
``dvc repro`` does it for each stage (the change check against dvc.lock, ``--pull`` from the remote, the run-cache
restore, removing the old outputs, then saving and committing the new ones and writing the stage into dvc.lock);
only the stage commands themselves run in worker threads, as subprocesses. The outputs and dvc.lock are the ones
``dvc repro`` writes; a stage's command, its inputs and its outputs are the same whatever else runs beside it (the
stages share no files but their declared dependencies). What changes is the order of the lines on the terminal:
stages running together interleave their output (each progress line names its stage). A stage that fails lets the
stages already running finish (their outputs are committed), starts nothing new, and the exit code is 1, naming it.

    python -m ops.parallel [--jobs 2] [--force] [--pull] [STAGE ...]
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
import time
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from typing import Any, Dict, List, Optional, Sequence


def _say(msg: str) -> None:
    print(f"weakspot: {msg}", flush=True)


def _skip_or_restore(stage: Any, upstream: List[Any], *, force: bool, pull: bool) -> Optional[str]:
    """What ``Stage.reproduce`` and ``run_stage`` decide before running a command: why the stage needs no run
    (``"didn't change"``, ``"pulled"``, ``"restored from the run-cache"``: then saved and committed, not yet in
    dvc.lock), or None when its command must run (its old outputs are then removed, its dependencies saved)."""
    from dvc.exceptions import CheckoutError
    from dvc.stage.cache import RunCacheNotFoundError
    from dvc.stage.run import _pull_missing_deps

    if not force and not stage.changed(False, upstream):
        return "didn't change"
    if not force and pull and not stage.changed(True, upstream):
        try:
            stage.repo.pull(stage.addressing)
            stage.checkout()
            return "pulled from the remote"
        except CheckoutError:
            _say(f"{stage.addressing}: could not pull its outputs; running it")
    stage.remove_outs(ignore_remove=False, force=False)
    if force:
        return None
    if pull:
        _pull_missing_deps(stage)
    try:
        stage.repo.stage_cache.restore(stage, pull=pull)
        _commit(stage)
        return "restored from the run-cache"
    except RunCacheNotFoundError:
        stage.save_deps()
        return None


def _commit(stage: Any) -> None:
    """After the command (or a run-cache restore): the outputs saved and committed (dvc.lock comes later, in plan
    order: :class:`_Run`)."""
    no_cache_outs = any(not o.use_cache for o in stage.outs if not (o.is_metric or o.is_plot))
    stage.save(run_cache=not no_cache_outs)
    stage.commit()


def _run_command(stage: Any) -> float:
    """The stage's command(s), in a worker thread: DVC's own runner (its environment, DVC_ROOT, DVC_STAGE)."""
    from dvc.stage.run import cmd_run

    t0 = time.perf_counter()
    cmd_run(stage)
    return time.perf_counter() - t0


def _plain(stage: Any) -> bool:
    """A stage this module leaves to DVC's own ``Stage.reproduce`` (in the main thread, one at a time): frozen,
    without a command (a data source) or an import."""
    return bool(stage.frozen or not stage.cmd or stage.is_import)


def _plan(repo: Any, targets: Sequence[str]) -> "tuple[list, Any]":
    from dvc.dvcfile import PROJECT_FILE
    from dvc.repo.reproduce import collect_stages, get_active_graph, plan_repro

    stages = collect_stages(repo, list(targets) or [PROJECT_FILE], recursive=False, glob=False)
    graph = get_active_graph(repo.index.graph)
    return plan_repro(graph, stages), graph


def reproduce(targets: Sequence[str] = (), *, jobs: int = 2, force: bool = False, pull: bool = False,
              root: str = ".") -> int:
    """Reproduce ``targets`` (default: every stage) of the DVC project at ``root`` with up to ``jobs`` stage commands
    at once; 0, 1 when a stage failed (named on stderr), 130 when interrupted (Ctrl-C: the commands running get it
    too; what finished is committed, nothing new starts)."""
    from dvc.repo import Repo, lock_repo

    repo = Repo(root)
    run = _Run(jobs=max(1, int(jobs)), force=force, pull=pull)
    old = signal.signal(signal.SIGINT, run.interrupt) if threading.current_thread() is threading.main_thread() \
        else None
    try:
        with lock_repo(repo), repo.scm_context(quiet=True):
            if pull:
                from dvc.stage.cache import RunCacheNotSupported  # what dvc repro --pull only warns about

                try:
                    repo.stage_cache.pull(None)
                except RunCacheNotSupported as e:
                    _say(f"could not pull the run-cache: {e}")
            steps, graph = _plan(repo, targets)
            return run.schedule(steps, graph)
    finally:
        if old is not None:
            signal.signal(signal.SIGINT, old)


class _Run:
    """One scheduling of a plan: which stages are done, failed or running, and dvc.lock written in plan order."""

    def __init__(self, *, jobs: int, force: bool, pull: bool):
        self.jobs, self.force, self.pull = jobs, force, pull
        self.done: set = set()
        self.failed: List[Any] = []
        self.to_dump: set = set()
        self.interrupted = False

    def interrupt(self, *_: Any) -> None:
        self.interrupted = True
        _say("interrupted: waiting for the running stages to stop, starting nothing new")

    def _fail(self, stage: Any, e: BaseException) -> None:
        print(f"ERROR: failed to reproduce '{stage.addressing}': {e}", file=sys.stderr, flush=True)
        self.failed.append(stage)

    def _dump(self, steps: List[Any], final: bool = False) -> None:
        """Write the committed stages into dvc.lock in the plan's order, as ``dvc repro`` does, so that its bytes do
        not depend on which stage finished first: a stage is written once every stage before it is settled."""
        for stage in steps:
            settled = stage in self.done or stage in self.failed
            if not settled and not final:
                return
            if stage in self.to_dump:
                stage.dump(update_pipeline=False)
                self.to_dump.discard(stage)

    def _start(self, stage: Any, ups: List[Any], pool: ThreadPoolExecutor, running: Dict[Future, Any]) -> None:
        """Decide in the main thread; run the command in a worker, or settle the stage here."""
        try:
            if _plain(stage):
                if stage.reproduce(upstream=ups, force=self.force, pull=self.pull):
                    self.to_dump.add(stage)
                self.done.add(stage)
                return
            why = _skip_or_restore(stage, ups, force=self.force, pull=self.pull)
        except Exception as e:  # noqa: BLE001 -- a missing dependency, a remote or restore error: this stage fails
            self._fail(stage, e)
            return
        if why is None:
            running[pool.submit(_run_command, stage)] = stage  # DVC prints "Running stage 'x':" and the command
            if len(running) > 1:
                _say(f"{len(running)} stages at once: " + ", ".join(s.addressing for s in running.values()))
            return
        print(f"Stage '{stage.addressing}' {why}, skipping", flush=True)  # DVC's wording
        if why != "didn't change" and not why.startswith("pulled"):
            self.to_dump.add(stage)
        self.done.add(stage)

    def schedule(self, steps: List[Any], graph: Any) -> int:
        todo = list(steps)  # post-order: every stage after the stages it needs
        ups = {s: [u for u in graph.successors(s) if u in todo] for s in todo}
        running: Dict[Future, Any] = {}
        with ThreadPoolExecutor(max_workers=self.jobs, thread_name_prefix="stage") as pool:
            while todo or running:
                while len(running) < self.jobs and not self.failed and not self.interrupted:
                    ready = [s for s in todo if all(u in self.done for u in ups[s])]
                    if not ready:
                        break
                    todo.remove(ready[0])
                    self._start(ready[0], ups[ready[0]], pool, running)
                    self._dump(steps)
                if not running:
                    break
                finished, _ = wait(list(running), return_when=FIRST_COMPLETED)
                for fut in finished:
                    stage = running.pop(fut)
                    try:
                        seconds = fut.result()
                        _commit(stage)
                    except Exception as e:  # noqa: BLE001 -- reported with the stage's name, the others finish first
                        self._fail(stage, e)
                        continue
                    self.to_dump.add(stage)
                    self.done.add(stage)
                    print(f"Stage '{stage.addressing}' finished in {seconds:.0f} s", flush=True)
                self._dump(steps)
        self._dump(steps, final=True)
        if self.interrupted:
            print("ERROR: interrupted; the stages that finished are committed", file=sys.stderr)
            return 130
        if self.failed or todo:
            names = ", ".join(f"'{s.addressing}'" for s in self.failed) or "none"
            print(f"ERROR: failed to reproduce {names}; the stages that finished are committed"
                  + (f"; not started: {', '.join(s.addressing for s in todo)}" if todo else ""), file=sys.stderr)
            return 1
        return 0


def main(argv: Optional[Sequence[str]] = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m ops.parallel", description=__doc__.splitlines()[0])
    ap.add_argument("stages", nargs="*")
    ap.add_argument("--jobs", type=int, default=2, help="stage commands at once (default 2)")
    ap.add_argument("--force", action="store_true")
    ap.add_argument("--pull", action="store_true")
    a = ap.parse_args(argv)
    return reproduce(a.stages, jobs=a.jobs, force=a.force, pull=a.pull)


if __name__ == "__main__":
    sys.exit(main())
