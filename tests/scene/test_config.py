"""SceneParams: paper defaults, forbidden extras, named errors; the scene's params and data load no renderer."""

import pytest
from pydantic import ValidationError

from weakspot.scene.config import SceneParams
from weakspot.scene.objects import CLASSES


def test_defaults_follow_the_paper():
    p = SceneParams()
    assert p.views_per_instance == 10  # paper Sec. 4.1: m = 10
    assert p.classes == list(CLASSES) and {"bowl", "barrel"} <= set(p.classes)
    assert p.space().bounds == SceneParams(bounds={}).space().bounds
    assert (p.resolution, p.samples, p.workers, p.seed) == (32, 8, 2, 0)


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


@pytest.mark.parametrize(
    "module", ["weakspot.scene.config", "weakspot.scene.space", "weakspot.scene.objects", "weakspot.scene.dataset"]
)
def test_the_scene_params_and_data_load_no_renderer(module):
    """Only the stages that render load the renderer: a change to it reruns render, examine and the study alone."""
    from tasks.closure import module_closure

    loaded = module_closure(module)
    assert f"{module.replace('.', '/')}.py" in loaded
    render = {f"weakspot/scene/{m}.py" for m in ("renderer", "pool", "blender", "camera")}
    assert not render & set(loaded), f"{module} loads {sorted(render & set(loaded))}"
