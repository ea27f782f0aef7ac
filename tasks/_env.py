"""Prefect settings for weakspot's runs, applied before Prefect is imported.

With no PREFECT_API_URL, Prefect starts a temporary local server on SQLite: the embedded default. Its database and
the cached task results live in the repository's ``.prefect/`` (git-ignored), so a rerun on the same machine reuses
what earlier runs computed, and nothing is written to the user's home folder. A user who runs a Prefect server sets
PREFECT_API_URL and these defaults step aside.
"""

import os
from pathlib import Path


def configure() -> None:
    root = Path(os.environ.get("WEAKSPOT_ROOT", os.getcwd()))
    home = root / ".prefect"
    os.environ.setdefault("PREFECT_HOME", str(home))
    os.environ.setdefault("PREFECT_LOCAL_STORAGE_PATH", str(home / "results"))
    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    # The embedded server needs ~10 s to start on a busy 2-core machine; Prefect's default wait is 20 s.
    os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "180")
    os.environ.setdefault("PREFECT_LOGGING_LEVEL", "WARNING")
    os.environ.setdefault("PREFECT_RESULTS_PERSIST_BY_DEFAULT", "true")
    os.environ.setdefault("PREFECT_TASKS_DEFAULT_PERSIST_RESULT", "true")
    os.environ.setdefault("MPLBACKEND", "Agg")
    # OpenMP threads that spin while waiting starve each other (and Blender's workers) on a small machine: measured
    # here, LeNet training took 144 s with torch's default spinning and 28 s with passive waits, same results.
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
