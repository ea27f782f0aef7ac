"""The tests' Prefect database, made once per machine and Prefect version and copied into each throwaway repository's
``.prefect`` (tests/conftest.py's ``Repo``): a server started on an empty database first runs Prefect's migrations,
about 11 s of a 2-core machine's CPU here, against about 3.5 s on a database that has them, and the suite starts a
server in dozens of new repositories. weakspot itself never copies Prefect's files (issue 48: public interfaces
only); a user's checkout pays the migrations once.

Caveats first: the copy is taken by SQLite's online backup right after the first server on a new database answers
its health check, before anything of an audit is written to it (no flow run, work pool or deployment). It is used
only for Prefect's default SQLite database (``PREFECT_HOME/prefect.db``, no database URL in the environment) and
only when that file does not exist yet. Its name carries Prefect's version, so an upgrade makes a new one. It lives
in ``$XDG_CACHE_HOME/weakspot`` (default ``~/.cache/weakspot``), or WEAKSPOT_CACHE; deleting it costs one slow start.
:func:`prepare` makes it (a server started once on a new database, under a file lock).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sqlite3
import tempfile
from importlib.metadata import version
from pathlib import Path
from typing import Mapping, Optional

_URL_SETTINGS = ("PREFECT_API_DATABASE_CONNECTION_URL", "PREFECT_SERVER_DATABASE_CONNECTION_URL")


def template(env: Mapping[str, str]) -> Path:
    """Where this machine keeps the prepared database of the installed Prefect version."""
    cache = env.get("WEAKSPOT_CACHE") or str(Path(env.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "weakspot")
    return Path(cache) / f"prefect-{version('prefect')}.db"


def database(home: Path, env: Mapping[str, str]) -> Optional[Path]:
    """The SQLite file a server with ``PREFECT_HOME=home`` uses, or None when ``env`` names another database."""
    return None if any(env.get(k) for k in _URL_SETTINGS) else home / "prefect.db"


def seed(home: Path, env: Mapping[str, str]) -> bool:
    """Copy the prepared database into ``home`` when it has none; whether it did."""
    db, tpl = database(home, env), template(env)
    if db is None or db.exists() or not tpl.is_file():
        return False
    if any(db.with_name(db.name + end).exists() for end in ("-wal", "-shm", "-journal")):
        return False  # a deleted database's journal left behind: SQLite would replay it onto the copy
    fd, tmp = tempfile.mkstemp(dir=home, prefix=".prefect.db.")
    os.close(fd)
    try:
        shutil.copyfile(tpl, tmp)
        try:
            os.link(tmp, db)  # never over a database another server created meanwhile
        except FileExistsError:
            return False
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
    return True


def keep(home: Path, env: Mapping[str, str]) -> None:
    """Save ``home``'s database as the prepared one when there is none yet (call it right after the server on a new
    database came up). Best effort: a failure leaves the next start as slow as this one."""
    db, tpl = database(home, env), template(env)
    if db is None or not db.is_file() or tpl.exists():
        return
    with contextlib.suppress(OSError, sqlite3.Error):
        tpl.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=tpl.parent, prefix=tpl.name + ".")
        os.close(fd)
        try:
            src, dst = sqlite3.connect(f"file:{db}?mode=ro", uri=True), sqlite3.connect(tmp)
            with dst:
                src.backup(dst)
            src.close()
            dst.close()
            os.replace(tmp, tpl)
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)


def prepare(env: Mapping[str, str]) -> Optional[Path]:
    """The prepared database, made first when there is none (a Prefect server started once on a new database in a
    temporary home, under a file lock: one maker at a time); None when it could not be made."""
    tpl = template(env)
    if tpl.is_file():
        return tpl
    from filelock import FileLock

    tpl.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(tpl) + ".lock"):
        if tpl.is_file():
            return tpl
        from tasks.server import free_port, start, stop_session

        with tempfile.TemporaryDirectory(prefix="weakspot-prefect-home-") as home:
            server_env = {**env, "PREFECT_HOME": home, "PREFECT_SERVER_ANALYTICS_ENABLED": "false"}
            for k in ("PREFECT_API_URL",) + _URL_SETTINGS:
                server_env.pop(k, None)
            proc, _ = start(server_env, free_port(None), Path(home) / "server.log", retries=2)
            try:
                keep(Path(home), server_env)
            finally:
                stop_session(proc)
    return tpl if tpl.is_file() else None


def fresh_home(folder: Path, env: Mapping[str, str]) -> Path:
    """``folder`` made a PREFECT_HOME of its own with the prepared database in it (when one could be made): a test's
    temporary server starts in seconds and shares no database with another test's."""
    folder.mkdir(parents=True, exist_ok=True)
    if prepare(env):
        seed(folder, env)
    return folder
