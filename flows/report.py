"""Stage ``report``: gather every stage's section, metrics, figures and tables into ``reports/index.html``."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path

import flows  # noqa: F401
import pandas as pd
from prefect import flow, task

from tasks.common import code_version, run_main, stage_params
from weakspot.io import write_text
from weakspot.report import render_report

REPORT = Path("reports/index.html")


@task
def collect(plots_root: str = "plots", metrics_root: str = "metrics"):
    sections, figures, tables, metrics = [], {}, {}, {}
    for sec_file in sorted(Path(plots_root).glob("*/section.json")):
        section = json.loads(sec_file.read_text())
        stage = section["stage"]
        sections.append(section)
        for item in section.get("items", []):
            if "figure" in item:
                png = sec_file.parent / f"{item['figure']}.png"
                if png.is_file():
                    figures[f"{stage}/{item['figure']}"] = png.read_bytes()
            if "table" in item:
                csv = sec_file.parent / f"{item['table']}.csv"
                if csv.is_file():
                    tables[f"{stage}/{item['table']}"] = pd.read_csv(csv)
        mfile = Path(metrics_root) / f"{stage}.json"
        if mfile.is_file():
            metrics[stage] = json.loads(mfile.read_text())
    return sections, figures, tables, metrics


@flow(name="report")
def report_flow() -> str:
    top, p = stage_params("report")
    sections, figures, tables, metrics = collect()
    code = code_version()
    run_info = {
        "generated": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "code": (code.get("git_commit") or "unknown")[:12] + (" (uncommitted changes)" if code.get("git_dirty") else ""),
        "weakspot": code["weakspot"],
        "device": top["device"],
        "stages": len(sections),
    }
    page = render_report(sections, figures=figures, tables=tables, metrics=metrics, title=p.title,
                         run_info=run_info, max_table_rows=p.max_table_rows)
    write_text(REPORT, page)
    print(f"report: {len(sections)} sections, {len(figures)} figures -> {REPORT.resolve()}")
    return str(REPORT)


if __name__ == "__main__":
    run_main(report_flow, "report")
