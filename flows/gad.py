"""Stage ``gad-<target>``: Generalized Adversarial Distance (seeds/001) on a tabular target: a black-box search for
the target's high-confidence errors among its unlabeled test rows.

Writes ``metrics/gad/<t>.json``, the report section under ``plots/gad/<t>/``, the findings
``findings/<t>/gad.parquet`` and the ranked rows to hand to a person for labelling,
``findings/<t>/gad_to_label.parquet`` and ``.csv``.
"""

from __future__ import annotations

import flows  # noqa: F401
from prefect import flow

from tasks import paths
from tasks.common import combined_digest, digest, lineage, run_main, source_digest, stage_params, target_params, \
    write_stage_result
from tasks.gad import gad_target
from weakspot.gad.experiment import findings_of, result_of
from weakspot.io import write_parquet, write_text


@flow(name="gad")
def gad_flow(target: str) -> dict:
    top, t = target_params(target)
    _, p = stage_params("gad")
    inputs = [paths.prepared(target), paths.model_dir(target)]
    outcome = gad_target(target, p.model_dump(mode="json"), combined_digest(digest(inputs[:1])),
                         combined_digest(digest(inputs[1:])), source_digest("weakspot.gad", "weakspot.models",
                                                                             "weakspot.data"), top["device"])
    weak_spots, to_label = findings_of(outcome)
    result = result_of([outcome], p)
    lin = lineage("gad", top, p, inputs)
    write_stage_result("gad", result, lin, target=target, findings=weak_spots)
    write_parquet(paths.findings_extra(target, "gad", "to_label.parquet"), to_label)
    write_text(paths.findings_extra(target, "gad", "to_label.csv"), to_label.to_csv(index=False))
    print(f"gad-{target}: {len(to_label)} rows ranked for labelling -> {paths.findings_extra(target, 'gad', 'to_label.csv')}")
    return result.metrics


if __name__ == "__main__":
    run_main(gad_flow, "gad", per_target=True)
