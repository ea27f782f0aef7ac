"""weakspot.intrinsic.stability: Fig. 6, psi over random batches of the same size."""

import numpy as np

from weakspot.intrinsic.psi import psi
from weakspot.intrinsic.stability import COLUMNS, stability_table


def test_stability_spread_shrinks_with_the_batch_and_is_corrected_for_the_pool():
    kl = np.random.default_rng(0).lognormal(0, 1, 2000)
    t = stability_table(kl, [50, 200, 1000, 2000], draws=40, seed=0)
    assert list(t["batch_size"]) == [50, 200, 1000]  # the pool's own size is no sample
    assert t["relative_std"].is_monotonic_decreasing
    assert (t["relative_std"] > t["relative_std_in_pool"]).all()
    # ~1/sqrt(b): from 50 to 200 inputs the spread roughly halves
    assert 1.4 < t["relative_std"].iloc[0] / t["relative_std"].iloc[1] < 2.9
    # the known answer (the delta method): psi = 1 / mean KL of b inputs drawn without replacement from N has a
    # relative spread of CV(KL) / sqrt(b) x sqrt((N - b) / (N - 1)); 40 draws estimate it within about a quarter
    cv = kl.std() / kl.mean()
    expected = cv / np.sqrt(t["batch_size"]) * np.sqrt((2000 - t["batch_size"]) / 1999.0)
    assert ((t["relative_std_in_pool"] / expected).between(0.7, 1.3)).all(), (t, expected)
    # the correction is the finite-population factor sqrt((N - b) / (N - 1))
    np.testing.assert_allclose(
        t["relative_std_in_pool"] / t["relative_std"], np.sqrt((2000 - t["batch_size"]) / 1999.0)
    )


def test_a_constant_pool_has_no_spread_and_the_table_is_seeded():
    t = stability_table(np.full(300, 0.25), [10, 100], draws=5, seed=3)
    assert list(t.columns) == COLUMNS and (t["psi_mean"] == psi(np.full(300, 0.25))).all()
    assert (t["relative_std"] == 0).all() and (t["max_relative_deviation"] == 0).all()
    kl = np.random.default_rng(1).exponential(size=400)
    a, b = stability_table(kl, [40], 6, seed=1), stability_table(kl, [40], 6, seed=1)
    assert a.equals(b) and not a.equals(stability_table(kl, [40], 6, seed=2))


def test_no_batch_smaller_than_the_pool_gives_an_empty_table_with_the_columns():
    t = stability_table(np.ones(10), [10, 50], draws=3, seed=0)
    assert len(t) == 0 and list(t.columns) == COLUMNS
