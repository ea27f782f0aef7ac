import numpy as np
import pytest
import torch

from weakspot.corner.realism import latent_density
from weakspot.corner.search import fgsm_vs_latent, search_corner_cases
from weakspot.errors import ConfigError


def _seeds(g, n=48, seed=0):
    d = latent_density(g.codes)
    return d, d.sample(n, np.random.default_rng(seed))


def test_search_lands_on_the_known_boundary(wide_generator, mean_threshold_clf):
    """MeanThreshold's boundary is mean intensity 0.5, inside the data: the decoded corner cases must sit on it."""
    X, g = wide_generator
    d, seeds = _seeds(g)
    r = search_corner_cases(mean_threshold_clf, g, seeds, steps=50, lr=0.05, density=d, realism_weight=0.0)
    assert r.path.shape == (51, 48, 2) and r.margin_path.shape == (51, 48)
    np.testing.assert_allclose(r.margin_path[0], r.margin_before, rtol=1e-5)
    assert np.median(r.margin_after) < 0.05 * np.median(r.margin_before)
    # the known boundary: mean(x) = 0.5; logit margin = 20 |mean - 0.5|
    dist = np.abs(r.images_after.mean((1, 2, 3)) - 0.5)
    assert np.median(dist) < 0.01 and np.quantile(dist, 0.9) < 0.05
    np.testing.assert_allclose(r.margin_after, 20 * dist, atol=1e-4)
    assert np.median(r.prob_margin_after) < 0.1 and np.median(r.prob_margin_before) > 0.5


def test_an_annealed_step_settles_on_the_boundary_where_a_constant_one_bounces(wide_generator, mean_threshold_clf):
    """The margin is a V around the boundary and Adam's steps keep their size: at a large constant lr the seeds
    cross the boundary back and forth; annealed to 0 they settle on it."""
    X, g = wide_generator
    d, seeds = _seeds(g)
    const = search_corner_cases(mean_threshold_clf, g, seeds, steps=50, lr=0.3, density=d)
    cos = search_corner_cases(mean_threshold_clf, g, seeds, steps=50, lr=0.3, density=d, schedule="cosine")
    assert np.median(cos.margin_after) < 0.2 * np.median(const.margin_after)
    with pytest.raises(ConfigError, match="schedule"):
        search_corner_cases(mean_threshold_clf, g, seeds, steps=2, lr=0.3, density=d, schedule="linear")


def test_paper_learning_rate_moves_seeds_by_at_most_steps_times_lr(wide_generator, mean_threshold_clf):
    X, g = wide_generator
    d, seeds = _seeds(g, n=16)
    r = search_corner_cases(mean_threshold_clf, g, seeds, steps=50, lr=0.001, density=d)
    # Adam moves a coordinate by about lr per step at most
    assert 0.04 < np.abs(r.final - r.seeds).max() <= 50 * 0.001 * 1.1
    assert np.all(r.margin_after <= r.margin_before + 1e-4)


def test_heavy_realism_keeps_seeds_in_the_accepted_region(gap_generator, mean_threshold_clf):
    """The boundary (mean 0.5) lies in the gap between the data's two clusters: hardness alone drags seeds out of
    the region the KDE accepts; a heavy realism weight keeps them in."""
    X, g = gap_generator
    d, seeds = _seeds(g)
    free = search_corner_cases(mean_threshold_clf, g, seeds, steps=50, lr=0.05, density=d, realism_weight=0.0)
    held = search_corner_cases(mean_threshold_clf, g, seeds, steps=50, lr=0.05, density=d, realism_weight=100.0)
    assert np.mean(free.log_density_after >= d.threshold) < 0.3  # the test means something
    assert np.median(np.abs(free.images_after.mean((1, 2, 3)) - 0.5)) < 0.05
    assert np.all(held.log_density_after >= d.threshold - 0.05)
    assert np.mean(held.log_density_after >= d.threshold) >= 0.95
    # and its images stay in the data's clusters, not the gap
    assert np.median(np.abs(held.images_after.mean((1, 2, 3)) - 0.5)) > 0.15


def test_same_seeds_same_corner_cases_and_model_untouched(wide_generator, mean_threshold_clf):
    X, g = wide_generator
    d, seeds = _seeds(g, n=12)
    lin = torch.nn.Linear(64, 2)
    from weakspot.models import TorchClassifier

    clf = TorchClassifier(torch.nn.Sequential(torch.nn.Flatten(), lin), n_classes=2, device="cpu")
    before = [p.detach().clone() for p in clf.module.parameters()]
    a = search_corner_cases(clf, g, seeds, steps=10, lr=0.05, density=d, realism_weight=1.0)
    b = search_corner_cases(clf, g, seeds, steps=10, lr=0.05, density=d, realism_weight=1.0)
    np.testing.assert_array_equal(a.path, b.path)
    np.testing.assert_array_equal(a.images_after, b.images_after)
    for p, q in zip(before, clf.module.parameters()):
        assert torch.equal(p, q) and q.grad is None


def test_fgsm_is_noisier_than_the_latent_step(wide_generator):
    """Sec. 4.5 on a trained toy autoencoder: FGSM (eps 0.25) against a fixed random linear classifier leaves
    sign noise; a latent step of the same length stays on the decoder's manifold."""
    from weakspot.models import TorchClassifier

    X, g = wide_generator
    torch.manual_seed(0)
    module = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(64, 3))
    clf = TorchClassifier(module, n_classes=3, device="cpu")
    _, seeds = _seeds(g, n=32)
    c = fgsm_vs_latent(clf, g, seeds, eps=0.25)
    assert c.fgsm.shape == c.latent.shape == c.images.shape
    assert np.abs(c.fgsm - c.images).max() <= 0.25 + 1e-6 and c.fgsm.min() >= 0 and c.fgsm.max() <= 1
    assert c.tv_fgsm.mean() > 3 * c.tv_latent.mean()
    assert c.manifold_fgsm.mean() > 3 * c.manifold_latent.mean()
    # the latent step is the requested length in latent space
    assert np.abs(c.tv_latent - c.tv).mean() < 0.05


def test_black_box_and_bad_seeds_are_refused(wide_generator):
    from weakspot.models import CallableClassifier

    X, g = wide_generator
    with pytest.raises(ConfigError):
        search_corner_cases(CallableClassifier(lambda x: np.full((len(x), 2), 0.5), n_classes=2), g, np.zeros((2, 2)))
    from weakspot.models import TorchClassifier

    from .conftest import MeanThreshold

    clf = TorchClassifier(MeanThreshold(), n_classes=2, device="cpu")
    with pytest.raises(ConfigError):
        search_corner_cases(clf, g, np.zeros((2, 3)))
    with pytest.raises(ConfigError):
        search_corner_cases(clf, g, np.zeros((2, 2)), realism_weight=1.0)
