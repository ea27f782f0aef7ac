"""The Blender scene of one process: RGBA with an exact mask on the background grey, a mesh cache that changes no
pixel, nothing left behind, a missing bpy named."""

import os
import sys

import numpy as np
import pytest

from weakspot.errors import RenderError
from weakspot.scene.blender import BACKGROUND, BlenderScene

from .scene_helpers import needs_bpy, scene

CONFIG = dict(resolution=24, samples=2, device="cpu", seed=0, threads=1, background=BACKGROUND)


@needs_bpy
def test_rgba_on_the_background_grey_with_the_object_as_alpha():
    s = BlenderScene(**CONFIG)
    try:
        out = s.render([scene("mug"), scene("chair", 1, view_elevation=-40.0)])
        assert out.shape == (2, 24, 24, 4) and out.dtype == np.uint8
        rgb, alpha = out[..., :3], out[..., 3]
        bg = alpha == 0
        assert bg.any() and (alpha == 255).any()
        assert np.all(rgb[bg] == 128)  # 0.5 grey where the object is not
        assert os.listdir(s.tmp_dir) == []  # the frame is read back and removed at once
        assert s.device_used == "cpu"
    finally:
        s.close()
    assert not os.path.exists(s.tmp_dir)


@needs_bpy
def test_a_small_mesh_cache_changes_no_pixel_and_frees_what_it_drops():
    import bpy

    ps = [scene(c, i) for c, i in (("mug", 0), ("bowl", 1), ("cap", 2), ("mug", 0))]
    big, small = BlenderScene(**CONFIG), BlenderScene(**CONFIG, cache_size=1)
    try:
        a, b = big.render(ps), small.render(ps)
        assert np.array_equal(a, b)
        meshes = [m.name for m in bpy.data.meshes if m.name.startswith(small._prefix)]
        assert len(meshes) == 2  # the empty slot's mesh and the one cached object
    finally:
        big.close()
        small.close()
    assert not [m for m in bpy.data.meshes if m.name.startswith(small._prefix)]  # close frees the scene's data


def test_missing_bpy_is_a_render_error(monkeypatch):
    monkeypatch.setitem(sys.modules, "bpy", None)  # makes `import bpy` raise ImportError
    with pytest.raises(RenderError, match="bpy .* is not importable.*bpy==5.0.1"):
        BlenderScene(**CONFIG)
