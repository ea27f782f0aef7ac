"""SceneParams: paper defaults, forbidden extras, named errors."""

import pytest
from pydantic import ValidationError

from weakspot.scene.config import SceneParams
from weakspot.scene.objects import CLASSES


def test_defaults_follow_the_paper():
    p = SceneParams()
    assert p.views_per_instance == 10  # paper Sec. 4.1: m = 10
    assert p.classes == list(CLASSES) and {"bowl", "barrel"} <= set(p.classes)
    assert p.space().bounds == SceneParams(bounds={}).space().bounds
    r = p.renderer("cpu")
    assert (r.resolution, r.samples, r.workers, r.device, r.seed) == (32, 8, 2, "cpu", 0)


def test_overrides_and_errors():
    p = SceneParams(bounds={"view_elevation": [-30, 30]}, classes=["mug", "bowl"])
    assert p.space().bounds["view_elevation"] == (-30.0, 30.0)
    with pytest.raises(ValidationError, match="resolutoin"):
        SceneParams(resolutoin=32)
    with pytest.raises(ValidationError, match="unknown classes \\['sofa'\\]"):
        SceneParams(classes=["mug", "sofa"])
    with pytest.raises(ValidationError, match="unknown factor 'elevation'"):
        SceneParams(bounds={"elevation": (0, 1)})
    with pytest.raises(ValidationError, match="samples"):
        SceneParams(samples=0)
