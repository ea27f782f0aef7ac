"""The study's models: the planted weakness's training set rendered inside the range, a model trained reproducibly
from its seed, and the audited model standing in for the full one."""

import numpy as np
import pytest

from weakspot.errors import ConfigError, DataError
from weakspot.examine.study_models import render_limited_training_set, train_study_model, train_study_models

from .examine_helpers import CLASSES, tiny_params


def test_the_planted_weakness_training_set_is_rendered_inside_the_range(world):
    """Sec. 4.4 limits the elevation *when rendering* the training data: the same rows (class, instance, view) as the
    training split, the factor inside the range and every other factor drawn afresh, reproducibly."""
    space, r, images, meta, params, _ = world
    train = meta[meta.split == "train"]
    a_img, a = render_limited_training_set(r, space, train, "view_elevation", (-30, 30), seed=0, chunk=37)
    b_img, b = render_limited_training_set(r, space, train, "view_elevation", (-30, 30), seed=0)
    assert len(a_img) == len(a) == len(train) and np.array_equal(a_img, b_img) and a.equals(b)
    assert a.view_elevation.between(-30, 30).all() and a.view_elevation.std() > 10  # spread over the range
    assert (a[["class", "instance", "label"]].to_numpy() == train[["class", "instance", "label"]].to_numpy()).all()
    lo, hi = space.bounds["view_azimuth"]
    assert a.view_azimuth.between(lo, hi).all() and a.view_azimuth.std() > 0.2 * (hi - lo)
    assert not np.allclose(a.view_azimuth.to_numpy(), train.view_azimuth.to_numpy())
    # with a view column, the draws depend on (class, instance, view), not on the row order
    viewed = train.assign(view=train.groupby(["class", "instance"]).cumcount())
    v_img, _ = render_limited_training_set(r, space, viewed, "view_elevation", (-30, 30), seed=0)
    c_img, _ = render_limited_training_set(r, space, viewed.iloc[::-1], "view_elevation", (-30, 30), seed=0)
    assert np.array_equal(c_img[::-1], v_img) and np.array_equal(v_img, a_img)
    with pytest.raises(ConfigError, match="must lie inside view_elevation's bounds"):
        render_limited_training_set(r, space, train, "view_elevation", (-120, 30))


def test_a_study_model_is_its_seeds(world):
    _, _, images, meta, _, _ = world
    p = tiny_params(study=dict(epochs=1))
    x, y = images[:64], meta.label.to_numpy()[:64]
    a = train_study_model(x, y, len(CLASSES), p, seed=5, device="cpu")
    b = train_study_model(x, y, len(CLASSES), p, seed=5, device="cpu")
    c = train_study_model(x, y, len(CLASSES), p, seed=6, device="cpu")
    from weakspot.scene.dataset import images_to_input

    pa, pb, pc = (m.predict_proba(images_to_input(images[64:96])) for m in (a, b, c))
    assert pa.shape == (32, len(CLASSES)) and np.array_equal(pa, pb) and not np.array_equal(pa, pc)
    with pytest.raises(DataError, match=r"labels: expected 64 class codes in \[0, 4\)"):
        train_study_model(x, np.full(64, 4), len(CLASSES), p, seed=5, device="cpu")


def test_the_audited_model_stands_in_for_the_full_one(world):
    space, r, images, meta, _, clf = world
    p = tiny_params(study=dict(epochs=1, m_study=dict(values=[1, 10], T=2), artificial_weakness=dict(enabled=False)))
    calls = []
    trained, rows = train_study_models(
        r,
        space,
        images,
        meta,
        p,
        device="cpu",
        full_model=(clf, CLASSES, "scenes"),
        progress=lambda w, d, n: calls.append(w),
    )
    assert list(trained) == ["small_cnn", "small_cnn_m1", "small_cnn_m10"]
    assert trained["small_cnn"].clf is clf and trained["small_cnn_m10"] is trained["small_cnn"]  # m = 10: every view
    roles = {r["model"]: r["role"] for r in rows}
    assert roles["small_cnn"] == "full: the audited model of target 'scenes' (not retrained)"
    assert {w.split(":")[0] for w in calls} == {"train small_cnn_m1"}  # only the m = 1 model is trained
    full = next(r for r in rows if r["model"] == "small_cnn")
    assert full["n_train"] == (meta.split == "train").sum() and 0.0 <= full["unseen_accuracy"] <= 1.0
    with pytest.raises(DataError, match="no rows with split == 'train'"):
        train_study_models(r, space, images, meta.assign(split="validation"), p, device="cpu")
