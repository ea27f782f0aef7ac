import numpy as np
import pytest

from weakspot.corner.realism import latent_density, total_variation
from weakspot.corner.realism import scott_bandwidth
from weakspot.errors import DataError


def test_kde_matches_sklearn_and_threshold_is_the_leave_one_out_quantile():
    from sklearn.neighbors import KernelDensity

    rng = np.random.default_rng(0)
    codes = rng.standard_normal((300, 2))
    d = latent_density(codes, quantile=0.05)
    assert d.bandwidth == pytest.approx(scott_bandwidth(300, 2)) == pytest.approx(300 ** (-1 / 6))
    z = rng.standard_normal((50, 2)) * 2
    ref = KernelDensity(kernel="gaussian", bandwidth=d.bandwidth).fit(codes).score_samples(z)
    np.testing.assert_allclose(d.score(z), ref, rtol=1e-5, atol=1e-5)
    # leave-one-out: a training code's own score is lower than its in-sample KDE score
    assert np.all(d.train_scores < d.score(codes))
    assert np.mean(d.train_scores >= d.threshold) == pytest.approx(0.95, abs=0.01)
    # far from the codes is not realistic, the mode is
    assert not d.realistic(np.array([[6.0, 6.0]]))[0] and d.realistic(np.zeros((1, 2)))[0]


def test_torch_density_is_differentiable_and_agrees():
    import torch

    codes = np.random.default_rng(1).standard_normal((100, 3))
    d = latent_density(codes, bandwidth=0.4)
    z = torch.zeros(4, 3, requires_grad=True)
    ld = d.log_density_torch(z)
    ld.sum().backward()
    assert z.grad is not None and torch.isfinite(z.grad).all()
    np.testing.assert_allclose(ld.detach().numpy(), d.score(np.zeros((4, 3))), rtol=1e-4)


def test_bad_codes_are_refused():
    with pytest.raises(DataError):
        latent_density(np.zeros((2, 2)))
    with pytest.raises(DataError):
        latent_density(np.full((10, 2), np.nan))


def test_total_variation():
    flat = np.full((1, 1, 4, 4), 0.3)
    checker = (np.indices((4, 4)).sum(0) % 2).astype(float)[None, None]
    assert total_variation(flat)[0] == 0.0
    assert total_variation(checker)[0] == pytest.approx(1.0)
