"""Stage ``prepare-<target>``: load the target's data source and write its train/val/test splits as Parquet."""

from __future__ import annotations

from prefect import flow

from tasks import paths
from tasks.common import digest, lineage, one_target, stage_main, write_stage_result
from tasks.data import load_and_split, write_prepared
from weakspot.data.summary import data_section


@flow(name="prepare", flow_run_name="prepare-{target}", validate_parameters=False)
def prepare_flow(top: dict, target: str, t) -> dict:
    files = t.data.files() + ([str(paths.RENDER)] if t.data.kind == "scenes" else [])
    ds, splits, info = load_and_split(
        t.data.model_dump(mode="json"),
        t.class_of_interest,
        t.trains,
    )
    lin = lineage(
        "prepare",
        top,
        {"data": t.data.model_dump(mode="json"), "class_of_interest": t.class_of_interest, "trains": t.trains},
        dict(ds.provenance.get("files") or {}) | digest(files),
        section=f"targets.{target}",
    )
    counts = write_prepared(target, ds, splits, lin, info)
    write_stage_result("prepare", data_section(target, t.data.described, ds, splits, info), lin, target=target)
    print(
        f"prepare-{target}: {t.data.described}: {counts['train']} train, {counts['val']} val, {counts['test']} test rows "
        f"-> {paths.prepared(target)}/"
    )
    return counts


if __name__ == "__main__":
    stage_main(prepare_flow, lambda raw, argv: one_target(raw, argv, "python -m flows.prepare"))
