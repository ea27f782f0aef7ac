"""``weakspot serve`` (alias ``schedule``): the nightly flow (``ops/engine/nightly.py``: ``weakspot audit --push``, the verdict
as Prefect artifacts) served as a Prefect deployment on a cron schedule, against PREFECT_API_URL or else a persistent
local server (``.prefect/``, on ``port``) whose UI shows the runs.

Caveats first: it runs until Ctrl-C or SIGTERM, which pauses the schedule (Prefect's runner), lets an audit in
progress end (a second Ctrl-C stops it) and stops the local server; the runs stay in ``.prefect/prefect.db``. The
flow runs in a process of its own (``python -m ops.engine.nightly --serve``), which audits by running ``weakspot audit``.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Dict, List, Optional, Sequence

from weakspot.errors import ConfigError

from tasks.settings import check_params
from ops.engine import dvc
from ops.verdict.notify import automation_name, check_url, describe
from ops.engine.server import prefect_server


def _banner(
    env: Dict[str, str], cron: str, name: str, timezone: Optional[str], own: bool, notify: Sequence[str] = ()
) -> str:
    api = env["PREFECT_API_URL"].rstrip("/")
    ui = api[:-4] if api.endswith("/api") else api
    where = f"a local Prefect server ({Path('.prefect').resolve()}, log in server.log)" if own else api
    tz = timezone or "this machine's time zone"
    prefect = Path(sys.executable).parent / "prefect"
    with contextlib.suppress(ValueError):
        prefect = prefect.relative_to(Path.cwd())  # .venv/bin/prefect
    return (
        f'weakspot: serving the nightly audit as deployment nightly-audit/{name}, cron "{cron}" '
        f"({tz}), on {where}\n"
        f"  Prefect UI: {ui}  (Runs: {ui}/runs ; each run's verdict: its Artifacts tab, "
        "weakspot-verdict and weakspot-comparison)\n"
        f"  run it now: PREFECT_API_URL={api} {prefect} deployment run nightly-audit/{name}\n"
        + (
            f"  a failed or regressed run posts to {', '.join(describe(u) for u in notify)} (Prefect automation "
            f"{automation_name(name)}, removed when serving stops)\n"
            if notify
            else ""
        )
        + "  Ctrl-C stops serving (the schedule is paused until the next `weakspot serve`)"
        + (" and the server" if own else "")
    )


def _stop_flow(proc: subprocess.Popen, own: bool) -> int:
    """After a Ctrl-C: one SIGINT to the flow's process (Prefect's runner pauses the schedule, lets a run in progress
    end), SIGTERM on a second Ctrl-C (the run reports itself Crashed), SIGKILL if it still runs."""
    proc.send_signal(signal.SIGINT)
    try:
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            print(
                "weakspot: waiting for the audit in progress to finish (Ctrl-C again to stop it now)",
                file=sys.stderr,
                flush=True,
            )
            proc.wait()
    except KeyboardInterrupt:
        os.killpg(proc.pid, signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired, KeyboardInterrupt):
            proc.wait(timeout=20)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    print(
        "weakspot: stopped serving"
        + (" and the Prefect server" if own else "")
        + "; the runs stay in the UI's database (.prefect/prefect.db)" * own,
        file=sys.stderr,
    )
    return 130


def serve(
    cron: str = "0 2 * * *",
    name: str = "weakspot-nightly",
    port: int = 4200,
    timezone: Optional[str] = None,
    push: bool = True,
    notify: Sequence[str] = (),
) -> int:
    """Serve the nightly audit of the checkout in the current folder until interrupted; the exit code (130 after
    Ctrl-C or SIGTERM). ``notify``: URLs a failed or regressed run posts to (:mod:`ops.verdict.notify`)."""
    for url in notify:
        check_url(url)  # before anything starts
    if not Path("ops/engine/nightly.py").is_file() or not Path(".dvc").is_dir():
        raise ConfigError(f"no weakspot pipeline in {Path.cwd()}: run `weakspot serve` from the repository root")
    check_params(dvc.PARAMS)
    if len(cron.split()) != 5 and not cron.startswith("@"):  # Prefect checks the fields themselves
        raise ConfigError(
            f'--cron {cron!r}: a cron has 5 fields, minute hour day month weekday: "0 2 * * *" is 02:00 every night'
        )
    own = not os.environ.get("PREFECT_API_URL")
    cmd: List[str] = [sys.executable, "-m", "ops.engine.nightly", "--serve", cron, "--name", name]
    cmd += (["--timezone", timezone] if timezone else []) + ([] if push else ["--no-push"])
    cmd += [a for url in notify for a in ("--notify", url)]

    def stop(signum, frame):  # SIGTERM (systemctl stop, kill): stop like Ctrl-C, so the server is stopped too
        raise KeyboardInterrupt

    old_term = signal.signal(signal.SIGTERM, stop)
    old_int = signal.signal(signal.SIGINT, signal.default_int_handler)  # even when started with SIGINT ignored
    try:
        with prefect_server(dvc.env(), port=port) as env:
            print(_banner(env, cron, name, timezone, own, notify), flush=True)
            # its own process group: a Ctrl-C reaches this process only, which passes exactly one SIGINT on (Prefect's
            # runner pauses the schedule on it; a second one would cut that short)
            proc = subprocess.Popen(
                cmd, env=env, process_group=0, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL)
            )
            try:
                return proc.wait()
            except KeyboardInterrupt:
                return _stop_flow(proc, own)
    except KeyboardInterrupt:  # while the server was starting
        print("weakspot: interrupted", file=sys.stderr)
        return 130
    finally:
        signal.signal(signal.SIGTERM, old_term)
        signal.signal(signal.SIGINT, old_int)
