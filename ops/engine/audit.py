"""``weakspot audit``: the audit of the checkout in the current folder, one at a time.

Under the audit lock (:mod:`ops.engine.lock`): dvc.yaml regenerated from params.yaml, partial files of an interrupted run
swept, ``dvc repro`` of every stage but the report on one shared Prefect server (:mod:`ops.engine.server`), the audit's
metrics recorded in the history store and compared with the previous audit's (:mod:`ops.verdict.history`), then the report
(which shows that comparison and the trend: the history folder is one of its DVC dependencies), and with ``push``
every output sent to the DVC remote.

Caveats first: the exit code is the verdict: 0, 3 when a watched metric regressed (with
``history.fail_on_regression``) or a gate failed (with ``gates.fail``), 2 for bad params or another audit running,
and DVC's own code when a stage fails. ``reports/junit.xml`` and ``reports/summary.md`` say which conditions
failed (:mod:`ops.verdict.files`).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence

from weakspot.errors import ConfigError
from weakspot.io import remove_partials, write_json

from tasks.settings import check_params, load_section
from ops.engine import dvc
from ops.engine.dvc import PARAMS


def regenerate_pipeline(say: Callable[[str], object] = print) -> bool:
    """Regenerate dvc.yaml from params.yaml (:mod:`ops.engine.pipeline`) with this checkout's ``tasks``, then remove what
    it no longer declares under the pipeline's artifact roots (:func:`remove_stale`, said through ``say``); True
    when dvc.yaml changed. Call it when no stage is writing (under the audit lock)."""
    dvc.checkout_on_path(".")
    from ops.engine.pipeline import write_dvc_yaml

    changed = write_dvc_yaml(PARAMS, "dvc.yaml")
    gone = remove_stale(".")
    if gone:
        say(
            f"weakspot: removed {len(gone)} output(s) that dvc.yaml no longer declares (DVC's cache and the history "
            "keep them; `weakspot rerun` of an older audit restores them): "
            + ", ".join(gone[:5])
            + (" ..." if len(gone) > 5 else "")
        )
    return changed


def recorded_outputs(root: "str | Path" = ".") -> List[str]:
    """Every output DVC recorded for a stage, in ``dvc.lock`` and in the audits' copies of it in the history store:
    what DVC's cache holds, so what the pipeline may remove from the workspace and restore."""
    import yaml

    root = Path(root)
    try:
        store = load_section("history", root / PARAMS)[1].dir
    except ConfigError:  # no params (a bare pipeline): the default store
        store = "history"
    locks = [root / "dvc.lock", *sorted((root / store).glob("*.dvc.lock"))]
    out = set()
    for f in locks:
        try:
            lock = yaml.safe_load(f.read_text()) or {}
        except (OSError, yaml.YAMLError):
            continue
        for body in (lock.get("stages") or {}).values():
            out.update(str(o["path"]).rstrip("/") for o in (body or {}).get("outs") or [] if "path" in o)
    return sorted(out)


def _recorded_parts(root: Path, rel: str, recorded: Sequence[str]) -> List[str]:
    """The parts of the stale entry ``rel`` that DVC recorded as a stage's output (the whole entry where all of it
    is, or holds nothing); a file no stage wrote (the user's own) is not among them."""
    if any(rel == o or rel.startswith(o + "/") for o in recorded):
        return [rel]
    p = root / rel
    if not p.is_dir() or p.is_symlink():
        return []
    children = sorted(p.iterdir())
    parts = [x for c in children for x in _recorded_parts(root, f"{rel}/{c.name}", recorded)]
    return [rel] if parts == [f"{rel}/{c.name}" for c in children] else parts


def remove_stale(root: "str | Path" = ".") -> List[str]:
    """Remove what the pipeline wrote under its artifact roots that root/dvc.yaml no longer declares (the outputs of
    stages it no longer has: :meth:`tasks.manifest.Manifest.stale`, as far as DVC recorded them in dvc.lock or the
    history's copies of it, so its cache holds them: a file no stage wrote stays, and no reader reads it); their
    paths relative to ``root``. Each is first renamed beside itself (``.<name>.stale-<random>``, one atomic step: what
    a reader lists is either the old entry or nothing), then deleted; an interrupted removal leaves only undeclared
    entries, which the next one removes. Nothing declared is touched: no stale entry holds a declared output or a
    path a stage reads."""
    import secrets
    import shutil

    from tasks.manifest import read_manifest

    recorded = recorded_outputs(root)
    gone = [x for rel in read_manifest(root).stale() for x in _recorded_parts(Path(root), rel, recorded)]
    for rel in gone:
        p = Path(root) / rel
        trash = p.with_name(f".{p.name}.stale-{secrets.token_hex(4)}")
        try:
            p.rename(trash)
        except FileNotFoundError:  # gone meanwhile
            continue
        if trash.is_dir() and not trash.is_symlink():
            shutil.rmtree(trash)
        else:
            trash.unlink()
    return gone


def sweep_partials(root: "str | Path") -> List[str]:
    """The partly written files a killed stage left beside the pipeline's outputs, removed (under the audit lock,
    when no stage is writing); their paths relative to ``root``."""
    dirs = ("data", "metrics", "plots", "findings", "reports")
    return sorted(str(f.relative_to(root)) for d in dirs for f in remove_partials(Path(root) / d))


def _metrics_exist() -> bool:
    """Whether any metrics file that dvc.yaml declares is there."""
    from tasks.manifest import read_manifest

    return bool(read_manifest(".").files("metrics", "**/*.json"))


def record_and_compare(
    failures: Sequence[Dict[str, Any]] = (), times: Optional[Dict[str, Dict[str, Any]]] = None
) -> int:
    """Keep the audit's metrics in the history store, compare them with the previous audit's (as far as today's
    stages go) and check the gates (:mod:`ops.verdict.gates`, the first audit too); every one of them reads only the outputs
    dvc.yaml declares (:mod:`tasks.manifest`); 3 on a regression (with history.fail_on_regression) or a failed gate
    (with gates.fail), else 0. The comparison (rule and gate rows) is written next to the audit's file, and
    ``reports/junit.xml`` and ``reports/summary.md`` from it (:mod:`ops.verdict.files`)."""
    from ops.verdict.gates import check_gates
    from ops.verdict.artifacts import publish_verdict
    from ops.verdict.history import audits, compare, format_comparison, load, record, since_last, today
    from ops.verdict.files import write_verdict_files
    from tasks.manifest import read_manifest

    _, hp = load_section("history", PARAMS)
    _, gp = load_section("gates", PARAMS)
    prev = audits(".", hp.dir)
    rec = record(".", hp.dir)
    prev_id = prev[-1].stem if prev else None
    now = load(Path(rec["file"]))
    # the previous audit as far as today's stages go: a target or method removed since is not "missing"
    rows = compare(today(load(prev[-1]), read_manifest(".")), now, hp.rules) if prev else []
    gates = check_gates(gp, now, ".")
    comparison = {
        "audit": rec,
        "previous": prev_id,
        "rows": rows,
        "gates": gates,
        "failures": list(failures),
        "complete": not failures,
        # what the report's "Since the last audit" and its trend show: the report reads it, never the store
        "since": since_last(".", hp.dir, hp.rules),
    }
    write_json(Path(hp.dir) / f"{rec['audit_id']}.comparison.json", comparison)
    if times:  # each stage's time against its estimate: what the next audit's estimate is checked against
        write_json(Path(hp.dir) / f"{rec['audit_id']}.stages.json", {"audit": rec["audit_id"], "stages": times})
    publish_verdict(comparison, report_path=str(Path("reports/index.html").resolve()))  # on the audit's flow run
    print(format_comparison(rows, prev_id, rec["audit_id"]), flush=True)
    for g in gates:
        print(f"{'PASS' if g['passed'] else 'FAIL'} gate {g['condition']}: {g['numbers']}", flush=True)
    write_verdict_files(comparison, "reports", ".", report_path="reports/index.html")
    regressed = any(r["regression"] for r in rows) and hp.fail_on_regression
    failed = [g for g in gates if not g["passed"]] if gp.fail else []
    if regressed:
        print(
            "weakspot: regressions since the last audit (exit 3); history.rules in params.yaml set what counts",
            file=sys.stderr,
        )
    if failed:
        print(
            f"weakspot: {len(failed)} gate(s) failed (exit 3): "
            + "; ".join(g["condition"] for g in failed)
            + " (gates in params.yaml)",
            file=sys.stderr,
        )
    return 3 if regressed or failed else 0


def audit(
    stages: Optional[Sequence[str]] = None,
    *,
    force: bool = False,
    pull: bool = False,
    push: bool = False,
    workers: Optional[int] = None,
    gpu_workers: Optional[int] = None,
    in_checkout: Optional[bool] = None,
    command: str = "weakspot audit",
) -> int:
    """Audit the checkout in the current folder under its lock (``command``: how the lock names this audit to a
    second one); ``workers``/``gpu_workers``: local process workers on the cpu/gpu pool, ``in_checkout``: plain
    ``dvc repro`` here instead of workers (defaults: params.yaml's ``execution``); the exit code (see the module's
    doc)."""
    check_params(PARAMS)
    if not Path("flows").is_dir() or not Path(".dvc").is_dir():
        raise ConfigError(
            f"no weakspot pipeline in {Path.cwd()}: run `weakspot audit` from the weakspot repository root"
        )
    from ops.engine.lock import audit_lock

    with audit_lock(".", command):
        return _audit(
            list(stages or []),
            force=force,
            pull=pull,
            push=push,
            workers=workers,
            gpu_workers=gpu_workers,
            in_checkout=in_checkout,
        )


def estimate_only(stages: Optional[Sequence[str]] = None, *, force: bool = False, workers: Optional[int] = None) -> int:
    """``weakspot audit --estimate``: the stages an audit would run now (those that changed and those after them;
    every one with ``force``) and how long each should take here (:func:`announce_estimate`); runs nothing."""
    check_params(PARAMS)
    from ops.engine.graph import stage_graph, upstream
    from ops.engine.lock import audit_lock

    with audit_lock(".", "weakspot audit --estimate"):
        regenerate_pipeline(lambda line: print(line, flush=True))
    _, hp = load_section("history", PARAMS)
    _, ex = load_section("execution", PARAMS)
    graph = stage_graph()
    asked = [s for s in (stages or graph) if s != "report"]
    wanted = [s for s in upstream(graph, asked) if s != "report"]
    to_run = stages_to_run(wanted, graph, force)
    if not to_run:
        print("weakspot: every stage is up to date; the report only", flush=True)
    n = ex.workers if workers is None else workers
    announce_estimate(to_run, graph, 1 if ex.in_checkout else max(1, n), hp.dir)
    return 0


def stages_to_run(wanted: List[str], graph: Dict[str, List[str]], force: bool) -> List[str]:
    """The stages of ``wanted`` an audit runs now, in the graph's order: those ``dvc status`` says changed and those
    after them (every one with ``force``)."""
    from ops.engine.graph import downstream

    to_run = list(wanted) if force else changed_stages(wanted)
    for s in list(to_run):
        to_run.extend(d for d in downstream(graph, s) if d in wanted and d not in to_run)
    return [s for s in wanted if s in to_run]


def changed_stages(stages: List[str]) -> List[str]:
    """The stages among ``stages`` that ``dvc status`` says changed (deps, params, code or missing outputs)."""
    proc = subprocess.run(dvc.dvc() + ["status", "--json", *stages], capture_output=True, text=True, env=dvc.env())
    if proc.returncode != 0:
        return list(stages)  # DVC could not tell (no lock yet, a missing output): run them all
    try:
        status = json.loads(proc.stdout or "{}")
    except ValueError:
        return list(stages)
    return [s for s in stages if s in status]


def gpu_steps(ex: Any) -> List[str]:
    """The steps whose stages go to the gpu pool (when it has a worker): ``execution.pools.gpu``, else the methods
    that need gradients."""
    if "gpu" in ex.pools:
        return list(ex.pools["gpu"])
    from weakspot import methods

    return [m.name for m in methods.all_methods() if m.white_box]


def _gpu_workers(ex: Any, given: Optional[int]) -> int:
    if given is not None:
        return given
    if ex.gpu_workers is not None:
        return ex.gpu_workers
    import torch

    return 1 if torch.cuda.is_available() else 0


def _audit(
    stages: List[str],
    *,
    force: bool,
    pull: bool,
    push: bool,
    workers: Optional[int],
    gpu_workers: Optional[int],
    in_checkout: Optional[bool],
) -> int:
    if regenerate_pipeline(lambda line: print(line, flush=True)):
        print("weakspot: dvc.yaml regenerated from params.yaml (targets or methods changed)", flush=True)
    _, hp = load_section("history", PARAMS)
    _, ex = load_section("execution", PARAMS)
    Path(hp.dir).mkdir(parents=True, exist_ok=True)  # the report stage depends on it
    swept = sweep_partials(".")
    if swept:
        print(
            f"weakspot: removed {len(swept)} partly written file(s) left by an interrupted run: "
            + ", ".join(swept[:5])
            + (" ..." if len(swept) > 5 else ""),
            flush=True,
        )
    from ops.engine.graph import stage_graph, upstream

    graph = stage_graph()
    names = list(graph)
    asked = list(stages or [s for s in names if s != "report"])
    unknown = [s for s in asked if s not in names]
    if unknown:
        raise ConfigError(f"no stage named {', '.join(unknown)} in dvc.yaml; stages: {', '.join(names)}")
    wanted = [s for s in upstream(graph, [s for s in asked if s != "report"]) if s != "report"]
    here = ex.in_checkout if in_checkout is None else in_checkout
    # asking torch whether this machine has CUDA imports it (seconds): done while the Prefect server starts
    from concurrent.futures import ThreadPoolExecutor

    side = ThreadPoolExecutor(1)
    n_gpu_later = side.submit(_gpu_workers, ex, 0 if here else gpu_workers)
    side.shutdown(wait=False)
    t0 = time.time()
    from ops.engine.server import prefect_server

    with prefect_server(dvc.env()) as env:
        # the stages' cached tasks (a resumed stage takes what its killed run stored) in one place, whichever runs them
        env = {
            **env,
            "PREFECT_LOCAL_STORAGE_PATH": env.get("PREFECT_LOCAL_STORAGE_PATH")
            or str(Path(".prefect/results").resolve()),
            "PREFECT_FLOWS_HEARTBEAT_FREQUENCY": str(ex.heartbeat_seconds),
        }
        plan = Plan(
            wanted=wanted,
            graph=graph,
            env=env,
            force=force,
            pull=pull,
            report="report" in names and (not stages or "report" in stages),
            here=here,
            n_cpu=ex.workers if workers is None else workers,
            n_gpu=lambda: n_gpu_later.result(),
            flags_given=workers is not None or gpu_workers is not None,
        )
        rc = run_audit_flow(plan, hp, ex)
        send_prefect_logs(env.get("PREFECT_API_URL"))
    if rc is None:  # the audit finished: its report is there
        return _finish(plan, hp, push, t0)
    return rc


def send_prefect_logs(url: Optional[str]) -> None:
    """Send the log lines and events Prefect still holds for the audit's server while it runs: left for the process's
    exit, they were retried against the stopped server for a minute and a half before the command returned."""
    from prefect.events.worker import EventsWorker
    from prefect.logging.handlers import APILogHandler

    if not url:
        return
    APILogHandler().flush()  # sends what the API log worker holds, and waits (at most 5 s)
    EventsWorker.drain_all(timeout=10, at_exit=False)


@dataclass
class Plan:
    """What one audit runs: the stages wanted (dvc.yaml's order) and their graph, the pipeline's environment, and how
    (in the checkout or on workers; ``n_gpu``: asked when needed)."""

    wanted: List[str]
    graph: Dict[str, List[str]]
    env: Dict[str, str]
    force: bool
    pull: bool
    report: bool
    here: bool
    n_cpu: int
    n_gpu: Callable[[], int]
    flags_given: bool
    failures: List[Dict[str, Any]] = field(default_factory=list)
    verdict: int = 0


def run_audit_flow(plan: Plan, hp: Any, ex: Any) -> Optional[int]:
    """The audit as one flow run, ``weakspot-audit``, on the audit's Prefect server (``plan.env``): its stages, the
    record and comparison, the report. None when the report was written (``plan.failures`` and ``plan.verdict`` say
    the rest), else the exit code of what stopped it."""
    from prefect import flow
    from prefect.settings import PREFECT_API_URL, PREFECT_FLOWS_HEARTBEAT_FREQUENCY, temporary_settings

    from ops.engine.audit_flow import runner

    url = plan.env.get("PREFECT_API_URL")
    stopped: List[int] = []

    def body() -> str:
        rc = _audit_body(plan, hp, ex)
        if rc is not None:
            stopped.append(rc)
            raise AuditStopped(f"the audit stopped (exit {rc}): the output above says why")
        if plan.failures:
            from prefect.states import Failed

            return Failed(  # type: ignore[return-value]
                message="INCOMPLETE: " + "; ".join(f"{f['stage']}: {f['message']}" for f in plan.failures)
            )
        return f"verdict exit {plan.verdict}; report {Path('reports/index.html').resolve()}"

    audit = flow(
        body,
        name="weakspot-audit",
        flow_run_name=f"audit {time.strftime('%Y-%m-%d %H:%M:%S')}",
        task_runner=runner(len(plan.wanted) + 1),
        persist_result=False,
        validate_parameters=False,
        log_prints=False,
    )
    from prefect import tags

    # the audit's own flow run beats as often as its stages' (the lost-worker automation expects it of every
    # weakspot flow run: at Prefect's default of 180 s it would be marked Crashed while it waits for its stages)
    beat = {PREFECT_FLOWS_HEARTBEAT_FREQUENCY: int(ex.heartbeat_seconds)}
    with temporary_settings(updates={**beat, **({PREFECT_API_URL: url} if url else {})}), tags("weakspot"):
        state = audit(return_state=True)
    if stopped:
        return stopped[0]
    if state.is_failed() and not plan.failures or state.is_crashed():
        state.result()  # raises what stopped it (a ConfigError names the problem)
    return None


class AuditStopped(RuntimeError):
    """DVC or a step of the audit stopped it before the report (the exit code is kept)."""


def _audit_body(plan: Plan, hp: Any, ex: Any) -> Optional[int]:
    """Inside the audit's flow run: the stages, the record and comparison, the report; an exit code when one of
    them stopped the audit, else None."""
    outcome = None
    if plan.pull:  # the DVC remote `--pull` restores from (the workers are given it with each stage)
        dvc.configure_remote(dvc.remote_url(hp))
    if plan.wanted and plan.here:
        if plan.flags_given:
            print("weakspot: --workers and --gpu-workers have no effect in the checkout", file=sys.stderr)
        announce_estimate(stages_to_run(plan.wanted, plan.graph, plan.force), plan.graph, 1, hp.dir)
        rc, outcome = run_in_checkout(plan.wanted, plan.graph, plan.env, force=plan.force, pull=plan.pull)
        if rc != 0 and outcome.complete:  # DVC failed before any stage did (its message says why)
            return rc
    elif plan.wanted:
        outcome, shared = run_on_workers(
            plan.wanted, plan.graph, plan.env, hp, ex, force=plan.force, n_cpu=plan.n_cpu, n_gpu=plan.n_gpu()
        )
        ok = [s for s in plan.wanted if s not in outcome.failed and s not in outcome.not_run]
        # the workspace's one `dvc repro`: every stage restored from the run-cache, dvc.lock written by DVC alone
        rc = dvc.repro(([] if shared else ["--pull"]) + ok, plan.env) if ok else 0
        if rc != 0:
            return rc
    plan.failures = failure_rows(outcome, plan.graph) if outcome is not None else []
    if not _metrics_exist():
        print("weakspot: no metrics yet; nothing recorded in the history", file=sys.stderr)
        plan.verdict = 0
    else:
        plan.verdict = record_and_compare(plan.failures, outcome.times if outcome is not None else None)
    if plan.report:
        if plan.failures:  # DVC would refuse the report stage (its deps from the failed stages are missing)
            rc = subprocess.call([sys.executable, "-m", "flows.report"], env=plan.env)
        else:
            rc = dvc.repro((["--pull"] if plan.pull else []) + ["report"], plan.env)
        if rc != 0:
            return rc
    return None


def _finish(plan: Plan, hp: Any, push: bool, t0: float) -> int:
    from tasks.paths import REPORT  # this checkout's (regenerate_pipeline put it first on sys.path)

    print(f"weakspot: audit finished in {time.time() - t0:.0f} s. Report: {REPORT.resolve()}")
    if plan.failures:
        print(
            f"weakspot: the audit is INCOMPLETE (exit {INCOMPLETE}): "
            + "; ".join(f"{f['stage']} failed" for f in plan.failures if f["failed"])
            + ". The report and reports/summary.md open with the failure.",
            file=sys.stderr,
        )
        return INCOMPLETE
    if push:
        rc = dvc.push(hp)
        if rc != 0:
            return rc
    return plan.verdict


#: the exit code of an audit in which a stage failed (the other targets were audited): distinct from a failed gate's 3
INCOMPLETE = 4


def failure_rows(outcome: Any, graph: Dict[str, List[str]]) -> List[Dict[str, Any]]:
    """One row per stage that failed or was not run: stage, target, whether it failed, the error (the failed stage's
    own for the stages it stopped)."""
    rows = []
    for s, err in outcome.failed.items():
        rows.append(
            {"stage": s, "target": _target_of(s), "failed": True, "error": _short(err), "message": headline(err)}
        )
    for s, cause in outcome.not_run.items():
        rows.append(
            {
                "stage": s,
                "target": _target_of(s),
                "failed": False,
                "error": f"not run: it needs {cause}, which failed",
                "message": f"not run: {cause} failed",
            }
        )
    return rows


def headline(err: str) -> str:
    """The line of a stage's output that says what went wrong: weakspot's own error message where there is one (not
    DVC's "failed to reproduce" around it), else the last line."""
    lines = [ln.strip() for ln in str(err).splitlines() if ln.strip()]
    ours = [ln for ln in lines if "Error:" in ln or "error:" in ln]
    ours = [ln for ln in ours if "failed to reproduce" not in ln and "failed to run" not in ln] or ours
    return (ours or lines or ["failed"])[-1][:400]


def _short(err: str, lines: int = 12) -> str:
    text = "\n".join(line for line in str(err).strip().splitlines() if line.strip())
    return "\n".join(text.splitlines()[-lines:])


def _target_of(stage: str) -> Optional[str]:
    from weakspot.config import read_yaml

    targets = read_yaml(PARAMS).get("targets") or {}
    hits = [t for t in targets if stage.endswith("-" + t)]
    return max(hits, key=len) if hits else None


def run_in_checkout(
    wanted: List[str], graph: Dict[str, List[str]], env: Dict[str, str], *, force: bool, pull: bool
) -> "tuple[int, Any]":
    """``dvc repro --keep-going`` of ``wanted`` in this checkout (``execution.in_checkout``): DVC's exit code and what
    became of the stages (:class:`ops.engine.audit_flow.Outcome`). A stage that fails stops only the stages that need it, as
    on workers: once DVC is done, the stages ``dvc status`` still lists are the failed ones (each with the last lines
    of its output) and those that needed them."""
    import re
    from collections import deque

    from ops.engine.graph import upstream
    from ops.engine.audit_flow import Outcome

    argv = ["--keep-going"] + (["--pull"] if pull else []) + (["--force"] if force else []) + wanted
    print("weakspot: dvc repro " + " ".join(argv), flush=True)
    tails: Dict[str, Any] = {}
    current = ""
    proc = subprocess.Popen(
        dvc.dvc() + ["repro"] + argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1
    )
    assert proc.stdout is not None
    for line in proc.stdout:  # the audit's terminal sees every line; each stage's last lines are kept for its error
        sys.stdout.write(line)
        sys.stdout.flush()
        started = re.match(r"Running stage '([^']+)'", line)
        current = started.group(1) if started else current
        tails.setdefault(current, deque(maxlen=25)).append(line.rstrip())
    rc = proc.wait()
    if rc == 0:
        return 0, Outcome(done=list(wanted))
    left = changed_stages(wanted)
    outcome = Outcome(done=[s for s in wanted if s not in left])
    for s in left:  # in the graph's order: what a stage needs comes before it
        needs = [n for n in upstream(graph, graph[s]) if n in left]
        if not needs:
            outcome.failed[s] = "\n".join(tails.get(s, [])) or f"dvc repro exited with {rc}"
        else:
            outcome.not_run[s] = next((n for n in needs if n in outcome.failed), None) or outcome.not_run[needs[0]]
    return rc, outcome


def git_source(ref: str, sha: str) -> str:
    """Where workers clone the audit from: this checkout's path (workers on this machine), or with
    WEAKSPOT_GIT_REMOTE (a git remote's name or URL every worker reaches) that remote, after the audit's commit is
    pushed to it under ``ref``."""
    remote = os.environ.get("WEAKSPOT_GIT_REMOTE")
    if not remote:
        return str(Path.cwd().resolve())
    proc = subprocess.run(["git", "push", "-q", remote, f"{sha}:{ref}"], capture_output=True, text=True)
    if proc.returncode != 0:
        raise ConfigError(f"WEAKSPOT_GIT_REMOTE={remote}: git push of the audit's commit failed: {proc.stderr.strip()}")
    named = subprocess.run(["git", "remote", "get-url", remote], capture_output=True, text=True)
    return named.stdout.strip() if named.returncode == 0 else remote


def _say(line: str) -> None:
    """A line of the audit: to the terminal, and to the audit flow run's log in Prefect."""
    print(line, flush=True)
    from prefect.exceptions import MissingContextError
    from prefect.logging import get_run_logger

    try:
        get_run_logger().info(line)
    except MissingContextError:
        pass


def run_on_workers(
    wanted: List[str],
    graph: Dict[str, List[str]],
    env: Dict[str, str],
    hp: Any,
    ex: Any,
    *,
    force: bool,
    n_cpu: int,
    n_gpu: int,
) -> "tuple[Any, bool]":
    """The stages that changed (and those after them) as child flow runs of the audit's flow run on the work pools
    (:mod:`ops.engine.audit_flow`), local workers started for the while; and whether the workers shared this
    checkout's DVC cache (no WEAKSPOT_GIT_REMOTE: they clone this checkout, so they run on this machine). Workers
    elsewhere restore from the DVC remote: the stages already up to date are pushed there first."""
    from ops.engine.audit_flow import Outcome, run_stages
    from ops.engine.lost import install
    from ops.engine.snapshot import snapshot
    from ops.engine.workers import deployment_name, ensure_pools, local_workers, online_workers

    to_run = stages_to_run(wanted, graph, force)
    shared = not os.environ.get("WEAKSPOT_GIT_REMOTE")
    if not to_run:
        print("weakspot: every stage is up to date", flush=True)
        return Outcome(done=[]), shared
    url = dvc.configure_remote(dvc.remote_url(hp))
    ready = [s for s in wanted if s not in to_run]
    if ready and not shared:
        rc = subprocess.call(dvc.dvc() + ["push", "--run-cache", "-q", "-r", "weakspot", *ready], env=dvc.env())
        if rc != 0:
            print(
                "weakspot: could not push the up-to-date stages to the DVC remote; the workers recompute what they "
                "need",
                file=sys.stderr,
            )
    ref, sha = snapshot(".")
    gpu = gpu_steps(ex)
    ensure_pools()
    install(ex.heartbeat_seconds)  # a lost worker's stage is marked Crashed by Prefect, and run again
    cache = dvc.cache_dir(".") if shared else None
    if cache:
        Path(cache).mkdir(parents=True, exist_ok=True)  # a fresh checkout has none yet: the workers' test is its folder
    print(
        f"weakspot: {len(to_run)} stage(s) to run on {n_cpu} local cpu worker(s)"
        + (f" and {n_gpu} gpu worker(s)" if n_gpu else "")
        + f"; the audit's commit {sha[:12]} ({ref}); "
        + (f"DVC cache {cache} (shared)" if shared else f"DVC remote {url}"),
        flush=True,
    )
    works = announce_estimate(to_run, graph, n_cpu + n_gpu, hp.dir)
    with local_workers({"cpu": n_cpu, "gpu": n_gpu}, env):
        has_gpu = bool(n_gpu) or bool(online_workers("gpu"))
        if not n_cpu and not online_workers("cpu"):
            raise ConfigError(
                "no worker on the cpu pool: set execution.workers (or --workers) above 0, or start "
                "`weakspot worker --pool cpu` on a machine that sees this Prefect server"
            )

        def pool_of(stage: str) -> str:
            step = stage.split("-", 1)[0]
            return "gpu" if has_gpu and step in gpu else "cpu"

        outcome = run_stages(
            to_run,
            {s: graph[s] for s in to_run},
            pool_of,
            deployment_name,
            {"repo": git_source(ref, sha), "ref": ref, "commit": sha, "remote": url, "force": force, "cache": cache},
            audit=sha[:12],
            retries=ex.retries,
            say=_say,
            estimates={w.stage: w.seconds for w in works},
        )
    from ops.engine.estimate import record_row

    seconds = {r["stage"]: r.get("seconds") for r in outcome.runs}
    outcome.times = {w.stage: record_row(w, seconds.get(w.stage)) for w in works if w.stage in seconds}
    return outcome, shared


def announce_estimate(stages: List[str], graph: Dict[str, List[str]], workers: int, store: str) -> List[Any]:
    """Say, before they run, how long ``stages`` and the report after them (when the graph has one) should take on
    this machine (:mod:`ops.engine.estimate`): the audit's wall time on ``workers`` workers, each stage's estimate
    beside the last audit's time; their work."""
    from weakspot.config import read_yaml
    from ops.engine.estimate import attach_last, stage_work, table, wall_time

    stages = [s for s in stages if s != "report"] + [s for s in graph if s == "report"]
    data = read_yaml(PARAMS)
    try:
        works = stage_work(stages, data, int(data.get("threads") or 1))
    except Exception as e:  # noqa: BLE001 - an estimate that cannot be made never stops the audit
        print(f"weakspot: no time estimate ({type(e).__name__}: {e})", flush=True)
        return []
    attach_last(works, store)
    cores = os.cpu_count() or 1
    # the coefficients were fitted on stage times measured with the audit's workers sharing the cores, so each
    # estimate holds that sharing already: the stages are laid out on as many slots as workers
    wall = wall_time(works, graph, workers, max(workers, 1))
    total = sum(w.seconds for w in works)
    print(
        f"weakspot: estimated time on this machine: about {wall / 60:.1f} min for {len(works)} stage(s) "
        f"({total / 60:.1f} min of stage time, {workers} worker(s) on {cores} core(s)); per stage:\n" + table(works),
        flush=True,
    )
    return works
