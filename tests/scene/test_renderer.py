"""A real Blender render: determinism (also across workers), object in frame, lights and camera matter; the
renderer registry and a batch's checks (no Blender needed)."""

import numpy as np
import pytest

from weakspot.errors import ConfigError, RenderError
from weakspot.scene.config import SceneParams
from weakspot.scene.objects import CLASSES
from weakspot.scene.renderer import RENDERERS, BlenderRenderer, Renderer, check_scene_params, renderer_for
from weakspot.scene.space import SceneSpace

from .scene_helpers import needs_bpy, scene


def _stats(images, alpha):
    fg = alpha > 127
    cover = fg.mean((1, 2))
    lum = images.mean(-1)
    fg_lum = np.array([lum[i][fg[i]].mean() if fg[i].any() else 0.0 for i in range(len(images))])
    sat = np.array([(images[i][fg[i]] >= 254).any(-1).mean() if fg[i].any() else 0.0 for i in range(len(images))])
    return cover, fg_lum, sat


@needs_bpy
def test_protocol_shapes_and_determinism(renderer):
    assert isinstance(renderer, Renderer)
    ps = [scene("mug"), scene("bowl", 2, view_roll=40.0), scene("airplane", 1, view_elevation=-60.0)]
    a = renderer.render(ps)
    assert a.shape == (3, 32, 32, 3) and a.dtype == np.uint8
    b = renderer.render(ps[::-1])[::-1]  # another order, the mesh cache warm: same pixels
    assert np.array_equal(a, b)
    assert renderer.render([]).shape == (0, 32, 32, 3)
    with BlenderRenderer(resolution=32, samples=4, workers=0, seed=1) as other:
        c = other.render(ps)
    assert not np.array_equal(a, c)  # the seed drives the sampling noise ...
    assert np.abs(a.astype(int) - c).mean() < 8  # ... and nothing else


@needs_bpy
def test_pool_gives_the_same_pixels_as_in_process(renderer):
    ps = [scene(c, i % 3, view_azimuth=20.0 * i) for i, c in enumerate(CLASSES)]
    ref = renderer.render(ps)
    with BlenderRenderer(resolution=32, samples=4, workers=2, seed=0) as pool:
        got = pool.render(ps)
        got2 = pool.render(ps[::-1])[::-1]  # the other worker renders each scene this time
        device = pool.device_used_
    assert np.array_equal(ref, got) and np.array_equal(ref, got2)
    assert device == "cpu"


@needs_bpy
def test_every_class_is_in_frame_and_centred(renderer):
    ps = [scene(c, i) for c in CLASSES for i in (0, 1)]
    images, alpha = renderer.render(ps, return_alpha=True)
    cover, fg_lum, _ = _stats(images, alpha)
    assert np.all(cover > 0.03), dict(zip([p["class"] for p in ps], cover.round(3)))
    assert np.all(cover < 0.9)
    ys, xs = np.mgrid[0:32, 0:32]
    w = alpha.astype(float)
    cy = (w * ys).sum((1, 2)) / w.sum((1, 2))
    cx = (w * xs).sum((1, 2)) / w.sum((1, 2))
    assert np.all(np.abs(cy - 15.5) < 6) and np.all(np.abs(cx - 15.5) < 6)
    # the background is the constant grey, the object is not
    assert np.all(images[:, 0, 0] == 128)
    contrast = [np.abs(images[i][alpha[i] > 127].astype(int) - 128).max(-1).mean() for i in range(len(ps))]
    assert min(contrast) > 8, dict(zip([p["class"] for p in ps], np.round(contrast, 1)))


@needs_bpy
def test_lights_matter(renderer):
    dim = dict(light_energy=900.0, light_distance=20.0)
    ps = [scene("barrel", 0, sun_energy=e, **dim) for e in (0.0, 2.5, 5.0)]
    ps += [
        scene("barrel", 0, sun_energy=0.0, light_energy=e, light_distance=8.0, light_azimuth=30.0, light_elevation=30.0)
        for e in (900.0, 3000.0)
    ]
    images, alpha = renderer.render(ps, return_alpha=True)
    _, lum, _ = _stats(images, alpha)
    assert lum[0] + 10 < lum[1] < lum[2] - 5  # the sun (shining down on the top the camera sees) brightens it
    assert lum[3] + 5 < lum[4]  # so does the point light, placed next to the camera


@needs_bpy
def test_camera_distance_shrinks_the_object(renderer):
    ds = [1.3, 1.8, 2.3, 2.8]
    _, alpha = renderer.render([scene("chair", 0, view_distance=d) for d in ds], return_alpha=True)
    cover = (alpha > 127).mean((1, 2))
    assert np.all(np.diff(cover) < 0)
    # perspective: the covered area falls roughly as 1 / distance^2
    assert cover[0] / cover[-1] == pytest.approx((ds[-1] / ds[0]) ** 2, rel=0.35)


@needs_bpy
def test_corners_of_the_space_keep_the_object_visible(renderer):
    """Paper Sec. 2.1: g(z, s) must keep the label, so no corner of S may be black, blown out or empty."""
    space = SceneSpace()
    corners = space.corners(["sun_energy", "light_energy", "light_distance", "view_distance", "view_elevation"])
    ps = [
        dict(p, sun_alpha=1.0, sun_beta=2.0, **{"class": c, "instance": 0})
        for c in ("bowl", "chair", "airplane", "cap")
        for p in corners
    ]
    images, alpha = renderer.render(ps, return_alpha=True)
    cover, lum, sat = _stats(images, alpha)
    assert cover.min() > 0.01  # at least ~10 of 1024 pixels even from far below
    assert np.median(cover) > 0.08
    assert lum.min() > 20 and lum.max() < 235  # neither black nor white
    assert sat.max() < 0.05  # (almost) no clipped object pixels


def test_bad_input_is_named():
    """Checked before Blender starts: a bad batch or setting costs no Blender start-up."""
    with pytest.raises(ConfigError, match="item 0.*'class'"):
        check_scene_params([{k: v for k, v in scene().items() if k != "class"}])
    with pytest.raises(ConfigError, match="unknown class 'sofa'"):
        check_scene_params([scene("sofa")])
    with pytest.raises(ConfigError, match="item 1.*view_elevation.*95"):
        check_scene_params([scene(), scene(view_elevation=95.0)])
    with pytest.raises(ConfigError, match="instance"):
        check_scene_params([scene(instance=-2)])
    with pytest.raises(ConfigError, match="list of scene-param dicts"):
        BlenderRenderer(workers=0).render(scene())
    check_scene_params([scene(view_distance=25.0)])  # wider than the default space: a narrower space's set passes
    with pytest.raises(ConfigError, match="view_distance"):
        check_scene_params([scene(view_distance=25.0)], SceneParams().space())
    with pytest.raises(ConfigError, match="resolution=4"):
        BlenderRenderer(resolution=4, workers=0).start()
    with pytest.raises(ConfigError, match="device='tpu'"):
        BlenderRenderer(device="tpu", workers=0).start()
    with pytest.raises(ConfigError, match="max_retries=-1"):
        BlenderRenderer(max_retries=-1, workers=0).start()


def test_renderer_for_a_scene_section_and_the_registry():
    r = renderer_for(SceneParams(resolution=48, samples=3, workers=0, seed=7), "cpu")
    assert isinstance(r, Renderer) and RENDERERS.get("blender") is BlenderRenderer
    assert (r.resolution, r.samples, r.workers, r.device, r.seed) == (48, 3, 0, "cpu", 7)
    assert r.tmp_dirs_ == [] and r.restarts_ == 0 and r.device_used_ is None  # not started
    with pytest.raises(ConfigError, match="unknown renderer 'povray'; valid names: blender"):
        RENDERERS.get("povray")


def test_missing_bpy_is_a_render_error(monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "bpy", None)  # makes `import bpy` raise ImportError
    with pytest.raises(RenderError, match="bpy .* is not importable.*bpy==5.0.1"):
        BlenderRenderer(resolution=16, workers=0, device="cpu").start()
