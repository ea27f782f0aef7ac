"""The examiner's entry point on a target: every examiner of ``examine.examiners`` on every examined class, rendering
with exactly the scene settings that rendered the target's data."""

from __future__ import annotations

from typing import Any

from weakspot.examine.config import ExamineParams
from weakspot.examine.experiment import examine_target
from weakspot.methods import AuditTarget, MethodReport
from weakspot.scene.config import SceneParams
from weakspot.scene.renderer import renderer_for


def run(target: AuditTarget, params: ExamineParams, runtime: Any) -> MethodReport:
    if target.scene is None:
        from weakspot.errors import DataError

        raise DataError(f"{target.name}: the examiner needs the rendered scene data set (run the render stage)")
    sp = SceneParams.model_validate(target.scene.settings)
    class_map = (getattr(target.params, "class_map", None) or {})
    classes = [class_map.get(c, c) for c in target.classes]
    with renderer_for(sp, device=runtime.device) as renderer:
        section, found = examine_target(renderer, sp.space(), target.model, classes, target.scene.images,
                                        target.scene.table, params, progress=runtime.progress)
    return MethodReport(section=section, findings=found)
