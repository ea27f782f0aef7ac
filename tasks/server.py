"""A Prefect server of its own, started through Prefect's public CLI (``prefect server start``) and stopped with it:
what a stage's Dask workers reach when no PREFECT_API_URL is set, and what :mod:`ops.engine.server` starts for an audit.

Caveats first: the server's database is PREFECT_HOME's (``prefect.db``); its log goes where the caller says. It is
started in a session of its own, so stopping it stops everything it started.
"""

from __future__ import annotations

import contextlib
import os
import random
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Dict, Iterator, Optional

from weakspot.errors import ConfigError


def healthy(url: str) -> bool:
    """Whether the Prefect API at ``url`` (``http://host:port/api``) answers its health check."""
    with contextlib.suppress(OSError):
        with urllib.request.urlopen(f"{url}/health", timeout=2) as r:
            return r.status == 200
    return False


def _ephemeral() -> "tuple[int, int]":
    """The ports the kernel hands out to outgoing connections (Linux's ip_local_port_range; its default elsewhere)."""
    with contextlib.suppress(OSError, ValueError):
        low, high = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()
        return int(low), int(high)
    return 32768, 60999


def _bind(sock: socket.socket, port: int) -> int:
    # as the server binds: a recently closed connection (TIME_WAIT) does not make the port taken
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))
    return sock.getsockname()[1]


def free_port(port: Optional[int]) -> int:
    """``port`` when it is free (a ConfigError says who holds a taken one); with None, a free port outside the
    range the kernel gives outgoing connections (a port from that range, found free, can become the local end of a
    client's connection before the server binds it: every Prefect client beside it makes them)."""
    if port is None:
        low, high = _ephemeral()
        lo, hi = (20000, min(low, 32768)) if low > 21000 else (max(high + 1, 20000), 65536)
        rng = random.Random()
        for _ in range(50 if hi - lo > 1000 else 0):  # no such range: any free port
            with socket.socket() as sock, contextlib.suppress(OSError):
                return _bind(sock, rng.randrange(lo, hi))
    with socket.socket() as sock:
        try:
            return _bind(sock, port or 0)
        except OSError:
            other = " by a Prefect server" if healthy(f"http://127.0.0.1:{port}/api") else ""
            use = f"; to use that server instead: PREFECT_API_URL=http://127.0.0.1:{port}/api" if other else ""
            raise ConfigError(
                f"port {port} is taken{other} (another `weakspot serve` or `prefect server start`?); "
                f"pick another with --port{use}"
            ) from None


class ServerExited(ConfigError):
    """The server process ended before it answered (e.g. its port was taken meanwhile)."""


def log_tail(log: Path, lines: int = 12) -> str:
    with contextlib.suppress(OSError):
        text = log.read_text(errors="replace").strip().splitlines()[-lines:]
        return "\n".join("  " + line for line in text)
    return ""


def wait_until_up(proc: subprocess.Popen, url: str, home: Path, timeout: float = 300) -> None:
    deadline = time.time() + timeout
    while not healthy(url):
        exited = proc.poll() is not None
        if exited or time.time() > deadline:
            why = "it exited" if exited else f"no answer in {timeout:.0f} s"
            tail = log_tail(home / "server.log")
            raise (ServerExited if exited else ConfigError)(
                f"the Prefect server did not start ({why}; see {home / 'server.log'}); "
                "set PREFECT_API_URL to a running server, or WEAKSPOT_NO_SHARED_SERVER=1"
                + (f"\nthe end of its log:\n{tail}" if tail else "")
            )
        time.sleep(0.1)


def stop_session(proc: subprocess.Popen) -> None:
    """A process started in its own session, and anything it started: SIGTERM, then SIGKILL after 20 s."""
    stop_sessions([proc])


def stop_sessions(procs: "list[subprocess.Popen]", grace: float = 20.0) -> None:
    """Processes each started in its own session, and anything they started: SIGTERM to all at once, then SIGKILL to
    those still running ``grace`` seconds later (one grace for all: idle Prefect workers each used all 20 s of
    theirs, one after the other)."""
    import time

    for proc in procs:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    for proc in procs:
        try:
            proc.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def start(env: Dict[str, str], port: int, log: Path, retries: int = 0) -> "tuple[subprocess.Popen, str]":
    """``prefect server start`` on 127.0.0.1:``port`` with ``env``, its output appended to ``log``: the process (in a
    session of its own) and its API URL, once it answers. ``retries``: when the server exits before it answers, start
    it again on another free port up to that many times (a port :func:`free_port` found free can be taken by another
    process before the server binds it)."""
    for attempt in range(retries + 1):
        url = f"http://127.0.0.1:{port}/api"
        prefect = Path(sys.executable).parent / "prefect"
        with open(log, "ab") as out:
            proc = subprocess.Popen(
                [str(prefect), "server", "start", "--host", "127.0.0.1", "--port", str(port)],
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        try:
            wait_until_up(proc, url, log.parent)
            return proc, url
        except ServerExited:
            stop_session(proc)
            if attempt == retries:
                raise
            port = free_port(None)
        except BaseException:
            stop_session(proc)
            raise
    raise AssertionError("unreachable")


@contextlib.contextmanager
def temporary_server(home: "Path | None" = None) -> Iterator[str]:
    """A Prefect server for the ``with`` block on a free port, its database PREFECT_HOME's (as Prefect's own
    temporary server's; ``home``: that folder's instead), its log in a temporary folder; yields its API URL."""
    with tempfile.TemporaryDirectory(prefix="weakspot-prefect-") as tmp:
        env = {**os.environ, "PREFECT_SERVER_ANALYTICS_ENABLED": "false"}
        env.pop("PREFECT_API_URL", None)
        if home is not None:
            env["PREFECT_HOME"] = str(home)
        proc, url = start(env, free_port(None), Path(tmp) / "server.log", retries=2)
        try:
            yield url
        finally:
            stop_session(proc)
