"""Artifact I/O shared by every stage: params, lineage, stage results, cached tasks.

Paths are relative to the working directory, which is the repository root when DVC runs a stage.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import platform
import subprocess
import sys
from pathlib import Path
from typing import Any, Callable, Dict, Iterable, List, Optional, Tuple

from prefect import task
from prefect.cache_policies import INPUTS, TASK_SOURCE

import weakspot
from weakspot.config import read_yaml
from weakspot.data import sha256_file
from weakspot.errors import DataError, WeakspotError
from weakspot.io import save_figure, write_json, write_text
from weakspot.result import StageResult

from tasks import paths
from tasks.identity import STAGE, bound

PARAMS_FILE = str(paths.PARAMS)

#: Where the sections of the stages that are no method's stand in the report; a method's stage (and a shared one)
#: passes its declared order (:class:`weakspot.methods.StageSpec`, :class:`weakspot.methods.SharedStage`).
STAGE_ORDER = {"prepare": 0, "train": 1, "render": 15}

#: The decorator of every cached task: the key is the stage's identity (:mod:`tasks.identity`: every dep, param and
#: package version DVC records for it), the task's own arguments and its source, so a rerun after a crash, or of an
#: unchanged stage on another worker, reuses the stored result, and a change to anything the stage depends on
#: recomputes it.
cached_task = task(cache_policy=STAGE + INPUTS + TASK_SOURCE, persist_result=True)


def run_blob_task(blob_task: Any, *args: Any) -> Dict[str, Any]:
    """Run a cached task that writes its product (weights) to a content-addressed blob and returns ``{"blob": path,
    ...}``; a cached result whose blob is gone (a cleaned ``.prefect/blobs``) is recomputed."""
    out = blob_task(*args)
    if not Path(out["blob"]).is_file():
        out = blob_task.with_options(refresh_cache=True)(*args)
    return out


def fan_out(
    task_fn: Any, calls: "Iterable[Tuple[Iterable[Any], Dict[str, Any]]]", labels: "Optional[Iterable[str]]" = None
) -> list:
    """Run the cached task ``task_fn`` once per ``(args, kwargs)`` on the flow's task runner (params.yaml
    ``execution``: one at a time, or on Dask workers), all submitted at once; the results in submission order. A call
    whose Dask worker died is resubmitted ``execution.retries`` times, then the stage fails naming it."""
    from tasks import runner

    return runner.fan_out(task_fn, list(calls), None if labels is None else list(labels))


def digest(items: Iterable[os.PathLike | str]) -> Dict[str, str]:
    """sha256 of every file under the given paths (folders walked in sorted order)."""
    out: Dict[str, str] = {}
    for p in items:
        p = Path(p)
        if p.is_dir():
            for f in sorted(x for x in p.rglob("*") if x.is_file() and not x.name.startswith(".")):
                out[str(f)] = sha256_file(f)
        elif p.is_file():
            out[str(p)] = sha256_file(p)
        else:
            raise DataError(f"{p}: input artifact not found; run the stage that makes it first (dvc repro)")
    return out


def combined_digest(d: Dict[str, str]) -> str:
    return hashlib.sha256(json.dumps(d, sort_keys=True).encode()).hexdigest()


def code_version() -> Dict[str, Any]:
    """The git commit of the code (with a dirty flag) and the library version."""
    info: Dict[str, Any] = {"weakspot": weakspot.__version__, "python": platform.python_version()}
    try:
        info["git_commit"] = subprocess.run(
            ["git", "rev-parse", "HEAD"], capture_output=True, text=True, check=True, timeout=10
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no", "--", ".", *paths.NOT_CODE],
            capture_output=True,
            text=True,
            timeout=10,
        ).stdout.strip()
        info["git_dirty"] = bool(dirty)
    except (OSError, subprocess.SubprocessError):
        info["git_commit"] = None
    torch = torch_version()
    if torch:
        info["torch"] = torch
    return info


def torch_version() -> Optional[str]:
    """torch's ``__version__``, its build tag included (``2.14.1+cu130``, where the distribution's metadata says
    ``2.14.1``), read from its ``version.py`` without importing torch: a tabular stage never loads it, and importing
    it only to read its version cost seconds of CPU per stage."""
    import importlib.metadata
    import importlib.util
    import re

    spec = importlib.util.find_spec("torch")  # finds the package without running it
    if spec is None or not spec.origin:
        return None
    f = Path(spec.origin).parent / "version.py"
    found = re.search(r"^__version__\s*=\s*['\"]([^'\"]+)['\"]", f.read_text(), re.M) if f.is_file() else None
    return found.group(1) if found else importlib.metadata.version("torch")


def lineage(
    stage: str,
    top: Dict[str, Any],
    params: Any,
    inputs: "Iterable[os.PathLike | str] | Dict[str, str]" = (),
    section: Optional[str] = None,
) -> Dict[str, Any]:
    """What made an artifact: the stage, its params (under their params.yaml section), the code version and the
    sha256 of its inputs (paths to hash, or a ready {name: sha256} mapping such as a data source's provenance)."""
    import datetime

    p = params.model_dump(mode="json") if hasattr(params, "model_dump") else params
    return {
        "stage": stage,
        "params": {**top, section or stage: p},
        "code": code_version(),
        "inputs": dict(inputs) if isinstance(inputs, dict) else digest(inputs),
        "ran_at": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "prefect_flow_run": _flow_run(),
        **({"identity": ident} if (ident := bound()) else {}),
        **({"worker": json.loads(os.environ["WEAKSPOT_WORKER"])} if os.environ.get("WEAKSPOT_WORKER") else {}),
    }


def _flow_run() -> Optional[Dict[str, str]]:
    """The Prefect flow run this stage runs in (its id and name, as the Prefect UI shows them; on a worker, the flow
    run its worker started), or None."""
    worker = json.loads(os.environ.get("WEAKSPOT_WORKER") or "{}")
    if worker.get("flow_run"):
        return {"id": worker["flow_run"], "name": worker.get("stage") or ""}
    try:
        from prefect.runtime import flow_run

        return {"id": str(flow_run.id), "name": str(flow_run.name)} if flow_run.id else None
    except Exception:  # outside a flow, or an older Prefect: lineage goes on without it  # noqa: BLE001
        return None


def write_stage_result(
    stage: str,
    result: StageResult,
    lin: Dict[str, Any],
    *,
    target: Optional[str] = None,
    findings: Any = None,
    dpi: int = 110,
    order: Optional[int] = None,
    headline: Iterable[str] = (),
) -> None:
    """A stage's artifacts: ``metrics/<stage>[/<target>].json`` (its headline figures, :mod:`tasks.headline`:
    ``headline`` patterns and the section's key metrics), ``plots/<stage>[/<target>]/`` (every metric in
    ``results.json``, tables as CSV, figures as PNG, ``section.json`` for the report) and, for a method,
    ``findings/<target>/<stage>.parquet``."""
    from tasks.headline import select
    from weakspot.findings import normalise
    from weakspot.io import write_parquet

    result.check()
    plots = paths.plots(stage, target)
    for name, table in result.tables.items():
        write_text(plots / f"{name}.csv", table.to_csv(index=False))
    for name, fig in result.figures.items():
        save_figure(plots / f"{name}.png", fig, dpi=dpi)
    if findings is not None:
        write_parquet(paths.findings(target, stage), normalise(findings, where=f"{stage}-{target}"))
    section = result.section(stage, target, order if order is not None else STAGE_ORDER.get(stage, 50), lin)
    write_json(plots / "section.json", section)
    write_json(paths.results(stage, target), result.metrics)
    write_json(paths.metrics(stage, target), select(result.metrics, tuple(headline), result.key_metrics))


class _QuietWeakspotErrors(logging.Filter):
    """Drop Prefect's traceback for a WeakspotError: its message already names the problem; keep it for bugs."""

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        if isinstance(exc, WeakspotError):
            record.exc_info = None
            record.exc_text = None
        return True


def _quiet_expected_errors() -> None:
    for name in ("prefect.task_runs", "prefect.flow_runs", "prefect.task_engine", "prefect.flow_engine"):
        logging.getLogger(name).addFilter(_QuietWeakspotErrors())


def stage_main(flow_fn: Any, load: Callable[[Dict[str, Any], List[str]], Tuple[Any, ...]]) -> None:
    """Entry point of ``python -m flows.<stage> [ARGS]``: read params.yaml once, validate what the stage reads
    (``load(params, argv) -> the flow's arguments``), then run the flow (or ``flow_fn(*arguments)``, a function that
    returns the flow) on the task runner of params.yaml's ``execution`` section (tasks/runner.py).

    A WeakspotError (bad params, missing file, bad model output) ends the run with its message and exit code 2,
    before any artifact is touched.
    """
    from tasks import runner
    from tasks.identity import bind

    try:
        raw = read_yaml(PARAMS_FILE)
        args = load(raw, sys.argv[1:])  # fail fast, before Prefect starts
        bind()  # the stage's identity: its cached tasks' keys and its lineage
        params = runner.execution(raw)  # the task runner, checked before Prefect starts too
        _quiet_expected_errors()
        if not hasattr(flow_fn, "with_options"):  # a function of the arguments that names the flow run
            flow_fn = flow_fn(*args)
        if os.environ.get("WEAKSPOT_WORKER") and params.runner == "sequential":
            # on a worker the stage already is a flow run (the one its worker started, ops/engine/stage_flow.py):
            # the flow's body runs here without a second engine; its tasks are cached as in a flow run
            flow_fn.fn(*args)
        else:
            runner.run_flow(flow_fn, *args, params=params)
    except WeakspotError as exc:
        print(f"weakspot: error: {exc}", file=sys.stderr)
        sys.exit(2)


def one_target(raw: Dict[str, Any], argv: List[str], usage: str) -> Tuple[Dict[str, Any], str, Any]:
    """(top-level settings, the target's name, its validated params) for a per-target stage's ``argv``."""
    from weakspot.config import target_of, validate_top_level

    if len(argv) != 1:
        raise WeakspotError(f"usage: {usage} TARGET (a name under targets: in params.yaml)")
    return validate_top_level(raw, PARAMS_FILE, every_key=False), argv[0], target_of(argv[0], raw, PARAMS_FILE)
