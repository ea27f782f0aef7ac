"""Shared by the intrinsic and adversarial tests: a small model trained on sklearn's 8x8 digits in a fraction of a
second, and the method's settings scaled down for tests."""

import numpy as np
import torch
import torch.nn.functional as F

from weakspot.intrinsic.config import IntrinsicParams


def digits_net(seed: int = 0, steps: int = 200):
    """A small ReLU MLP (64-32-10) on sklearn's 8x8 digits in [0, 1], trained in a fraction of a second."""
    from sklearn.datasets import load_digits

    X, y = load_digits(return_X_y=True)
    X = (X / 16.0).astype(np.float32)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # module fixtures run outside conftest's one-thread fixture; tiny ops only spin-wait
    try:
        torch.manual_seed(seed)
        net = torch.nn.Sequential(torch.nn.Linear(64, 32), torch.nn.ReLU(), torch.nn.Linear(32, 10))
        opt = torch.optim.Adam(net.parameters(), lr=1e-2)
        Xt, yt = torch.as_tensor(X[:1200]), torch.as_tensor(y[:1200])
        for _ in range(steps):
            opt.zero_grad()
            F.cross_entropy(net(Xt), yt).backward()
            opt.step()
    finally:
        torch.set_num_threads(threads)
    net.zero_grad(set_to_none=True)
    return net.eval(), X[1200:], y[1200:]


def small_params(**kw):
    """The method's settings scaled down to a few seconds on the fixture's models."""
    base = dict(
        n_inputs=120,
        n_attack=60,
        pgd_steps=10,
        cw_steps=10,
        psi={"steps": 10},
        batch_size=60,
        autoattack={"enabled": False},
        reparam={"n_inputs": 40, "factors": [100.0, 0.01]},
        stability={"batch_sizes": [20, 60], "draws": 5, "pool": 120},
        surface={"n_inputs": 1, "grid": 9},
        max_findings=3,
    )
    base.update(kw)
    return IntrinsicParams.model_validate(base)
