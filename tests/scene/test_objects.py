"""Procedural objects: every class builds, is normalised, deterministic per id; instance splits."""

import numpy as np
import pytest

from weakspot.errors import ConfigError
from weakspot.scene.objects import CLASSES, OBJECT_SIZE, OBJECTS, build_object, class_index, split_instances


def test_at_least_ten_classes_including_the_hard_round_ones():
    assert len(CLASSES) >= 10 and set(CLASSES) <= set(OBJECTS.names())
    assert {"bowl", "barrel"} <= set(CLASSES)


@pytest.mark.parametrize("cls", CLASSES)
def test_every_class_builds_normalised_and_deterministic(cls):
    for inst in (0, 1, 7):
        m = build_object(cls, inst)
        lo, hi = m.vertices.min(0), m.vertices.max(0)
        assert np.allclose((lo + hi) / 2, 0.0, atol=1e-9)  # centred
        assert np.max(hi - lo) == pytest.approx(OBJECT_SIZE)  # longest side fixed
        assert len(m.faces) == len(m.face_colors) == len(m.smooth) > 10
        flat = np.concatenate([np.asarray(f) for f in m.faces])
        assert flat.min() >= 0 and flat.max() < len(m.vertices)
        assert all(len(set(f)) == len(f) >= 3 for f in m.faces)
        assert np.all((m.face_colors >= 0) & (m.face_colors <= 1))
        again = build_object(cls, inst)
        assert np.array_equal(m.vertices, again.vertices) and m.faces == again.faces
    # instances differ in proportions
    exts = np.array([build_object(cls, i).extent() for i in range(6)])
    assert np.ptp(exts / exts.max(1, keepdims=True), axis=0).max() > 0.02


def test_unknown_class_and_bad_id():
    with pytest.raises(ConfigError, match="unknown object class 'sofa'.*valid names: airplane"):
        build_object("sofa", 0)
    with pytest.raises(ConfigError, match="instance"):
        build_object("mug", -1)
    with pytest.raises(ConfigError, match="duplicate"):
        class_index(["mug", "mug"])
    assert class_index(["bowl", "mug"]) == {"bowl": 0, "mug": 1}


def test_split_is_deterministic_and_disjoint():
    tr, va = split_instances(8, 4, seed=3, pool=50)
    assert (tr, va) == split_instances(8, 4, seed=3, pool=50)
    assert len(tr) == 8 and len(va) == 4 and not set(tr) & set(va)
    assert all(0 <= i < 50 for i in tr + va)
    assert split_instances(8, 4, seed=4, pool=50) != (tr, va)
    tr0, va0 = split_instances(5, 3, seed=0)
    assert sorted(tr0 + va0) == list(range(8))
    with pytest.raises(ConfigError, match="pool=5"):
        split_instances(4, 2, seed=0, pool=5)
