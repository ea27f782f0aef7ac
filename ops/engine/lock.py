"""One audit at a time per checkout: ``weakspot audit`` holds an exclusive lock on ``.dvc/tmp/weakspot-audit.lock``
(the ``filelock`` package: ``flock``), and a second audit started meanwhile refuses, naming the first: its process,
host, start time and command, which the holder keeps in a side file next to the lock (``weakspot-audit.json``).

Caveats first: the lock guards audits started through ``weakspot audit`` on one file system (a bare ``dvc repro`` is
guarded by DVC's own repository lock instead). The kernel releases an flock when its process ends, however it ends,
so a lock is never stale: after a killed audit (kill -9, a reboot) the next one takes it at once and says that the
previous audit ended without releasing it (its side file is still there). The lock file itself stays in place
(unlinking a locked file would let two audits lock two different files); the side file exists only while an audit
holds the lock, or after one was killed.
"""

from __future__ import annotations

import contextlib
import datetime
import json
import os
import socket
import time
from pathlib import Path
from typing import Callable, Iterator, Optional

from filelock import FileLock, Timeout

from weakspot.errors import WeakspotError
from weakspot.io import write_json

LOCK = Path(".dvc/tmp/weakspot-audit.lock")
#: Who holds the lock: ``{"pid", "host", "started", "command"}``, written by the holder once it has the lock.
INFO = LOCK.with_suffix(".json")


class AuditRunning(WeakspotError, RuntimeError):
    """Another audit holds the repository."""


def _read(path: Path) -> dict:
    try:
        out = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return out if isinstance(out, dict) else {}


def _alive(pid: object, host: object) -> bool:
    """Whether ``pid`` on ``host`` may still run (another host's process cannot be checked: assumed alive)."""
    if not isinstance(pid, int):
        return False
    if host != socket.gethostname():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, owned by someone else
        return True
    return True


def _holder(info: Path, wait: float = 2.0) -> dict:
    """The lock holder's side file. A holder that has just taken the lock may not have written it yet (or a killed
    audit's file is still there): read it again for up to ``wait`` seconds until it names a live process; ``{}``
    when it never does."""
    deadline = time.monotonic() + wait
    while True:
        other = _read(info)
        if _alive(other.get("pid"), other.get("host")):
            return other
        if time.monotonic() > deadline:
            return {}
        time.sleep(0.1)


def _refusal(other: dict, path: Path) -> AuditRunning:
    if not other:
        return AuditRunning(
            f"another audit is running in this repository (it has not written which one yet to "
            f"{path.with_suffix('.json')}). Two audits at once would write the same artifacts; wait "
            f"for it to end. Lock file: {path}"
        )
    pid = other.get("pid")
    return AuditRunning(
        f"another audit is running in this repository: process {pid} on {other.get('host')}, started "
        f"{other.get('started')} ({other.get('command')}). Two audits at once would write the same artifacts; wait "
        f"for it to end, or stop it (kill {pid}) and rerun. Lock file: {path}"
    )


@contextlib.contextmanager
def audit_lock(
    root: "str | Path" = ".", command: str = "weakspot audit", say: Optional[Callable[[str], object]] = print
) -> Iterator[Path]:
    """Hold the checkout's audit lock for the ``with`` block (yields the lock file's path); raise
    :class:`AuditRunning`, naming the holder, when another audit has it. ``say``: where the line about a previous
    audit that ended without releasing the lock goes (None: nowhere)."""
    path, info = Path(root) / LOCK, Path(root) / INFO
    path.parent.mkdir(parents=True, exist_ok=True)
    lock = FileLock(str(path), timeout=0)
    try:
        lock.acquire()
    except Timeout:
        raise _refusal(_holder(info), path) from None
    try:
        left = _read(info)
        if left and say:
            say(
                f"weakspot: the audit of process {left.get('pid')} on {left.get('host')} (started "
                f"{left.get('started')}) ended without releasing its lock (killed?); going on"
            )
        me = {
            "pid": os.getpid(),
            "host": socket.gethostname(),
            "command": command,
            "started": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        }
        write_json(info, me)
        yield path
    finally:
        with contextlib.suppress(OSError):
            if _read(info).get("pid") == os.getpid():
                info.unlink()
        lock.release()
