"""Stage ``render``: render m random views of every training and held-out instance with Blender (seeds/000 Sec. 4.1).

Writes ``data/render/images.npy`` (uint8, n x H x W x 3), ``views.parquet`` (class, label, instance, split, view and
the 12 factor values of every image, so any image traces to its scene) and a contact sheet for the report. Scene
targets (data source ``scenes``) and the examiner read it.
"""

from __future__ import annotations

import time

import flows  # noqa: F401
from prefect import flow

from tasks import paths
from tasks.common import lineage, run_main, source_digest, stage_params, write_stage_result
from tasks.scene import render_views, write_render
from weakspot.scene.summary import render_section


@flow(name="render")
def render_flow() -> dict:
    top, p = stage_params("scene")
    t0 = time.time()
    scene = p.model_dump(mode="json")
    images, table = render_views(scene, source_digest("weakspot.scene"), top["device"])
    lin = lineage("render", top, p, section="scene")
    write_render(images, table, scene, lin)
    result = render_section(images, table, p)
    write_stage_result("render", result, lin)
    print(f"render: {len(images)} images in {time.time() - t0:.0f} s -> {paths.RENDER}/")
    return result.metrics


if __name__ == "__main__":
    run_main(render_flow, "scene")
