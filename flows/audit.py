"""The nightly audit: one Prefect flow that runs `weakspot audit` (the DVC pipeline (only what changed reruns) and reports.

``python -m flows.audit`` runs it once; ``python -m flows.audit --serve "0 2 * * *"`` (or ``weakspot schedule``)
serves it on a cron schedule against the Prefect server (the embedded one by default, or PREFECT_API_URL).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import flows  # noqa: F401
from prefect import flow, task

from tasks import paths


@task(retries=1, retry_delay_seconds=60)
def run_audit() -> None:
    """`weakspot audit`: regenerate dvc.yaml from params.yaml, then `dvc repro` (only what changed reruns)."""
    subprocess.run([sys.executable, "-m", "weakspot.cli", "audit"], check=True)


@flow(name="nightly-audit")
def audit_flow() -> str:
    run_audit()
    report = Path(paths.REPORT).resolve()
    print(f"nightly audit finished: {report}")
    return str(report)


if __name__ == "__main__":
    if len(sys.argv) >= 3 and sys.argv[1] == "--serve":
        audit_flow.serve(name="weakspot-nightly", cron=sys.argv[2])
    else:
        audit_flow()
