"""The ``weakspot`` command: validate params, run the audit pipeline, switch profiles, schedule the nightly run."""

from __future__ import annotations

import argparse
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

REPORT = Path("reports/index.html")


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
    params = check_params(args.params)
    sections = [k for k in params if isinstance(params[k], dict)]
    print(f"{args.params}: valid ({len(sections)} sections: {', '.join(sections)}; device={params['device']})")
    return 0


def cmd_audit(args: argparse.Namespace) -> int:
    if args.profile:
        cmd_profile(argparse.Namespace(name=args.profile, params=args.params))
    check_params(args.params)
    if not Path("dvc.yaml").is_file():
        raise ConfigError(f"dvc.yaml not found in {Path.cwd()}: run `weakspot audit` from the weakspot repository root")
    repro = ["repro"] + (["--force"] if args.force else []) + list(args.stages or [])
    cmd = _dvc() + repro
    print("weakspot: running the audit pipeline: dvc " + " ".join(repro), flush=True)
    t0 = time.time()
    rc = subprocess.call(cmd, env=_env())
    if rc != 0:
        print(f"weakspot: the pipeline failed (exit {rc}); the message above names the stage and the problem. "
              "Artifacts of earlier successful stages are intact.", file=sys.stderr)
        return rc
    print(f"weakspot: audit finished in {time.time() - t0:.0f} s. Report: {REPORT.resolve()}")
    return 0


def cmd_stage(args: argparse.Namespace) -> int:
    return subprocess.call([sys.executable, "-m", f"flows.{args.name}"], env=_env())


def cmd_profile(args: argparse.Namespace) -> int:
    prof = Path("profiles") / f"{args.name}.yaml"
    if not prof.is_file():
        names = sorted(p.stem for p in Path("profiles").glob("*.yaml"))
        raise ConfigError(f"profile {args.name!r} not found at {prof}; available: {', '.join(names) or '(none)'}")
    merged = deep_merge(read_yaml(args.params), read_yaml(prof))
    tmp = Path(args.params).with_suffix(".candidate.yaml")
    write_text(tmp, yaml.safe_dump(merged, sort_keys=False))
    try:
        check_params(tmp)
    finally:
        tmp.unlink(missing_ok=True)
    backup = Path(args.params).with_suffix(".yaml.bak")
    shutil.copyfile(args.params, backup)
    write_text(args.params, f"# profile {args.name} merged in by `weakspot profile`; previous file: {backup}\n"
               + yaml.safe_dump(merged, sort_keys=False))
    print(f"{args.params}: profile {args.name!r} merged in (previous file kept as {backup})")
    return 0


def cmd_schedule(args: argparse.Namespace) -> int:
    return subprocess.call([sys.executable, "-m", "flows.audit", "--serve", args.cron], env=_env())


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="weakspot", description=__doc__)
    ap.add_argument("--params", default="params.yaml", help="the params file (default: params.yaml)")
    sub = ap.add_subparsers(dest="command", required=True)
    sub.add_parser("check", help="validate params.yaml against the schema").set_defaults(fn=cmd_check)
    a = sub.add_parser("audit", help="run the audit pipeline (dvc repro) and print where the report is")
    a.add_argument("stages", nargs="*", help="only these stages (and what they need)")
    a.add_argument("--force", action="store_true", help="rerun every stage even if nothing changed")
    a.add_argument("--profile", help="merge profiles/NAME.yaml into params.yaml first (e.g. paper)")
    a.set_defaults(fn=cmd_audit)
    s = sub.add_parser("stage", help="run one stage's flow directly (python -m flows.NAME)")
    s.add_argument("name")
    s.set_defaults(fn=cmd_stage)
    p = sub.add_parser("profile", help="merge profiles/NAME.yaml into params.yaml (keeps a .bak)")
    p.add_argument("name")
    p.set_defaults(fn=cmd_profile)
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
