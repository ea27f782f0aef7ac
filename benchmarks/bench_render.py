"""Renders per second through the BlenderRenderer pool against one bare bpy render loop, in the same run.

Peers (same scene, same resolution, same samples):

* ``bare``: one process, the scene built once, ``bpy.ops.render.render`` called in a loop with nothing changed
  between frames (no object swap, no parameters, no read-back): the floor of what Cycles costs per frame here.
* ``in-process``: ``BlenderRenderer(workers=0)`` on varied scenes (object swap, camera, lights, PNG read-back).
* ``pool``: ``BlenderRenderer(workers=W)`` on the same varied scenes, the batch split across W processes.

Then the per-image time of the pool at 32 and 64 pixels. Run:

    .venv/bin/python benchmarks/bench_render.py [--n 200] [--workers 2] [--samples 8]
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from weakspot.scene.objects import CLASSES  # noqa: E402
from weakspot.scene.renderer import BlenderRenderer  # noqa: E402
from weakspot.scene.space import SceneSpace  # noqa: E402


def _scenes(n: int, seed: int = 0):
    space = SceneSpace()
    rng = np.random.default_rng(seed)
    return [
        dict(p, **{"class": CLASSES[i % len(CLASSES)], "instance": int(i // len(CLASSES)) % 4})
        for i, p in enumerate(space.sample(rng, n))
    ]


def _rate(renderer: BlenderRenderer, scenes) -> float:
    renderer.render(scenes[: len(CLASSES) * 4])  # warm: workers started, meshes cached, kernels loaded
    t = time.perf_counter()
    renderer.render(scenes)
    return len(scenes) / (time.perf_counter() - t)


def _bare_rate(resolution: int, samples: int, n: int) -> float:
    import bpy

    from weakspot.scene.blender import BlenderScene, quiet_stdout

    scene = BlenderScene(
        resolution=resolution, samples=samples, device="cpu", seed=0, threads=0, background=(0.5, 0.5, 0.5)
    )
    try:
        scene._apply(_scenes(1)[0])
        name = scene.scene.name
        with quiet_stdout():
            bpy.ops.render.render(write_still=True, scene=name)
            t = time.perf_counter()
            for _ in range(n):
                bpy.ops.render.render(write_still=True, scene=name)
            dt = time.perf_counter() - t
        return n / dt
    finally:
        scene.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=200)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--samples", type=int, default=8)
    ap.add_argument("--resolution", type=int, default=32)
    ap.add_argument("--repeats", type=int, default=3, help="interleaved repeats; the best rate of each peer is kept")
    a = ap.parse_args()
    scenes = _scenes(a.n)
    print(
        f"{a.n} scenes, {a.samples} samples, {os.cpu_count()} CPU cores, load average {os.getloadavg()[0]:.1f} "
        "(a shared machine: rates are the best of interleaved repeats)"
    )
    bare, local, pool = [], [], []
    with (
        BlenderRenderer(resolution=a.resolution, samples=a.samples, workers=0, device="cpu") as r0,
        BlenderRenderer(resolution=a.resolution, samples=a.samples, workers=a.workers, device="cpu") as rw,
    ):
        for _ in range(a.repeats):
            bare.append(_bare_rate(a.resolution, a.samples, a.n))
            local.append(_rate(r0, scenes))
            pool.append(_rate(rw, scenes))
    bare, local, pool = max(bare), max(local), max(pool)
    print(f"{a.resolution:>3d} px  bare bpy loop (1 process, same frame)  {bare:7.1f} img/s")
    print(
        f"{a.resolution:>3d} px  in-process renderer (varied scenes)    {local:7.1f} img/s  ratio to bare {local / bare:.2f}"
    )
    print(
        f"{a.resolution:>3d} px  pool, {a.workers} workers (varied scenes)     {pool:7.1f} img/s  ratio to bare {pool / bare:.2f}"
    )
    for res in (32, 64):
        with BlenderRenderer(resolution=res, samples=a.samples, workers=a.workers, device="cpu") as r:
            rate = max(_rate(r, scenes) for _ in range(a.repeats))
        print(
            f"pool {a.workers} workers, {res:>3d} px, {a.samples} samples: {1000.0 / rate:6.1f} ms per image "
            f"({rate:.0f} img/s)"
        )
    print(f"load average at the end {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
