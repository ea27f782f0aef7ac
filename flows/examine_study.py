"""Stage ``examine_study``: the examiner paper's experiments that need models of their own (seeds/000 Sec. 4.3
training-set size, Sec. 4.4 planted weakness, Sec. 4.5 factor order), trained on the rendered scenes.

Writes ``metrics/examine_study.json`` and the report section under ``plots/examine_study/``.
"""

from __future__ import annotations

import flows  # noqa: F401
from prefect import flow

from tasks import paths
from tasks.common import lineage, run_main, stage_params, target_params, write_stage_result
from tasks.scene import read_render
from tasks.target import load_target_model
from weakspot.examine import run_study
from weakspot.progress import printer
from weakspot.scene.config import SceneParams


@flow(name="examine_study")
def examine_study_flow() -> dict:
    top, p = stage_params("examine")
    images, table, scene = read_render()
    sp = SceneParams.model_validate(scene)
    full, inputs = None, [paths.RENDER]
    if p.study.full_model:  # the audited scene target's model stands in for the study's full model
        name = p.study.full_model
        _, t = target_params(name)
        clf, spec = load_target_model(name, top["device"])
        full = (clf, [(t.class_map or {}).get(c, c) for c in spec["classes"]], name)
        inputs.append(paths.model_dir(name))
    with sp.renderer(device=top["device"]) as renderer:
        result = run_study(renderer, sp.space(), images, table, p, device=top["device"],
                           progress=printer("examine_study"), full_model=full)
    write_stage_result("examine_study", result, lineage("examine_study", top, p, inputs, section="examine"))
    print(f"examine_study: done -> {paths.metrics('examine_study')}")
    return result.metrics


if __name__ == "__main__":
    run_main(examine_study_flow, "examine")
