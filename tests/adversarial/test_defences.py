"""weakspot.adversarial.defences and the loss hook of weakspot.models.train: each defence against natural training of
the same MLP (same seed, epochs, lr) on 8x8 digits in [0, 1], the losses on known answers, errors, determinism."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from weakspot.device import single_thread
from weakspot.errors import ConfigError, DataError
from weakspot.adversarial.attacks import fgsm, input_grad, pgd, predict
from weakspot.adversarial.defences import (
    DEFENCES,
    defence_options,
    fgsm_at_loss,
    gradreg_loss,
    soft_label_loss,
    temperature_loss,
    train_defence,
)
from weakspot.models import MLP, train_torch_classifier
from weakspot.models.archs import ARCHS

EPS = 0.1  # L-inf radius on digits scaled to [0, 1] (pixel values 0..16 / 16)
EPOCHS, LR, BATCH, SEED = 40, 1e-2, 64, 0


@pytest.fixture(scope="module")
def digits():
    from sklearn.datasets import load_digits

    d = load_digits()
    X, y = (d.data / 16.0).astype(np.float32), d.target.astype(np.int64)
    p = np.random.default_rng(0).permutation(len(X))
    return X[p[:1200]], y[p[:1200]], X[p[1200:]], y[p[1200:]]


def _mlp(seed=SEED):
    torch.manual_seed(seed)
    return MLP(64, 10, hidden=(64, 32))


def _scores(module, X, y):
    """Clean, FGSM, PGD-20 (CE) and PGD-20 (CW) accuracy at EPS; CE input-gradient norms; max |logit|."""
    module.eval()
    x, t = torch.as_tensor(X), torch.as_tensor(y)

    def acc(xa):
        with torch.no_grad():
            return float((module(xa).argmax(1) == t).float().mean())

    g = input_grad(module, x, t).flatten(1).norm(dim=1)
    with torch.no_grad():
        zmax = float(module(x).abs().max())
    return {
        "clean": float((predict(module, X) == y).mean()),
        "fgsm": acc(fgsm(module, x, t, eps=EPS)),
        "pgd": acc(pgd(module, x, t, eps=EPS, steps=20, generator=torch.Generator().manual_seed(0))),
        "cw": acc(pgd(module, x, t, eps=EPS, steps=20, loss="cw", generator=torch.Generator().manual_seed(0))),
        "grad_sq": float(g.pow(2).mean()),
        "grad_median": float(g.median()),
        "grad_zero": float((g == 0).float().mean()),
        "max_logit": zmax,
    }


@pytest.fixture(scope="module")
def natural(digits):
    Xtr, ytr, Xte, yte = digits
    m = _mlp()
    with single_thread("cpu"):  # module fixtures run before conftest's per-test one-thread fixture
        train_torch_classifier(m, Xtr, ytr, epochs=EPOCHS, lr=LR, batch_size=BATCH, seed=SEED, device="cpu")
        return _scores(m, Xte, yte)


@pytest.fixture(scope="module")
def defended(digits):
    """name -> (scores on the test split, info); each defence trained once, from the same initial weights."""
    Xtr, ytr, Xte, yte = digits
    cache = {}

    def get(name):
        if name not in cache:
            m, info = train_defence(name, _mlp(), Xtr, ytr, eps=EPS, epochs=EPOCHS, lr=LR, batch_size=BATCH, seed=SEED)
            cache[name] = (_scores(m, Xte, yte), info)
        return cache[name]

    return get


# ---------------------------------------------------------------- the loss hook of train_torch_classifier


def _tiny_images(n=70, seed=0):
    rng = np.random.default_rng(seed)
    return rng.uniform(size=(n, 3, 8, 8)).astype(np.float32), rng.integers(0, 3, n)


def _train_small_cnn(**kw):
    X, y = _tiny_images()
    torch.manual_seed(1)
    m = ARCHS.get("small_cnn")((3, 8, 8), 3)
    h = train_torch_classifier(
        m, X, y, epochs=2, lr=1e-2, batch_size=16, seed=3, device="cpu", augment="hflip", lr_schedule="cosine", **kw
    )
    return h, [t.detach().clone() for t in m.state_dict().values()]


def test_loss_fn_none_and_an_explicit_cross_entropy_train_exactly_as_before():
    (h0, w0), (h1, w1) = _train_small_cnn(), _train_small_cnn(loss_fn=None)

    def ce(module, xb, yb, gen):
        out = module(xb)
        return F.cross_entropy(out, yb), out

    h2, w2 = _train_small_cnn(loss_fn=ce)  # the hook adds no draw from the generator, no extra forward pass
    assert all(torch.equal(a, b) for a, b in zip(w0, w1)) and all(torch.equal(a, b) for a, b in zip(w0, w2))
    assert h0["train_loss"] == h1["train_loss"] == h2["train_loss"]
    assert h0["train_accuracy"] == h2["train_accuracy"]


def test_loss_fn_contract_is_checked():
    X, y = _tiny_images(20)
    with pytest.raises(ConfigError, match="loss_fn = 3 is not callable"):
        train_torch_classifier(MLP(192, 3), X, y, epochs=1, lr=1e-3, batch_size=8, seed=0, device="cpu", loss_fn=3)

    def per_row(module, xb, yb, gen):
        out = module(xb)
        return F.cross_entropy(out, yb, reduction="none"), out

    with pytest.raises(ConfigError, match=r"scalar loss tensor.*got loss \(8,\)"):
        train_torch_classifier(
            MLP(192, 3), X.reshape(20, -1), y, epochs=1, lr=1e-3, batch_size=8, seed=0, device="cpu", loss_fn=per_row
        )


def test_attacks_are_crafted_in_eval_mode_so_batch_norm_sees_one_update_per_step():
    rng = np.random.default_rng(0)
    X, y = rng.uniform(size=(100, 4)).astype(np.float32), rng.integers(0, 2, 100)
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.BatchNorm1d(8), torch.nn.ReLU(), torch.nn.Linear(8, 2))
    _, info = train_defence("minmax", m, X, y, eps=0.1, epochs=1, lr=1e-2, batch_size=32, seed=0, options={"steps": 3})
    # 4 optimizer steps (32, 32, 32, 4); the 3 PGD forward passes per step leave the running statistics alone
    assert info["history"]["steps"] == [4] and int(m[1].num_batches_tracked) == 4 and not m.training


# ---------------------------------------------------------------- each defence against natural training


def test_minmax_raises_pgd_accuracy_over_natural_training(natural, defended):
    s, info = defended("minmax")
    assert s["pgd"] >= natural["pgd"] + 0.3, (s, natural)  # seen: 0.83 vs 0.26
    assert s["clean"] >= natural["clean"] - 0.03
    assert info["label"] == f"PGD-7 min-max (eps 0.1, step {2.5 * 0.1 / 7:.4g}, 40 epochs)"
    assert info["settings"]["steps"] == 7 and info["settings"]["step_size"] == pytest.approx(2.5 * 0.1 / 7)


def test_fgsm_at_raises_fgsm_accuracy_over_natural_training(natural, defended):
    s, info = defended("fgsm_at")
    assert s["fgsm"] >= natural["fgsm"] + 0.2, (s, natural)  # seen: 0.77 vs 0.36
    assert s["clean"] >= natural["clean"] - 0.03
    assert {k: info["settings"][k] for k in ("eps", "lam", "fraction")} == {"eps": 0.1, "lam": 0.3, "fraction": 0.5}


def test_gradreg_shrinks_input_gradients_and_raises_pgd_accuracy(natural, defended):
    s, info = defended("gradreg")
    assert s["grad_sq"] <= natural["grad_sq"] / 3, (s, natural)  # the penalised quantity, held out; seen 3 vs 29
    assert s["pgd"] >= natural["pgd"] + 0.15  # seen: 0.50 vs 0.26
    assert s["clean"] >= natural["clean"] - 0.04
    assert info["settings"]["lam"] == 0.1 and "eps" not in info["settings"]


def test_distillation_masks_gradients_without_being_robust(natural, defended):
    s, info = defended("distillation")
    assert s["max_logit"] >= 20 * natural["max_logit"], (s, natural)  # deployed at T = 1: logits ~T times larger
    assert s["clean"] >= natural["clean"] - 0.05  # seen: 0.95 vs 0.975
    # gradient masking: most CE input gradients underflow to exactly 0 (a natural model has none) ...
    assert s["grad_zero"] >= 0.5 and natural["grad_zero"] == 0 and s["grad_median"] < natural["grad_median"]
    # ... so PGD on the cross-entropy fails while PGD on the C&W margin does not (seeds/002 Table 3's pattern)
    assert s["pgd"] >= natural["pgd"] + 0.3 and s["cw"] <= s["pgd"] - 0.4, (s, natural)
    assert len(info["teacher_history"]["epoch"]) == len(info["history"]["epoch"]) == EPOCHS
    assert info["settings"]["temperature"] == 100.0
    assert info["label"] == "defensive distillation (T 100, deployed at T 1, 40 epochs per phase)"


# ---------------------------------------------------------------- the losses on known answers


def test_fgsm_at_loss_weights_clean_and_adversarial_halves_as_kurakin():
    torch.manual_seed(0)
    m = torch.nn.Linear(3, 4)
    x, y = torch.rand(6, 3), torch.tensor([0, 1, 2, 3, 0, 1])
    loss, out = fgsm_at_loss(eps=0.2, lam=0.3, fraction=0.5)(m, x, y, torch.Generator())
    x_adv = fgsm(m, x[:3], y[:3], eps=0.2)
    all_adv, _ = fgsm_at_loss(eps=0.2, lam=0.3, fraction=1.0)(m, x, y, torch.Generator())
    with torch.no_grad():
        ce_adv = F.cross_entropy(m(x_adv), y[:3], reduction="sum")
        ce_clean = F.cross_entropy(m(x[3:]), y[3:], reduction="sum")
        assert float(loss.detach()) == pytest.approx(float((ce_clean + 0.3 * ce_adv) / (3 + 0.3 * 3)), rel=1e-6)
        assert torch.allclose(out, m(torch.cat([x_adv, x[3:]])))
        assert float(all_adv.detach()) == pytest.approx(float(F.cross_entropy(m(fgsm(m, x, y, eps=0.2)), y)), rel=1e-6)


def test_gradreg_loss_matches_the_analytic_gradient_of_a_linear_model():
    torch.manual_seed(0)
    m = torch.nn.Linear(5, 3)
    x, y = torch.rand(4, 5), torch.tensor([0, 1, 2, 1])
    loss, _ = gradreg_loss(lam=2.0)(m, x, y, torch.Generator())
    with torch.no_grad():
        z = m(x)
        g = (F.softmax(z, 1) - F.one_hot(y, 3).float()) @ m.weight  # dCE_i/dx_i = W^T (p_i - e_y)
        expected = F.cross_entropy(z, y) + 2.0 * g.pow(2).sum(1).mean()
    assert float(loss.detach()) == pytest.approx(float(expected), rel=1e-5)
    plain, _ = gradreg_loss(lam=0.0)(m, x, y, torch.Generator())
    assert float(plain.detach()) == pytest.approx(float(F.cross_entropy(z, y)), rel=1e-6)


def test_temperature_losses():
    torch.manual_seed(0)
    m = torch.nn.Linear(5, 3)
    x, y = torch.rand(4, 5), torch.tensor([0, 1, 2, 1])
    z = m(x).detach()
    at_t, _ = temperature_loss(temperature=10.0)(m, x, y, torch.Generator())
    assert float(at_t.detach()) == pytest.approx(float(F.cross_entropy(z / 10, y)), rel=1e-6)
    # a student identical to its teacher: the soft-label loss is the entropy of softmax(z / T)
    soft, out = soft_label_loss(m, temperature=10.0)(m, x, y, torch.Generator())
    p = F.softmax(z / 10, 1)
    assert float(soft.detach()) == pytest.approx(float(-(p * p.log()).sum(1).mean()), rel=1e-5)
    assert torch.equal(out.detach(), z)


# ---------------------------------------------------------------- API: names, options, errors, determinism


def _toy(n=48):
    rng = np.random.default_rng(0)
    X = rng.uniform(size=(n, 2)).astype(np.float32)
    return X, (X[:, 0] > 0.5).astype(np.int64)


def _net(seed=0):
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(2, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))


def test_registry_and_defaults():
    assert DEFENCES.names() == ["distillation", "fgsm_at", "gradreg", "minmax"]
    assert defence_options("fgsm_at") == {"lam": 0.3, "fraction": 0.5}
    assert defence_options("minmax") == {"steps": 7, "step_size": None}
    assert defence_options("gradreg") == {"lam": 0.1}
    assert defence_options("distillation") == {"temperature": 100.0, "warm_start": False}


def test_distillation_warm_start_scales_a_trained_model_to_the_temperature():
    """Fine-tuning a trained model: with warm_start its last layer is scaled by T first, so at temperature T it
    predicts as it did at 1; with a vanishing learning rate the deployed logits are then T times the original."""
    X, y = _toy()
    net = _net()
    with torch.no_grad():
        before = net(torch.as_tensor(X[:20])).clone()
    m, info = train_defence(
        "distillation",
        copy.deepcopy(net),
        X,
        y,
        eps=0.1,
        epochs=1,
        lr=1e-12,
        batch_size=16,
        seed=0,
        options={"temperature": 20.0, "warm_start": True},
    )
    with torch.no_grad():
        after = m(torch.as_tensor(X[:20]))
    torch.testing.assert_close(after, 20.0 * before, rtol=1e-4, atol=1e-4)
    assert info["settings"]["warm_start"] is True and "warm start" in info["label"]


def test_unknown_names_and_options_are_config_errors():
    X, y = _toy()
    kw = dict(eps=0.1, epochs=1, lr=1e-2, batch_size=16, seed=0)
    with pytest.raises(ConfigError, match="unknown defence 'pgd'; valid names: distillation, fgsm_at, gradreg, minmax"):
        train_defence("pgd", _net(), X, y, **kw)
    with pytest.raises(ConfigError, match="unknown option.*'steps'; valid options: lam"):
        train_defence("gradreg", _net(), X, y, options={"steps": 3}, **kw)
    for name, options, match in [
        ("fgsm_at", {"fraction": 1.5}, "fraction = 1.5"),
        ("minmax", {"steps": 0}, "steps"),
        ("minmax", {"step_size": -1.0}, "step_size"),
        ("distillation", {"temperature": 0}, "temperature"),
        ("gradreg", {"lam": -1}, "lam"),
    ]:
        with pytest.raises(ConfigError, match=match):
            train_defence(name, _net(), X, y, options=options, **kw)
    with pytest.raises(ConfigError, match="eps = 0"):
        train_defence("minmax", _net(), X, y, **{**kw, "eps": 0.0})
    with pytest.raises(ConfigError, match="clip"):
        train_defence("minmax", _net(), X, y, clip=(1.0, 0.0), **kw)
    with pytest.raises(DataError, match="outside clip"):
        train_defence("fgsm_at", _net(), X * 2, y, **kw)


@pytest.mark.parametrize("name", ["fgsm_at", "minmax", "gradreg", "distillation"])
def test_the_same_seed_gives_identical_weights(name):
    X, y = _toy()

    def run(seed):
        m, info = train_defence(
            name,
            _net(),
            X,
            y,
            eps=0.1,
            epochs=2,
            lr=1e-2,
            batch_size=16,
            seed=seed,
            options={"steps": 3} if name == "minmax" else None,
        )
        return [p.detach().clone() for p in m.parameters()], info["history"]["train_loss"]

    (w1, l1), (w2, l2), (w3, _) = run(0), run(0), run(1)
    assert all(torch.equal(a, b) for a, b in zip(w1, w2)) and l1 == l2
    assert not all(torch.equal(a, b) for a, b in zip(w1, w3))  # the seed orders the batches (and PGD's starts)


def test_label_settings_and_progress():
    X, y = _toy()
    calls = []
    _, info = train_defence(
        "minmax",
        _net(),
        X,
        y,
        eps=0.3,
        epochs=1,
        lr=1e-2,
        batch_size=16,
        seed=0,
        options={"steps": 3},
        progress=lambda *a: calls.append(a),
    )
    assert info["label"] == "PGD-3 min-max (eps 0.3, step 0.25, 1 epoch)"
    assert info["settings"] == {
        "defence": "minmax",
        "eps": 0.3,
        "steps": 3,
        "step_size": pytest.approx(0.25),
        "random_start": True,
        "loss": "ce",
        "clip": [0.0, 1.0],
        "epochs": 1,
        "lr": 0.01,
        "batch_size": 16,
        "seed": 0,
        "lr_schedule": "constant",
        "augment": None,
        "weight_decay": 0.0,
    }
    assert [c[1:] for c in calls] == [(1, 1)] and calls[0][0].startswith("minmax: epoch (loss ")
    calls.clear()
    _, info = train_defence(
        "distillation",
        _net(),
        X,
        y,
        eps=0.3,
        epochs=2,
        lr=1e-2,
        batch_size=16,
        seed=0,
        options={"temperature": 20},
        progress=lambda *a: calls.append(a),
    )
    assert [c[0].split(":")[0] for c in calls] == ["distillation teacher"] * 2 + ["distillation student"] * 2
    assert info["settings"]["temperature"] == 20.0 and len(info["teacher_history"]["epoch"]) == 2
