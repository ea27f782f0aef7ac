"""One audit at a time per repository: ``weakspot audit`` holds a lock file naming itself, and a second audit started
meanwhile refuses with a message that names the first (its process, host, start time and command).

Caveats first: the lock is a file created atomically (``O_CREAT | O_EXCL``) in ``.dvc/tmp/`` (git-ignored), so it
guards audits started through ``weakspot audit`` on one file system; a bare ``dvc repro`` is guarded by DVC's own
repository lock instead. A lock whose process is gone (killed, machine rebooted) is stale: the next audit says so,
removes it and goes on -- on the same host only, because another host's process cannot be checked.
"""

from __future__ import annotations

import contextlib
import datetime
import json
import os
import socket
import time
from pathlib import Path
from typing import Iterator, Optional

from weakspot.errors import WeakspotError

LOCK = Path(".dvc/tmp/weakspot-audit.lock")


class AuditRunning(WeakspotError, RuntimeError):
    """Another audit holds the repository."""


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, owned by someone else
        return True
    return True


def _read(path: Path) -> dict:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {}


@contextlib.contextmanager
def audit_lock(root: "str | Path" = ".", command: str = "weakspot audit",
               say: Optional[callable] = print) -> Iterator[Path]:
    """Hold the repository's audit lock for the ``with`` block; raise :class:`AuditRunning` if a live audit has it."""
    path = Path(root) / LOCK
    path.parent.mkdir(parents=True, exist_ok=True)
    me = {"pid": os.getpid(), "host": socket.gethostname(), "command": command,
          "started": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")}
    for attempt in range(3):
        try:
            fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            other = _read(path)
            if not other and attempt == 0:  # the other audit is writing it this instant: read it again
                time.sleep(0.2)
                continue
            pid, host = other.get("pid"), other.get("host")
            if isinstance(pid, int) and (host != me["host"] or _alive(pid)):
                raise AuditRunning(
                    f"another audit is running in this repository: process {pid} on {host}, started "
                    f"{other.get('started')} ({other.get('command')}). Two audits at once would write the same "
                    f"artifacts; wait for it to end, or stop it (kill {pid}) and rerun. Lock file: {path}") from None
            if say:
                say(f"weakspot: removing a stale audit lock left by process {pid} (started {other.get('started')}), "
                    "which is no longer running")
            path.unlink(missing_ok=True)
            continue
        with os.fdopen(fd, "w") as f:
            json.dump(me, f)
        break
    else:  # the lock was re-created by another audit between our attempts
        raise AuditRunning(f"another audit took the lock {path} just now; wait for it to end")
    try:
        yield path
    finally:
        if _read(path).get("pid") == me["pid"]:
            path.unlink(missing_ok=True)
