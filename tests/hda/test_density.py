"""weakspot.hda.density (seeds/004 Sec. 3.2): the adaptive KDE over the VAE's codes, on problems whose answer is
known."""

import numpy as np
import pytest
import torch

from weakspot.errors import DataError
from weakspot.hda.density import log_adaptive_kde, train_density

from .conftest import images as _images


def test_adaptive_kde_equals_a_brute_force_gaussian_mixture():
    from scipy.stats import multivariate_normal

    g = np.random.default_rng(0)
    mu = g.normal(size=(40, 3)).astype(np.float32)
    sig = g.uniform(0.2, 1.5, size=(40, 3)).astype(np.float32)
    z = g.normal(size=(25, 3)).astype(np.float32) * 1.5
    ours = log_adaptive_kde(torch.as_tensor(z), torch.as_tensor(mu), torch.as_tensor(sig), batch=7).numpy()
    brute = np.log(np.mean([multivariate_normal(mu[i], np.diag(sig[i] ** 2)).pdf(z) for i in range(40)], axis=0))
    np.testing.assert_allclose(ours, brute, rtol=1e-4, atol=1e-4)


def test_adaptive_kde_rejects_mismatched_shapes_and_zero_bandwidth():
    with pytest.raises(DataError, match="do not match"):
        log_adaptive_kde(torch.zeros(2, 3), torch.zeros(4, 2), torch.ones(4, 2))
    with pytest.raises(DataError, match="bandwidth"):
        log_adaptive_kde(torch.zeros(2, 2), torch.zeros(4, 2), torch.zeros(4, 2))


def test_the_kde_is_densest_where_the_training_data_are():
    g = np.random.default_rng(0)
    X = np.concatenate([_images(300, 0.2, g, 0.03), _images(15, 0.8, g, 0.03)])
    dens = train_density(X, clip=(0.0, 1.0), latent_dim=2, hidden=16, epochs=60, max_steps=1000, batch_size=32, seed=0)
    ld = dens.log_density(np.concatenate([_images(20, 0.2, g, 0.03), _images(20, 0.8, g, 0.03)]))
    assert ld[:20].mean() > ld[20:].mean() + 1.0, (ld[:20].mean(), ld[20:].mean())
