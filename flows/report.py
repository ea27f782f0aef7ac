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
from weakspot import methods
from ops.params import validate_section
from weakspot.config import validate_top_level
from weakspot.findings import correct_targets
from weakspot.io import write_text
from weakspot.report import render_report


def groups() -> dict:
    """Stage -> the heading its sections stand under: a method's title and paper (its study's too)."""
    out = {"prepare": "Targets: data and models", "train": "Targets: data and models", "render": "Rendered scenes"}
    for m in methods.all_methods():
        out[m.name] = f"{m.title} ({m.paper})"
    if "examine" in out:
        out["examine_study"] = out["examine"]
    return out


@task
def collect():
    sections, figures, tables, metrics = [], {}, {}, {}
    for sec_file in sorted(paths.PLOTS.glob("**/section.json")):
        section = json.loads(sec_file.read_text())
        key = f"{section['stage']}/{section['target']}" if section.get("target") else section["stage"]
        sections.append(section)
        for item in section.get("items", []):
            if "figure" in item:
                png = sec_file.parent / f"{item['figure']}.png"
                if png.is_file():
                    figures[f"{key}/{item['figure']}"] = png.read_bytes()
            if "table" in item:
                csv = sec_file.parent / f"{item['table']}.csv"
                if csv.is_file():
                    tables[f"{key}/{item['table']}"] = pd.read_csv(csv)
        # every metric (results.json); the metrics file holds the headline only
        for mfile in (
            paths.results(section["stage"], section.get("target")),
            paths.metrics(section["stage"], section.get("target")),
        ):
            if mfile.is_file():
                metrics[key] = json.loads(mfile.read_text())
                break
    return sections, figures, tables, metrics


def weak_spots(targets: dict, metrics: dict, sections: list = (), failures: list = ()) -> list:
    """Per target: a line on its model and every method's findings (or why the method did not run: it does not fit,
    or its stage failed or was not run, ``failures``) and what each ran on (its section's ``sample``)."""
    samples = {(s.get("stage"), s.get("target")): s.get("sample", "") for s in sections}
    failed = {f["stage"]: f for f in failures}
    out = []
    for name, t in targets.items():
        m = metrics.get(f"train/{name}", {})
        intro = f"Data {t.data.described}; model {t.model.kind} {t.model.arch or t.model.weights or t.model.factory}"
        if "test_accuracy" in m:
            intro += f"; test accuracy {m['test_accuracy']:.1%}, ECE {m['ece']:.3f}"
        cards = []
        for method, reason in methods.fits(t).items():
            meta = methods.get(method)
            entry = {"name": method, "title": meta.title, "paper": meta.paper, "anchor": f"{method}-{name}"}
            stage = failed.get(f"{method}-{name}")
            if reason:
                entry["reason"] = reason
            elif stage is not None:
                entry["reason"] = ("its stage failed: " if stage["failed"] else "") + stage.get(
                    "message", stage["error"]
                )
            elif paths.findings(name, method).is_file():
                entry["findings"] = pd.read_parquet(paths.findings(name, method))
                entry["sample"] = samples.get((method, name), "")
            cards.append(entry)
        model = f"{t.model.kind} {t.model.arch or Path(str(t.model.weights or t.model.factory)).name}"
        out.append(
            {"name": name, "intro": intro + ".", "methods": cards, "model": model, "accuracy": m.get("test_accuracy")}
        )
    return correct_targets(out)


def since_last_audit(hp):
    """The comparison with the previous audit in the history store and the trend figure (PNG bytes or None); the
    verdict is also published as Prefect artifacts, so the Prefect UI shows it on this run."""
    import io

    from ops.history import since_last, trend_figure

    since = since_last(".", hp.dir, hp.rules)
    fig = trend_figure(since)
    png = None
    if fig is not None:
        import matplotlib.pyplot as plt

        buf = io.BytesIO()
        fig.savefig(buf, format="png", dpi=100)
        plt.close(fig)
        png = buf.getvalue()
    from ops.verdict import publish_verdict

    recorded = Path(hp.dir) / f"{since['current']}.comparison.json"
    comparison = (
        json.loads(recorded.read_text())
        if since["current"] and recorded.is_file()
        else {
            "audit": {"audit_id": since["current"] or "this run (not recorded in the history)"},
            "previous": since["previous"],
            "rows": since["rows"],
        }
    )
    publish_verdict(comparison, report_path=str(Path(paths.REPORT).resolve()))
    since["gates"] = comparison.get("gates", [])  # the conditions summary at the top of the report
    since["failures"] = comparison.get("failures", [])  # an incomplete audit: the report opens with it
    return since, png


@flow(name="report", validate_parameters=False)
def report_flow(top: dict, p, targets, hp) -> str:
    sections, figures, tables, metrics = collect()
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
    page = render_report(
        sections,
        figures=figures,
        tables=tables,
        metrics=metrics,
        title=p.title,
        run_info=run_info,
        max_table_rows=p.max_table_rows,
        targets=weak_spots(targets.root, metrics, sections, since.get("failures", [])),
        groups=groups(),
        since=since,
        trend_png=trend_png,
    )
    write_text(paths.REPORT, page)
    print(f"report: {len(targets.root)} targets, {len(sections)} sections -> {Path(paths.REPORT).resolve()}")
    return str(paths.REPORT)


if __name__ == "__main__":
    stage_main(
        report_flow,
        lambda raw, argv: (
            validate_top_level(raw, PARAMS_FILE, every_key=False),
            *(validate_section(s, raw, PARAMS_FILE) for s in ("report", "targets", "history")),
        ),
    )
