"""Prefect settings for weakspot's runs, applied before Prefect is imported.

With no PREFECT_API_URL, Prefect starts a temporary local server on SQLite: the embedded default. Its database and
the cached task results live in the repository's ``.prefect/`` (git-ignored), so a rerun on the same machine reuses
what earlier runs computed, and nothing is written to the user's home folder. A user who runs a Prefect server sets
PREFECT_API_URL and these defaults step aside.
"""

import os
import sys
from pathlib import Path

#: The variables torch (intra-op), BLAS and OpenMP (scikit-learn, NumPy) read for their thread counts at start.
THREAD_VARS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")


def params_threads(params: Path) -> int:
    """params.yaml's top-level ``threads`` (weakspot.device.DEFAULT_THREADS when absent or unreadable: the stage's
    own validation names a bad value), read before torch or NumPy is imported."""
    from weakspot.device import DEFAULT_THREADS, valid_threads

    import yaml

    try:
        value = (yaml.safe_load(params.read_text()) or {}).get("threads", DEFAULT_THREADS)
    except (OSError, ValueError, AttributeError, yaml.YAMLError):  # the stage's own reading names the problem
        return DEFAULT_THREADS
    return value if valid_threads(value) else DEFAULT_THREADS


def pin_threads(threads: int) -> None:
    """Every computation of this process and the processes it starts (Dask workers, Blender) on ``threads`` CPU
    threads. A stage's results depend on the count, so params.yaml's value wins over one in the environment (said
    on stderr)."""
    for var in THREAD_VARS:
        before = os.environ.get(var)
        if before not in (None, str(threads)):
            print(
                f"weakspot: {var}={before} in the environment ignored: params.yaml's threads = {threads} decides "
                f"(results depend on it)",
                file=sys.stderr,
                flush=True,
            )
        os.environ[var] = str(threads)


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
    pin_threads(params_threads(root / "params.yaml"))
