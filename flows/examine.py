"""Stage ``examine-<target>``: adversarial examiners (random, BO, RL; seeds/000) search the rendering conditions
under which the target's model fails each object class, by rendering the scene and querying ``predict_proba``.

Writes ``metrics/examine/<t>.json``, the report section under ``plots/examine/<t>/`` and ``findings/<t>/examine.parquet``.
"""

from __future__ import annotations

import flows  # noqa: F401
from prefect import flow

from tasks import paths
from tasks.common import lineage, run_main, stage_params, target_params, write_stage_result
from tasks.scene import read_render
from tasks.target import load_target_model
from weakspot.examine import examine_target
from weakspot.progress import printer
from weakspot.scene.config import SceneParams


@flow(name="examine")
def examine_flow(target: str) -> dict:
    top, t = target_params(target)
    _, p = stage_params("examine")
    images, table, scene = read_render()
    sp = SceneParams.model_validate(scene)  # render with exactly the settings that rendered the data
    clf, spec = load_target_model(target, top["device"])
    classes = [(t.class_map or {}).get(c, c) for c in spec["classes"]]
    with sp.renderer(device=top["device"]) as renderer:
        result, found = examine_target(renderer, sp.space(), clf, classes, images, table, p,
                                       progress=printer(f"examine-{target}"))
    write_stage_result("examine", result, lineage("examine", top, p, [paths.RENDER, paths.model_dir(target)]),
                       target=target, findings=found)
    print(f"examine-{target}: {len(found)} classes examined -> {paths.findings(target, 'examine')}")
    return result.metrics


if __name__ == "__main__":
    run_main(examine_flow, "examine", per_target=True)
