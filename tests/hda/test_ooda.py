"""weakspot.hda.ooda: the validity threshold of Table 7 and OODA, on a VAE of real digits: held-out digits pass at the
calibrated rate, noise does not."""

import numpy as np
import pytest

from weakspot.errors import DataError
from weakspot.hda.density import train_density
from weakspot.hda.ooda import calibrate


def test_held_out_digits_pass_and_noise_fails():
    from sklearn.datasets import load_digits

    d = load_digits()
    X = (d.images / 16.0).astype(np.float32)[:, None]
    dens = train_density(X[:1000], clip=(0.0, 1.0), latent_dim=8, epochs=30, max_steps=600, seed=0)
    v = calibrate(dens, X[1000:1400], quantile=0.05, samples=4, seed=0)
    assert v.n_reference == 400 and v.quantile == 0.05
    assert v(X[1000:1400]).mean() == pytest.approx(0.95, abs=0.01)  # the calibration set: by construction
    assert v(X[1400:]).mean() > 0.85  # other held-out digits: near the calibrated rate
    noise = np.random.default_rng(0).random((200, 1, 8, 8)).astype(np.float32)
    assert v(noise).mean() < 0.05
    assert v(X[:0]).shape == (0,)
    with pytest.raises(DataError, match="at least 2"):
        calibrate(dens, X[:1])
