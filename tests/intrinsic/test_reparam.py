"""weakspot.intrinsic.reparam: Table 4's row of one model (psi and eps-sharpness under last-layer rescaling)."""

import numpy as np
import torch

from weakspot.intrinsic.reparam import factor_key, reparam_row
from tests.intrinsic.helpers import digits_net, small_params


def test_normalised_psi_stays_softmax_psi_and_sharpness_move_and_the_model_is_left_alone():
    net, X, y = digits_net()
    before = [p.detach().clone() for p in net.parameters()]
    p = small_params(reparam={"factors": [100.0, 0.01]})
    r = reparam_row(net, X[:60], y[:60], eps=0.1, clip=(0.0, 1.0), params=p)
    keys = [factor_key(f) for f in (1.0, 100.0, 0.01)]
    assert keys == ["x1", "x100", "x0.01"]
    assert set(r) == {pre + k for pre in ("", "softmax_", "sharpness_") for k in keys}
    for k in ("x100", "x0.01"):
        assert abs(r[k] / r["x1"] - 1) < 0.01, r  # Eq. 5 is scale invariant
    assert r["softmax_x0.01"] / r["softmax_x100"] > 10, r  # smaller logits, flatter softmax, larger psi
    assert r["sharpness_x100"] > r["sharpness_x1"] > r["sharpness_x0.01"] >= 0, r
    assert all(torch.equal(a, b) for a, b in zip(before, net.parameters()))
    assert r == reparam_row(net, X[:60], y[:60], eps=0.1, clip=(0.0, 1.0), params=p)  # seeded
    assert np.isfinite(list(r.values())).all()
