"""The ``weakspot`` command: validate params, generate dvc.yaml, run the audit pipeline, switch profiles, trace
lineage, rerun a past audit, schedule the nightly run. Every command works on ``params.yaml`` in the current folder
(the repository root), which is the file DVC's stages read.

Caveats first: this module only parses arguments and calls the module that does the work (:mod:`ops.engine.audit`,
:mod:`ops.serve`, ...); nothing imports it. A WeakspotError ends the command with its message and exit code 2.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import List, Optional

#: Prefect's logging for the audit's processes: the flow runs' INFO lines go to Prefect (its UI shows each run's log),
#: the terminal shows warnings and errors only (Prefect's documented PREFECT_LOGGING_[PATH]_[KEY] overrides); a user's
#: own values win. Read before ``tasks`` is imported (its default, for a stage run by hand, is WARNING) and applied by
#: :func:`main`, before anything imports Prefect.
QUIET_CONSOLE = {"PREFECT_LOGGING_LEVEL": "INFO", "PREFECT_LOGGING_HANDLERS_CONSOLE_LEVEL": "WARNING"}
USERS_LOGGING = {k: os.environ[k] for k in QUIET_CONSOLE if k in os.environ}

from weakspot.errors import WeakspotError  # noqa: E402

from tasks.settings import check_params, load_section  # noqa: E402
from ops.engine import dvc  # noqa: E402
from ops.engine.dvc import PARAMS  # noqa: E402


def cmd_check(args: argparse.Namespace) -> int:
    checked = check_params(args.file)
    sections = [k for k in checked if isinstance(checked[k], dict)]
    print(
        f"{args.file}: valid ({len(sections)} sections: {', '.join(sections)}; targets: "
        f"{', '.join(checked['targets'])}; device={checked['device']})"
    )
    return 0


def cmd_pipeline(args: argparse.Namespace) -> int:
    from ops.engine.audit import regenerate_pipeline
    from ops.engine.lock import audit_lock

    # under the audit lock: an audit running now would have its pipeline and its outputs changed under it
    with audit_lock(".", "weakspot pipeline"):
        changed = regenerate_pipeline()
    print(f"dvc.yaml {'regenerated' if changed else 'already current'} from {PARAMS}")
    return 0


def cmd_audit(args: argparse.Namespace) -> int:
    from ops.engine.audit import audit

    if args.profile:
        cmd_profile(argparse.Namespace(name=args.profile))
    if args.estimate:
        from ops.engine.audit import estimate_only

        return estimate_only(args.stages, force=args.force, workers=args.workers)
    return audit(
        args.stages,
        force=args.force,
        pull=args.pull,
        push=args.push,
        workers=args.workers,
        gpu_workers=args.gpu_workers,
        in_checkout=args.in_checkout,
        command="weakspot audit " + " ".join(sys.argv[2:]),
    )


def cmd_worker(args: argparse.Namespace) -> int:

    from ops.engine.workers import ensure_pools, worker_command, worker_env

    if not os.environ.get("PREFECT_API_URL"):
        raise WeakspotError(
            "weakspot worker: set PREFECT_API_URL to the Prefect server the audits use (e.g. "
            "http://audit-host:4200/api, the server of `weakspot serve`)"
        )
    ensure_pools()
    name = args.name or f"{args.pool}-{__import__('socket').gethostname()}-{os.getpid()}"
    print(
        f"weakspot worker: {name} on the {args.pool} pool of {os.environ['PREFECT_API_URL']}; stages run in clones "
        f"under {os.environ.get('WEAKSPOT_WORKDIR') or 'the temporary folder'}",
        flush=True,
    )
    return subprocess.call(worker_command(args.pool, name), env=worker_env(dict(os.environ)))


def cmd_stage(args: argparse.Namespace) -> int:
    from weakspot.methods import available, shared_stages

    shared = {s.name: m.name for m, s in shared_stages()}
    if args.name in available():
        flow = ["flows.method", args.name]
    elif args.name in shared:
        flow = ["flows.shared", shared[args.name], args.name]
    else:
        flow = [f"flows.{args.name}"]
    return subprocess.call([sys.executable, "-m", *flow, *([args.target] if args.target else [])], env=dvc.env())


def cmd_compare(args: argparse.Namespace) -> int:
    from ops.verdict.compare import write_comparison

    page = write_comparison(args.a, args.b)
    print(f"weakspot: {args.a} vs {args.b} -> {page.resolve()}")
    return 0


def cmd_plots_diff(args: argparse.Namespace) -> int:
    from ops.verdict.plots_diff import plots_diff

    res = plots_diff(args.a, args.b, out=args.out)
    print(
        f"weakspot: dvc plots diff {args.a} {args.b}: {len(res['plots'])} plots -> {res['html']}"
        + (f"; not in the cache: {', '.join(res['missing'])}" if res["missing"] else "")
    )
    return 0


def cmd_profile(args: argparse.Namespace) -> int:
    from ops.profile import apply_profile

    backup = apply_profile(args.name, PARAMS)
    print(f"{PARAMS}: profile {args.name!r} merged in (previous file kept as {backup})")
    return 0


def cmd_lineage(args: argparse.Namespace) -> int:
    from ops.provenance.lineage import format_trace, trace

    path, key = args.path, args.key
    if key is None and ":" in path and not Path(path).exists():
        path, key = path.split(":", 1)
    t = trace(path, key)
    print(json.dumps(t, indent=1, default=str) if args.json else format_trace(t, all_deps=args.all))
    return 0


def cmd_rerun(args: argparse.Namespace) -> int:
    from ops.provenance.rerun import format_rerun, rerun

    _, hp = load_section("history", PARAMS)
    res = rerun(
        args.audit_id,
        ".",
        store=hp.dir,
        workdir=args.workdir,
        pull=args.pull,
        keep=args.keep,
        remote=dvc.remote_url(hp) if args.pull else None,
    )
    print(json.dumps(res, indent=1, default=str) if args.json else format_rerun(res))
    return 0 if res["reproduced"] else 1


def cmd_serve(args: argparse.Namespace) -> int:
    from ops.serve import serve

    return serve(args.cron, args.name, args.port, args.timezone, args.push, args.notify)


def _audit_parser(sub) -> None:
    a = sub.add_parser("audit", help="run the audit pipeline (dvc repro) and print where the report is")
    a.add_argument("stages", nargs="*", help="only these stages (and what they need)")
    a.add_argument("--force", action="store_true", help="rerun every stage even if nothing changed")
    a.add_argument("--profile", help="merge profiles/NAME.yaml into params.yaml first (e.g. paper)")
    a.add_argument(
        "--push",
        action="store_true",
        help="after a successful audit, push every output and the "
        "run-cache to the DVC remote (history.remote or WEAKSPOT_DVC_REMOTE); the nightly flow does",
    )
    a.add_argument(
        "--pull",
        action="store_true",
        help="restore stages from the DVC remote's run-cache where it "
        "has them instead of recomputing (dvc repro --pull)",
    )
    a.add_argument("--workers", type=int, help="local process workers on the cpu pool (default: execution.workers)")
    a.add_argument(
        "--gpu-workers",
        type=int,
        help="local process workers on the gpu pool (default: execution.gpu_workers; 1 when this machine has CUDA)",
    )
    a.add_argument(
        "--in-checkout",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="no workers: plain dvc repro --keep-going in this checkout, one stage at a time (default: "
        "execution.in_checkout; --no-in-checkout: on workers whatever it says)",
    )
    a.add_argument(
        "--estimate",
        action="store_true",
        help="run nothing: say how long each stage that would run should take on this machine, beside the last "
        "audit's times (the audit says the same in its first lines)",
    )
    a.set_defaults(fn=cmd_audit)
    w = sub.add_parser(
        "worker",
        help="join the audits of a Prefect server as a worker of a pool (a GPU machine: "
        "--pool gpu); PREFECT_API_URL names the server, the DVC remote comes with each stage",
    )
    w.add_argument("--pool", choices=["cpu", "gpu"], default="cpu")
    w.add_argument("--name", help="the worker's name (default: pool, host and process id)")
    w.set_defaults(fn=cmd_worker)


def _trace_parsers(sub) -> None:
    ln = sub.add_parser(
        "lineage",
        help="the chain that produced an artifact or a number: stages, the params they "
        "read, their inputs' hashes, the code version, when they ran and their Prefect runs",
    )
    ln.add_argument("path", help="an artifact, e.g. metrics/hda/digits.json (or PATH:KEY)")
    ln.add_argument("key", nargs="?", help="a number in a JSON artifact, dotted: hda.ae_prop")
    ln.add_argument("--json", action="store_true", help="machine-readable")
    ln.add_argument("--all", action="store_true", help="list every code file the stages depend on")
    ln.set_defaults(fn=cmd_lineage)
    rr = sub.add_parser(
        "rerun",
        help="reproduce a past audit exactly: its code and params in a scratch git "
        "worktree, every stage rerun, its metrics compared byte for byte with the recorded ones",
    )
    rr.add_argument("audit_id", help="an id from history/ (or a unique prefix, or 'last')")
    rr.add_argument(
        "--pull",
        action="store_true",
        help="restore stages from the DVC remote (what `weakspot audit --push` sent) instead of recomputing them",
    )
    rr.add_argument("--workdir", help="where to put the worktree (default: a new temporary folder)")
    rr.add_argument("--keep", action="store_true", help="keep the worktree afterwards")
    rr.add_argument("--json", action="store_true", help="machine-readable")
    rr.set_defaults(fn=cmd_rerun)


def _serve_parsers(sub) -> None:
    for name in ("serve", "schedule"):
        c = sub.add_parser(
            name,
            help="serve the nightly audit (weakspot audit --push, verdict as Prefect artifacts) "
            "on a cron schedule" + (" (alias of serve)" if name == "schedule" else ""),
        )
        c.add_argument("--cron", default="0 2 * * *", help='cron schedule (default: "0 2 * * *", 02:00 every night)')
        c.add_argument("--name", default="weakspot-nightly", help="the deployment's name (default: weakspot-nightly)")
        c.add_argument(
            "--port",
            type=int,
            default=4200,
            help="the local Prefect server's port, when PREFECT_API_URL is not set (default: 4200)",
        )
        c.add_argument("--timezone", help="the cron's IANA time zone, e.g. Europe/Paris (default: this machine's)")
        c.add_argument(
            "--no-push",
            dest="push",
            action="store_false",
            help="audit without pushing the outputs to the DVC remote (history.remote)",
        )
        c.add_argument(
            "--notify",
            action="append",
            default=[],
            metavar="URL",
            help="post a failed or regressed "
            "nightly run to URL (repeatable): an http(s) webhook gets a JSON object, a Slack incoming "
            "webhook or a Teams workflow URL a message (a Prefect automation, weakspot-notify-NAME)",
        )
        c.set_defaults(fn=cmd_serve)


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="weakspot", description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="command", required=True)
    ch = sub.add_parser("check", help="validate params.yaml (or another params file) against the schema")
    ch.add_argument("file", nargs="?", default=PARAMS)
    ch.set_defaults(fn=cmd_check)
    sub.add_parser("pipeline", help="regenerate dvc.yaml from params.yaml (weakspot audit does it too)").set_defaults(
        fn=cmd_pipeline
    )
    _audit_parser(sub)
    s = sub.add_parser("stage", help="run one stage's flow directly (python -m flows.NAME)")
    s.add_argument(
        "name",
        help="the stage: prepare, train, gad, examine (these take a target), render, a method's shared stage, report...",
    )
    s.add_argument("target", nargs="?", help="the target, for a per-target stage")
    s.set_defaults(fn=cmd_stage)
    cp = sub.add_parser(
        "compare",
        help="two audited targets on the same data side by side (a model and its "
        "repaired copy, a candidate and production): reports/compare-A-B.html",
    )
    cp.add_argument("a", help="a target of params.yaml (e.g. digits)")
    cp.add_argument("b", help="another target on the same data (e.g. digits_repaired)")
    cp.set_defaults(fn=cmd_compare)
    pd_ = sub.add_parser(
        "plots-diff",
        help="dvc plots diff between two recorded audits (ids, prefixes or last): "
        "every curve dvc.yaml declares, both audits drawn",
    )
    pd_.add_argument("a")
    pd_.add_argument("b")
    pd_.add_argument("--out", default="reports/plots-diff", help="where the HTML goes (default: reports/plots-diff)")
    pd_.set_defaults(fn=cmd_plots_diff)
    p = sub.add_parser("profile", help="merge profiles/NAME.yaml into params.yaml (keeps a .bak)")
    p.add_argument("name")
    p.set_defaults(fn=cmd_profile)
    _trace_parsers(sub)
    _serve_parsers(sub)
    return ap


def main(argv: Optional[List[str]] = None) -> int:
    os.environ.update({**QUIET_CONSOLE, **USERS_LOGGING})
    args = build_parser().parse_args(argv)
    try:
        return args.fn(args)
    except WeakspotError as exc:
        print(f"weakspot: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
