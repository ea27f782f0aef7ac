"""The Prefect server that every stage of a run shares (each stage would otherwise start Prefect's temporary server
of its own, about 12 s each here), and the persistent one `weakspot serve` keeps for its UI.

Caveats first: the server steps aside when PREFECT_API_URL points at the user's server, and an audit uses the server
of a `weakspot serve` running in this checkout (``.prefect/serve.url``), so one database holds every run. Its
database is ``.prefect/prefect.db`` (PREFECT_HOME), so the runs stay visible to the next server started there; its
log is ``.prefect/server.log``. WEAKSPOT_NO_SHARED_SERVER=1 lets each stage start its own. Its automations run
(the triggers and actions services on, for `weakspot serve --notify`).
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Dict, Iterator, Optional

from weakspot.errors import ConfigError


def _healthy(url: str) -> bool:
    """Whether the Prefect API at ``url`` (``http://host:port/api``) answers its health check."""
    with contextlib.suppress(OSError):
        with urllib.request.urlopen(f"{url}/health", timeout=2) as r:
            return r.status == 200
    return False


def _free_port(port: Optional[int]) -> int:
    """``port`` when it is free (any free port when None); a ConfigError says who holds a taken one."""
    with socket.socket() as sock:
        # as the server binds: a recently closed connection (TIME_WAIT) does not make the port taken
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port or 0))
        except OSError:
            other = " by a Prefect server" if _healthy(f"http://127.0.0.1:{port}/api") else ""
            use = f"; to use that server instead: PREFECT_API_URL=http://127.0.0.1:{port}/api" if other else ""
            raise ConfigError(
                f"port {port} is taken{other} (another `weakspot serve` or `prefect server start`?); "
                f"pick another with --port{use}"
            ) from None
        return sock.getsockname()[1]


def _wait_until_up(proc: subprocess.Popen, url: str, home: Path, timeout: float = 180) -> None:
    deadline = time.time() + timeout
    while not _healthy(url):
        if proc.poll() is not None or time.time() > deadline:
            raise ConfigError(
                f"the Prefect server did not start (see {home / 'server.log'}); "
                "set PREFECT_API_URL to a running server, or WEAKSPOT_NO_SHARED_SERVER=1"
            )
        time.sleep(0.1)


def stop_session(proc: subprocess.Popen) -> None:
    """A process started in its own session, and anything it started: SIGTERM, then SIGKILL after 20 s."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


@contextlib.contextmanager
def prefect_server(env: Dict[str, str], port: Optional[int] = None) -> Iterator[Dict[str, str]]:
    """A Prefect server for the ``with`` block, stopped when it ends; yields ``env`` with PREFECT_API_URL (and
    PREFECT_HOME) set for the pipeline's subprocesses. ``port``: listen there (`weakspot serve`, whose UI the user
    opens; recorded in ``.prefect/serve.url`` meanwhile) instead of on a free port; a ConfigError when taken."""
    if env.get("PREFECT_API_URL") or (port is None and os.environ.get("WEAKSPOT_NO_SHARED_SERVER")):
        yield env
        return
    home = Path(env.get("PREFECT_HOME") or Path.cwd() / ".prefect")
    home.mkdir(parents=True, exist_ok=True)
    served = home / "serve.url"  # `weakspot serve`'s server, while it runs: an audit meanwhile uses it (one database)
    if port is None and served.is_file():
        url = served.read_text().strip()
        if _healthy(url):
            print(f"weakspot: using the Prefect server of `weakspot serve` ({url[:-4]})", flush=True)
            yield {**env, "PREFECT_HOME": str(home), "PREFECT_API_URL": url}
            return
    port_given, port = port is not None, _free_port(port)
    env = {**env, "PREFECT_HOME": str(home), "PREFECT_SERVER_ANALYTICS_ENABLED": "false"}
    url = f"http://127.0.0.1:{port}/api"
    prefect = Path(sys.executable).parent / "prefect"
    with open(home / "server.log", "ab") as log:
        # the UI's pages call the API at PREFECT_UI_API_URL, which otherwise says port 4200 whatever --port is;
        # PREFECT_UI_URL: the run links in notifications. The triggers service (which also runs the actions) and
        # the event persister are on by default: on here whatever the environment says, `--notify` needs them.
        server_env = {
            **env,
            "PREFECT_UI_API_URL": url,
            "PREFECT_UI_URL": url[:-4],
            "PREFECT_SERVER_SERVICES_TRIGGERS_ENABLED": "true",
            "PREFECT_SERVER_SERVICES_EVENT_PERSISTER_ENABLED": "true",
        }
        from ops import prefect_db

        fresh = not prefect_db.seed(home, server_env) and not (home / "prefect.db").exists()
        proc = subprocess.Popen(
            [str(prefect), "server", "start", "--host", "127.0.0.1", "--port", str(port)],
            env=server_env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        try:
            _wait_until_up(proc, url, home)
            if fresh:
                prefect_db.keep(home, server_env)
            if port_given:
                served.write_text(url + "\n")
            yield {**env, "PREFECT_API_URL": url}
        finally:
            if port_given:
                with contextlib.suppress(OSError):
                    if served.read_text().strip() == url:
                        served.unlink()
            stop_session(proc)
