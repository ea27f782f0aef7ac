"""The nightly audit: one Prefect flow that runs `weakspot audit --push` (the DVC pipeline: only what changed reruns,
the history comparison, then every output pushed to the DVC remote) and publishes the verdict as Prefect artifacts.

``python -m ops.engine.nightly`` runs it once; ``weakspot serve --cron "0 2 * * *"`` serves it as the deployment
``nightly-audit/weakspot-nightly`` (``python -m ops.engine.nightly --serve CRON`` does the same against PREFECT_API_URL).

The flow run ends Completed when the audit passed, Failed naming the regressed metrics and failed gates when the
audit found a regression or a gate failed (exit 3, not retried: rerunning would not change the numbers), and Failed
after one retry for any other failure (a stage failed, the push failed), with the audit's last output lines in the
message. ``--notify URL`` (with ``--serve``) posts a Failed or Crashed run of the deployment to URL (:mod:`ops.verdict.notify`).
"""

from __future__ import annotations

import collections
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import List, Optional, Sequence, Set

from prefect import flow, task
from prefect.cache_policies import NO_CACHE
from prefect.states import Completed, Failed

from tasks import paths

#: The repository the flow audits: the checkout this file is in (served or deployed from its root).
ROOT = Path(__file__).resolve().parents[2]
REGRESSION = 3
#: exit code of an incomplete audit (ops.engine.audit.INCOMPLETE): a stage failed, the other targets were audited
INCOMPLETE = 4


class AuditError(RuntimeError):
    pass


def _history_dir() -> Path:
    """params.yaml's history.dir (``history`` when params.yaml does not validate: the audit then says why)."""
    from tasks.settings import load_section
    from weakspot.errors import WeakspotError

    try:
        _, hp = load_section("history", ROOT / "params.yaml")
    except WeakspotError:
        return ROOT / "history"
    return ROOT / hp.dir


def _comparisons() -> Set[str]:
    d = _history_dir()
    return {p.name for p in d.glob("*.comparison.json")} if d.is_dir() else set()


@task(retries=1, retry_delay_seconds=60, cache_policy=NO_CACHE, persist_result=False)
def run_audit(push: bool = True) -> int:
    """`weakspot audit [--push]` in the repository root; its exit code when it finished (0, or 3 on a regression),
    an AuditError (retried once) on any other exit."""
    cmd = [sys.executable, "-m", "ops.cli", "audit"] + (["--push"] if push else [])
    env = {k: v for k, v in os.environ.items() if k != "PREFECT__FLOW_RUN_ID"}  # the stages' runs are their own
    env["PATH"] = str(Path(sys.executable).parent) + os.pathsep + env.get("PATH", "")
    print(f"nightly audit: {' '.join(cmd[2:])} in {ROOT}", flush=True)
    tail: collections.deque = collections.deque(maxlen=30)
    proc = subprocess.Popen(
        cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1
    )
    assert proc.stdout is not None
    for line in proc.stdout:
        sys.stdout.write(line)
        sys.stdout.flush()
        tail.append(line.rstrip())
    rc = proc.wait()
    if rc not in (0, REGRESSION, INCOMPLETE):  # an incomplete audit is not retried: its report says what failed
        raise AuditError(
            f"`weakspot {' '.join(cmd[3:])}` failed (exit {rc}) in {ROOT}; its last lines:\n" + "\n".join(tail)
        )
    return rc


@flow(
    name="nightly-audit",
    persist_result=False,
    description="weakspot audit --push, then the verdict as artifacts (weakspot-verdict, weakspot-comparison); "
    "Failed when a watched metric regressed or a gate failed",
)
def audit_flow(push: bool = True):
    """Run the audit; publish its verdict; Completed, or Failed naming the regressed metrics and failed gates."""
    from ops.verdict.notify import announce_failure
    from ops.verdict.artifacts import failure_message, publish_verdict, verdict_line

    before = _comparisons()
    try:
        rc = run_audit(push)
    except Exception as e:  # failed after its retry: the run fails with it, and says so to `serve --notify`
        announce_failure(f"Flow run encountered an exception: {type(e).__name__}: {e}")
        raise
    new: List[str] = sorted(_comparisons() - before)
    report = ROOT / paths.REPORT
    print(f"nightly audit finished (exit {rc}). Report: {report}", flush=True)
    comparison: Optional[dict] = None
    if new:
        comparison = json.loads((_history_dir() / new[-1]).read_text())
        publish_verdict(comparison, str(report))
        print(f"verdict: {verdict_line(comparison)}", flush=True)
    if rc == INCOMPLETE:  # a stage failed; the other targets were audited
        failed = [f for f in (comparison or {}).get("failures", []) if f.get("failed")]
        message = (
            "weakspot audit INCOMPLETE: "
            + "; ".join(f"{f['stage']}: {f.get('message', '')}" for f in failed)
            + f". Report: {report}"
        )
        announce_failure(message)
        return Failed(message=message)
    if rc == REGRESSION:  # a regression or a failed gate: the message is what `weakspot serve --notify` posts
        message = failure_message(comparison, str(report), str(ROOT / "reports" / "summary.md"))
        announce_failure(message)
        return Failed(message=message)
    return Completed(
        message=f"weakspot audit: {verdict_line(comparison) if comparison else 'done'}. Report: {report}",
        data=str(report),
    )


def local_timezone() -> str:
    """This machine's IANA time zone (TZ, else /etc/localtime's link), else UTC: a cron of 02:00 means 02:00 here."""
    tz = os.environ.get("TZ", "").lstrip(":")
    if not tz:
        try:
            link = os.readlink("/etc/localtime")
            tz = link.split("zoneinfo/", 1)[1] if "zoneinfo/" in link else ""
        except OSError:
            tz = ""
    try:
        import zoneinfo

        zoneinfo.ZoneInfo(tz)
        return tz
    except (ValueError, zoneinfo.ZoneInfoNotFoundError):
        return "UTC"


def serve(
    cron: str,
    name: str = "weakspot-nightly",
    push: bool = True,
    timezone: Optional[str] = None,
    notify: Sequence[str] = (),
) -> int:
    """Serve the flow as deployment ``nightly-audit/<name>`` on ``cron`` against PREFECT_API_URL (or Prefect's
    ephemeral server) until interrupted; the schedule is paused when serving stops. ``notify``: URLs that a failed
    run posts to, through the automation ``weakspot-notify-<name>`` (:mod:`ops.verdict.notify`), replaced when serving starts
    (removed without ``notify``) and removed when it stops."""
    from ops.verdict import notify as notifications
    from prefect.client.schemas.schedules import CronSchedule
    from prefect.schedules import Cron
    from pydantic import ValidationError

    try:
        CronSchedule(cron=cron)  # Prefect's public schedule model checks the string
    except ValidationError:
        print(
            f'weakspot: error: Invalid cron string: "{cron}"; e.g. "0 2 * * *" (02:00 every night) or "*/30 * * * *"',
            file=sys.stderr,
        )
        return 2
    tz = timezone or local_timezone()
    if notify:
        auto = notifications.install(name, notify)
        print(
            f"notifications: automation {notifications.automation_name(name)} ({auto}): a failed run posts to "
            + ", ".join(notifications.describe(u) for u in notify),
            flush=True,
        )
    else:
        notifications.remove(name)  # one left by a serve that was killed
    try:
        audit_flow.serve(
            name=name,
            schedule=Cron(cron, timezone=tz),
            parameters={"push": push},
            description=f"weakspot audit{' --push' if push else ''} in {ROOT} on cron {cron!r} ({tz}); "
            "verdict in the run's artifacts",
            pause_on_shutdown=True,
        )
    finally:
        if notify:
            try:
                notifications.remove(name)
                print(f"notifications: automation {notifications.automation_name(name)} removed", flush=True)
            except Exception as e:  # the server gone: the next serve replaces it  # noqa: BLE001
                print(
                    f"notifications: automation {notifications.automation_name(name)} not removed ({e!r})",
                    file=sys.stderr,
                    flush=True,
                )
    return 0


def main(argv: Optional[List[str]] = None) -> int:
    import argparse

    ap = argparse.ArgumentParser(prog="python -m ops.engine.nightly", description=__doc__.split("\n\n")[0])
    ap.add_argument("--serve", metavar="CRON", help="serve on this cron schedule instead of running once")
    ap.add_argument("--name", default="weakspot-nightly", help="the deployment's name")
    ap.add_argument("--timezone", help="the cron's IANA time zone (default: this machine's)")
    ap.add_argument("--no-push", dest="push", action="store_false", help="audit without pushing to the DVC remote")
    ap.add_argument(
        "--notify",
        action="append",
        default=[],
        metavar="URL",
        help="with --serve: post a failed run to this URL (repeatable; see ops/verdict/notify.py)",
    )
    args = ap.parse_args(argv)
    if args.serve:
        return serve(args.serve, args.name, args.push, args.timezone, args.notify)
    state = audit_flow(push=args.push, return_state=True)
    print(f"nightly audit: {state.name}: {state.message}", file=sys.stderr if not state.is_completed() else sys.stdout)
    return 0 if state.is_completed() else 1


if __name__ == "__main__":
    sys.exit(main())
