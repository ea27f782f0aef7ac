"""Targets and methods: which method fits which target, decided from params alone, with the reason when not."""

import pytest

from weakspot.errors import ConfigError
from weakspot.targets import METHODS, TargetParams, fits, pairs


def _t(**kw):
    return TargetParams.model_validate(kw)


def test_methods_fit_by_modality_gradients_and_scene():
    digits = _t(data={"source": "digits"}, model={"kind": "builtin", "arch": "lenet"})
    table = _t(data={"source": "csv:x.csv", "label": "y"}, model={"kind": "sklearn", "weights": "m.pkl"})
    scenes = _t(data={"source": "scenes"}, model={"kind": "builtin", "arch": "small_cnn"})
    assert digits.white_box and not table.white_box and scenes.renderable
    assert fits(table)["gad"] is None and "tabular" in fits(digits)["gad"]
    assert fits(scenes)["examine"] is None and "scene" in fits(digits)["examine"]
    assert fits(digits)["corner"] is None and fits(scenes)["corner"] is None
    assert "gradients" in fits(_t(data={"source": "digits"}, model={"kind": "sklearn", "weights": "m.pkl"}))["corner"]
    assert "image" in fits(table)["corner"]
    assert [(p.target, p.method) for p in pairs({"d": digits, "t": table, "s": scenes})] == \
        [("d", "corner"), ("d", "hda"), ("d", "intrinsic"), ("t", "gad"), ("s", "corner"), ("s", "examine"),
         ("s", "hda"), ("s", "intrinsic")]
    # HDA is black-box at its core: it fits an image target whatever its model
    assert fits(_t(data={"source": "digits"}, model={"kind": "sklearn", "weights": "m.pkl"}))["hda"] is None
    assert "image" in fits(table)["hda"]
    assert fits(digits)["intrinsic"] is None and "gradients" in \
        fits(_t(data={"source": "digits"}, model={"kind": "sklearn", "weights": "m.pkl"}))["intrinsic"]


def test_a_target_names_its_own_defences_and_a_bad_name_is_an_error():
    t = _t(data={"source": "digits"}, model={"kind": "builtin", "arch": "lenet"}, defences=[])
    assert t.defences == []
    with pytest.raises(ValueError, match="unknown defence 'minimax'; valid: fgsm_at, minmax"):
        _t(data={"source": "digits"}, defences=["minimax"])


def test_a_users_classifier_of_rendered_objects_is_examined_given_a_class_map():
    t = _t(data={"source": "torchvision:CIFAR10", "root": "x"}, model={"kind": "torch", "factory": "m:f"},
           class_map={"automobile": "can"})
    assert fits(t)["examine"] is None


def test_methods_list_restricts_and_is_checked_against_the_registry():
    t = _t(data={"source": "keel:phoneme"}, model={"kind": "builtin", "arch": "svm_grid"}, methods=[])
    assert "lists methods" in fits(t)["gad"]
    with pytest.raises(ValueError, match="valid names: .*gad"):
        _t(methods=["gadd"])


def test_builtin_arch_is_checked_against_both_registries():
    assert _t(model={"kind": "builtin", "arch": "svm_grid"}).model.arch == "svm_grid"
    with pytest.raises(ValueError, match="valid: .*lenet.*svm_grid"):
        _t(model={"kind": "builtin", "arch": "lenett"})


def test_registered_methods():
    assert {"gad", "examine"} <= set(METHODS.names())
    with pytest.raises(ConfigError):
        METHODS.get("nope")
