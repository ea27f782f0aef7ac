"""weakspot.evidence: one test and one bound that agree on every count, a disjoint control, Benjamini-Hochberg over a
family, and the test's size measured exactly (by enumeration) on null regions."""

import itertools
from dataclasses import replace

import numpy as np
import pytest
from scipy.stats import binom

from weakspot.evidence import (
    ALPHA,
    FDR,
    MIN_CONFIRM,
    MIN_CONTROL,
    bound,
    compare,
    correct,
    on_masks,
    p_value,
)


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
    """Adjusted p-values pinned by hand (p * m / rank, the running minimum from the largest) and against statsmodels'
    own Benjamini-Hochberg; the adjusted bound agrees with the adjusted p on every candidate."""
    from statsmodels.stats.multitest import multipletests

    raw = [0.01, 0.04, 0.03, 0.20]  # sorted 0.01 0.03 0.04 0.20 -> 0.04 0.06 0.0533 0.20 -> 0.04 0.0533 0.0533 0.20
    fam = correct([replace(compare(10, 50, 2, 50), p_value=q) for q in raw])
    assert [round(e.p_adjusted, 4) for e in fam] == [0.04, 0.0533, 0.0533, 0.2]
    assert [e.p_adjusted for e in fam] == pytest.approx(list(multipletests(raw, method="fdr_bh")[1]))
    assert [e.confirmed for e in fam] == [True, False, False, False] and {e.family for e in fam} == {4}

    rng = np.random.default_rng(0)
    real = [compare(30, 60, 30, 600)] * 3  # lift 10
    null = [compare(int(rng.binomial(40, 0.1)), 40, 60, 600) for _ in range(37)]
    fam = correct(real + null)
    ps = [e.p_value for e in real + null]
    assert [e.p_adjusted for e in fam] == pytest.approx(list(multipletests(ps, method="fdr_bh")[1]))
    assert all(e.family == 40 for e in fam) and [e.confirmed for e in fam].count(True) == 3
    assert all(e.confirmed for e in fam[:3])
    for e in fam:
        assert (e.p_adjusted <= FDR) == e.confirmed == (e.lift_lo_adjusted > 1.0)
        assert e.lift_lo_adjusted <= e.lift_lo + 1e-12
    # one borderline candidate alone is confirmed; among 40 candidates it is not
    edge = compare(9, 40, 60, 600)  # p 0.02
    assert edge.confirmed and edge.p_value > FDR / 40
    assert not correct([edge] + null)[0].confirmed


def test_a_control_of_fewer_inputs_than_its_minimum_confirms_nothing():
    """Issue 47: 40 of 40 failing inside against a control of one input that did not fail (p 0.024, and the lower
    bound above 1) was confirmed; the minimum size holds on both sides."""
    e = compare(40, 40, 0, 1)
    assert e.p_value < ALPHA and not e.confirmed and not e.testable
    assert f"too few in the control to confirm (at least {MIN_CONTROL})" in e.sentence()
    assert compare(40, 40, 0, MIN_CONTROL).confirmed
    assert not correct([e, compare(30, 60, 30, 600)])[0].confirmed


def test_the_lower_bound_falls_as_the_control_fails_more():
    """Issue 47's non-monotone cases: 1 of 10 inside against 5, 9 and 10 of 10 in the control gave lower bounds
    0.019, 0.092 and 0."""
    los = [compare(1, 10, c, 10).lift_lo for c in (5, 9, 10)]
    assert los[0] > los[1] > los[2] == 0.0


@pytest.mark.parametrize("upper", [False, True])
def test_each_bound_is_monotone_in_every_count(upper):
    """Exhaustively for sizes up to 9 on each side: more failures inside never lower a bound, more in the control
    never raise it, more inputs inside (failures fixed) never raise it, more in the control never lower it."""
    sizes = range(1, 10)
    b = {
        (f, n, c, m): bound(f, n, c, m, upper=upper)
        for n in sizes
        for m in sizes
        for f in range(n + 1)
        for c in range(m + 1)
    }
    wrong = []
    for (f, n, c, m), v in b.items():
        for step, sign in (((1, 0, 0, 0), 1), ((0, 0, 1, 0), -1), ((0, 1, 0, 0), -1), ((0, 0, 0, 1), 1)):
            k = tuple(a + d for a, d in zip((f, n, c, m), step))
            if k in b and sign * (b[k] - v) < -1e-9 * max(1.0, abs(v)) and not (np.isinf(v) and np.isinf(b[k])):
                wrong.append(((f, n, c, m), step, v, b[k]))
    assert not wrong, wrong[:5]


def _coverage(n: int, m: int, p1: float, p2: float, upper: bool) -> float:
    """The exact probability, over every count inside and in the control, that the bound holds the true lift."""
    lift = p1 / p2
    w = np.outer(binom.pmf(np.arange(n + 1), n, p1), binom.pmf(np.arange(m + 1), m, p2))
    ok = np.array(
        [
            [
                (bound(f, n, c, m, upper=True) >= lift * (1 - 1e-12))
                if upper
                else (bound(f, n, c, m) <= lift * (1 + 1e-12))
                for c in range(m + 1)
            ]
            for f in range(n + 1)
        ]
    )
    return float(w[ok].sum())


@pytest.mark.parametrize("n,m", [(30, 30), (40, 10), (10, 40)])
def test_each_bound_holds_the_true_lift_at_its_level_on_both_sides_of_one(n, m):
    """Coverage by exact enumeration over a grid of true rates (lifts from 0.02 to 49), each bound at least
    ``1 - 2 alpha``. Issue 47's case, 12% inside against 94% in the control with 30 on each side, held the lower bound
    with probability 0.694."""
    rates = np.linspace(0.02, 0.98, 9)
    for upper in (False, True):
        worst = min((_coverage(n, m, p1, p2, upper), p1, p2) for p1 in rates for p2 in rates)
        assert worst[0] >= 1 - 2 * ALPHA, (upper, worst)
    assert _coverage(30, 30, 0.12, 0.94, upper=False) >= 1 - 2 * ALPHA


def test_a_candidate_with_too_few_inputs_counts_in_the_family_but_is_never_confirmed():
    tiny = compare(MIN_CONFIRM - 1, MIN_CONFIRM - 1, 0, 500)
    fam = correct([tiny, compare(30, 60, 30, 600)])
    assert fam[0].family == 2 and not fam[0].confirmed and fam[1].confirmed
    assert correct([compare(0, 0, 0, 0)])[0].family == 1  # nothing measured: not a candidate
