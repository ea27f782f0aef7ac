"""weakspot.hda.fid: the Fréchet distance on known answers and the features it is computed on."""

import numpy as np
import pytest
import torch

from weakspot.hda.fid import Featurizer, fid, frechet_distance


def test_frechet_distance_known_answers():
    g = np.random.default_rng(1)
    A = g.normal(size=(4000, 3))
    assert frechet_distance(A, A) == pytest.approx(0.0, abs=1e-6)
    # same covariance, means 2 apart along one axis: FID = 4 (up to sampling error)
    assert frechet_distance(A, A + np.array([2.0, 0, 0])) == pytest.approx(4.0, abs=1e-6)
    B = g.normal(size=(4000, 3)) * 2.0  # sigma 1 vs 2 per axis: 3 * (1 + 4 - 2 * 2) = 3
    assert frechet_distance(A, B) == pytest.approx(3.0, rel=0.15)
    assert np.isnan(frechet_distance(A[:1], B))  # one sample has no covariance


class _Features:
    """A stand-in for the Density: features are the first two pixels, doubled."""

    def features(self, X):
        return 2.0 * np.asarray(X, np.float64).reshape(len(X), -1)[:, :2]


def test_featurizer_reads_the_input_of_the_last_linear_layer():
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(16, 5), torch.nn.Tanh(), torch.nn.Linear(5, 3))
    X = np.random.default_rng(0).random((7, 1, 4, 4)).astype(np.float32)
    feat = Featurizer(net, _Features(), batch=3)
    with torch.no_grad():
        expected = torch.tanh(net[1](torch.as_tensor(X).reshape(7, -1))).numpy()
    np.testing.assert_allclose(feat(X), expected, rtol=1e-6)
    assert feat.name == "the audited model's penultimate layer"
    assert not net[3]._forward_hooks  # the hook is removed after each call


def test_without_a_linear_layer_or_a_model_the_vae_features_serve():
    X = np.random.default_rng(0).random((5, 1, 4, 4)).astype(np.float32)
    for module in (None, torch.nn.Sequential(torch.nn.Conv2d(1, 2, 3), torch.nn.Flatten())):
        feat = Featurizer(module, _Features())
        assert feat.name == "the VAE encoder's hidden layer"
        np.testing.assert_array_equal(feat(X), _Features().features(X))


def test_fid_of_inputs_on_the_features():
    g = np.random.default_rng(2)
    A = g.random((500, 1, 2, 2))
    shifted = A.copy()
    shifted[:, 0, 0, 0] += 0.5  # feature 0 doubled: means 1 apart, same covariance
    assert fid(_Features().features, A, shifted) == pytest.approx(1.0, abs=1e-6)
    assert np.isnan(fid(_Features().features, A[:1], shifted))
