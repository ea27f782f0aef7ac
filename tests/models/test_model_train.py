"""weakspot.models.train and archs: LeNet shapes, determinism, and the digits accuracy bar."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from weakspot.data import load_source, split_dataset
from weakspot.errors import ConfigError, DataError
from weakspot.metrics import accuracy
from weakspot.models import MLP, LeNet, TorchClassifier, train_torch_classifier


@pytest.mark.parametrize("c, s", [(1, 8), (1, 28), (3, 32), (2, 5)])
def test_lenet_output_shape(c, s):
    out = LeNet(in_channels=c, n_classes=7, image_size=s)(torch.zeros(3, c, s, s))
    assert out.shape == (3, 7)


def test_lenet_rejects_bad_sizes():
    with pytest.raises(ConfigError, match="image_size"):
        LeNet(image_size=3)
    with pytest.raises(ConfigError, match="channels"):
        LeNet(channels=(6,))


def _blobs(n=200, seed=0):
    rng = np.random.default_rng(seed)
    y = np.arange(n) % 2
    X = (rng.normal(size=(n, 2)) + np.where(y[:, None] == 1, 2.0, -2.0)).astype(np.float32)
    return X, y


def test_training_is_deterministic_for_a_seed():
    X, y = _blobs()

    def run(seed):
        torch.manual_seed(0)
        m = MLP(2, 2, hidden=(8,))
        h = train_torch_classifier(m, X, y, epochs=3, lr=1e-2, batch_size=32, seed=seed, device="cpu")
        return h, [p.detach().clone() for p in m.parameters()]

    (h1, w1), (h2, w2), (_, w3) = run(5), run(5), run(6)
    assert h1["train_loss"] == h2["train_loss"] and np.isnan(h1["val_accuracy"]).all()
    assert all(torch.equal(a, b) for a, b in zip(w1, w2))
    assert not all(torch.equal(a, b) for a, b in zip(w1, w3))  # the seed orders the batches


def test_training_learns_separable_blobs_and_reports_progress():
    X, y = _blobs()
    calls = []
    torch.manual_seed(0)
    m = MLP(2, 2, hidden=(8,))
    rng_before = torch.get_rng_state()
    h = train_torch_classifier(
        m,
        X[:150],
        y[:150],
        X_val=X[150:],
        y_val=y[150:],
        epochs=5,
        lr=5e-2,
        batch_size=32,
        seed=0,
        device="cpu",
        progress=lambda *a: calls.append(a),
    )
    assert torch.equal(torch.get_rng_state(), rng_before)  # the global RNG is left alone
    assert [c[1:] for c in calls] == [(e, 5) for e in range(1, 6)]  # progress(what, done, total)
    assert calls[0][0].startswith("epoch (loss ") and "val acc" in calls[0][0]
    assert h["epoch"] == [1, 2, 3, 4, 5] and len(h["val_accuracy"]) == 5 and h["steps"] == [5, 10, 15, 20, 25]
    assert all(len(v) == 5 for v in h.values()) and np.all(np.diff(h["seconds"]) >= 0)
    assert h["val_accuracy"][-1] >= 0.95 and h["train_loss"][-1] < h["train_loss"][0]
    assert not m.training


def test_training_rejects_bad_arguments():
    X, y = _blobs(10)
    m = MLP(2, 2)
    with pytest.raises(ConfigError, match="epochs"):
        train_torch_classifier(m, X, y, epochs=0, lr=1e-3, batch_size=4, seed=0, device="cpu")
    with pytest.raises(ConfigError, match="lr"):
        train_torch_classifier(m, X, y, epochs=1, lr=-1.0, batch_size=4, seed=0, device="cpu")
    with pytest.raises(DataError, match=r"y \(9,\)"):
        train_torch_classifier(m, X, y[:9], epochs=1, lr=1e-3, batch_size=4, seed=0, device="cpu")
    with pytest.raises(ConfigError, match="X_val and y_val"):
        train_torch_classifier(m, X, y, X_val=X, epochs=1, lr=1e-3, batch_size=4, seed=0, device="cpu")


def test_lenet_on_digits_reaches_095_test_accuracy():
    """The pipeline's default target model (slowest test here: about 10-20 s on one busy CPU core)."""
    ds = load_source("digits")
    parts = split_dataset(ds.y, seed=0)
    tr, va, te = (ds.subset(parts[k]) for k in ("train", "val", "test"))
    torch.manual_seed(0)
    net = LeNet(in_channels=1, n_classes=10, image_size=8)
    h = train_torch_classifier(
        net, tr.X, tr.y, X_val=va.X, y_val=va.y, epochs=30, lr=3e-3, batch_size=64, seed=0, device="cpu"
    )
    p = TorchClassifier(net, n_classes=10, device="cpu").predict_proba(te.X)
    assert accuracy(p, te.y) >= 0.95
    assert h["val_accuracy"][-1] >= 0.95
