"""A real Blender render: determinism (also across workers), object in frame, lights and camera matter."""

import logging
import os

import numpy as np
import pytest

from weakspot.errors import ConfigError, RenderError
from weakspot.scene.objects import CLASSES
from weakspot.scene.renderer import _FAULT_ENV, BlenderRenderer, Renderer, camera_matrix
from weakspot.scene.space import SceneSpace

from .scene_helpers import needs_bpy, scene


def _stats(images, alpha):
    fg = alpha > 127
    cover = fg.mean((1, 2))
    lum = images.mean(-1)
    fg_lum = np.array([lum[i][fg[i]].mean() if fg[i].any() else 0.0 for i in range(len(images))])
    sat = np.array([(images[i][fg[i]] >= 254).any(-1).mean() if fg[i].any() else 0.0 for i in range(len(images))])
    return cover, fg_lum, sat


def test_camera_matrix_is_a_rotation_looking_at_the_origin():
    for el in (-90.0, -30.0, 0.0, 45.0, 90.0):
        for roll in (0.0, 77.0):
            m = camera_matrix(2.0, 33.0, el, roll)
            r = m[:3, :3]
            assert np.allclose(r.T @ r, np.eye(3), atol=1e-12) and np.linalg.det(r) == pytest.approx(1.0)
            assert np.linalg.norm(m[:3, 3]) == pytest.approx(2.0)
            assert np.allclose(-r[:, 2], -m[:3, 3] / 2.0)  # the view axis (-z) points at the origin
    # continuous through the pole: no flip of the up vector between 89.9 and 90 degrees
    assert np.allclose(camera_matrix(2, 33, 89.99, 0)[:3, :3], camera_matrix(2, 33, 90.0, 0)[:3, :3], atol=1e-3)


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
    ps += [scene("barrel", 0, sun_energy=0.0, light_energy=e, light_distance=8.0, light_azimuth=30.0,
                 light_elevation=30.0) for e in (900.0, 3000.0)]
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
    ps = [dict(p, sun_alpha=1.0, sun_beta=2.0, **{"class": c, "instance": 0})
          for c in ("bowl", "chair", "airplane", "cap") for p in corners]
    images, alpha = renderer.render(ps, return_alpha=True)
    cover, lum, sat = _stats(images, alpha)
    assert cover.min() > 0.01  # at least ~10 of 1024 pixels even from far below
    assert np.median(cover) > 0.08
    assert lum.min() > 20 and lum.max() < 235  # neither black nor white
    assert sat.max() < 0.05  # (almost) no clipped object pixels


@needs_bpy
def test_bad_input_is_named(renderer):
    with pytest.raises(ConfigError, match="item 0.*'class'"):
        renderer.render([{k: v for k, v in scene().items() if k != "class"}])
    with pytest.raises(ConfigError, match="unknown class 'sofa'"):
        renderer.render([scene("sofa")])
    with pytest.raises(ConfigError, match="item 1.*view_elevation.*95"):
        renderer.render([scene(), scene(view_elevation=95.0)])
    with pytest.raises(ConfigError, match="instance"):
        renderer.render([scene(instance=-2)])
    with pytest.raises(ConfigError, match="list of scene-param dicts"):
        renderer.render(scene())
    with pytest.raises(ConfigError, match="resolution=4"):
        BlenderRenderer(resolution=4, workers=0).start()
    with pytest.raises(ConfigError, match="device='tpu'"):
        BlenderRenderer(device="tpu", workers=0).start()
    with pytest.raises(ConfigError, match="max_retries=-1"):
        BlenderRenderer(max_retries=-1, workers=0).start()


@needs_bpy
def test_dead_worker_is_a_render_error_and_nothing_is_left_behind():
    r = BlenderRenderer(resolution=16, samples=1, workers=1, max_retries=0)
    r.render([scene()])
    worker_tmp = list(r.tmp_dirs_)
    assert len(worker_tmp) == 1
    r._procs[0].kill()  # killed while idle: with max_retries=0 not restarted
    r._procs[0].join()
    with pytest.raises(RenderError, match=r"worker 0 .*died before it got its chunk.*SIGKILL.*max_retries=0"):
        r.render([scene()])
    assert r.restarts_ == 0
    with pytest.raises(RenderError, match="closed"):
        r.render([scene()])
    r.close()
    assert not os.path.exists(worker_tmp[0])  # the parent removes the folder of the killed worker
    with BlenderRenderer(resolution=16, samples=1, workers=0) as local:
        local.render([scene()])
        (tmp,) = local.tmp_dirs_
        assert os.path.isdir(tmp) and os.listdir(tmp) == []  # the frame file is read and removed at once
    assert not os.path.exists(tmp)
    with BlenderRenderer(resolution=16, samples=1, workers=1) as pool:
        pool.render([scene()])
        (ptmp,) = pool.tmp_dirs_
    assert not os.path.exists(ptmp)  # a worker that is closed cleans up its folder


@needs_bpy
def test_a_worker_killed_mid_batch_is_restarted_and_its_chunk_rendered_again(tmp_path, monkeypatch, caplog):
    ps = [scene(c, i % 2, view_azimuth=25.0 * i) for i, c in enumerate(CLASSES)]
    with BlenderRenderer(resolution=16, samples=2, workers=0) as local:  # the uncrashed run (same pixels as a pool)
        ref = local.render(ps)
    marker = tmp_path / "crashed"
    monkeypatch.setenv(_FAULT_ENV, f"kill-once:{marker}")  # the first worker to get a chunk SIGKILLs itself mid-chunk
    with caplog.at_level(logging.WARNING, logger="weakspot.scene.renderer"):
        with BlenderRenderer(resolution=16, samples=2, workers=2) as pool:
            got = pool.render(ps)
            assert marker.exists() and pool.restarts_ == 1
            again = pool.render(ps[::-1])[::-1]  # the fresh worker goes on working, and renders the other chunk
            assert pool.restarts_ == 1
            pool._procs[1].kill()  # killed from outside while idle: restarted when the next batch comes
            pool._procs[1].join()
            third = pool.render(ps)
            assert pool.restarts_ == 2
            tmp_dirs = list(pool.tmp_dirs_)
    assert np.array_equal(ref, got) and np.array_equal(ref, again) and np.array_equal(ref, third)
    first, second = [r for r in caplog.records if r.name == "weakspot.scene.renderer"]
    assert "worker 1 " in second.getMessage() and "before it got its chunk" in second.getMessage()
    record = first
    assert record.levelno == logging.WARNING
    assert "died while rendering its chunk (chunk " in record.getMessage()
    assert "SIGKILL" in record.getMessage() and "retry 1 of 2" in record.getMessage()
    assert not any(os.path.exists(d) for d in tmp_dirs)


@needs_bpy
def test_a_worker_that_always_dies_exhausts_the_retries(monkeypatch, caplog):
    monkeypatch.setenv(_FAULT_ENV, "kill")
    r = BlenderRenderer(resolution=16, samples=1, workers=1, max_retries=1)
    with caplog.at_level(logging.WARNING, logger="weakspot.scene.renderer"):
        with pytest.raises(RenderError, match=r"worker 0 \(pid \d+\) died while rendering its chunk \(chunk 0: scenes "
                           r"0-2 of 3: mug#0, bowl#1, cap#2\); it was killed by SIGKILL.*exit code -9; gave up after "
                           r"1 restart\(s\) for this chunk \(max_retries=1\)"):
            r.render([scene(), scene("bowl", 1), scene("cap", 2)])
    assert r.restarts_ == 1 and len(caplog.records) == 1
    with pytest.raises(RenderError, match="closed"):
        r.render([scene()])
    assert not any(os.path.exists(d) for d in r.tmp_dirs_)


@needs_bpy
def test_a_python_error_in_a_worker_is_not_retried(monkeypatch):
    monkeypatch.setenv(_FAULT_ENV, "raise")
    r = BlenderRenderer(resolution=16, samples=1, workers=1)
    with pytest.raises(RenderError, match="worker 0 failed during render: RuntimeError: fault injected"):
        r.render([scene()])
    assert r.restarts_ == 0
    with pytest.raises(RenderError, match="closed"):
        r.render([scene()])


def test_missing_bpy_is_a_render_error(monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "bpy", None)  # makes `import bpy` raise ImportError
    with pytest.raises(RenderError, match="bpy .* is not importable.*bpy==5.0.1"):
        BlenderRenderer(resolution=16, workers=0, device="cpu").start()
