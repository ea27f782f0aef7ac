"""Shared helpers of the scene tests (a module, not a conftest, so tests import it by name)."""

import pytest

bpy_missing = False
try:  # bpy is imported lazily by the renderer; the renderer tests need it
    import importlib.util

    bpy_missing = importlib.util.find_spec("bpy") is None
except Exception:  # pragma: no cover  # noqa: BLE001
    bpy_missing = True

_skip = pytest.mark.skipif(bpy_missing, reason="bpy (Blender 5.0 as a Python module) is not installed")


def needs_bpy(fn):
    """Mark a test that renders through bpy: the project's ``blender`` marker, skipped without bpy."""
    return pytest.mark.blender(_skip(fn))


BASE = dict(
    sun_alpha=0.0,
    sun_beta=0.0,
    sun_zeta=0.0,
    sun_energy=2.5,
    light_energy=1500.0,
    light_distance=12.0,
    light_azimuth=45.0,
    light_elevation=30.0,
    view_distance=1.9,
    view_azimuth=30.0,
    view_elevation=30.0,
    view_roll=0.0,
)


def scene(cls="mug", instance=0, **factors):
    return {**BASE, **factors, "class": cls, "instance": instance}
