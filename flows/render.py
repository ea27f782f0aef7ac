"""Stage ``render``: render m random views of every training and held-out instance with Blender (seeds/000 Sec. 4.1).

Writes ``data/render/images.npy`` (uint8, n x H x W x 3), ``views.parquet`` (class, label, instance, split, view and
the 12 factor values of every image, so any image traces to its scene) and a contact sheet for the report. Scene
targets (data source ``scenes``) and the examiner read it.
"""

from __future__ import annotations

import time
from typing import Any, Dict, Tuple

from prefect import flow

from tasks import paths
from tasks.common import PARAMS_FILE, cached_task, lineage, stage_main, write_stage_result
from tasks.scene import write_render
from weakspot.config import validate_section, validate_top_level
from weakspot.scene.summary import render_section


@cached_task
def render_views(scene: Dict[str, Any], device: str) -> Tuple[Any, Any]:
    """Render the data set of the ``scene`` section; cached on the stage's identity (:mod:`tasks.identity`) and its
    arguments."""
    from weakspot.scene.config import SceneParams
    from weakspot.scene.dataset import render_dataset
    from weakspot.scene.renderer import renderer_for

    p = SceneParams.model_validate(scene)
    with renderer_for(p, device=device) as renderer:
        return render_dataset(
            renderer,
            p.classes,
            p.train_instances,
            p.views_per_instance,
            p.space(),
            p.seed,
            val_instances_per_class=p.val_instances,
        )


@flow(name="render", validate_parameters=False)
def render_flow(top: dict, p) -> dict:
    t0 = time.time()
    scene = p.model_dump(mode="json")
    images, table = render_views(scene, top["device"])
    lin = lineage("render", top, p, section="scene")
    write_render(images, table, scene, lin)
    result = render_section(images, table, p, views_file=str(paths.RENDER / "views.parquet"))
    write_stage_result("render", result, lin)
    print(f"render: {len(images)} images in {time.time() - t0:.0f} s -> {paths.RENDER}/")
    return result.metrics


if __name__ == "__main__":
    stage_main(
        render_flow,
        lambda raw, argv: (
            validate_top_level(raw, PARAMS_FILE, every_key=False),
            validate_section("scene", raw, PARAMS_FILE),
        ),
    )
