import numpy as np
import pytest

from weakspot.errors import DataError
from weakspot.gad.distance import mae


def test_mae_known_values_and_scale():
    a = np.array([[0.0, 0.0], [1.0, 2.0]])
    b = np.array([[1.0, -3.0], [1.0, 0.0]])
    np.testing.assert_allclose(mae(a, b), [2.0, 1.0])
    np.testing.assert_allclose(mae(a, b, scale=np.array([1.0, 2.0])), [1.25, 0.5])
    with pytest.raises(DataError, match="one shape"):
        mae(a, b[:1])
