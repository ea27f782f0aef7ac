import hashlib
from types import SimpleNamespace

import numpy as np
import pytest

from weakspot.corner.autoencoder import Generator
from weakspot.corner.config import CornerParams
from weakspot.corner.generator import generator_bytes
from weakspot.corner.run import CornerResult, corner_cases, corner_flags, draw_seeds, run
from weakspot.errors import ConfigError, DataError
from weakspot.runtime import Runtime

from .conftest import TINY, RecordingRuntime, toy_target


def test_run_returns_the_search_and_its_measurements(toy_run):
    params, res, _ = toy_run
    assert isinstance(res, CornerResult) and res.latent_dim == 2 and not res.use_discriminator
    assert res.search.n == 24 and res.n_train == 128
    assert np.median(res.search.margin_after) < np.median(res.search.margin_before)
    f = res.flags
    assert (f["corner"] == (f["near"] & f["realistic"])).all()
    assert (f["realistic"] == (f["kde_ok"] & f["disc_ok"])).all()
    assert f["disc_ok"].all()  # no discriminator: realism is the KDE's alone
    assert f["corner"].any()  # the boundary (mean 0.5) runs through the data: corner cases exist
    # the labels are the model's own rule, so it is right on every training image
    assert res.accuracy_on_training_images == 1.0 and 0 <= res.accuracy_on_reconstructions <= 1
    assert res.nearest_train_before.shape == res.nearest_train_after.shape == (24,)
    assert (res.nearest_train_after >= 0).all()
    assert list(res.seconds) == ["generator", "search", "fgsm_and_distances", "paper_lr", "judge"]


def test_the_generator_is_one_cached_call_named_by_the_call_alone(toy_run, toy):
    """Its key names which call it is; what the generator depends on (the training images, the params, the code) is
    the stage's identity, from which the pipeline derives the cache key (tasks/identity.py). The report still names
    the pixels it was trained on."""
    params, res, rt = toy_run
    [(fn, key)] = rt.calls
    X = np.ascontiguousarray(toy.train.X, np.float32)
    pixels = hashlib.sha256(str(X.shape).encode() + X.tobytes()).hexdigest()
    assert fn is generator_bytes and key == {"call": "generator"}
    assert res.generator_info["pixels"] == pixels and res.generator_info["training_seconds"] > 0

    class Stop(Exception):
        pass

    class KeyOnly(RecordingRuntime):
        def cached(self, fn, *args, key, label="", **kw):
            self.calls.append((fn, key))
            raise Stop

    other = toy_target(toy.model, toy.train.X, 1 - toy.train.y, ["a", "b"], name="other")
    keys = []
    for t in (toy, other):
        krt = KeyOnly()
        with pytest.raises(Stop):
            run(t, params, krt)
        keys.append(krt.calls[0][1])
    assert keys[0] == keys[1] == key


def test_the_same_params_give_the_same_corner_cases(toy_run, toy):
    params, res, _ = toy_run
    again = run(toy, params, Runtime(device="cpu"))
    np.testing.assert_array_equal(again.search.final, res.search.final)
    np.testing.assert_array_equal(again.search.images_after, res.search.images_after)
    for k in res.flags:
        np.testing.assert_array_equal(again.flags[k], res.flags[k])
    assert again.accuracy_on_reconstructions == res.accuracy_on_reconstructions


def test_a_generator_handed_back_by_the_cache_gives_the_same_result(toy_run, toy):
    params, res, _ = toy_run
    X, y = np.asarray(toy.train.X, np.float32), np.asarray(toy.train.y)
    g = Generator.from_bytes(res.generator.to_bytes())
    again = corner_cases(toy.model, X, y, g, params)
    np.testing.assert_array_equal(again.search.prob_margin_after, res.search.prob_margin_after)
    with pytest.raises(ConfigError, match="does not match"):
        corner_cases(toy.model, X, y, g, params.model_copy(update={"latent_dim": 3}))


def test_wrong_inputs_are_refused_before_the_generator_is_trained(toy):
    X, y = toy.train.X, toy.train.y
    for target, kind in (
        (toy_target(toy.model, X.reshape(len(X), -1), y, ["a", "b"]), DataError),
        (toy_target(toy.model, X * 3, y, ["a", "b"]), DataError),
        (toy_target(toy.model, X, y % 3, ["a", "b", "c"]), ConfigError),
    ):
        rt = RecordingRuntime()
        with pytest.raises(kind):
            run(target, CornerParams(**TINY), rt)
        assert rt.calls == []


def test_seeds_come_from_the_codes_and_the_params_seed(toy_run):
    params, res, _ = toy_run
    g, dens = res.generator, res.density
    a, b = draw_seeds(g, dens, params), draw_seeds(g, dens, params)
    np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(a, res.search.seeds)  # the search started from these
    assert not np.array_equal(a, draw_seeds(g, dens, params.model_copy(update={"seed": 1})))
    many = draw_seeds(g, dens, params.model_copy(update={"n_seeds": 4000, "seed_source": "gaussian"}))
    assert many.shape == (4000, 2)
    np.testing.assert_allclose(many.mean(0), g.codes.mean(0), atol=0.1)  # standardised codes: mean 0, sd 1
    np.testing.assert_allclose(many.std(0), g.codes.std(0), rtol=0.1)


def test_corner_flags_on_known_margins_densities_and_discriminator_logits():
    search = SimpleNamespace(
        prob_margin_after=np.array([0.01, 0.5, 0.02, 0.03]),
        prob_margin_before=np.array([0.9, 0.01, 0.9, 0.9]),
        log_density_after=np.array([0.0, 0.0, -10.0, 0.0]),
        log_density_before=np.array([-10.0, 0.0, 0.0, 0.0]),
        disc_after=np.array([1.0, 1.0, 1.0, -1.0]),
    )
    dens = SimpleNamespace(threshold=-1.0)
    p = CornerParams(boundary_margin=0.05)
    f = corner_flags(search, dens, p, use_disc=False)
    assert f["near"].tolist() == [True, False, True, True]
    assert f["kde_ok"].tolist() == [True, True, False, True]
    assert f["corner"].tolist() == [True, False, False, True]
    assert f["near_before"].tolist() == [False, True, False, False]
    assert f["realistic_before"].tolist() == [False, True, True, True]
    f = corner_flags(search, dens, p, use_disc=True)  # the discriminator now vetoes the last seed
    assert f["disc_ok"].tolist() == [True, True, True, False]
    assert f["corner"].tolist() == [True, False, False, False]
