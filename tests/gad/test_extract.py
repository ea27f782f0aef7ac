import numpy as np
import pytest

from weakspot.errors import DataError
from weakspot.gad.extract import extract_pseudo_model, latin_hypercube, r2_score

from .conftest import LinearLogistic, black_box


def test_lhs_hits_each_stratum_exactly_once():
    lo, hi, n = np.array([-2.0, 0.0, 10.0]), np.array([2.0, 1.0, 30.0]), 97
    pts = latin_hypercube(lo, hi, n, seed=4)
    assert pts.shape == (n, 3) and (pts >= lo).all() and (pts <= hi).all()
    strata = np.floor((pts - lo) / (hi - lo) * n).astype(int)
    for j in range(3):
        assert sorted(strata[:, j].tolist()) == list(range(n))
    np.testing.assert_array_equal(pts, latin_hypercube(lo, hi, n, seed=4))
    assert not np.array_equal(pts, latin_hypercube(lo, hi, n, seed=5))


def test_pseudo_model_learns_a_logistic_black_box_and_is_deterministic():
    rng = np.random.default_rng(0)
    X = rng.uniform(-1, 1, size=(200, 2))
    bb = black_box(LinearLogistic([3.0, -2.0], 0.5))
    kw = dict(n_points=4000, epochs=8, hidden=32, batch_size=128, lr=3e-3, seed=1, device="cpu")
    e1 = extract_pseudo_model(bb, X, **kw)
    assert e1.r2_design > 0.97 and e1.r2_eval > 0.97
    e2 = extract_pseudo_model(bb, X, **kw)
    np.testing.assert_array_equal(e1.confidence(X), e2.confidence(X))


def test_nan_in_evaluation_data_is_rejected():
    X = np.array([[0.0, 1.0], [np.nan, 2.0], [1.0, 0.0]])
    with pytest.raises(DataError, match="NaN"):
        extract_pseudo_model(black_box(LinearLogistic([1.0, 1.0])), X, n_points=100, epochs=1, device="cpu")


def test_r2_known_values():
    y = np.array([1.0, 2.0, 3.0, 4.0])
    assert r2_score(y, y) == 1.0
    assert r2_score(y, np.full(4, 2.5)) == 0.0
