"""weakspot.robustness: the robustness curve on a model whose curve is known exactly (its decision depends on one
pixel, so PGD at eps flips exactly the inputs within eps of the boundary), its metrics, table, DVC plot declaration
and a planted fragile class confirmed against a random control."""

import numpy as np
import pytest
import torch

from weakspot import methods
from weakspot.data.dataset import Dataset
from weakspot.errors import DataError
from weakspot.robustness.config import RobustnessParams, grid
from weakspot.robustness.report import eps_half, metrics, report
from weakspot.robustness.run import run
from weakspot.runtime import Runtime

CLASSES = ["dark", "bright"]


class Pixel0(torch.nn.Module):
    """Class 1 when pixel 0 is above 0.5: logit(1) - logit(0) = 20 (x_0 - 0.5)."""

    def forward(self, x):
        d = 20.0 * (x.reshape(len(x), -1)[:, 0] - 0.5)
        return torch.stack([-d / 2, d / 2], 1)


class _Model:
    outputs = "logits"

    def __init__(self):
        self.module = Pixel0()


def _target(dist, y):
    """Inputs of 8x8 grey pixels; pixel 0 at 0.5 -+ ``dist`` (class 0 below, class 1 above); pixel 63 at 0 and 1 so
    the data's range is [0, 1]."""
    X = np.full((len(y), 1, 8, 8), 0.5, np.float32)
    X[:, 0, 0, 0] = np.where(y == 1, 0.5 + dist, 0.5 - dist)
    X[:, 0, 7, 7] = np.where(np.arange(len(y)) % 2 == 0, 0.0, 1.0)
    ds = Dataset(X=X, y=y, classes=CLASSES)
    return methods.AuditTarget(name="toy", model=_Model(), classes=CLASSES, test=ds, val=ds.subset(np.arange(0)))


def test_the_curve_is_the_known_one_and_its_metrics_follow():
    g = np.random.default_rng(0)
    y = np.arange(400) % 2
    dist = g.uniform(0.001, 0.4, 400).astype(np.float32)
    p = RobustnessParams(eps=[0.0, 0.05, 0.1, 0.2, 0.3], n_inputs=400, pgd_steps=10)
    res = run(_target(dist, y), p, Runtime(device="cpu"))
    expected = [(dist > e).mean() for e in [0.0, 0.05, 0.1, 0.2, 0.3]]  # flipped iff within eps of the boundary
    np.testing.assert_allclose(res.accuracy("pgd"), expected, atol=0.01)
    m = metrics(res)
    assert m["clean_accuracy"] == 1.0 and m["n_inputs"] == 400 and m["pgd"]["accuracy"][0] == 1.0
    assert all(lo <= a <= hi for a, (lo, hi) in zip(m["pgd"]["accuracy"], m["pgd"]["interval"]))
    assert m["eps_half_pgd"] == pytest.approx(0.2, abs=0.02)  # half the inputs lie within 0.2 of the boundary
    assert m["focal_eps"] == 0.2 and "autoattack" not in m  # where about half the inputs still hold
    out = report(res, p, _target(dist, y))
    t = out.section.tables["curve"]
    assert list(t["eps"]) == [0.0, 0.05, 0.1, 0.2, 0.3] and {"clean", "pgd", "pgd lo", "pgd hi"} <= set(t.columns)
    assert out.section.headline[0].startswith("Robustness curve: clean accuracy 100.0% on 400 test inputs")


def test_a_fragile_class_is_confirmed_against_the_other_classes():
    y = np.arange(400) % 2
    dist = np.where(y == 1, 0.05, 0.35).astype(np.float32)  # every bright input within 0.1 of the boundary
    p = RobustnessParams(eps=[0.0, 0.1, 0.2], n_inputs=400, pgd_steps=10)
    f = report(run(_target(dist, y), p, Runtime(device="cpu")), p, _target(dist, y)).findings
    assert list(f["label"]) == ["bright"] and bool(f["confirmed"].iloc[0]) and f["lift"].iloc[0] > 1.5
    assert "against the other classes' inputs it gets right" in f["confirmation"].iloc[0]


def test_grid_defaults_errors_and_the_dvc_plot():
    assert grid(RobustnessParams(), 1)[-1] == 0.3 and grid(RobustnessParams(), 3)[-1] == pytest.approx(8 / 255)
    with pytest.raises(ValueError, match="increasing"):
        RobustnessParams(eps=[0.1, 0.0])
    assert eps_half([0.0, 0.1], np.array([1.0, 0.9])) is None
    m = methods.get("robustness")
    from ops.engine.pipeline import method_plots

    assert (
        m.white_box
        and m.modalities == ("image",)
        and method_plots("robustness") == (("curve", "eps", ("clean", "pgd")),)
    )
    X = np.zeros((4, 8), np.float32)
    flat = methods.AuditTarget(
        name="flat", model=_Model(), classes=CLASSES, test=Dataset(X=X, y=np.zeros(4, int), classes=CLASSES)
    )
    with pytest.raises(DataError, match="images"):
        run(flat, RobustnessParams(), Runtime(device="cpu"))


def test_dvc_yaml_declares_the_curve_of_every_white_box_image_target():
    import yaml

    from ops.engine.pipeline import dvc_yaml
    from weakspot.config import read_yaml
    from tasks.closure import ROOT

    plots = yaml.safe_load(dvc_yaml(read_yaml(ROOT / "params.yaml")))["plots"]
    declared = {k: v for d in plots for k, v in d.items()}
    assert declared["plots/robustness/digits/curve.csv"] == {"x": "eps", "y": ["clean", "pgd"]}
    assert "plots/robustness/scenes/curve.csv" in declared and "plots/robustness/phoneme/curve.csv" not in declared


def test_depth_study_turns_autoattack_on_and_finds_what_the_audit_finds(monkeypatch):
    """issue 49: the audit runs PGD as configured (AutoAttack off by default), the study AutoAttack too at every eps;
    PGD's points and the findings (chosen and confirmed on PGD's failures) are the same at both depths."""
    import weakspot.adversarial.art_attacks as art

    y = np.arange(200) % 2
    dist = np.where(y == 1, 0.05, 0.35).astype(np.float32)
    calls = []
    real = art.art_autoattack
    monkeypatch.setattr(art, "art_autoattack", lambda *a, **k: calls.append(k["eps"]) or real(*a, **k))
    out = {}
    for depth in ("audit", "study"):
        p = RobustnessParams(eps=[0.0, 0.1, 0.2], n_inputs=200, pgd_steps=10, autoattack_iters=2, depth=depth)
        res = run(_target(dist, y), p, Runtime(device="cpu"))
        out[depth] = (res, report(res, p, _target(dist, y)))
    assert calls == [0.1, 0.2]  # only the study ran AutoAttack, at every eps > 0
    (a, ra), (s, rs) = out["audit"], out["study"]
    assert set(a.correct) == {"clean", "pgd"} and set(s.correct) == {"clean", "pgd", "autoattack"}
    assert (a.correct["pgd"] == s.correct["pgd"]).all()
    import pandas as pd

    pd.testing.assert_frame_equal(ra.findings, rs.findings)
    assert list(ra.findings["label"]) == ["bright"]
    m, ms = ra.section.metrics, rs.section.metrics
    assert m["depth"] == "audit" and ms["depth"] == "study"
    assert set(m) < set(ms) and all(m[k] == ms[k] for k in m if k != "depth")
    assert "Depth: audit — PGD at every eps; `robustness.depth: study` adds AutoAttack" in ra.section.summary[0]
    assert "Depth: study — PGD and AutoAttack at every eps" in rs.section.summary[0]
    assert RobustnessParams(autoattack=True).runs_autoattack and not RobustnessParams().runs_autoattack


def test_depth_is_set_per_target():
    from weakspot.config import validate_section

    data = {"robustness": {"per_target": {"digits": {"depth": "study"}}}}
    assert validate_section("robustness", data, target="digits").runs_autoattack
    assert not validate_section("robustness", data, target="scenes").runs_autoattack
