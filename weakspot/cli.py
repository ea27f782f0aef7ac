"""The ``weakspot`` command: validate params, generate dvc.yaml, run the audit pipeline, switch profiles, schedule the
nightly run. Every command works on ``params.yaml`` in the current folder (the repository root), which is the file
DVC's stages read."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import List, Optional

import yaml

from weakspot.config import check_params, deep_merge, read_yaml
from weakspot.errors import ConfigError, WeakspotError
from weakspot.io import write_text

PARAMS = "params.yaml"


def _env() -> dict:
    """The environment for pipeline subprocesses: this interpreter's bin first, so dvc.yaml's `python` is ours."""
    env = dict(os.environ)
    bindir = str(Path(sys.executable).parent)
    env["PATH"] = bindir + os.pathsep + env.get("PATH", "")
    return env


def _dvc() -> List[str]:
    exe = Path(sys.executable).parent / "dvc"
    if exe.exists():
        return [str(exe)]
    found = shutil.which("dvc")
    if found:
        return [found]
    return [sys.executable, "-m", "dvc"]


def cmd_check(args: argparse.Namespace) -> int:
    params = check_params(args.file)
    sections = [k for k in params if isinstance(params[k], dict)]
    print(f"{args.file}: valid ({len(sections)} sections: {', '.join(sections)}; targets: "
          f"{', '.join(params['targets'])}; device={params['device']})")
    return 0


def _pipeline() -> bool:
    """Regenerate dvc.yaml from params.yaml (tasks.pipeline); True when it changed."""
    sys.path.insert(0, str(Path.cwd()))
    from tasks.pipeline import write_dvc_yaml

    return write_dvc_yaml(PARAMS, "dvc.yaml")


def cmd_pipeline(args: argparse.Namespace) -> int:
    changed = _pipeline()
    print(f"dvc.yaml {'regenerated' if changed else 'already current'} from {PARAMS}")
    return 0


@contextlib.contextmanager
def prefect_server(env: dict):
    """One Prefect server for every stage of a run (each stage would otherwise start its own temporary server, about
    12 s each here). Steps aside when PREFECT_API_URL points at the user's server; stopped when the run ends."""
    if env.get("PREFECT_API_URL") or os.environ.get("WEAKSPOT_NO_SHARED_SERVER"):
        yield env
        return
    import socket
    import urllib.request

    home = Path(env.get("PREFECT_HOME") or Path.cwd() / ".prefect")
    home.mkdir(parents=True, exist_ok=True)
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    env = {**env, "PREFECT_HOME": str(home), "PREFECT_SERVER_ANALYTICS_ENABLED": "false"}
    log = open(home / "server.log", "ab")
    prefect = Path(sys.executable).parent / "prefect"
    proc = subprocess.Popen([str(prefect), "server", "start", "--host", "127.0.0.1", "--port", str(port)],
                            env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://127.0.0.1:{port}/api"
    try:
        deadline = time.time() + 180
        while True:
            try:
                with urllib.request.urlopen(f"{url}/health", timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if proc.poll() is not None or time.time() > deadline:
                raise ConfigError(f"the Prefect server did not start (see {home / 'server.log'}); "
                                  "set PREFECT_API_URL to a running server, or WEAKSPOT_NO_SHARED_SERVER=1")
            time.sleep(0.5)
        yield {**env, "PREFECT_API_URL": url}
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


def cmd_audit(args: argparse.Namespace) -> int:
    if args.profile:
        cmd_profile(argparse.Namespace(name=args.profile))
    check_params(PARAMS)
    if not Path("flows").is_dir() or not Path(".dvc").is_dir():
        raise ConfigError(f"no weakspot pipeline in {Path.cwd()}: run `weakspot audit` from the weakspot repository root")
    from weakspot.runlock import audit_lock

    with audit_lock(".", "weakspot audit " + " ".join(sys.argv[2:])):
        return _audit(args)


def _audit(args: argparse.Namespace) -> int:
    if _pipeline():
        print("weakspot: dvc.yaml regenerated from params.yaml (targets or methods changed)", flush=True)
    repro = ["repro"] + (["--force"] if args.force else []) + list(args.stages or [])
    cmd = _dvc() + repro
    print("weakspot: running the audit pipeline: dvc " + " ".join(repro), flush=True)
    t0 = time.time()
    with prefect_server(_env()) as env:
        rc = subprocess.call(cmd, env=env)
    if rc != 0:
        print(f"weakspot: the pipeline failed (exit {rc}); the message above names the stage and the problem. "
              "Artifacts of earlier successful stages are intact.", file=sys.stderr)
        return rc
    from tasks.paths import REPORT  # importable: _pipeline() put the repository on sys.path

    print(f"weakspot: audit finished in {time.time() - t0:.0f} s. Report: {REPORT.resolve()}")
    return _record_and_compare()


def _record_and_compare() -> int:
    """Keep the audit's metrics in the history store and compare them with the previous audit's; 3 on a regression
    (with history.fail_on_regression), else 0. The comparison is written next to the audit's file."""
    from weakspot.config import load_section
    from weakspot.history import audits, compare, format_comparison, load, record
    from weakspot.io import write_json

    _, hp = load_section("history", PARAMS)
    prev = audits(".", hp.dir)
    rec = record(".", hp.dir)
    prev_id = prev[-1].stem if prev else None
    rows = compare(load(prev[-1]), load(Path(rec["file"])), hp.rules) if prev else []
    write_json(Path(hp.dir) / f"{rec['audit_id']}.comparison.json",
               {"audit": rec, "previous": prev_id, "rows": rows})
    print(format_comparison(rows, prev_id, rec["audit_id"]))
    if any(r["regression"] for r in rows) and hp.fail_on_regression:
        print("weakspot: regressions since the last audit (exit 3); history.rules in params.yaml set what counts",
              file=sys.stderr)
        return 3
    return 0


def cmd_stage(args: argparse.Namespace) -> int:
    return subprocess.call([sys.executable, "-m", f"flows.{args.name}", *([args.target] if args.target else [])],
                           env=_env())


def cmd_profile(args: argparse.Namespace) -> int:
    prof = Path("profiles") / f"{args.name}.yaml"
    if not prof.is_file():
        names = sorted(p.stem for p in Path("profiles").glob("*.yaml"))
        raise ConfigError(f"profile {args.name!r} not found at {prof}; available: {', '.join(names) or '(none)'}")
    merged = deep_merge(read_yaml(PARAMS), read_yaml(prof))
    tmp = Path(PARAMS).with_suffix(".candidate.yaml")
    write_text(tmp, yaml.safe_dump(merged, sort_keys=False))
    try:
        check_params(tmp)
    finally:
        tmp.unlink(missing_ok=True)
    backup = Path(PARAMS).with_suffix(".yaml.bak")
    shutil.copyfile(PARAMS, backup)
    write_text(PARAMS, f"# profile {args.name} merged in by `weakspot profile`; previous file: {backup}\n"
               + yaml.safe_dump(merged, sort_keys=False))
    print(f"{PARAMS}: profile {args.name!r} merged in (previous file kept as {backup})")
    return 0


def cmd_lineage(args: argparse.Namespace) -> int:
    from weakspot.lineage import format_trace, trace

    path, key = args.path, args.key
    if key is None and ":" in path and not Path(path).exists():
        path, key = path.split(":", 1)
    t = trace(path, key)
    print(json.dumps(t, indent=1, default=str) if args.json else format_trace(t, all_deps=args.all))
    return 0


def cmd_schedule(args: argparse.Namespace) -> int:
    return subprocess.call([sys.executable, "-m", "flows.audit", "--serve", args.cron], env=_env())


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="weakspot", description=__doc__)
    sub = ap.add_subparsers(dest="command", required=True)
    ch = sub.add_parser("check", help="validate params.yaml (or another params file) against the schema")
    ch.add_argument("file", nargs="?", default=PARAMS)
    ch.set_defaults(fn=cmd_check)
    sub.add_parser("pipeline", help="regenerate dvc.yaml from params.yaml (weakspot audit does it too)"
                   ).set_defaults(fn=cmd_pipeline)
    a = sub.add_parser("audit", help="run the audit pipeline (dvc repro) and print where the report is")
    a.add_argument("stages", nargs="*", help="only these stages (and what they need)")
    a.add_argument("--force", action="store_true", help="rerun every stage even if nothing changed")
    a.add_argument("--profile", help="merge profiles/NAME.yaml into params.yaml first (e.g. paper)")
    a.set_defaults(fn=cmd_audit)
    s = sub.add_parser("stage", help="run one stage's flow directly (python -m flows.NAME)")
    s.add_argument("name", help="the stage: prepare, train, gad, examine (these take a target), render, report...")
    s.add_argument("target", nargs="?", help="the target, for a per-target stage")
    s.set_defaults(fn=cmd_stage)
    p = sub.add_parser("profile", help="merge profiles/NAME.yaml into params.yaml (keeps a .bak)")
    p.add_argument("name")
    p.set_defaults(fn=cmd_profile)
    ln = sub.add_parser("lineage", help="the chain that produced an artifact or a number: stages, the params they "
                        "read, their inputs' hashes, the code version, when they ran and their Prefect runs")
    ln.add_argument("path", help="an artifact, e.g. metrics/hda/digits.json (or PATH:KEY)")
    ln.add_argument("key", nargs="?", help="a number in a JSON artifact, dotted: hda.ae_prop")
    ln.add_argument("--json", action="store_true", help="machine-readable")
    ln.add_argument("--all", action="store_true", help="list every code file the stages depend on")
    ln.set_defaults(fn=cmd_lineage)
    c = sub.add_parser("schedule", help="serve the nightly audit flow with Prefect on a cron schedule")
    c.add_argument("--cron", default="0 2 * * *", help="cron schedule (default: 02:00 every night)")
    c.set_defaults(fn=cmd_schedule)
    return ap


def main(argv: Optional[List[str]] = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.fn(args)
    except WeakspotError as exc:
        print(f"weakspot: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
