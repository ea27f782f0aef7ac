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
from pathlib import Path
from typing import Dict, Iterator, Optional

from tasks.server import free_port, healthy, start, stop_session, wait_until_up

__all__ = ["prefect_server", "stop_session", "healthy", "free_port", "wait_until_up"]


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
        if healthy(url):
            print(f"weakspot: using the Prefect server of `weakspot serve` ({url[:-4]})", flush=True)
            yield {**env, "PREFECT_HOME": str(home), "PREFECT_API_URL": url}
            return
    port_given, port = port is not None, free_port(port)
    env = {**env, "PREFECT_HOME": str(home), "PREFECT_SERVER_ANALYTICS_ENABLED": "false"}
    url = f"http://127.0.0.1:{port}/api"
    # the UI's pages call the API at PREFECT_UI_API_URL, which otherwise says port 4200 whatever --port is;
    # PREFECT_UI_URL: the run links in notifications. The triggers service (which also runs the actions) and the
    # event persister are on by default: on here whatever the environment says, `--notify` needs them.
    server_env = {
        **env,
        "PREFECT_UI_API_URL": url,
        "PREFECT_UI_URL": url[:-4],
        "PREFECT_SERVER_SERVICES_TRIGGERS_ENABLED": "true",
        "PREFECT_SERVER_SERVICES_EVENT_PERSISTER_ENABLED": "true",
    }
    proc, url = start(server_env, port, home / "server.log", retries=0 if port_given else 2)
    try:
        if port_given:
            served.write_text(url + "\n")
        yield {**env, "PREFECT_API_URL": url}
    finally:
        if port_given:
            with contextlib.suppress(OSError):
                if served.read_text().strip() == url:
                    served.unlink()
        stop_session(proc)
