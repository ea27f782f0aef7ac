"""Fixtures shared by the intrinsic tests: a LeNet-like CNN on 8x8 digits and its PGD-trained twin (the planted robust
model), and the method's measurements of both (a few seconds each, once per session)."""

import copy

import numpy as np
import pytest
import torch

from tests.intrinsic.helpers import small_params


@pytest.fixture(scope="session")
def trained():
    """``({"none": natural, "minmax": PGD-trained twin}, X_test, y_test)``: same init, same data, 12 epochs each."""
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
        init = copy.deepcopy(base.state_dict())
        train_torch_classifier(base, X[:1200], y[:1200], epochs=12, lr=3e-3, batch_size=64, seed=0, device="cpu")
        mm = ARCHS.get("lenet")((1, 8, 8), 10)
        mm.load_state_dict(init)
        mm, _ = train_defence(
            "minmax", mm, X[:1200], y[:1200], eps=0.15, epochs=12, lr=3e-3, batch_size=64, seed=0, options={"steps": 3}
        )
    finally:
        torch.set_num_threads(threads)
    return {"none": base.eval(), "minmax": mm.eval()}, X[1200:], y[1200:]


@pytest.fixture(scope="session")
def measured(trained):
    """:func:`weakspot.intrinsic.run.measure` of the two models at eps 0.15 (the digits pipeline's), at depth study
    (the defended model, Table 4 and Fig. 6 are the study's)."""
    from weakspot.intrinsic.run import measure

    models, X, y = trained
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return measure(
            models,
            X,
            y,
            [str(c) for c in range(10)],
            small_params(depth="study"),
            eps=0.15,
            clip=(0.0, 1.0),
            n_test=len(X),
            defence_info={"minmax": {"label": "PGD-3 min-max (eps 0.15)"}},
        )
    finally:
        torch.set_num_threads(threads)
