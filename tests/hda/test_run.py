"""weakspot.hda.run: HDA's entry point on an AuditTarget, black-box and white-box, through the generic run_method."""

import io
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from weakspot import methods
from weakspot.data.dataset import Dataset
from weakspot.errors import DataError
from weakspot.hda.config import HdaParams
from weakspot.hda.generate import module_proba
from weakspot.hda.run import run
from weakspot.runtime import Runtime

from .conftest import CLASSES, TINY, toy_data


class _BlackBox:
    """A classifier that answers probabilities only (no torch module)."""

    def __init__(self, net):
        self.pf = module_proba(net)

    def predict_proba(self, X):
        return self.pf(torch.as_tensor(np.asarray(X, np.float32))).numpy()


class _WhiteBox(_BlackBox):
    """A classifier with its torch module (answering logits): the white-box parts run."""

    outputs = "logits"

    def __init__(self, net):
        super().__init__(net)
        self.module = net


def _target(model, X, y):
    def ds(a, b):
        return Dataset(X=X[a:b], y=y[a:b], classes=CLASSES)

    return methods.AuditTarget(
        name="toy", model=model, classes=CLASSES, test=ds(500, 600), val=ds(400, 500), train=ds(0, 400)
    )


def test_a_black_box_run_is_the_audit_of_its_arrays_and_repeats_exactly(toy):
    from weakspot.hda.report import metrics

    X, y = toy["data"]
    p = toy["black"][1]
    first = run(_target(_BlackBox(toy["black"][2]), X, y), p, Runtime(device="cpu"))
    assert not first.white_box and first.adversarial_info == {} and first.clip == (0.0, 1.0)
    assert metrics(first, p) == metrics(toy["black"][0], p)  # run() = audit() on the target's splits
    again = run(_target(_BlackBox(toy["black"][2]), X, y), p, Runtime(device="cpu"))
    assert metrics(again, p) == metrics(first, p)


def test_the_method_runs_white_box_through_its_entry_points(toy):
    X, y = toy["data"]
    net = toy["white"][2]
    p = HdaParams.model_validate({**TINY, "adversarial_model": False})
    out = methods.run_method("hda", _target(_WhiteBox(net), X, y), p, Runtime(device="cpu"))
    sec = out.section
    assert sec.title.endswith("(toy)") and set(sec.figures) == {"landscape", "aes", "ga_curve", "indicators", "samples"}
    assert "table8" in sec.tables and list(sec.metrics["adversarial_model"]) == ["normal"]  # no min-max model asked
    assert out.repaired["spec"]["repaired_by"].startswith("hda") and set(out.lineage) == {"seconds"}
    state = torch.load(io.BytesIO(out.repaired["state_dict"]))
    assert set(state) == set(net.state_dict()) and all(v.shape == net.state_dict()[k].shape for k, v in state.items())
    import matplotlib.pyplot as plt

    plt.close("all")


@pytest.mark.parametrize("depth", ["audit", "study"])
def test_the_adversarially_trained_model_is_trained_at_depth_study_only(monkeypatch, depth):
    """RQ3's min-max model (the intrinsic stage's, trained through ``runtime``) is the study's: at depth audit
    ``run`` never asks for it."""
    import weakspot.adversarial.defended as defended
    import weakspot.hda.run as hda_run

    asked = []

    def fake_defended(target, names, section, runtime):
        asked.append(names)
        return {"minmax": torch.nn.Identity()}, {"minmax": {"label": "min-max"}}, 0.1

    def fake_audit(*args, **kw):
        return SimpleNamespace(adversarial=kw["adversarial"])

    monkeypatch.setattr(defended, "defended_models", fake_defended)
    monkeypatch.setattr(hda_run, "audit", fake_audit)
    X, y = toy_data()
    p = HdaParams.model_validate({**TINY, "depth": depth})
    out = run(_target(_WhiteBox(toy_net_stub()), X, y), p, Runtime(device="cpu", sections={"intrinsic": None}))
    assert asked == ([] if depth == "audit" else [["minmax"]])
    assert (out.adversarial is None) == (depth == "audit") and (out.adversarial_info == {}) == (depth == "audit")


def toy_net_stub():
    """A linear model of the toy's images (untrained: ``run`` only wires it up here)."""
    return torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(64, 3)).eval()


def test_inputs_that_are_not_finite_are_a_data_error():
    X, y = toy_data()
    X = X.copy()
    X[450, 0, 0, 0] = np.nan
    with pytest.raises(DataError, match="toy: the val inputs hold NaN"):
        run(_target(_BlackBox(torch.nn.Identity()), X, y), HdaParams(), Runtime(device="cpu"))
