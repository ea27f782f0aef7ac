"""Stage ``gad``: Generalized Adversarial Distance (seeds/001) on every data set of the ``gad`` section.

Writes ``metrics/gad.json`` and the figures and tables of the report's GAD section under ``plots/gad/``.
"""

from __future__ import annotations

import time

import flows  # noqa: F401
from prefect import flow

from tasks.common import combined_digest, digest, lineage, run_main, source_digest, stage_params, write_stage_result
from tasks.gad import gad_dataset
from weakspot.gad.experiment import result_of


def _headline(metrics: dict, budget: int) -> list:
    out = []
    for name, m in metrics.items():
        if not isinstance(m, dict) or "sdr" not in m:
            continue
        lo, hi = m["sdr_ci95"]["gad"]
        best = max(m["sdr"], key=m["sdr"].get)
        out.append(f"{name}: with {budget} labels, GAD finds {m['errors']['gad']:.1f} high-confidence errors, "
                   f"SDR {m['sdr']['gad']:.2f} [{lo:.2f}, {hi:.2f}] against random {m['sdr']['random']:.2f} "
                   f"(SDR > 1: more errors than the model's confidence admits); best search here: {best}.")
    return out


@flow(name="gad")
def gad_flow() -> dict:
    top, p = stage_params("gad")
    t0 = time.time()
    inputs = [p.keel_root] + [d.source.split(":", 1)[1] for d in p.datasets
                              if d.source and d.source.split(":", 1)[0] in ("csv", "parquet")]
    in_digest = combined_digest(digest(inputs))
    code = source_digest("weakspot.gad", "weakspot.models", "weakspot.data")
    params_json = p.model_dump(mode="json")
    outcomes = []
    for d in p.datasets:
        print(f"gad: {d.name} ...", flush=True)
        outcomes.append(gad_dataset(d.model_dump(mode="json"), params_json, in_digest, code, top["device"]))
    result = result_of(outcomes, p)
    result.headline = _headline(result.metrics, p.budget)
    write_stage_result("gad", result, lineage("gad", top, p, inputs))
    line = ", ".join(f"{name}: GAD SDR {m['sdr'].get('gad', float('nan')):.2f} vs random {m['sdr'].get('random', float('nan')):.2f}"
                     for name, m in result.metrics.items() if isinstance(m, dict) and "sdr" in m)
    print(f"gad: {line} ({time.time() - t0:.0f} s) -> metrics/gad.json")
    return result.metrics


if __name__ == "__main__":
    run_main(gad_flow, "gad")
