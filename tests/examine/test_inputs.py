"""What the examiner is given: named input errors, the class order, the examined classes and the unseen instance
the model is most sure of."""

import numpy as np
import pandas as pd
import pytest

from weakspot.errors import ConfigError, DataError, ModelError
from weakspot.examine.config import ExamineParams
from weakspot.examine.inputs import (
    as_params,
    check_meta,
    check_space,
    class_order,
    examined_classes,
    examined_model,
    select_instances,
)
from weakspot.models import CallableClassifier
from weakspot.scene.dataset import images_to_input
from weakspot.scene.space import SceneSpace

from .examine_helpers import CLASSES


def _meta(classes=("b", "a"), labels=(0, 1), split=("train", "validation")):
    return pd.DataFrame({"class": list(classes), "label": list(labels), "instance": [0, 0], "split": list(split)})


def test_class_order_follows_the_labels():
    assert class_order(_meta(("b", "a"), (0, 1))) == ["b", "a"]
    assert class_order(_meta(("b", "a"), (1, 0))) == ["a", "b"]
    with pytest.raises(DataError, match="not one-to-one"):
        class_order(_meta(("a", "a"), (0, 1)))
    with pytest.raises(DataError, match=r"expected 0..k-1, got \[0, 2\]"):
        class_order(_meta(("a", "b"), (0, 2)))


def test_bad_images_and_metadata_are_named():
    meta = _meta()
    ok = np.zeros((2, 4, 4, 3), np.uint8)
    check_meta(ok, meta)
    with pytest.raises(DataError, match=r"missing column\(s\) \['split'\]"):
        check_meta(ok, meta.drop(columns=["split"]))
    with pytest.raises(DataError, match=r"missing column\(s\) \['view_elevation'\]"):
        check_meta(ok, meta, "view_elevation")
    with pytest.raises(DataError, match="uint8"):
        check_meta(ok.astype(np.float32), meta)
    with pytest.raises(DataError, match=r"images \(3\) and metadata \(2 rows\)"):
        check_meta(np.zeros((3, 4, 4, 3), np.uint8), meta)
    check_space(SceneSpace())


def test_the_classifier_and_its_names_are_checked():
    clf = CallableClassifier(lambda x: np.full((len(x), 2), 0.5), n_classes=2)
    m = examined_model(clf, ["a", "b"])
    assert m.classes == ["a", "b"] and m.proba(np.zeros((3, 4, 4, 3), np.uint8)).shape == (3, 2)
    with pytest.raises(ModelError, match="no predict_proba"):
        examined_model(object(), ["a", "b"])
    with pytest.raises(ConfigError, match="names must be unique"):
        examined_model(clf, ["a", "a"])
    with pytest.raises(ConfigError, match="2 outputs but 3 class names"):
        examined_model(clf, ["a", "b", "c"])
    wrong = examined_model(CallableClassifier(lambda x: np.full((len(x), 3), 1 / 3), n_classes=3), ["a", "b", "c"])
    wrong.classes = ["a", "b"]
    with pytest.raises(ModelError, match=r"shape \(1, 3\) for 1 images; expected \(1, 2\)"):
        wrong.proba(np.zeros((1, 4, 4, 3), np.uint8))


def test_examined_classes_default_to_the_models_in_the_scene_in_model_order():
    clf = CallableClassifier(lambda x: np.full((len(x), 3), 1 / 3), n_classes=3)
    m = examined_model(clf, ["c", "a", "teapot"])
    meta = pd.DataFrame(
        {
            "class": ["a", "c", "a"],
            "label": [0, 1, 0],
            "instance": [0, 0, 1],
            "split": ["validation", "validation", "train"],
        }
    )
    assert examined_classes(None, m, meta) == ["c", "a"]
    assert examined_classes(["a"], m, meta) == ["a"]
    with pytest.raises(ConfigError, match=r"classes: unknown \['sofa'\]"):
        examined_classes(["sofa"], m, meta)
    with pytest.raises(DataError, match=r"\['teapot'\] have no unseen instance"):
        examined_classes(["teapot"], m, meta)


def test_params_are_validated_once_given_as_a_dict():
    p = as_params({"T": 5, "checkpoints": [0, 5]})
    assert isinstance(p, ExamineParams) and p.T == 5 and as_params(p) is p
    with pytest.raises(ConfigError, match="examine params are not valid"):
        as_params({"T": 5, "checkpoints": [0, 50]})


def test_select_instances_takes_the_most_sure_unseen_instance(world):
    space, r, images, meta, params, clf = world
    chosen = select_instances(clf, CLASSES, images, meta)
    val = meta[meta.split != "train"]
    pos = meta.index.get_indexer(val.index)
    p = clf.predict_proba(images_to_input(images[pos]))[np.arange(len(pos)), val.label.to_numpy()]
    means = val.assign(p=p).groupby(["class", "instance"]).p.mean()
    for c in CLASSES:
        assert means[c].idxmax() == chosen[c]
    assert set(chosen.values()) <= set(val.instance)  # never a training instance
    with pytest.raises(DataError, match="no rows with split != 'train'"):
        select_instances(clf, CLASSES, images, meta.assign(split="train"))


def test_the_worst_recalled_classes_are_examined_first_when_fewer_than_every_class_is_asked():
    """Issue 47: the examiner examined a fixed list of 6 of 10 classes, missing two the model recalls worst. An int
    asks for that many classes, chosen by their recall on the unseen renders, worst first: here a 100%, b 80%,
    c 50% (the green channel says the class, the blue one where the model answers class a)."""
    import numpy as np
    import pandas as pd
    import pytest

    from weakspot.errors import ConfigError
    from weakspot.examine.inputs import examined_classes, examined_model, worst_recalled
    from weakspot.models import CallableClassifier

    rows, imgs = [], []
    for k, (c, wrong) in enumerate([("a", 0), ("b", 2), ("c", 5)]):
        for i in range(12):
            split = "train" if i < 2 else "val"
            img = np.zeros((4, 4, 3), np.uint8)
            img[..., 1] = 40 * k
            img[..., 2] = 255 if split == "val" and i - 2 < wrong else 0
            rows.append({"class": c, "label": k, "instance": i // 4, "split": split})
            imgs.append(img)
    meta, images = pd.DataFrame(rows), np.stack(imgs)

    def predict(x):
        k = np.rint(x[:, 1].mean(axis=(1, 2)) * 255 / 40).astype(int)
        k = np.where(x[:, 2].mean(axis=(1, 2)) > 0.5, 0, k)
        return np.eye(3)[k]

    model = examined_model(CallableClassifier(predict, n_classes=3), ["a", "b", "c"])
    assert worst_recalled(model, images, meta, 2) == ["c", "b"]
    assert examined_classes(1, model, meta, images) == ["c"] and examined_classes(3, model, meta, images)[-1] == "a"
    assert examined_classes(None, model, meta) == ["a", "b", "c"]
    with pytest.raises(ConfigError, match="needs the rendered images"):
        examined_classes(2, model, meta)
