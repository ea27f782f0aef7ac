"""Targets: what a target is (data + model) and what a method may ask of one, decided from params alone."""

import pytest

from weakspot.methods import fits
from weakspot.targets import TargetParams


def _t(**kw):
    return TargetParams.model_validate(kw)


def test_what_a_target_offers_a_method():
    digits = _t(data={"source": "digits"}, model={"kind": "builtin", "arch": "lenet"})
    table = _t(data={"source": "csv:x.csv", "label": "y"}, model={"kind": "sklearn", "weights": "m.pkl"})
    scenes = _t(data={"source": "scenes"}, model={"kind": "builtin", "arch": "small_cnn"})
    user_net = _t(data={"source": "digits"}, model={"kind": "torch", "factory": "m:f"})
    assert (digits.modality, table.modality, scenes.modality) == ("image", "tabular", "image")
    assert digits.white_box and user_net.white_box and scenes.white_box and not table.white_box
    assert scenes.renderable and not digits.renderable
    assert digits.trains and not table.trains and not user_net.trains


def test_a_users_classifier_of_rendered_objects_is_examined_given_a_class_map():
    t = _t(
        data={"source": "torchvision:CIFAR10", "root": "x"},
        model={"kind": "torch", "factory": "m:f"},
        class_map={"automobile": "can"},
    )
    assert fits(t)["examine"] is None


def test_methods_list_restricts_and_is_checked_against_the_methods():
    t = _t(data={"source": "keel:phoneme"}, model={"kind": "builtin", "arch": "svm_grid"}, methods=[])
    assert all("lists methods" in why for why in fits(t).values())
    with pytest.raises(ValueError, match="unknown method.*'gadd'.*methods: .*gad"):
        _t(methods=["gadd"])


def test_builtin_arch_is_checked_against_both_registries():
    assert _t(model={"kind": "builtin", "arch": "svm_grid"}).model.arch == "svm_grid"
    with pytest.raises(ValueError, match="valid: .*lenet.*svm_grid"):
        _t(model={"kind": "builtin", "arch": "lenett"})
