"""weakspot.evidence: one test and one bound that agree on every count, a disjoint control, Benjamini-Hochberg over a
family, and the test's size measured exactly (by enumeration) on null regions."""

import itertools

import numpy as np
import pytest
from scipy.stats import binom

from weakspot.evidence import ALPHA, FDR, MIN_CONFIRM, bound, compare, correct, on_masks, p_value


@pytest.mark.parametrize(
    "counts",
    [
        (26, 26, 26, 26),
        (5, 5, 3, 5),
        (40, 40, 39, 40),
        (24, 24, 23, 24),
        (9, 9, 6, 9),
        (11, 11, 8, 11),
        (6, 6, 6, 6),
        (3, 5, 0, 5),
    ],
)
def test_the_cases_a_score_interval_confirmed_are_not_confirmed(counts):
    """Issue 34's regression cases: every input inside failing (or nearly all in the control too) made a score
    interval's lower end pass 1 whatever its own p-value said."""
    e = compare(*counts)
    assert not e.confirmed
    assert e.lift_lo <= 1.0 and e.p_value >= ALPHA


def _grid():
    for n, m in [(5, 5), (6, 40), (12, 12), (20, 300)]:
        for f in sorted({0, 1, n // 3, n // 2, n - 1, n}):
            for c in sorted({0, 1, m // 10, m // 3, m - 1, m}):
                yield f, n, c, m


@pytest.mark.parametrize("f,n,c,m", list(_grid()))
def test_the_decision_is_the_bounds_and_the_bounds_hold_the_lift(f, n, c, m):
    e = compare(f, n, c, m)
    assert (e.lift_lo > 1.0) == (e.p_value < ALPHA)
    assert 0.0 <= e.lift_lo <= e.lift_hi
    if f and c:  # the point lift (a zero control counted as half a failure is not the bounds' business)
        assert e.lift_lo <= e.lift <= e.lift_hi
    for alpha in (0.01, 0.2):
        assert (bound(f, n, c, m, alpha) > 1.0) == (p_value(f, n, c, m) < alpha)


def test_more_failures_inside_never_weaken_the_evidence_and_more_in_the_control_never_strengthen_it():
    for n, m in [(8, 8), (10, 60)]:
        for c in range(0, m + 1, max(1, m // 6)):
            ps = [p_value(f, n, c, m) for f in range(n + 1)]
            los = [bound(f, n, c, m) for f in range(n + 1)]
            assert all(a >= b - 1e-12 for a, b in zip(ps, ps[1:]))
            assert all(a <= b + 1e-9 for a, b in zip(los, los[1:]))
        for f in range(0, n + 1, 2):
            ps = [p_value(f, n, c, m) for c in range(m + 1)]
            assert all(a <= b + 1e-12 for a, b in zip(ps, ps[1:]))


@pytest.mark.parametrize("n,m,rate", [(5, 200, 0.05), (10, 200, 0.05), (20, 200, 0.2), (50, 500, 0.05), (12, 12, 0.5)])
def test_a_null_region_is_confirmed_at_most_alpha_of_the_time(n, m, rate):
    """The test's size, exactly: every count inside and in the control weighted by its binomial probability when
    both fail at the same ``rate``. A score test reached 9% here at 5% (5 inputs, 5% errors)."""
    size = sum(
        binom.pmf(f, n, rate) * binom.pmf(c, m, rate)
        for f, c in itertools.product(range(n + 1), range(m + 1))
        if binom.pmf(f, n, rate) * binom.pmf(c, m, rate) > 1e-12 and p_value(f, n, c, m) < ALPHA
    )  # the bound agrees (the test above)
    assert size <= ALPHA


def test_the_control_is_the_regions_complement_and_needs_no_seed():
    fails = np.array([1, 1, 1, 0, 0, 0, 1, 0, 0, 0], bool)
    inside = np.array([1, 1, 1, 1, 0, 0, 0, 0, 0, 0], bool)
    e = on_masks(fails, inside)
    assert (e.failures, e.n_confirm, e.control_failures, e.n_control) == (3, 4, 1, 6)
    pool = np.array([1, 1, 1, 1, 1, 1, 1, 0, 0, 0], bool)
    e = on_masks(fails, inside, control=pool)
    assert (e.control_failures, e.n_control) == (1, 3)


def test_benjamini_hochberg_confirms_what_survives_the_family_and_the_adjusted_bound_agrees():
    rng = np.random.default_rng(0)
    real = [compare(30, 60, 30, 600)] * 3  # lift 10
    null = [compare(int(rng.binomial(40, 0.1)), 40, 60, 600) for _ in range(37)]
    fam = correct(real + null)
    assert all(e.family == 40 for e in fam)
    assert all(e.confirmed for e in fam[:3])
    for e in fam:
        assert e.p_adjusted >= e.p_value
        assert (e.p_adjusted <= FDR) == e.confirmed == (e.lift_lo_adjusted > 1.0)
        assert e.lift_lo_adjusted <= e.lift_lo + 1e-12
    # one borderline candidate alone is confirmed; among 40 candidates it is not
    edge = compare(9, 40, 60, 600)  # p 0.02
    assert edge.confirmed and edge.p_value > FDR / 40
    assert not correct([edge] + null)[0].confirmed


def test_a_candidate_with_too_few_inputs_counts_in_the_family_but_is_never_confirmed():
    tiny = compare(MIN_CONFIRM - 1, MIN_CONFIRM - 1, 0, 500)
    fam = correct([tiny, compare(30, 60, 30, 600)])
    assert fam[0].family == 2 and not fam[0].confirmed and fam[1].confirmed
    assert correct([compare(0, 0, 0, 0)])[0].family == 1  # nothing measured: not a candidate
