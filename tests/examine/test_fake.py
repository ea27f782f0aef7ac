"""The Blender-free renderer: its planted weakness (views from the top squash every class), determinism, the data
set it renders, and named errors."""

import numpy as np
import pytest

from weakspot.errors import ConfigError, RenderError
from weakspot.examine.fake import FakeRenderer, fake_dataset
from weakspot.scene.space import SceneSpace


def test_views_from_the_top_squash_the_silhouette():
    r = FakeRenderer(classes=["disc", "square"], resolution=32, noise=0.0)
    imgs = r.render([{"class": c, "instance": 0, "view_elevation": e} for c in ("disc", "square") for e in (0.0, 88.0)])
    fg = (imgs[..., 0] > 60).mean((1, 2))
    assert fg[1] < fg[0] / 4 and fg[3] < fg[2] / 4
    side = np.abs(imgs[0].astype(int) - imgs[2].astype(int)).mean()
    top = np.abs(imgs[1].astype(int) - imgs[3].astype(int)).mean()
    assert top < side / 4  # from the top the classes look alike


def test_the_same_scene_renders_the_same_image_and_calls_are_counted():
    r = FakeRenderer(classes=["disc"], resolution=16)
    s = {"class": "disc", "instance": 2, "view_azimuth": 30.0}
    a, b = r.render([s]), r.render([s, {**s, "instance": 3}])
    assert np.array_equal(a[0], b[0]) and not np.array_equal(b[0], b[1])
    assert (r.calls, r.n_rendered) == (2, 3) and a.dtype == np.uint8 and a.shape == (1, 16, 16, 3)
    assert r.render([]).shape == (0, 16, 16, 3)


def test_the_data_set_has_the_scene_columns_and_splits():
    r = FakeRenderer(classes=["disc", "cross"], resolution=12)
    images, meta = fake_dataset(r, SceneSpace(), instances_per_class=3, views_per_instance=2, val_instances=1)
    assert len(images) == len(meta) == 12
    assert set(meta.columns) >= {"class", "label", "instance", "split", *SceneSpace().bounds}
    assert (meta.groupby("class").label.nunique() == 1).all()
    assert sorted(meta[meta.split == "validation"].instance.unique()) == [2]


def test_bad_input_is_named():
    with pytest.raises(ConfigError, match="resolution"):
        FakeRenderer(classes=["disc"], resolution=4)
    with pytest.raises(ConfigError, match="at least one class"):
        FakeRenderer(classes=[])
    with pytest.raises(RenderError, match="'class' among"):
        FakeRenderer(classes=["disc"]).render([{"class": "teapot", "instance": 0}])
