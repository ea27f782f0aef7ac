"""Stage ``examine_study``: the examiner paper's experiments that need models of their own (seeds/000 Sec. 4.3
training-set size, Sec. 4.4 planted weakness, Sec. 4.5 factor order), trained on the rendered scenes.

Writes ``metrics/examine_study.json`` and the report section under ``plots/examine_study/``.
"""

from __future__ import annotations

from typing import Any, Dict, List, Tuple

from prefect import flow

from tasks import paths
from tasks.common import PARAMS_FILE, lineage, stage_main, write_stage_result
from tasks.scene import read_render
from tasks.target import load_target_model
from weakspot.config import target_of, validate_section, validate_top_level
from weakspot.examine.study import run_study
from weakspot.examine.study_figures import study_figures
from weakspot.examine.study_report import study_report
from weakspot.progress import printer
from weakspot.scene.config import SceneParams
from weakspot.scene.renderer import renderer_for


@flow(name="examine_study", validate_parameters=False)
def examine_study_flow(top: Dict[str, Any], p: Any, full_target: Any) -> dict:
    images, table, scene = read_render()
    sp = SceneParams.model_validate(scene)
    full, inputs = None, [paths.RENDER]
    if p.study.full_model:  # the audited scene target's model stands in for the study's full model
        name = p.study.full_model
        clf, spec = load_target_model(name, top["device"])
        full = (clf, [(full_target.class_map or {}).get(c, c) for c in spec["classes"]], name)
        inputs.append(paths.model_dir(name))
    with renderer_for(sp, device=top["device"]) as renderer:
        found = run_study(
            renderer,
            sp.space(),
            images,
            table,
            p,
            device=top["device"],
            progress=printer("examine_study"),
            full_model=full,
        )
    result = study_report(found, p)
    result.figures.update(study_figures(found, p))
    write_stage_result(
        "examine_study",
        result,
        lineage("examine_study", top, p, inputs, section="examine"),
        headline=(
            "strength.*",
            "artificial_weakness.chance",
            "artificial_weakness.regions.*",
            "order_check.max_abs_diff",
        ),
    )
    print(f"examine_study: done -> {paths.metrics('examine_study')}")
    return result.metrics


def _load(raw: Dict[str, Any], argv: List[str]) -> Tuple[Any, ...]:
    p = validate_section("examine", raw, PARAMS_FILE)
    full = target_of(p.study.full_model, raw, PARAMS_FILE) if p.study.full_model else None
    return validate_top_level(raw, PARAMS_FILE, every_key=False), p, full


if __name__ == "__main__":
    stage_main(examine_study_flow, _load)
