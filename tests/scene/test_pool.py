"""The render worker pool: a crashed worker is restarted and its chunk rendered again with the same pixels, a Python
error or a worker that keeps dying is a named RenderError, and nothing is left behind."""

import logging
import os

import numpy as np
import pytest

from weakspot.errors import RenderError
from weakspot.scene.objects import CLASSES
from weakspot.scene.pool import FAULT_ENV, WorkerPool, _describe_chunk, _exit_reason
from weakspot.scene.renderer import BlenderRenderer

from .scene_helpers import needs_bpy, scene


def test_how_a_worker_ended_in_words():
    assert _exit_reason(None) == "closed its pipe (exit code unknown)"
    assert _exit_reason(3) == "exited with code 3"
    assert _exit_reason(-9) == "was killed by SIGKILL (the out-of-memory killer, or a kill -9), exit code -9"
    assert _exit_reason(-15) == "was killed by SIGTERM, exit code -15"
    chunk = [scene("mug", 0), scene("bowl", 1), scene("cap", 2), scene("can", 3), scene("lamp", 4)]
    assert _describe_chunk(chunk, 10, 40) == "scenes 10-14 of 40: mug#0, bowl#1, cap#2, can#3, ..."


def test_a_worker_that_cannot_build_its_scene_is_a_render_error():
    pool = WorkerPool({"no_such_setting": 1}, 1, timeout=60, max_retries=2)
    with pytest.raises(RenderError, match="render worker 0 failed during start: TypeError.*no_such_setting"):
        pool.start()
    assert pool.closed and pool.procs == [] and pool.restarts == 0


@needs_bpy
def test_dead_worker_is_a_render_error_and_nothing_is_left_behind():
    r = BlenderRenderer(resolution=16, samples=1, workers=1, max_retries=0)
    r.render([scene()])
    worker_tmp = list(r.tmp_dirs_)
    assert len(worker_tmp) == 1
    r._pool.procs[0].kill()  # killed while idle: with max_retries=0 not restarted
    r._pool.procs[0].join()
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
    monkeypatch.setenv(FAULT_ENV, f"kill-once:{marker}")  # the first worker to get a chunk SIGKILLs itself mid-chunk
    with caplog.at_level(logging.WARNING, logger="weakspot.scene.pool"):
        with BlenderRenderer(resolution=16, samples=2, workers=2) as pool:
            got = pool.render(ps)
            assert marker.exists() and pool.restarts_ == 1
            again = pool.render(ps[::-1])[::-1]  # the fresh worker goes on working, and renders the other chunk
            assert pool.restarts_ == 1
            pool._pool.procs[1].kill()  # killed from outside while idle: restarted when the next batch comes
            pool._pool.procs[1].join()
            third = pool.render(ps)
            assert pool.restarts_ == 2
            tmp_dirs = list(pool.tmp_dirs_)
    assert np.array_equal(ref, got) and np.array_equal(ref, again) and np.array_equal(ref, third)
    first, second = [r for r in caplog.records if r.name == "weakspot.scene.pool"]
    assert "worker 1 " in second.getMessage() and "before it got its chunk" in second.getMessage()
    record = first
    assert record.levelno == logging.WARNING
    assert "died while rendering its chunk (chunk " in record.getMessage()
    assert "SIGKILL" in record.getMessage() and "retry 1 of 2" in record.getMessage()
    assert not any(os.path.exists(d) for d in tmp_dirs)


@needs_bpy
def test_a_worker_that_always_dies_exhausts_the_retries(monkeypatch, caplog):
    monkeypatch.setenv(FAULT_ENV, "kill")
    r = BlenderRenderer(resolution=16, samples=1, workers=1, max_retries=1)
    with caplog.at_level(logging.WARNING, logger="weakspot.scene.pool"):
        with pytest.raises(
            RenderError,
            match=r"worker 0 \(pid \d+\) died while rendering its chunk \(chunk 0: scenes "
            r"0-2 of 3: mug#0, bowl#1, cap#2\); it was killed by SIGKILL.*exit code -9; gave up after "
            r"1 restart\(s\) for this chunk \(max_retries=1\)",
        ):
            r.render([scene(), scene("bowl", 1), scene("cap", 2)])
    assert r.restarts_ == 1 and len(caplog.records) == 1
    with pytest.raises(RenderError, match="closed"):
        r.render([scene()])
    assert not any(os.path.exists(d) for d in r.tmp_dirs_)


@needs_bpy
def test_a_python_error_in_a_worker_is_not_retried(monkeypatch):
    monkeypatch.setenv(FAULT_ENV, "raise")
    r = BlenderRenderer(resolution=16, samples=1, workers=1)
    with pytest.raises(RenderError, match="worker 0 failed during render: RuntimeError: fault injected"):
        r.render([scene()])
    assert r.restarts_ == 0
    with pytest.raises(RenderError, match="closed"):
        r.render([scene()])
