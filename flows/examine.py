"""Stage ``examine``: adversarial examiners (random, BO, RL) search the rendering conditions under which each target
model fails each class (seeds/000), and the paper's experiments (Table 2 and 3, Fig. 2-5, Sec. 4.4-4.6).

Writes ``metrics/examine.json`` and the report's examiner section under ``plots/examine/``.
"""

from __future__ import annotations

import time

import flows  # noqa: F401
from prefect import flow

from tasks.common import lineage, run_main, stage_params, write_stage_result
from tasks.examine import MODELS, _progress, load_models
from tasks.scene import RENDER, read_render


def _headline(metrics: dict) -> list:
    out = []
    for model, by_ex in metrics.items():
        if model == "artificial_weakness" or not isinstance(by_ex, dict):
            continue
        parts = []
        for ex, cps in by_ex.items():
            keys = list(cps)
            parts.append(f"{ex} {cps[keys[0]]:.2f} -> {cps[keys[-1]]:.2f}")
        out.append(f"{model}: mean true-class probability under examination ({keys[0]} -> {keys[-1]}): "
                   + ", ".join(parts) + ".")
    aw = metrics.get("artificial_weakness")
    if aw:
        out.append("Planted weakness (trained on elevations in [-30, 30] only): share of the last queries outside that "
                   "range: " + ", ".join(f"{k} {v['frac_extreme_elevation']:.0%}" for k, v in aw.items()) + ".")
    return out


@flow(name="examine")
def examine_flow() -> dict:
    from weakspot.examine import run_examinations
    from weakspot.scene.config import SceneParams

    top, p = stage_params("examine")
    t0 = time.time()
    images, table, scene = read_render()
    sp = SceneParams.model_validate(scene)  # render with exactly the settings that rendered the training data
    targets = load_models(top["device"])
    with sp.renderer(device=top["device"]) as renderer:
        result = run_examinations(renderer, sp.space(), targets, images, table, p, progress=_progress("examine"))
    result.headline = _headline(result.metrics)
    write_stage_result("examine", result, lineage("examine", top, p, [RENDER, MODELS]))
    print(f"examine: done in {time.time() - t0:.0f} s -> metrics/examine.json")
    return result.metrics


if __name__ == "__main__":
    run_main(examine_flow, "examine")
