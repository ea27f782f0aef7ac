"""The evidence that makes a finding a weak spot: its failure rate on inputs the search never saw against a control
disjoint from it, as a lift with a one-sided test and the bound that agrees with it, corrected for every candidate.

Caveats first: a method's search proposes a *region* (feature ranges, a class, a box of rendering factors, one
input's neighbourhood); this module does not search, it only judges. ``failures`` of ``n_confirm`` held-out inputs
inside the region are compared with ``control_failures`` of ``n_control`` control inputs: by default the region's
complement in the same held-out set (:func:`on_masks`, no seed), or a sample measured the same way and disjoint from
the region where no complement exists (fresh renders). The lift is the ratio of the two failure rates.

* **One test, one bound.** The p-value is Fisher's exact one-sided test of "the region fails no more often than its
  control"; the lower bound is the same conditional test inverted (:func:`bound`), so ``lift_lo > 1`` exactly when
  ``p_value < alpha`` -- also where every input inside fails (a score interval read off separately confirmed 26 of 26
  against 26 of 26) or none in the control does. Exact rather than a score test: on small regions with a low error
  rate the score test rejects a true null up to 9% of the time at 5% (5 inputs inside, 5% error rate, by
  enumeration), Fisher's never above its level (``tests/test_evidence.py`` enumerates it). The odds ratio's bound is
  written as a lift at the control rate's least favourable end for its side of 1, so the control's own uncertainty
  widens it. The upper bound decides nothing: Clopper-Pearson's upper end of the rate inside over the lower end of
  the control's. Each bound holds with at least ``1 - 2 alpha`` (90%) whatever the true rates, on both sides of a
  lift of 1, and each is monotone in every count (more failures inside never lower it, more in the control never
  raise it, more inputs without failures move it the other way): ``tests/test_evidence.py`` enumerates both over a
  grid of true rates and sizes. The point lift counts a control's zero as half a failure (say so where it is shown),
  the bounds do not.
* **Many candidates, one family.** A finding is *confirmed* only after the Benjamini-Hochberg correction over every
  candidate of its family (:func:`correct`) at :data:`FDR` false discovery rate: each carries its raw and adjusted p
  and its adjusted lower bound (the bound at level ``R * FDR / m``, Benjamini and Yekutieli's false-coverage
  adjustment, so the adjusted bound is above 1 exactly when the adjusted p is at most :data:`FDR`). BH rather than
  Holm: when no candidate is a weak spot the two are the same guarantee (a null audit confirms anything with
  probability at most 5%), and where real weak spots exist BH keeps the power to find the weaker ones.
* Nothing is confirmed from fewer than :data:`MIN_CONFIRM` held-out inputs inside or :data:`MIN_CONTROL` in the
  control (such a candidate still counts in the family: it was tested; :meth:`Evidence.sentence` says which side
  was too small).

Example
-------
>>> e = compare(failures=38, n_confirm=50, control_failures=6, n_control=50)
>>> round(e.lift, 2), e.confirmed, e.lift_lo > 3
(6.33, True, True)
>>> compare(26, 26, 26, 26).confirmed, compare(5, 5, 3, 5).confirmed  # lift 1.00; Fisher's p 0.22
(False, False)
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, replace
from functools import lru_cache
from typing import Any, Dict, Optional, Sequence

import numpy as np

from weakspot.errors import DataError

#: fewer held-out inputs inside a region than this and it is never confirmed (the interval would be all noise)
MIN_CONFIRM = 5
#: fewer control inputs than this and the region is never confirmed (a control of one input is no rate)
MIN_CONTROL = 5
#: one-sided level of each test and of each end of the lift's interval (the lower bound is a 95% lower bound)
ALPHA = 0.05
#: the false discovery rate at which a family's candidates are confirmed (Benjamini-Hochberg)
FDR = 0.05
#: the findings columns every method fills with :meth:`Evidence.columns`
COLUMNS = (
    "n_confirm",
    "failures",
    "n_control",
    "control_failures",
    "lift",
    "lift_lo",
    "lift_hi",
    "p_value",
    "p_adjusted",
    "lift_lo_adjusted",
    "family",
    "confirmed",
)


@dataclass(frozen=True)
class Evidence:
    """Failures inside a region on held-out inputs against a control, with the test of its family (``family``
    candidates tested together; 1 until :func:`correct` says otherwise)."""

    n_confirm: int
    failures: int
    n_control: int
    control_failures: int
    lift: float
    lift_lo: float
    lift_hi: float
    p_value: float
    p_adjusted: float = float("nan")
    lift_lo_adjusted: float = float("nan")
    family: int = 1

    @property
    def rate(self) -> float:
        return self.failures / self.n_confirm if self.n_confirm else float("nan")

    @property
    def control_rate(self) -> float:
        return self.control_failures / self.n_control if self.n_control else float("nan")

    @property
    def testable(self) -> bool:
        """At least :data:`MIN_CONFIRM` inputs inside, :data:`MIN_CONTROL` in the control and a finite p-value: the
        candidate can be confirmed."""
        return bool(self.n_confirm >= MIN_CONFIRM and self.n_control >= MIN_CONTROL and self.p_value == self.p_value)

    @property
    def confirmed(self) -> bool:
        """The adjusted lower bound of the lift is above 1 (the adjusted p at most :data:`FDR`), on at least
        :data:`MIN_CONFIRM` held-out inputs inside and :data:`MIN_CONTROL` in the control."""
        return bool(self.testable and math.isfinite(self.lift_lo_adjusted) and self.lift_lo_adjusted > 1.0)

    def columns(self) -> Dict[str, Any]:
        """The findings columns (:data:`COLUMNS`)."""
        return {**asdict(self), "confirmed": self.confirmed}

    def sentence(self, unit: str = "inputs", control: str = "in the control") -> str:
        """``"38 of 50 held-out inputs fail inside, 6 of 50 in the control: lift 6.33, at least 3.17 (95% one-sided,
        p 4.1e-11)"``: the raw evidence (the family's correction is stated where the family is known)."""
        counts = (
            f"{self.failures} of {self.n_confirm} held-out {unit} fail inside, {self.control_failures} of "
            f"{self.n_control} {control}"
        )
        if self.n_confirm < MIN_CONFIRM:
            return f"{counts}: too few inside to confirm (at least {MIN_CONFIRM})"
        if self.n_control < MIN_CONTROL:
            return f"{counts}: too few in the control to confirm (at least {MIN_CONTROL})"
        if not (math.isfinite(self.lift_lo) and math.isfinite(self.lift)):
            return f"{counts}: too few to compare"
        from weakspot.fmt import bound as end

        zero = (
            " (no control failure: counted as half a failure)" if self.control_failures == 0 and self.failures else ""
        )
        return (
            f"{counts}: lift {self.lift:.2f}{zero}, at least {end(self.lift_lo)} (95% one-sided, p {self.p_value:.2g})"
        )


def _count(value: Any, name: str) -> int:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)) or value < 0:
        raise DataError(f"evidence: {name} = {value!r}: must be a count (an integer >= 0)")
    return int(value)


def p_value(f: int, n: int, c: int, m: int) -> float:
    """One-sided p of "the region fails no more often than its control" for ``f`` of ``n`` failures inside and ``c``
    of ``m`` in the control: Fisher's exact test (scipy), conditional on the failures of both sides together."""
    from scipy.stats import fisher_exact

    return float(fisher_exact([[f, n - f], [c, m - c]], alternative="greater").pvalue)


def clopper_pearson(k: int, n: int, alpha: float = ALPHA) -> "tuple[float, float]":
    """The one-sided ``1 - alpha`` Clopper-Pearson ends of a rate of ``k`` in ``n`` (0 and 1 at the extremes)."""
    from scipy.stats import beta

    lo = float(beta.ppf(alpha, k, n - k + 1)) if k > 0 else 0.0
    hi = float(beta.ppf(1.0 - alpha, k + 1, n - k)) if k < n else 1.0
    return lo, hi


@lru_cache(maxsize=65536)  # the same counts are bounded again by every correction of the audit (large counts: seconds)
def bound(f: int, n: int, c: int, m: int, alpha: float = ALPHA, upper: bool = False) -> float:
    """The lift's one-sided ``1 - alpha`` lower bound (``upper``: upper bound).

    The lower bound is the test of :func:`p_value` inverted: the exact conditional lower bound ``psi`` of the odds
    ratio (scipy inverts the noncentral hypergeometric test whose value at 1 is :func:`p_value`) written as a lift,
    ``psi / (1 - q + psi q)``, at the control rate ``q`` least favourable on its side of 1: the upper end of the
    control rate's Clopper-Pearson interval where ``psi >= 1`` (there the lift falls as ``q`` rises), the lower end
    where ``psi < 1`` (there it rises). For every ``q < 1`` that map is 1 at ``psi = 1`` and increasing in ``psi``,
    so ``bound(...) > 1`` exactly when ``p_value(...) < alpha``. No failure inside: 0; an unbounded odds ratio: the
    lift's ceiling ``1 / q``.

    The upper bound is Clopper-Pearson's upper end of the rate inside over the lower end of the control's (each at
    ``alpha``): monotone in every count, unbounded when no control input fails.
    """
    q_lo, q_hi = clopper_pearson(c, m, alpha)  # the control rate's ends
    if upper:
        inside = clopper_pearson(f, n, alpha)[1]
        return inside / q_lo if q_lo > 0 else float("inf")
    if f == 0:
        return 0.0
    from scipy.stats.contingency import odds_ratio

    ci = odds_ratio([[f, n - f], [c, m - c]], kind="conditional").confidence_interval(
        confidence_level=1.0 - alpha, alternative="greater"
    )
    psi = float(ci.low)
    q = q_hi if psi >= 1.0 else q_lo
    if not math.isfinite(psi):
        return 1.0 / q if q > 0 else float("inf")
    den = 1.0 - q + psi * q
    return psi / den if den > 0 else 0.0  # every control input fails and psi = 0: no failure inside is possible


def compare(failures: int, n_confirm: int, control_failures: int, n_control: int) -> Evidence:
    """The :class:`Evidence` of ``failures`` of ``n_confirm`` inside a region against ``control_failures`` of
    ``n_control`` control inputs, as a family of one (:func:`correct` puts it in its family).

    Raises
    ------
    DataError
        A count that is negative or not an integer, or more failures than inputs.
    """
    f, n = _count(failures, "failures"), _count(n_confirm, "n_confirm")
    c, m = _count(control_failures, "control_failures"), _count(n_control, "n_control")
    if f > n or c > m:
        raise DataError(f"evidence: {f} failures of {n} inside, {c} of {m} in the control: more failures than inputs")
    if n == 0 or m == 0:
        nan = float("nan")
        return Evidence(n, f, m, c, nan, nan, nan, nan)
    if f == 0 and c == 0:
        return Evidence(n, f, m, c, 1.0, 0.0, float("inf"), 1.0, 1.0, 0.0)
    lift, lo, p = (f / n) / (max(c, 0.5) / m), bound(f, n, c, m), p_value(f, n, c, m)
    return Evidence(n, f, m, c, float(lift), lo, bound(f, n, c, m, upper=True), p, p, lo)  # a family of one


def correct(evidence: Sequence[Evidence], fdr: float = FDR) -> "list[Evidence]":
    """The family's evidence after the Benjamini-Hochberg correction at ``fdr``: each with its adjusted p, its lower
    bound at the adjusted level ``R * fdr / m`` (``R`` confirmed of ``m`` candidates; ``fdr / m`` when none is) and
    ``family = m``. Every candidate with a p-value counts in ``m``; one with fewer than :data:`MIN_CONFIRM` inputs
    inside is never confirmed (its p is taken as 1 for the ranking). Evidence without a p-value (nothing measured)
    is returned as it is and not counted.

    >>> fam = correct([compare(30, 50, 5, 50), compare(9, 50, 5, 50), compare(5, 5, 0, 5)])
    >>> [e.confirmed for e in fam], fam[0].family, fam[0].p_adjusted > fam[0].p_value
    ([True, False, True], 3, True)
    """
    idx = [i for i, e in enumerate(evidence) if e.p_value == e.p_value]
    out = list(evidence)
    m = len(idx)
    if not m:
        return out
    p = np.array([evidence[i].p_value if evidence[i].testable else 1.0 for i in idx])
    order = np.argsort(p, kind="stable")
    ranked = p[order] * m / np.arange(1, m + 1)
    adj_sorted = np.minimum(1.0, np.minimum.accumulate(ranked[::-1])[::-1])
    adjusted = np.empty(m)
    adjusted[order] = adj_sorted
    r = int((adjusted <= fdr).sum())
    level = max(r, 1) * fdr / m
    for k, i in enumerate(idx):
        e = evidence[i]
        lo = bound(e.failures, e.n_confirm, e.control_failures, e.n_control, alpha=level) if e.testable else 0.0
        if e.testable and (adjusted[k] <= fdr) != (lo > 1.0):  # a tie at the level: the p-value decides
            lo = math.nextafter(1.0, 2.0) if adjusted[k] <= fdr else min(lo, 1.0)
        out[i] = replace(e, p_adjusted=float(adjusted[k]), lift_lo_adjusted=float(lo), family=m)
    return out


def on_masks(fails: np.ndarray, inside: np.ndarray, control: Optional[np.ndarray] = None) -> Evidence:
    """Evidence from per-input failure flags of a held-out set: the inputs ``inside`` the region against its
    complement among the ``control`` inputs (default: every held-out input), never a random draw: the verdict needs
    no seed, and no input is on both sides."""
    fails = np.asarray(fails, bool)
    inside = np.asarray(inside, bool)
    if fails.shape != inside.shape or fails.ndim != 1:
        raise DataError(
            f"evidence: failure flags {fails.shape} and region mask {inside.shape} must be one flag per held-out input"
        )
    pool = np.ones_like(fails) if control is None else np.asarray(control, bool)
    if pool.shape != fails.shape:
        raise DataError(f"evidence: control mask {pool.shape} must be one flag per held-out input ({fails.shape})")
    outside = pool & ~inside
    return compare(int(fails[inside].sum()), int(inside.sum()), int(fails[outside].sum()), int(outside.sum()))
