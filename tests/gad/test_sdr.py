import numpy as np
import pytest

from weakspot.errors import DataError
from weakspot.gad.sdr import mean_ci95, reliability, sdr, sdr_curve


def test_sdr_of_a_hand_made_query_set():
    errors = np.array([1, 0, 1, 0])
    conf = np.array([0.9, 0.8, 0.7, 0.6])
    # expected errors 0.1, 0.3, 0.6, 1.0; found 1, 1, 2, 2
    np.testing.assert_allclose(sdr_curve(errors, conf), [10.0, 1 / 0.3, 2 / 0.6, 2.0])
    assert sdr(errors, conf) == pytest.approx(2.0)
    batch = sdr_curve(np.stack([errors, 1 - errors]), np.stack([conf, conf]))
    np.testing.assert_allclose(batch[1], [0.0, 1 / 0.3, 1 / 0.6, 2.0])


def test_confidence_one_gives_nan_not_inf_and_bad_input():
    assert np.isnan(sdr_curve(np.array([1]), np.array([1.0]))[0])
    with pytest.raises(DataError, match="0/1"):
        sdr_curve(np.array([2]), np.array([0.7]))
    with pytest.raises(DataError, match=r"\[0, 1\]"):
        sdr_curve(np.array([1]), np.array([1.7]))


def test_mean_ci95_known_values():
    v = np.array([1.0, 2.0, 3.0, 4.0, 5.0])
    m, lo, hi = mean_ci95(v)
    half = 2.7764451051977987 * np.std(v, ddof=1) / np.sqrt(5)  # t_{0.975, 4}
    assert m == 3.0 and lo == pytest.approx(3 - half) and hi == pytest.approx(3 + half)


def test_reliability_bins():
    conf = np.array([0.55, 0.56, 0.95, 0.97])
    correct = np.array([1, 0, 1, 1])
    r = reliability(conf, correct, bins=5)
    assert r["count"].tolist() == [2, 0, 0, 0, 2]
    assert r["accuracy"][0] == 0.5 and r["accuracy"][4] == 1.0
