"""Stage ``gad-<target>``: Generalized Adversarial Distance (seeds/001) on a tabular target: a black-box search for
the target's high-confidence errors among its unlabeled test rows, repeated over split seeds (``gad.seeds``: each
re-draws the split and retrains the target's model; seed 0 is the audited model).

Writes ``metrics/gad/<t>.json`` (per-seed and across-seed figures), the report section under ``plots/gad/<t>/``,
the findings ``findings/<t>/gad.parquet`` and the audited model's rows ranked for a person to label,
``findings/<t>/gad_to_label.parquet`` and ``.csv``. A target whose model the pipeline does not train (a user's
weights) runs seed 0 only.
"""

from __future__ import annotations

import flows  # noqa: F401
from prefect import flow

from tasks import paths
from tasks.common import combined_digest, digest, fan_out, lineage, run_main, source_digest, stage_params, \
    target_params, write_stage_result
from tasks.gad import gad_target
from weakspot.gad.experiment import findings_of, result_of
from weakspot.io import write_parquet, write_text


@flow(name="gad")
def gad_flow(target: str) -> dict:
    top, t = target_params(target)
    _, p = stage_params("gad")
    inputs = [paths.prepared(target), paths.model_dir(target)]
    seeds = p.seeds if t.trains else [0]
    if not t.trains and len(p.seeds) > 1:
        print(f"gad-{target}: the model is the user's ({t.model.kind}), so it cannot be retrained on other splits: "
              f"seed 0 only (gad.seeds {p.seeds})")
    key = p.model_dump(mode="json", exclude={"seeds"})
    spec = t.model_dump(mode="json")
    prepared, model = combined_digest(digest(inputs[:1])), combined_digest(digest(inputs[1:]))
    code = source_digest("weakspot.gad", "weakspot.models", "weakspot.data")
    # one task per split seed, all submitted at once (on Dask they run side by side), results in seed order
    outcomes = fan_out(gad_target, [((target, key, prepared, model, code, top["device"]),
                                     {"split_seed": s, "target_spec": spec if s else None}) for s in seeds],
                       labels=[f"{target}, split seed {s}" for s in seeds])
    weak_spots, to_label = findings_of(outcomes[0])
    result = result_of(outcomes, p)
    lin = lineage("gad", top, p, inputs)
    write_stage_result("gad", result, lin, target=target, findings=weak_spots)
    write_parquet(paths.findings_extra(target, "gad", "to_label.parquet"), to_label)
    write_text(paths.findings_extra(target, "gad", "to_label.csv"), to_label.to_csv(index=False))
    print(f"gad-{target}: {len(to_label)} rows ranked for labelling -> {paths.findings_extra(target, 'gad', 'to_label.csv')}"
          + ("" if outcomes[0].gad_reliable else " (GAD unreliable here: lowest confidence first)"))
    return result.metrics


if __name__ == "__main__":
    run_main(gad_flow, "gad", per_target=True)
