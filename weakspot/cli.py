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
from weakspot.io import remove_partials, write_text

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
def prefect_server(env: dict, port: Optional[int] = None):
    """One Prefect server for every stage of a run (each stage would otherwise start its own temporary server, about
    12 s each here), stopped when the run ends. Steps aside when PREFECT_API_URL points at the user's server, and
    uses the server of a `weakspot serve` running in this checkout (``.prefect/serve.url``). Its database is
    ``.prefect/prefect.db`` (PREFECT_HOME), so the runs stay visible to the next server started there. ``port``:
    listen there (`weakspot serve`, whose UI the user opens) instead of on a free port; a ConfigError when taken."""
    if env.get("PREFECT_API_URL") or (port is None and os.environ.get("WEAKSPOT_NO_SHARED_SERVER")):
        yield env
        return
    import signal
    import socket
    import urllib.request

    home = Path(env.get("PREFECT_HOME") or Path.cwd() / ".prefect")
    home.mkdir(parents=True, exist_ok=True)
    served = home / "serve.url"  # `weakspot serve`'s server, while it runs: an audit meanwhile uses it (one database)
    if port is None and served.is_file():
        url, up = served.read_text().strip(), False
        with contextlib.suppress(OSError):
            with urllib.request.urlopen(f"{url}/health", timeout=2) as r:
                up = r.status == 200
        if up:
            print(f"weakspot: using the Prefect server of `weakspot serve` ({url[:-4]})", flush=True)
            yield {**env, "PREFECT_HOME": str(home), "PREFECT_API_URL": url}
            return
    with socket.socket() as sock:
        # as the server binds: a recently closed connection (TIME_WAIT) does not make the port taken
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port or 0))
        except OSError:
            other = ""
            with contextlib.suppress(OSError):
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/health", timeout=2) as r:
                    other = " by a Prefect server" if r.status == 200 else ""
            use = (f"; to use that server instead: PREFECT_API_URL=http://127.0.0.1:{port}/api" if other else "")
            raise ConfigError(f"port {port} is taken{other} (another `weakspot serve` or `prefect server start`?); "
                              f"pick another with --port{use}") from None
        port_given, port = port is not None, sock.getsockname()[1]
    env = {**env, "PREFECT_HOME": str(home), "PREFECT_SERVER_ANALYTICS_ENABLED": "false"}
    log = open(home / "server.log", "ab")
    prefect = Path(sys.executable).parent / "prefect"
    url = f"http://127.0.0.1:{port}/api"
    # the UI's pages call the API at PREFECT_UI_API_URL, which otherwise says port 4200 whatever --port is
    proc = subprocess.Popen([str(prefect), "server", "start", "--host", "127.0.0.1", "--port", str(port)],
                            env={**env, "PREFECT_UI_API_URL": url}, stdout=log, stderr=subprocess.STDOUT,
                            start_new_session=True)
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
        if port_given:
            served.write_text(url + "\n")
        yield {**env, "PREFECT_API_URL": url}
    finally:
        if port_given:
            with contextlib.suppress(OSError):
                if served.read_text().strip() == url:
                    served.unlink()
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)  # the server and anything it started (its own session)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
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


def _stage_names() -> List[str]:
    return list((yaml.safe_load(Path("dvc.yaml").read_text()) or {}).get("stages", {}))


def _audit(args: argparse.Namespace) -> int:
    """``dvc repro`` of every stage but the report, then the history record and comparison, then the report (which
    shows the comparison and the trend over past audits: the history folder is one of its DVC dependencies)."""
    from weakspot.config import load_section

    if _pipeline():
        print("weakspot: dvc.yaml regenerated from params.yaml (targets or methods changed)", flush=True)
    _, hp = load_section("history", PARAMS)
    Path(hp.dir).mkdir(parents=True, exist_ok=True)  # the report stage depends on it
    swept = sweep_partials(".")
    if swept:
        print(f"weakspot: removed {len(swept)} partly written file(s) left by an interrupted run: "
              + ", ".join(swept[:5]) + (" ..." if len(swept) > 5 else ""), flush=True)
    names = _stage_names()
    wanted = list(args.stages or [s for s in names if s != "report"])
    unknown = [s for s in wanted if s not in names]
    if unknown:
        raise ConfigError(f"no stage named {', '.join(unknown)} in dvc.yaml; stages: {', '.join(names)}")
    first = [s for s in wanted if s != "report"]
    flags = (["--force"] if args.force else []) + (["--pull"] if args.pull else [])
    t0 = time.time()
    with prefect_server(_env()) as env:
        if first:
            rc = _repro(flags + first, env)
            if rc != 0:
                return rc
        if not _metrics_exist():
            print("weakspot: no metrics yet; nothing recorded in the history", file=sys.stderr)
            verdict = 0
        else:
            verdict = _record_and_compare()
        if "report" in names and (not args.stages or "report" in args.stages):
            rc = _repro((["--pull"] if args.pull else []) + ["report"], env)
            if rc != 0:
                return rc
    from tasks.paths import REPORT  # importable: _pipeline() put the repository on sys.path

    print(f"weakspot: audit finished in {time.time() - t0:.0f} s. Report: {REPORT.resolve()}")
    if args.push:
        rc = push(hp)
        if rc != 0:
            return rc
    return verdict


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
    print(format_comparison(rows, prev_id, rec["audit_id"]), flush=True)
    if any(r["regression"] for r in rows) and hp.fail_on_regression:
        print("weakspot: regressions since the last audit (exit 3); history.rules in params.yaml set what counts",
              file=sys.stderr)
        return 3
    return 0


def _repro(argv: List[str], env: dict) -> int:
    cmd = _dvc() + ["repro"] + argv
    print("weakspot: running the audit pipeline: dvc repro " + " ".join(argv), flush=True)
    rc = subprocess.call(cmd, env=env)
    if rc != 0:
        print(f"weakspot: the pipeline failed (exit {rc}); the message above names the stage and the problem. "
              "Artifacts of earlier successful stages are intact.", file=sys.stderr)
    return rc


def _metrics_exist() -> bool:
    return Path("metrics").is_dir() and any(Path("metrics").rglob("*.json"))


def sweep_partials(root: "str | Path") -> List[str]:
    """The partly written files a killed stage left beside the pipeline's outputs, removed (under the audit lock,
    when no stage is writing); their paths relative to ``root``."""
    dirs = ("data", "metrics", "plots", "findings", "reports")
    return sorted(str(f.relative_to(root)) for d in dirs for f in remove_partials(Path(root) / d))


def remote_url(hp) -> str:
    """The DVC remote of ``history.remote`` (or WEAKSPOT_DVC_REMOTE): a local folder is made absolute."""
    url = os.environ.get("WEAKSPOT_DVC_REMOTE") or hp.remote
    if "://" not in url:
        url = str(Path(url).expanduser().resolve())
    return url


def configure_remote(url: str, root: "str | Path" = ".") -> str:
    """Make ``url`` (see :func:`remote_url`) the default DVC remote, ``weakspot``, of the checkout at ``root`` (in
    .dvc/config.local: not committed)."""
    if "://" not in url:
        Path(url).mkdir(parents=True, exist_ok=True)
    subprocess.run(_dvc() + ["remote", "add", "--local", "--force", "-d", "weakspot", url], cwd=root, check=True,
                   capture_output=True, text=True)
    return url


def push(hp) -> int:
    """`dvc push --run-cache` of every output to the remote: another machine's `weakspot audit --pull` (or
    `weakspot rerun --pull`) then restores each stage from it instead of recomputing."""
    url = configure_remote(remote_url(hp))
    print(f"weakspot: pushing the audit's artifacts and run-cache to {url}", flush=True)
    rc = subprocess.call(_dvc() + ["push", "--run-cache", "-r", "weakspot"], env=_env())
    if rc != 0:
        print(f"weakspot: dvc push to {url} failed (exit {rc}); the audit itself succeeded", file=sys.stderr)
    return rc


def cmd_stage(args: argparse.Namespace) -> int:
    from weakspot.methods import available

    flow = ["flows.method", args.name] if args.name in available() else [f"flows.{args.name}"]
    return subprocess.call([sys.executable, "-m", *flow, *([args.target] if args.target else [])], env=_env())


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


def cmd_rerun(args: argparse.Namespace) -> int:
    from weakspot.config import load_section
    from weakspot.rerun import format_rerun, rerun

    _, hp = load_section("history", PARAMS)
    res = rerun(args.audit_id, ".", store=hp.dir, workdir=args.workdir, pull=args.pull, keep=args.keep,
                remote=remote_url(hp) if args.pull else None)
    print(json.dumps({k: v for k, v in res.items()}, indent=1, default=str) if args.json else format_rerun(res))
    return 0 if res["reproduced"] else 1


def cmd_schedule(args: argparse.Namespace) -> int:
    """`weakspot serve` (alias `schedule`): the nightly flow (flows/audit.py) served as a Prefect deployment on a cron
    schedule, against PREFECT_API_URL or else a persistent local server (.prefect/, on --port) whose UI shows the runs.
    Runs until Ctrl-C (or SIGTERM), which pauses the schedule and stops the server."""
    import signal

    if not Path("flows/audit.py").is_file() or not Path(".dvc").is_dir():
        raise ConfigError(f"no weakspot pipeline in {Path.cwd()}: run `weakspot serve` from the repository root")
    check_params(PARAMS)
    if len(args.cron.split()) != 5 and not args.cron.startswith("@"):  # Prefect checks the fields themselves
        raise ConfigError(f"--cron {args.cron!r}: a cron has 5 fields, minute hour day month weekday: "
                          "\"0 2 * * *\" is 02:00 every night")
    own = not os.environ.get("PREFECT_API_URL")
    cmd = [sys.executable, "-m", "flows.audit", "--serve", args.cron, "--name", args.name]
    cmd += (["--timezone", args.timezone] if args.timezone else []) + ([] if args.push else ["--no-push"])

    def stop(signum, frame):  # SIGTERM (systemctl stop, kill): stop like Ctrl-C, so the server is stopped too
        raise KeyboardInterrupt

    old_term = signal.signal(signal.SIGTERM, stop)
    old_int = signal.signal(signal.SIGINT, signal.default_int_handler)  # even when started with SIGINT ignored
    try:
        with prefect_server(_env(), port=args.port) as env:
            api = env["PREFECT_API_URL"].rstrip("/")
            ui = api[:-4] if api.endswith("/api") else api
            where = f"a local Prefect server ({Path('.prefect').resolve()}, log in server.log)" if own else api
            tz = args.timezone or "this machine's time zone"
            prefect = Path(sys.executable).parent / "prefect"
            with contextlib.suppress(ValueError):
                prefect = prefect.relative_to(Path.cwd())  # .venv/bin/prefect
            print(f"weakspot: serving the nightly audit as deployment nightly-audit/{args.name}, cron "
                  f"\"{args.cron}\" ({tz}), on {where}\n"
                  f"  Prefect UI: {ui}  (Runs: {ui}/runs ; each run's verdict: its Artifacts tab, "
                  "weakspot-verdict and weakspot-comparison)\n"
                  f"  run it now: PREFECT_API_URL={api} {prefect} deployment run nightly-audit/{args.name}\n"
                  "  Ctrl-C stops serving (the schedule is paused until the next `weakspot serve`)"
                  + (" and the server" if own else ""), flush=True)
            # its own process group: a Ctrl-C reaches this process only, which passes exactly one SIGINT on (Prefect's
            # runner pauses the schedule on it; a second one would cut that short)
            proc = subprocess.Popen(cmd, env=env, process_group=0,
                                    preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
            try:
                return proc.wait()
            except KeyboardInterrupt:
                proc.send_signal(signal.SIGINT)  # Prefect's runner pauses the schedule, lets a run in progress end
                try:
                    try:
                        proc.wait(timeout=10)
                    except subprocess.TimeoutExpired:
                        print("weakspot: waiting for the audit in progress to finish (Ctrl-C again to stop it now)",
                              file=sys.stderr, flush=True)
                        proc.wait()
                except KeyboardInterrupt:  # the run's process reports itself Crashed on SIGTERM
                    os.killpg(proc.pid, signal.SIGTERM)
                    with contextlib.suppress(subprocess.TimeoutExpired, KeyboardInterrupt):
                        proc.wait(timeout=20)
                finally:
                    if proc.poll() is None:
                        os.killpg(proc.pid, signal.SIGKILL)
                        proc.wait()
                print("weakspot: stopped serving" + (" and the Prefect server" if own else "")
                      + "; the runs stay in the UI's database (.prefect/prefect.db)" * own, file=sys.stderr)
                return 130
    except KeyboardInterrupt:  # while the server was starting
        print("weakspot: interrupted", file=sys.stderr)
        return 130
    finally:
        signal.signal(signal.SIGTERM, old_term)
        signal.signal(signal.SIGINT, old_int)


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
    a.add_argument("--push", action="store_true", help="after a successful audit, push every output and the "
                   "run-cache to the DVC remote (history.remote or WEAKSPOT_DVC_REMOTE); the nightly flow does")
    a.add_argument("--pull", action="store_true", help="restore stages from the DVC remote's run-cache where it "
                   "has them instead of recomputing (dvc repro --pull)")
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
    rr = sub.add_parser("rerun", help="reproduce a past audit exactly: its code and params in a scratch git "
                        "worktree, every stage rerun, its metrics compared byte for byte with the recorded ones")
    rr.add_argument("audit_id", help="an id from history/ (or a unique prefix, or 'last')")
    rr.add_argument("--pull", action="store_true", help="restore stages from the DVC remote (what `weakspot audit "
                    "--push` sent) instead of recomputing them")
    rr.add_argument("--workdir", help="where to put the worktree (default: a new temporary folder)")
    rr.add_argument("--keep", action="store_true", help="keep the worktree afterwards")
    rr.add_argument("--json", action="store_true", help="machine-readable")
    rr.set_defaults(fn=cmd_rerun)
    for name in ("serve", "schedule"):
        c = sub.add_parser(name, help="serve the nightly audit (weakspot audit --push, verdict as Prefect artifacts) "
                           "on a cron schedule" + (" (alias of serve)" if name == "schedule" else ""))
        c.add_argument("--cron", default="0 2 * * *", help="cron schedule (default: \"0 2 * * *\", 02:00 every night)")
        c.add_argument("--name", default="weakspot-nightly", help="the deployment's name (default: weakspot-nightly)")
        c.add_argument("--port", type=int, default=4200, help="the local Prefect server's port, when PREFECT_API_URL "
                       "is not set (default: 4200)")
        c.add_argument("--timezone", help="the cron's IANA time zone, e.g. Europe/Paris (default: this machine's)")
        c.add_argument("--no-push", dest="push", action="store_false", help="audit without pushing the outputs to the "
                       "DVC remote (history.remote)")
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
