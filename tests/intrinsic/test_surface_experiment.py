"""weakspot.intrinsic.surface (decision surfaces, Sec. 3) and weakspot.intrinsic.experiment (the whole method on one
target: psi, attacks, defences' comparison, Table 4, Fig. 6, claims, findings)."""

import json

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from weakspot.intrinsic.config import IntrinsicParams
from weakspot.intrinsic.experiment import claims, run_intrinsic, stability_table
from weakspot.intrinsic.psi import max_kl
from weakspot.intrinsic.surface import DIRECTIONS, decision_surfaces


def _linear(w0, w1, b=(0.0, 0.0)):
    m = torch.nn.Linear(len(w0), 2)
    with torch.no_grad():
        m.weight.copy_(torch.tensor(np.array([w0, w1]), dtype=torch.float32))
        m.bias.copy_(torch.tensor(b, dtype=torch.float32))
    return m.eval()


def test_surface_of_a_linear_model_crosses_the_boundary_where_the_algebra_says():
    """Two-class linear model: along the FGSM sign direction g falls by ||w_1 - w_0||_1 per unit, so on the a = 0
    column the boundary g = 0 is at b* = g(x) / ||w_1 - w_0||_1; g at the centre is the logit margin."""
    rng = np.random.default_rng(0)
    w0, w1 = rng.normal(size=6), rng.normal(size=6)
    m = _linear(w0, w1)
    x = rng.uniform(0.3, 0.7, 6).astype(np.float32)
    z = m(torch.as_tensor(x[None])).detach().numpy()[0]
    y = int(np.argmax(z))
    g0 = z[y] - z[1 - y]
    bstar = g0 / np.abs(w1 - w0).sum()
    eps = bstar / 1.5  # the boundary lies inside the plotted span (2 eps), outside the eps square
    surf = decision_surfaces(m, x, y, eps=eps, grid=201, span=2.0, seed=0)
    assert [s.direction for s in surf] == list(DIRECTIONS)
    fg = surf[1]
    c = len(fg.a) // 2
    assert fg.a[c] == pytest.approx(0.0, abs=1e-6)
    assert fg.g[c, c] == pytest.approx(g0, rel=1e-4)
    col = fg.g[:, c]
    cross = fg.b[np.flatnonzero(col <= 0)]
    assert cross.size and cross.min() == pytest.approx(bstar, abs=(fg.b[1] - fg.b[0]) * 1.01)
    # the C&W direction of a two-class linear model is the same sign vector
    np.testing.assert_allclose(surf[3].g, fg.g, rtol=1e-5, atol=1e-5)
    # Fig. 2's arrows: the FGSM direction is the steepest L-inf descent of g, so any other sign direction (the random
    # one) crosses the boundary no nearer (|dw . r| <= ||dw||_1)
    assert fg.boundary_distance() == pytest.approx(bstar, abs=(fg.b[1] - fg.b[0]) * 1.01)
    assert surf[0].boundary_distance() >= fg.boundary_distance()


def test_max_kl_respects_the_floor_bound():
    """With probabilities floored at f inside the logs, KL(p || q) <= log(1 / f) (and the ascent reaches the floor on
    a model whose logits it can push to the extreme)."""
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(5, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4)).eval()
    X = np.random.default_rng(1).uniform(0, 1, (64, 5)).astype(np.float32)
    for f in (1e-3, 1e-2):
        k = max_kl(net, X, eps=0.5, steps=30, floor=f).kl
        assert k.max() <= np.log(1 / f) + 1e-6
    assert max_kl(net, X, eps=0.5, steps=30, floor=1e-3).kl.mean() < max_kl(net, X, eps=0.5, steps=30, floor=1e-9).kl.mean()


def test_stability_spread_shrinks_with_the_batch_and_is_corrected_for_the_pool():
    kl = np.random.default_rng(0).lognormal(0, 1, 2000)
    t = stability_table(kl, [50, 200, 1000, 2000], draws=40, seed=0)
    assert list(t["batch_size"]) == [50, 200, 1000]  # the pool's own size is no sample
    assert t["relative_std"].is_monotonic_decreasing
    assert (t["relative_std"] > t["relative_std_in_pool"]).all()
    # ~1/sqrt(b): from 50 to 200 inputs the spread roughly halves
    assert 1.4 < t["relative_std"].iloc[0] / t["relative_std"].iloc[1] < 2.9


@pytest.fixture(scope="module")
def trained():
    """A LeNet-like CNN on 8x8 digits and its PGD-trained twin (same init, same data), a few seconds each."""
    from sklearn.datasets import load_digits

    from weakspot.adversarial.defences import train_defence
    from weakspot.models.archs import ARCHS
    from weakspot.models.train import train_torch_classifier

    X, y = load_digits(return_X_y=True)
    X = (X / 16.0).astype(np.float32).reshape(-1, 1, 8, 8)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        torch.manual_seed(0)
        base = ARCHS.get("lenet")((1, 8, 8), 10)
        import copy

        init = copy.deepcopy(base.state_dict())
        train_torch_classifier(base, X[:1200], y[:1200], epochs=12, lr=3e-3, batch_size=64, seed=0, device="cpu")
        mm = ARCHS.get("lenet")((1, 8, 8), 10)
        mm.load_state_dict(init)
        mm, _ = train_defence("minmax", mm, X[:1200], y[:1200], eps=0.15, epochs=12, lr=3e-3, batch_size=64, seed=0,
                              options={"steps": 3})
    finally:
        torch.set_num_threads(threads)
    return {"none": base.eval(), "minmax": mm.eval()}, X[1200:], y[1200:]


def _params(**kw):
    base = dict(n_inputs=120, n_attack=60, pgd_steps=10, cw_steps=10, psi={"steps": 10}, batch_size=60,
                autoattack={"enabled": False}, reparam={"n_inputs": 40, "factors": [100.0, 0.01]},
                stability={"batch_sizes": [20, 60], "draws": 5, "pool": 120}, surface={"n_inputs": 1, "grid": 9},
                max_findings=3)
    base.update(kw)
    return IntrinsicParams.model_validate(base)


def test_run_intrinsic_on_a_planted_robust_model(trained):
    """The PGD-trained twin is the planted robust model: larger psi and higher CW accuracy than the natural one, the
    normalised psi of Table 4 does not move under rescaling while softmax psi does, the metrics follow the schema
    and a rerun gives identical numbers."""
    models, X, y = trained
    classes = [str(c) for c in range(10)]
    res, found = run_intrinsic(models, X, y, classes, _params(), eps=0.15, clip=(0.0, 1.0), n_test=len(X))
    m = res.metrics
    for name in ("none", "minmax"):
        assert {"psi", "psi_softmax", "clean_acc", "fgsm_acc", "pgd30_acc", "cw30_acc"} <= set(m[name])
    assert m["minmax"]["psi"] > 1.3 * m["none"]["psi"]
    assert m["minmax"]["cw30_acc"] > m["none"]["cw30_acc"] + 0.2
    assert m["claims"]["minmax_largest_psi"] is True
    r = m["reparam"]["none"]
    assert {"x1", "x100", "x0.01", "softmax_x1", "softmax_x100", "softmax_x0.01"} <= set(r)
    assert abs(r["x100"] / r["x1"] - 1) < 0.01 and abs(r["x0.01"] / r["x1"] - 1) < 0.01
    assert r["softmax_x0.01"] / r["softmax_x100"] > 10
    assert set(found["kind"]) == {"threat_model", "class", "input"} or set(found["kind"]) == {"threat_model", "input"}
    assert found.iloc[0]["kind"] == "threat_model" and found.iloc[0]["severity"] == pytest.approx(1 - min(
        m["none"][k] for k in ("fgsm_acc", "pgd30_acc", "cw30_acc")))
    res.check()
    assert "surface_0" in res.figures and {"defences", "claims", "reparam", "stability"} <= set(res.tables)
    again, _ = run_intrinsic(models, X, y, classes, _params(), eps=0.15, clip=(0.0, 1.0), n_test=len(X))
    assert json.dumps(again.metrics, sort_keys=True) == json.dumps(m, sort_keys=True)


def test_claims_say_not_tested_without_the_models():
    t, out = claims({})
    assert len(t) == 0 and out == {}
