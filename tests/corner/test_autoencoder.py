import numpy as np
import pytest
import torch

from weakspot.corner.autoencoder import train_autoencoder
from weakspot.corner.autoencoder import ConvAutoencoder
from weakspot.errors import DataError

from .conftest import intensity_images, tiny_ae_kwargs


@pytest.mark.parametrize("shape", [(1, 8, 8), (3, 32, 32), (1, 28, 28), (3, 10, 12)])
def test_four_conv_layers_each_side_any_size(shape):
    ae = ConvAutoencoder(shape, latent_dim=3)
    convs = (
        [m for m in ae.encoder if isinstance(m, torch.nn.Conv2d)],
        [m for m in ae.decoder if isinstance(m, torch.nn.Conv2d)],
    )
    assert len(convs[0]) == len(convs[1]) == 4  # Sec. 4.2
    x = torch.rand(2, *shape)
    assert ae.encode(x).shape == (2, 3)
    out = ae(x)
    assert out.shape == x.shape and float(out.detach().min()) >= 0 and float(out.detach().max()) <= 1


def test_training_learns_and_is_deterministic(wide_generator):
    X, g = wide_generator
    assert g.history["loss"][-1] < 0.25 * g.history["loss"][0]
    # standardised codes
    np.testing.assert_allclose(g.codes.mean(0), 0, atol=1e-4)
    np.testing.assert_allclose(g.codes.std(0, ddof=1), 1, atol=1e-3)
    # the code tracks intensity: reconstructions keep the mean intensity
    r = g.reconstruct_np(X)
    assert np.abs(r.mean((1, 2, 3)) - X.mean((1, 2, 3))).mean() < 0.05
    g2 = train_autoencoder(X[:64], **tiny_ae_kwargs(epochs=2))
    g3 = train_autoencoder(X[:64], **tiny_ae_kwargs(epochs=2))
    g4 = train_autoencoder(X[:64], **tiny_ae_kwargs(epochs=2, seed=1))
    np.testing.assert_array_equal(g2.codes, g3.codes)
    assert not np.array_equal(g2.codes, g4.codes)


def test_max_steps_caps_epochs():
    X = intensity_images(64, [(0.1, 0.9)])
    g = train_autoencoder(X, **tiny_ae_kwargs(epochs=50, batch_size=32), max_steps=6)
    assert g.history["epochs"] == 3 and len(g.history["loss"]) == 3


def test_bad_images_are_refused():
    with pytest.raises(DataError):
        train_autoencoder(np.zeros((10, 8, 8), np.float32))


def test_the_generator_survives_bytes(wide_generator):
    from weakspot.corner.autoencoder import Generator
    from weakspot.errors import DataError

    X, g = wide_generator
    h = Generator.from_bytes(g.to_bytes())
    s = g.codes[:5]
    np.testing.assert_array_equal(h.decode_np(s), g.decode_np(s))
    np.testing.assert_array_equal(h.codes, g.codes)
    assert h.history["loss"] == g.history["loss"] and h.discriminator is None
    assert not any(p.requires_grad for p in h.ae.parameters())
    with pytest.raises(DataError, match="not a saved corner-case generator"):
        Generator.from_bytes(b"garbage")
