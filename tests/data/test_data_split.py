"""weakspot.data.split: stratified, deterministic, disjoint, complete."""

from __future__ import annotations

import numpy as np
import pytest

from weakspot.data import split_dataset
from weakspot.errors import ConfigError, DataError

FRACTIONS = (0.7, 0.15, 0.15)


def _labels():
    # unbalanced classes with sizes that do not divide evenly: 101, 37, 9, 2, 1
    return np.repeat(np.arange(5), [101, 37, 9, 2, 1])[np.random.default_rng(3).permutation(150)]


def test_disjoint_and_covering():
    y = _labels()
    parts = split_dataset(y, seed=0)
    assert set(parts) == {"train", "val", "test"}
    allidx = np.concatenate(list(parts.values()))
    assert len(allidx) == len(y) and np.array_equal(np.sort(allidx), np.arange(len(y)))
    for v in parts.values():
        assert v.dtype == np.int64 and np.all(np.diff(v) > 0)


@pytest.mark.parametrize("fractions", [FRACTIONS, (0.5, 0.3, 0.2), (0.34, 0.33, 0.33)])
def test_stratified_within_one_sample_per_class(fractions):
    y = _labels()
    parts = split_dataset(y, fractions=fractions, seed=1)
    for c in np.unique(y):
        n_c = int((y == c).sum())
        for f, name in zip(fractions, ("train", "val", "test")):
            got = int((y[parts[name]] == c).sum())
            assert abs(got - f * n_c) < 1.0, (c, name, got, f * n_c)


def test_deterministic_for_a_seed_and_different_across_seeds():
    y = _labels()
    a, b, c = split_dataset(y, seed=7), split_dataset(y, seed=7), split_dataset(y, seed=8)
    assert all(np.array_equal(a[k], b[k]) for k in a)
    assert not np.array_equal(a["test"], c["test"])


def test_string_labels_work_like_codes():
    codes = _labels()
    names = np.array(["c%d" % v for v in codes])
    a, b = split_dataset(codes, seed=2), split_dataset(names, seed=2)
    assert all(np.array_equal(a[k], b[k]) for k in a)


def test_docstring_example_counts():
    parts = split_dataset(np.array([0] * 10 + [1] * 10), seed=0)
    assert [len(parts[k]) for k in ("train", "val", "test")] == [14, 4, 2]


@pytest.mark.parametrize("bad", [(0.7, 0.3), (0.8, 0.15, 0.15), (1.0, 0.0, 0.0), (0.7, -0.1, 0.4), ("a", 0, 0)])
def test_bad_fractions_are_config_errors(bad):
    with pytest.raises(ConfigError, match="fractions"):
        split_dataset(np.zeros(10, int), fractions=bad, seed=0)


def test_bad_labels_and_seed():
    with pytest.raises(DataError, match="1-D"):
        split_dataset(np.zeros((3, 2)), seed=0)
    with pytest.raises(ConfigError, match="seed"):
        split_dataset(np.zeros(10, int), seed=1.5)
