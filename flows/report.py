"""Stage ``report``: the weak spots of every target first (every method's findings side by side, with examples),
then every stage's section, into ``reports/index.html``."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path

import pandas as pd
from prefect import flow, task

from tasks import paths
from tasks.common import PARAMS_FILE, code_version, stage_main
from tasks.manifest import read_manifest
from weakspot import methods
from tasks.settings import validate_section
from weakspot.config import validate_top_level
from weakspot.io import write_text
from weakspot.report import inputs


def groups() -> dict:
    """Stage -> the heading its sections stand under: a method's title and paper (its shared stages' too)."""
    out = {"prepare": "Targets: data and models", "train": "Targets: data and models", "render": "Rendered scenes"}
    for m in methods.all_methods():
        out[m.name] = f"{m.title} ({m.paper})"
        for s in m.stage.shared:
            out[s.name] = out[m.name]
    return out


@task
def collect():
    """Every section dvc.yaml declares (the audit's manifest: a section of a stage it no longer has is not today's
    audit), with its figures, tables and metrics."""
    manifest = read_manifest(".")
    sections, figures, tables, metrics = [], {}, {}, {}
    for sec_file in manifest.files(paths.PLOTS, "**/section.json"):
        section = json.loads(sec_file.read_text())
        key = f"{section['stage']}/{section['target']}" if section.get("target") else section["stage"]
        sections.append(section)
        for item in section.get("items", []):
            if "figure" in item:
                png = sec_file.parent / f"{item['figure']}.png"
                if png.is_file() and manifest.declares(png):
                    figures[f"{key}/{item['figure']}"] = png.read_bytes()
            if "table" in item:
                csv = sec_file.parent / f"{item['table']}.csv"
                if csv.is_file() and manifest.declares(csv):
                    tables[f"{key}/{item['table']}"] = pd.read_csv(csv)
        # every metric (results.json); the metrics file holds the headline only
        for mfile in (
            paths.results(section["stage"], section.get("target")),
            paths.metrics(section["stage"], section.get("target")),
        ):
            if mfile.is_file() and manifest.declares(mfile):
                metrics[key] = json.loads(mfile.read_text())
                break
    return sections, figures, tables, metrics


def read_findings(targets: dict) -> dict:
    """``{(target, method): findings}`` of every method that fits a target, whose stage dvc.yaml declares (the
    audit's manifest) and wrote its findings file."""
    manifest = read_manifest(".")
    return {
        (name, method): pd.read_parquet(paths.findings(name, method))
        for name, t in targets.items()
        for method, reason in methods.fits(t).items()
        if reason is None and manifest.declares(paths.findings(name, method)) and paths.findings(name, method).is_file()
    }


def not_run(targets: dict, failures: list = ()) -> dict:
    """``{(target, method): why}`` for each method stage (``<method>-<target>``) that failed or was not run (the
    history comparison's ``failures``: ``{"stage", "failed", "message" or "error"}``)."""
    failed = {f["stage"]: f for f in failures}
    return {
        (name, method): ("its stage failed: " if f["failed"] else "") + f.get("message", f["error"])
        for name in targets
        for method in methods.available()
        if (f := failed.get(f"{method}-{name}")) is not None
    }


def report_input(collected: tuple, targets: dict, p, *, run_info=None, since=None, trend_png=None):
    """The report's input from what the stages wrote (``collected``: :func:`collect`'s sections, figures, tables and
    metrics), each method's findings file and the stages that failed (``since``'s ``failures``), assembled by the
    library's :func:`weakspot.report.inputs.report_input`, as ``weakspot.audit``'s report is."""
    sections, figures, tables, metrics = collected
    # today's targets only, as the header and the targets table count them (the manifest, generated from the same
    # params, agrees unless dvc.yaml is out of date)
    sections = [s for s in sections if not s.get("target") or s["target"] in targets]
    return inputs.report_input(
        targets,
        sections=sections,
        figures=figures,
        tables=tables,
        metrics=metrics,
        findings=read_findings(targets),
        not_run=not_run(targets, (since or {}).get("failures", [])),
        title=p.title,
        run_info=run_info,
        max_table_rows=p.max_table_rows,
        groups=groups(),
        since=since,
        trend_png=trend_png,
    )


def since_last_audit(hp):
    """What the verdict wrote before this stage ran (``weakspot audit`` records and compares, then reports): the
    latest comparison in the history store, with its trend (:mod:`ops.verdict.history`), and the trend figure (PNG
    bytes or None). Nothing recorded yet: an empty comparison."""
    import io

    from tasks.trend import trend_figure

    store = Path(hp.dir)
    files = sorted(store.glob("*.comparison.json")) if store.is_dir() else []
    comparison = json.loads(files[-1].read_text()) if files else {}
    since = dict(comparison.get("since") or {"current": None, "previous": None, "rows": [], "trend": {}, "times": []})
    fig = trend_figure(since)
    png = None
    if fig is not None:
        import matplotlib.pyplot as plt

        buf = io.BytesIO()
        fig.savefig(buf, format="png", dpi=100)
        plt.close(fig)
        png = buf.getvalue()
    since["gates"] = comparison.get("gates", [])  # the conditions summary at the top of the report
    since["failures"] = comparison.get("failures", [])  # an incomplete audit: the report opens with it
    return since, png


@flow(name="report", validate_parameters=False)
def report_flow(top: dict, p, targets, hp) -> str:
    collected = collect()
    code = code_version()
    run_info = {
        "generated": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "code": (code.get("git_commit") or "unknown")[:12]
        + (" (uncommitted changes)" if code.get("git_dirty") else ""),
        "weakspot": code["weakspot"],
        "device": top["device"],
        "CPU threads": top["threads"],
        "targets": len(targets.root),
    }
    since, trend_png = since_last_audit(hp)
    inp = report_input(collected, targets.root, p, run_info=run_info, since=since, trend_png=trend_png)
    write_text(paths.REPORT, inp.render())
    print(f"report: {len(targets.root)} targets, {len(inp.sections)} sections -> {Path(paths.REPORT).resolve()}")
    return str(paths.REPORT)


if __name__ == "__main__":
    stage_main(
        report_flow,
        lambda raw, argv: (
            validate_top_level(raw, PARAMS_FILE, every_key=False),
            *(validate_section(s, raw, PARAMS_FILE) for s in ("report", "targets", "history")),
        ),
    )
