import numpy as np
import pytest

from weakspot.errors import DataError
from weakspot.gad.loess import gad_scores, loess_fit


def test_loess_recovers_a_smooth_curve():
    rng = np.random.default_rng(0)
    x = np.sort(rng.uniform(0.65, 1.0, 400))
    truth = 2.0 - 3.0 * (x - 0.65) + 4.0 * (x - 0.8) ** 2
    fit = loess_fit(x, truth + rng.normal(0, 0.1, x.size), frac=0.3)
    assert np.sqrt(np.mean((fit - truth) ** 2)) < 0.03


def test_gad_is_the_residual_and_finds_the_planted_close_point():
    x = np.linspace(0.66, 0.99, 101)
    d = np.exp(3 * x)  # distance grows with confidence: log-MAE is linear, which LOESS reproduces exactly
    d[40] *= 0.2  # one instance flips with a fifth of the expected distance
    g = gad_scores(x, d, log=True, frac=0.5, iterations=3)
    assert int(np.argmin(g)) == 40 and g[40] < np.log(0.2) * 0.9
    np.testing.assert_allclose(np.delete(g, 40), 0.0, atol=0.02)
    # without the log, GAD is in MAE units
    assert int(np.argmin(gad_scores(x, d, log=False, frac=0.5, iterations=3))) == 40


def test_bad_input():
    with pytest.raises(DataError, match="equal length"):
        loess_fit(np.arange(5.0), np.arange(4.0))
    with pytest.raises(DataError, match=">= 0"):
        gad_scores(np.linspace(0.7, 0.9, 5), -np.ones(5))


def test_never_flipped_instances_do_not_bend_the_fit_and_come_last():
    x = np.linspace(0.66, 0.99, 60)
    d = np.exp(2 * x)
    censored = d.copy()
    censored[[5, 30]] = 500.0  # the attack gave up: distances are lower bounds
    flipped = np.ones(60, dtype=bool)
    flipped[[5, 30]] = False
    g = gad_scores(x, censored, log=False, frac=0.5, iterations=0, flipped=flipped)
    assert np.isinf(g[[5, 30]]).all()
    ref = gad_scores(np.delete(x, [5, 30]), np.delete(d, [5, 30]), log=False, frac=0.5)
    np.testing.assert_allclose(np.delete(g, [5, 30]), ref)
