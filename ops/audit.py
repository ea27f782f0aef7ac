"""``weakspot audit``: the audit of the checkout in the current folder, one at a time.

Under the audit lock (:mod:`ops.lock`): dvc.yaml regenerated from params.yaml, partial files of an interrupted run
swept, ``dvc repro`` of every stage but the report on one shared Prefect server (:mod:`ops.server`), the audit's
metrics recorded in the history store and compared with the previous audit's (:mod:`ops.history`), then the report
(which shows that comparison and the trend: the history folder is one of its DVC dependencies), and with ``push``
every output sent to the DVC remote.

Caveats first: the exit code is the verdict: 0, 3 when a watched metric regressed (with
``history.fail_on_regression``) or a gate failed (with ``gates.fail``), 2 for bad params or another audit running,
and DVC's own code when a stage fails. ``reports/junit.xml`` and ``reports/summary.md`` say which conditions
failed (:mod:`ops.verdict_files`).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import List, Optional, Sequence

from weakspot.config import check_params, load_section
from weakspot.errors import ConfigError
from weakspot.io import remove_partials, write_json

import ops.params  # noqa: F401  (the history and execution sections, registered)
from ops import dvc
from ops.dvc import PARAMS


def regenerate_pipeline() -> bool:
    """Regenerate dvc.yaml from params.yaml (:mod:`ops.pipeline`) with this checkout's ``tasks``; True when it
    changed."""
    dvc.checkout_on_path(".")
    from ops.pipeline import write_dvc_yaml

    return write_dvc_yaml(PARAMS, "dvc.yaml")


def sweep_partials(root: "str | Path") -> List[str]:
    """The partly written files a killed stage left beside the pipeline's outputs, removed (under the audit lock,
    when no stage is writing); their paths relative to ``root``."""
    dirs = ("data", "metrics", "plots", "findings", "reports")
    return sorted(str(f.relative_to(root)) for d in dirs for f in remove_partials(Path(root) / d))


def _metrics_exist() -> bool:
    return Path("metrics").is_dir() and any(Path("metrics").rglob("*.json"))


def record_and_compare() -> int:
    """Keep the audit's metrics in the history store, compare them with the previous audit's and check the gates
    (:mod:`ops.gates`, the first audit too); 3 on a regression (with history.fail_on_regression) or a failed gate
    (with gates.fail), else 0. The comparison (rule and gate rows) is written next to the audit's file, and
    ``reports/junit.xml`` and ``reports/summary.md`` from it (:mod:`ops.verdict_files`)."""
    from ops.gates import check_gates
    from ops.history import audits, compare, format_comparison, load, record
    from ops.verdict_files import write_verdict_files

    _, hp = load_section("history", PARAMS)
    _, gp = load_section("gates", PARAMS)
    prev = audits(".", hp.dir)
    rec = record(".", hp.dir)
    prev_id = prev[-1].stem if prev else None
    now = load(Path(rec["file"]))
    rows = compare(load(prev[-1]), now, hp.rules) if prev else []
    gates = check_gates(gp, now, "findings")
    comparison = {"audit": rec, "previous": prev_id, "rows": rows, "gates": gates}
    write_json(Path(hp.dir) / f"{rec['audit_id']}.comparison.json", comparison)
    print(format_comparison(rows, prev_id, rec["audit_id"]), flush=True)
    for g in gates:
        print(f"{'PASS' if g['passed'] else 'FAIL'} gate {g['condition']}: {g['numbers']}", flush=True)
    write_verdict_files(comparison, "reports", "findings", report_path="reports/index.html")
    regressed = any(r["regression"] for r in rows) and hp.fail_on_regression
    failed = [g for g in gates if not g["passed"]] if gp.fail else []
    if regressed:
        print("weakspot: regressions since the last audit (exit 3); history.rules in params.yaml set what counts",
              file=sys.stderr)
    if failed:
        print(f"weakspot: {len(failed)} gate(s) failed (exit 3): " + "; ".join(g["condition"] for g in failed)
              + " (gates in params.yaml)", file=sys.stderr)
    return 3 if regressed or failed else 0


def audit(stages: Optional[Sequence[str]] = None, *, force: bool = False, pull: bool = False, push: bool = False,
          command: str = "weakspot audit") -> int:
    """Audit the checkout in the current folder under its lock (``command``: how the lock names this audit to a
    second one); the exit code (see the module's doc)."""
    check_params(PARAMS)
    if not Path("flows").is_dir() or not Path(".dvc").is_dir():
        raise ConfigError(f"no weakspot pipeline in {Path.cwd()}: run `weakspot audit` from the weakspot repository "
                          "root")
    from ops.lock import audit_lock

    with audit_lock(".", command):
        return _audit(list(stages or []), force=force, pull=pull, push=push)


def _audit(stages: List[str], *, force: bool, pull: bool, push: bool) -> int:
    if regenerate_pipeline():
        print("weakspot: dvc.yaml regenerated from params.yaml (targets or methods changed)", flush=True)
    _, hp = load_section("history", PARAMS)
    _, ex = load_section("execution", PARAMS)
    Path(hp.dir).mkdir(parents=True, exist_ok=True)  # the report stage depends on it
    swept = sweep_partials(".")
    if swept:
        print(f"weakspot: removed {len(swept)} partly written file(s) left by an interrupted run: "
              + ", ".join(swept[:5]) + (" ..." if len(swept) > 5 else ""), flush=True)
    names = dvc.stage_names()
    wanted = list(stages or [s for s in names if s != "report"])
    unknown = [s for s in wanted if s not in names]
    if unknown:
        raise ConfigError(f"no stage named {', '.join(unknown)} in dvc.yaml; stages: {', '.join(names)}")
    first = [s for s in wanted if s != "report"]
    flags = (["--force"] if force else []) + (["--pull"] if pull else [])
    t0 = time.time()
    from ops.server import prefect_server

    with prefect_server(dvc.env()) as env:
        if first:
            rc = dvc.repro(flags + first, env, jobs=ex.stages_at_once)
            if rc != 0:
                return rc
        if not _metrics_exist():
            print("weakspot: no metrics yet; nothing recorded in the history", file=sys.stderr)
            verdict = 0
        else:
            verdict = record_and_compare()
        if "report" in names and (not stages or "report" in stages):
            rc = dvc.repro((["--pull"] if pull else []) + ["report"], env)
            if rc != 0:
                return rc
    from tasks.paths import REPORT  # this checkout's (regenerate_pipeline put it first on sys.path)

    print(f"weakspot: audit finished in {time.time() - t0:.0f} s. Report: {REPORT.resolve()}")
    if push:
        rc = dvc.push(hp)
        if rc != 0:
            return rc
    return verdict
