"""The render worker pool: processes with one Blender scene each, started once, a batch split across them, a
crashed worker replaced and its chunk alone rendered again.

Caveats first:

* Workers are spawned (the "spawn" context: Blender is not fork-safe), which re-imports the main module: a script
  must make its renderer under ``if __name__ == "__main__":``.
* A worker that dies while it holds a chunk (a segfault in Blender, the out-of-memory killer, SIGKILL) is replaced by
  a fresh one and that chunk alone is rendered again, at most ``max_retries`` times per chunk (renders are
  deterministic, so the pixels are those of an uncrashed run); each restart is logged as a warning and counted in
  :attr:`WorkerPool.restarts`. Past that, or when a worker raises a Python exception (not a crash: rendering again
  would fail again), or does not answer within ``timeout``, it is a :class:`~weakspot.errors.RenderError` and the
  pool is closed. A worker that dies while starting is not restarted either.
* Each worker renders in a private temporary folder, removed when it closes; the pool removes the folders of the
  workers that were killed.
* Fault injection for the tests: :data:`FAULT_ENV` in the workers' environment.
"""

from __future__ import annotations

import contextlib
import logging
import multiprocessing as mp
import multiprocessing.connection
import os
import shutil
import signal
import sys
import time
import traceback
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple, cast

import numpy as np

from weakspot.errors import RenderError
from weakspot.scene.blender import BlenderScene

logger = logging.getLogger(__name__)

#: Fault injection for the tests (read by the worker processes): ``kill`` makes every worker SIGKILL itself after
#: the first scene of each chunk, ``kill-once:<path>`` only the first worker to create the file ``<path>``, and
#: ``raise`` makes a worker raise a Python exception instead of rendering.
FAULT_ENV = "WEAKSPOT_RENDER_FAULT"


class WorkerPool:
    """Worker processes, one :class:`~weakspot.scene.blender.BlenderScene` each, and a batch API over them.

    Parameters
    ----------
    config : dict
        The keyword arguments of :class:`~weakspot.scene.blender.BlenderScene` (every worker builds the same scene).
    workers : int
        How many processes.
    timeout : float
        Seconds to wait for a worker to start or to answer a chunk before raising RenderError.
    max_retries : int
        How many times one chunk of a batch goes to a fresh worker after the worker rendering it died.

    Attributes
    ----------
    procs, conns : list
        The worker processes and the parent's ends of their pipes.
    device_used : str or None
        Where Cycles renders (the first worker's answer).
    tmp_dirs : list of str
        The workers' private temporary folders.
    restarts : int
        Workers restarted after a crash.
    closed : bool
        True once closed (on :meth:`close` or after a RenderError): a closed pool renders nothing.
    """

    def __init__(self, config: Dict[str, Any], workers: int, *, timeout: float, max_retries: int):
        self.config = config
        self.workers = workers
        self.timeout = timeout
        self.max_retries = max_retries
        self.procs: List[Any] = []
        self.conns: List[Any] = []
        self.device_used: Optional[str] = None
        self.tmp_dirs: List[str] = []
        self.restarts = 0
        self.closed = False

    def start(self) -> "WorkerPool":
        """Spawn the workers and wait until each has built its scene. Returns self."""
        try:
            for _ in range(self.workers):
                proc, conn = self._spawn()
                self.procs.append(proc)
                self.conns.append(conn)
            answers = [self._receive(i, what="start") for i in range(self.workers)]
        except BaseException:
            self.close()
            raise
        self.device_used = answers[0][0]
        self.tmp_dirs = [a[1] for a in answers]
        return self

    def _spawn(self) -> Tuple[Any, Any]:
        ctx = mp.get_context("spawn")
        parent, child = ctx.Pipe()
        proc = ctx.Process(target=_worker_main, args=(child, self.config), daemon=True)
        proc.start()
        child.close()
        return proc, parent

    def _try_send(self, i: int, msg: Any) -> bool:
        """Send to worker ``i``; False when it is dead (its pipe broken)."""
        try:
            if not self.procs[i].is_alive():
                return False
            self.conns[i].send(msg)
            return True
        except (BrokenPipeError, EOFError, OSError):
            return False

    def _restart(self, i: int) -> None:
        """Replace the dead worker ``i`` by a fresh one (not waited for) and remove the dead one's folder."""
        proc, conn = self.procs[i], self.conns[i]
        with contextlib.suppress(Exception):
            conn.close()
        if proc.is_alive():  # its pipe broke but it lingers: it cannot be trusted with another chunk
            proc.kill()
        proc.join(timeout=5)
        if i < len(self.tmp_dirs):
            shutil.rmtree(self.tmp_dirs[i], ignore_errors=True)  # a killed worker could not remove it
        self.procs[i], self.conns[i] = self._spawn()
        self.restarts += 1

    def _receive(self, i: int, *, what: str) -> Any:
        conn, proc = self.conns[i], self.procs[i]
        deadline = time.monotonic() + self.timeout
        while True:
            try:
                ready = conn.poll(0.05)
            except (EOFError, OSError):
                ready = False
            if ready:
                try:
                    status, payload = conn.recv()
                except (EOFError, OSError):
                    status, payload = "died", None
                if status in ("ok", "ready"):
                    return payload
                self.close()
                if status == "died":
                    raise RenderError(
                        f"render worker {i} (pid {proc.pid}) died during {what}; exit code {proc.exitcode}{_hint(what)}"
                    )
                raise RenderError(f"render worker {i} failed during {what}: {payload}")
            if not proc.is_alive():
                code = proc.exitcode
                self.close()
                raise RenderError(
                    f"render worker {i} (pid {proc.pid}) died during {what} with exit code {code}{_hint(what)}"
                )
            if time.monotonic() > deadline:
                self.close()
                raise RenderError(f"render worker {i} did not answer within {self.timeout} s during {what}")

    def close(self) -> None:
        """Stop the workers and remove the folders of those that were killed. Safe to call twice."""
        for conn in self.conns:
            with contextlib.suppress(Exception):
                conn.send(("close",))
        for proc in self.procs:
            proc.join(timeout=5)
            if proc.is_alive():
                proc.terminate()
                proc.join(timeout=5)
        for conn in self.conns:
            with contextlib.suppress(Exception):
                conn.close()
        if self.procs:  # a worker that was killed could not remove its own folder
            for d in self.tmp_dirs:
                shutil.rmtree(d, ignore_errors=True)
        self.procs, self.conns = [], []
        self.closed = True

    def render(self, params: List[Mapping[str, Any]]) -> np.ndarray:
        """RGBA uint8 (n, H, W, 4) of the scenes ``params`` (n >= 1), in order.

        Chunk ``i`` goes to worker ``i``; a worker that dies is replaced and its chunk alone is sent again.
        """
        n = len(params)
        k = min(len(self.conns), n)
        bounds = np.linspace(0, n, k + 1).round().astype(int)
        # contiguous chunks: consecutive views of one object stay on one worker's mesh cache
        chunks = [params[bounds[i] : bounds[i + 1]] for i in range(k)]
        results: List[Optional[np.ndarray]] = [None] * k
        crashes = [0] * k
        phase: Dict[int, str] = {}  # worker -> "render" (holds its chunk) or "start" (a fresh one, not ready yet)
        deadline: Dict[int, float] = {}

        def submit(i: int) -> None:
            if self._try_send(i, ("render", chunks[i])):
                phase[i], deadline[i] = "render", time.monotonic() + self.timeout
            else:
                crashed(i, "before it got its chunk")

        def crashed(i: int, when: str) -> None:
            proc = self.procs[i]
            proc.join(timeout=5)
            reason = _exit_reason(proc.exitcode)
            crashes[i] += 1
            what = f"chunk {i}: {_describe_chunk(chunks[i], int(bounds[i]), n)}"
            if crashes[i] > self.max_retries:
                self.close()
                raise RenderError(
                    f"render worker {i} (pid {proc.pid}) died {when} ({what}); it {reason}; "
                    f"gave up after {crashes[i] - 1} restart(s) for this chunk (max_retries="
                    f"{self.max_retries}); the renderer is closed, make a new one"
                )
            logger.warning(
                "render worker %d (pid %s) died %s (%s); it %s; restarting it and rendering the "
                "chunk again (retry %d of %d)",
                i,
                proc.pid,
                when,
                what,
                reason,
                crashes[i],
                self.max_retries,
            )
            self._restart(i)
            phase[i], deadline[i] = "start", time.monotonic() + self.timeout

        for i in range(k):
            submit(i)
        while phase:
            waiting = {}
            for i in phase:
                waiting[self.conns[i]] = i
                waiting[self.procs[i].sentinel] = i
            left = min(deadline[i] for i in phase) - time.monotonic()
            ready = mp.connection.wait(list(waiting), timeout=max(left, 0.0))
            handled = set()
            for obj in ready:
                i = waiting[obj]
                if i in handled or i not in phase:
                    continue
                handled.add(i)
                conn, proc, stage = self.conns[i], self.procs[i], phase[i]
                has_msg = None
                payload: Any  # _worker_main's: (device, tmp_dir), the RGBA array or the error text; None: died
                try:
                    has_msg = conn.poll()
                    status, payload = conn.recv() if has_msg else ("died", None)
                except (EOFError, OSError):
                    status, payload = "died", None
                if status == "died":
                    if has_msg is False and proc.is_alive():  # a spurious wake-up
                        continue
                    del phase[i]
                    crashed(i, "while rendering its chunk" if stage == "render" else "while starting again")
                elif status == "ready" and stage == "start":
                    self.tmp_dirs[i] = payload[1]
                    submit(i)
                elif status == "ok" and stage == "render":
                    results[i] = payload
                    del phase[i]
                else:
                    self.close()
                    what = "render" if stage == "render" else "restart"
                    raise RenderError(f"render worker {i} failed during {what}: {payload}")
            now = time.monotonic()
            late = [i for i in phase if now > deadline[i]]
            if late:
                self.close()
                what = "render" if phase[late[0]] == "render" else "restart"
                raise RenderError(f"render worker {late[0]} did not answer within {self.timeout} s during {what}")
        return np.concatenate(cast(List[np.ndarray], results))  # phase is empty: every chunk rendered


def _strip_blender_script_paths() -> None:
    """Drop Blender's script folders that an in-process bpy added to sys.path and "spawn" copied to this child.

    Their pure-Python ``bpy`` package would shadow the real ``bpy`` extension module ("No module named '_bpy'").
    """
    sys.path[:] = [p for p in sys.path if not ("bpy" in p.split(os.sep) and "scripts" in p.split(os.sep))]


def _worker_main(conn, config: Dict[str, Any]) -> None:  # runs in a spawned process
    try:
        if "bpy" not in sys.modules:
            _strip_blender_script_paths()
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 1)  # Blender's chatter; errors still reach stderr
        scene = BlenderScene(**config)
        conn.send(("ready", (scene.device_used, scene.tmp_dir)))
    except BaseException as e:  # noqa: BLE001 - report any start-up failure to the parent
        conn.send(("error", f"{type(e).__name__}: {e}\n{traceback.format_exc()}"))
        return
    try:
        while True:
            try:
                msg = conn.recv()
            except EOFError:
                break
            if msg[0] == "close":
                break
            try:
                _inject_fault(scene, msg[1])
                conn.send(("ok", scene.render(msg[1])))
            except BaseException as e:  # noqa: BLE001
                conn.send(("error", f"{type(e).__name__}: {e}\n{traceback.format_exc()}"))
    finally:
        scene.close()


def _inject_fault(scene: "BlenderScene", chunk: Sequence[Mapping[str, Any]]) -> None:
    """The tests' crash (see :data:`FAULT_ENV`): die mid-chunk, after one scene, as a real crash would."""
    fault = os.environ.get(FAULT_ENV, "")
    if not fault:
        return
    if fault == "raise":
        raise RuntimeError(f"fault injected by {FAULT_ENV}=raise")
    if fault.startswith("kill-once:"):
        try:
            os.close(os.open(fault[len("kill-once:") :], os.O_CREAT | os.O_EXCL | os.O_WRONLY))
        except FileExistsError:
            return
    elif fault != "kill":
        return
    if chunk:
        scene.render_one(chunk[0])
    os.kill(os.getpid(), signal.SIGKILL)


def _exit_reason(code: Optional[int]) -> str:
    """How a worker ended, in words: its signal (SIGKILL is often the out-of-memory killer) or its exit code."""
    if code is None:
        return "closed its pipe (exit code unknown)"
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        oom = " (the out-of-memory killer, or a kill -9)" if -code == signal.SIGKILL else ""
        return f"was killed by {name}{oom}, exit code {code}"
    return f"exited with code {code}"


def _describe_chunk(chunk: Sequence[Mapping[str, Any]], lo: int, n: int) -> str:
    names = ", ".join(f"{p['class']}#{p['instance']}" for p in chunk[:4]) + (", ..." if len(chunk) > 4 else "")
    return f"scenes {lo}-{lo + len(chunk) - 1} of {n}: {names}"


def _hint(what: str) -> str:
    if what != "start":
        return ""
    return (
        "; workers are started with 'spawn', which re-imports the main module: a script must create the "
        'renderer under `if __name__ == "__main__":` (or use workers=0); see the worker\'s traceback above'
    )
