import numpy as np
import pytest

from weakspot.corner.config import CornerParams
from weakspot.corner.generator import GENERATOR_KEYS, check_generator, check_images, generator_params, train_generator
from weakspot.errors import ConfigError, DataError

from .conftest import intensity_images

FAST = dict(channels=[8, 8, 8, 8], hidden=16, epochs=3, batch_size=32)


def test_the_generator_key_is_exactly_the_generator_params():
    assert set(GENERATOR_KEYS) <= set(CornerParams.model_fields)
    p = CornerParams(**FAST)
    assert set(generator_params(p)) == set(GENERATOR_KEYS)
    # the search's and the report's params do not retrain the generator; the generator's own do
    assert generator_params(p.model_copy(update={"steps": 7, "n_seeds": 3, "fgsm_eps": 0.1})) == generator_params(p)
    assert generator_params(p.model_copy(update={"epochs": 4})) != generator_params(p)


def test_grey_images_get_a_2d_code_without_discriminator_and_training_is_deterministic():
    X = intensity_images(64, [(0.1, 0.9)], seed=0)
    a, b = train_generator(X, FAST), train_generator(X, CornerParams(**FAST))
    assert a.latent_dim == 2 and a.discriminator is None  # Sec. 4.1: MNIST in 2-D, no discriminator
    np.testing.assert_array_equal(a.codes, b.codes)
    c = train_generator(X, {**FAST, "seed": 1})
    assert not np.array_equal(a.codes, c.codes)


def test_rgb_images_get_an_8d_code_and_a_discriminator():
    rng = np.random.default_rng(0)
    X = rng.uniform(0, 1, size=(16, 3, 8, 8)).astype(np.float32)
    g = train_generator(X, {**FAST, "epochs": 1, "disc_epochs": 1})
    assert g.latent_dim == 8 and g.discriminator is not None and "disc_accuracy" in g.history
    check_generator(g, X.shape[1:], CornerParams(**FAST))
    with pytest.raises(ConfigError, match="does not match"):
        check_generator(g, X.shape[1:], CornerParams(**FAST, discriminator=False))


def test_a_generator_that_does_not_fit_the_data_or_params_is_refused():
    X = intensity_images(32, [(0.1, 0.9)], seed=0)
    g = train_generator(X, {**FAST, "epochs": 1})
    check_generator(g, X.shape[1:], CornerParams(**FAST))
    with pytest.raises(ConfigError, match="does not match"):
        check_generator(g, X.shape[1:], CornerParams(**FAST, latent_dim=3))
    with pytest.raises(ConfigError, match=r"\(1, 16, 16\)"):
        check_generator(g, (1, 16, 16), CornerParams(**FAST))


@pytest.mark.parametrize("shape", [(10, 64), (10, 2, 8, 8), (10, 1, 8)])
def test_non_images_are_refused_with_their_shape(shape):
    with pytest.raises(DataError, match=str(shape).replace("(", r"\(").replace(")", r"\)")):
        check_images(np.zeros(shape, np.float32))
    with pytest.raises(DataError):
        train_generator(np.zeros(shape, np.float32), FAST)
