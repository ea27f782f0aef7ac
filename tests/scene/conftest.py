import pytest


@pytest.fixture(scope="session")
def renderer():
    from weakspot.scene.renderer import BlenderRenderer

    with BlenderRenderer(resolution=32, samples=4, workers=0, seed=0) as r:
        yield r
