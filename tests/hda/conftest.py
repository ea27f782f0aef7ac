"""Planted toy models and one tiny HDA audit of each kind (white-box with an adversarially trained twin, black-box),
shared by the tests of weakspot.hda (seconds on a CPU)."""

import numpy as np
import pytest
import torch

from weakspot.hda.config import HdaParams

CLASSES = ["a", "b", "c"]
#: the tests of the paper's parts (Tables 3-9, FID, coverage, the fine-tuning) run the study; ``toy_audit`` the default
TINY = {
    "depth": "study",
    "pool": 80,
    "n_seeds": 6,
    "vae": {"epochs": 3, "max_steps": 30},
    "robustness": {"n_balls": 10, "particles": 8, "mh_steps": 1, "log_p_min": -8},
    "ga": {"population": 6, "generations": 5},
    "fid_samples": 40,
    "coverage": {"iterations": 3, "mutants": 4},
    "autoattack_iters": 2,
    "finetune": {"pool": 30, "seeds": 5, "train": 50, "epochs": 1},
    "fid": {"width": 4, "train": 200, "epochs": 1, "bootstrap": 20, "min_aes": 3},
    "ooda": {"samples": 2},
}


class Pixel0(torch.nn.Module):
    """Two classes decided by pixel 0 alone: logit(1) - logit(0) = k (x_0 - 0.5)."""

    def __init__(self, k: float = 20.0):
        super().__init__()
        self.k = k

    def forward(self, x):
        d = self.k * (x.reshape(len(x), -1)[:, 0] - 0.5)
        return torch.stack([-d / 2, d / 2], 1)


def images(n, value, rng, noise=0.0, shape=(1, 4, 4)):
    """``n`` images of one grey ``value`` plus Gaussian ``noise``, clipped to [0, 1]."""
    X = np.full((n, *shape), value, np.float32)
    return np.clip(X + noise * rng.standard_normal(X.shape).astype(np.float32), 0, 1)


def toy_data():
    """600 random 8x8 images in three classes (which half of the image is brighter, and how bright the top is)."""
    g = np.random.default_rng(0)
    X = g.random((600, 1, 8, 8)).astype(np.float32)
    y = (
        (X[:, 0, :, :4].mean(axis=(1, 2)) > X[:, 0, :, 4:].mean(axis=(1, 2))).astype(np.int64)
        + (X[:, 0, :4].mean(axis=(1, 2)) > 0.5)
    ).astype(np.int64)
    return X, y


def toy_net(X, y, seed=0):
    """A small MLP trained for 150 full-batch Adam steps on the first 400 rows."""
    torch.manual_seed(seed)
    net = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(64, 32), torch.nn.ReLU(), torch.nn.Linear(32, 3))
    opt = torch.optim.Adam(net.parameters(), 1e-2)
    for _ in range(150):
        loss = torch.nn.functional.cross_entropy(net(torch.as_tensor(X[:400])), torch.as_tensor(y[:400]))
        opt.zero_grad()
        loss.backward()
        opt.step()
    return net.eval()


def toy_splits(X, y):
    from weakspot.hda.protocol import Splits

    names = [f"test input {i}" for i in range(100)] + [f"validation input {i}" for i in range(100)]
    return Splits(
        (X[:400], y[:400]),
        (X[400:500], y[400:500]),
        (X[500:], y[500:]),
        (np.concatenate([X[500:], X[400:500]]), np.concatenate([y[500:], y[400:500]])),
        names,
    )


@pytest.fixture(scope="package")
def toy():
    """``{"white": (result, params, net, adversarial), "black": (result, params, net, None), "data": (X, y)}``."""
    from weakspot.hda.generate import module_proba
    from weakspot.hda.run import audit

    n = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        X, y = toy_data()
        net, adv = toy_net(X, y, 0), toy_net(X, y, 1)
        p = HdaParams.model_validate(TINY)
        data = toy_splits(X, y)
        white = audit(
            net,
            module_proba(net),
            data,
            CLASSES,
            p,
            radius=0.1,
            clip=(0.0, 1.0),
            adversarial=adv,
            adversarial_label="the twin",
        )
        black = audit(None, module_proba(net), data, CLASSES, p, radius=0.1, clip=(0.0, 1.0))
    finally:
        torch.set_num_threads(n)
    return {"white": (white, p, net, adv), "black": (black, p, net, None), "data": (X, y)}


@pytest.fixture(scope="package")
def toy_audit(toy):
    """The white-box toy audit of ``toy`` at ``hda.depth: audit`` (everything else the same): ``(result, params)``."""
    from weakspot.hda.generate import module_proba
    from weakspot.hda.run import audit

    n = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        X, y = toy["data"]
        net, adv = toy["white"][2:]
        p = HdaParams.model_validate({**TINY, "depth": "audit"})
        result = audit(
            net,
            module_proba(net),
            toy_splits(X, y),
            CLASSES,
            p,
            radius=0.1,
            clip=(0.0, 1.0),
            adversarial=adv,
            adversarial_label="the twin",
        )
    finally:
        torch.set_num_threads(n)
    return result, p
