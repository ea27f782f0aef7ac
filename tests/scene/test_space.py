"""SceneSpace: the 12 factors of the paper's Table 1, their bounds, sampling, clipping and validation."""

import math

import numpy as np
import pytest

from weakspot.errors import ConfigError
from weakspot.scene.space import DEFAULT_BOUNDS, FACTORS, PAPER_BOUNDS, SceneSpace


def test_factor_order_and_split_follow_table1():
    s = SceneSpace()
    assert s.factors == list(FACTORS) and len(s.factors) == 12
    assert s.fixed == ["sun_alpha", "sun_beta", "sun_zeta"]
    assert s.searched == [f for f in s.factors if f not in s.fixed] and len(s.searched) == 9
    assert set(s.bounds) == set(FACTORS)
    assert list(s.searched_bounds()) == s.searched


def test_unmapped_bounds_are_table1_verbatim():
    b = SceneSpace().bounds
    for name in (
        "sun_alpha",
        "sun_energy",
        "light_distance",
        "light_azimuth",
        "light_elevation",
        "view_azimuth",
        "view_elevation",
        "view_roll",
    ):
        assert b[name] == PAPER_BOUNDS[name]
    assert PAPER_BOUNDS["sun_alpha"] == (0.0, 2 * math.pi)
    assert PAPER_BOUNDS["view_azimuth"] == (0.0, 180.0) and PAPER_BOUNDS["light_energy"] == (0.3, 1.0)
    # the two mapped factors keep the paper's ordering and a recognisable range
    assert b["light_energy"][0] / b["light_energy"][1] == pytest.approx(0.3)
    assert b["view_distance"][0] < b["view_distance"][1]


def test_sample_is_uniform_within_bounds_and_seeded():
    s = SceneSpace({"view_elevation": (-30.0, 30.0)})
    a = s.sample(np.random.default_rng(3), 4000)
    b = s.sample(np.random.default_rng(3), 4000)
    assert a == b
    x = np.array([[p[f] for f in FACTORS] for p in a])
    lo, hi = s.arrays()
    assert np.all(x >= lo) and np.all(x <= hi)
    # uniform: the mean of each factor is the mid-point within 4 standard errors
    se = (hi - lo) / math.sqrt(12 * len(a))
    assert np.all(np.abs(x.mean(0) - (lo + hi) / 2) < 4 * se)
    assert x[:, FACTORS.index("view_elevation")].min() >= -30.0
    assert s.sample(np.random.default_rng(4), 1) != s.sample(np.random.default_rng(3), 1)


def test_clip_and_validate():
    s = SceneSpace()
    p = s.sample(np.random.default_rng(0), 1)[0]
    s.validate(p)
    bad = dict(p, view_elevation=120.0, **{"class": "mug"})
    with pytest.raises(ConfigError, match=r"view_elevation.*120.*\[-90.0, 90.0\]"):
        s.validate(bad)
    clipped = s.clip(bad)
    assert clipped["view_elevation"] == 90.0 and clipped["class"] == "mug"
    s.validate(clipped)
    missing = dict(p)
    del missing["sun_energy"]
    with pytest.raises(ConfigError, match="sun_energy.*missing"):
        s.validate(missing)
    with pytest.raises(ConfigError, match="light_energy.*outside"):
        s.validate(dict(p, light_energy=float("nan")))


@pytest.mark.parametrize(
    "bounds, match",
    [
        ({"camera_height": (0, 1)}, "unknown factor 'camera_height'.*valid factors: sun_alpha"),
        ({"view_roll": (5.0, 1.0)}, r"view_roll.*lo < hi"),
        ({"view_roll": "wide"}, r"view_roll.*pair"),
        ({"sun_energy": (-1.0, 2.0)}, "sun_energy.*negative"),
        ({"view_distance": (0.2, 2.0)}, "view_distance.*inside the object"),
        ({"view_elevation": (-100.0, 90.0)}, r"view_elevation.*\[-90, 90\]"),
    ],
)
def test_bad_bounds_are_named(bounds, match):
    with pytest.raises(ConfigError, match=match):
        SceneSpace(bounds)


def test_corners_cover_every_extreme():
    s = SceneSpace()
    c = s.corners(["sun_energy", "view_distance"])
    assert len(c) == 4
    assert {(p["sun_energy"], p["view_distance"]) for p in c} == {
        (lo1, lo2) for lo1 in DEFAULT_BOUNDS["sun_energy"] for lo2 in DEFAULT_BOUNDS["view_distance"]
    }
