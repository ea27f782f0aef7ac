"""The evidence that makes a finding a weak spot: its failure rate on inputs the search never saw, against a random
control measured the same way, as a lift with a 95% interval.

Caveats first: a method's search proposes a *region* (feature ranges, a class, a box of rendering factors, one
input's neighbourhood); this module does not search, it only judges. ``failures`` of ``n_confirm`` held-out inputs
inside the region are compared with ``control_failures`` of ``n_control`` inputs drawn at random from the same
eligible set (the same measure, the same budget). The lift is the ratio of the two failure rates; its interval and
one-sided p-value are the score (Miettinen-Nurminen) ones of ``statsmodels`` for a ratio of two independent
proportions. A finding is **confirmed** when the interval's lower end is above 1. With no control failure the ratio
is infinite: :attr:`Evidence.lift` then counts the control's zero as half a failure (say so where it is shown), and
the interval still comes from the counts. Nothing is confirmed from fewer than :data:`MIN_CONFIRM` held-out inputs.

Example
-------
>>> e = compare(failures=38, n_confirm=50, control_failures=6, n_control=50)
>>> round(e.lift, 2), e.confirmed, e.lift_lo > 3
(6.33, True, True)
>>> compare(failures=5, n_confirm=50, control_failures=5, n_control=50).confirmed
False
"""

from __future__ import annotations

import math
import warnings
from dataclasses import asdict, dataclass
from typing import Any, Dict, Optional

import numpy as np

from weakspot.errors import DataError

#: fewer held-out inputs inside a region than this and it is never confirmed (the interval would be all noise)
MIN_CONFIRM = 5
#: the findings columns every method fills with :meth:`Evidence.columns`
COLUMNS = ("n_confirm", "failures", "n_control", "control_failures", "lift", "lift_lo", "lift_hi", "p_value",
           "confirmed")


@dataclass(frozen=True)
class Evidence:
    """Failures inside a region on held-out inputs against a random control of the same eligible set."""

    n_confirm: int
    failures: int
    n_control: int
    control_failures: int
    lift: float
    lift_lo: float
    lift_hi: float
    p_value: float

    @property
    def rate(self) -> float:
        return self.failures / self.n_confirm if self.n_confirm else float("nan")

    @property
    def control_rate(self) -> float:
        return self.control_failures / self.n_control if self.n_control else float("nan")

    @property
    def confirmed(self) -> bool:
        """The 95% interval of the lift lies above 1, on at least :data:`MIN_CONFIRM` held-out inputs."""
        return bool(self.n_confirm >= MIN_CONFIRM and math.isfinite(self.lift_lo) and self.lift_lo > 1.0)

    def columns(self) -> Dict[str, Any]:
        """The findings columns (:data:`COLUMNS`)."""
        return {**asdict(self), "confirmed": self.confirmed}

    def sentence(self, unit: str = "inputs") -> str:
        """``"38 of 50 held-out inputs fail inside, 6 of 50 random ones: lift 6.3 (95% 3.1-13.8)"``."""
        if self.n_confirm < MIN_CONFIRM:
            return (f"{self.failures} of {self.n_confirm} held-out {unit} fail inside, {self.control_failures} of "
                    f"{self.n_control} random ones: too few inside to confirm (at least {MIN_CONFIRM})")
        if not (math.isfinite(self.lift_lo) and math.isfinite(self.lift)):
            return (f"{self.failures} of {self.n_confirm} held-out {unit} fail inside, {self.control_failures} of "
                    f"{self.n_control} random ones: too few to compare")
        from weakspot.fmt import interval

        zero = " (no control failure: counted as half a failure)" if self.control_failures == 0 and self.failures else ""
        return (f"{self.failures} of {self.n_confirm} held-out {unit} fail inside, {self.control_failures} of "
                f"{self.n_control} random ones: lift {self.lift:.2f}{zero} (95% {interval(self.lift_lo, self.lift_hi)})")


def _count(value: Any, name: str) -> int:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)) or value < 0:
        raise DataError(f"evidence: {name} = {value!r}: must be a count (an integer >= 0)")
    return int(value)


def compare(failures: int, n_confirm: int, control_failures: int, n_control: int) -> Evidence:
    """The :class:`Evidence` of ``failures`` of ``n_confirm`` inside a region against ``control_failures`` of
    ``n_control`` random inputs.

    Raises
    ------
    DataError
        A count that is negative or not an integer, or more failures than inputs.
    """
    f, n = _count(failures, "failures"), _count(n_confirm, "n_confirm")
    c, m = _count(control_failures, "control_failures"), _count(n_control, "n_control")
    if f > n or c > m:
        raise DataError(f"evidence: {f} failures of {n} inside, {c} of {m} in the control: more failures than inputs")
    if n == 0 or m == 0 or (f == 0 and c == 0):
        lift = float("nan") if n == 0 or m == 0 else 1.0
        return Evidence(n, f, m, c, lift, float("nan"), float("nan"), float("nan") if n == 0 or m == 0 else 1.0)
    lift = (f / n) / (max(c, 0.5) / m)
    from statsmodels.stats.proportion import confint_proportions_2indep, test_proportions_2indep

    with warnings.catch_warnings():  # statsmodels divides by a zero count on the way to an infinite upper end
        warnings.simplefilter("ignore", RuntimeWarning)
        lo, hi = confint_proportions_2indep(f, n, c, m, method="score", compare="ratio", alpha=0.05)
        p = test_proportions_2indep(f, n, c, m, compare="ratio", alternative="larger", method="score").pvalue
    lo, hi = float(np.real(lo)), float(np.real(hi))  # statsmodels' root search can hand back a complex 0j part
    lo = 0.0 if f == 0 else lo
    return Evidence(n, f, m, c, float(lift), lo, float(hi) if np.isfinite(hi) else float("inf"),
                    float(p) if np.isfinite(p) else float("nan"))


def control_draw(eligible: int, size: int, seed: Any) -> np.ndarray:
    """``size`` distinct indices into an eligible set of ``eligible`` inputs, drawn at random from ``seed`` (all of
    them when the set is smaller): the random control of a region measured on ``size`` inputs."""
    n, k = _count(eligible, "eligible"), _count(size, "size")
    rng = np.random.default_rng(seed)
    return np.sort(rng.choice(n, size=min(k, n), replace=False)) if n else np.zeros(0, np.int64)


def on_masks(fails: np.ndarray, inside: np.ndarray, seed: Any, control: Optional[np.ndarray] = None) -> Evidence:
    """Evidence from per-input failure flags of a held-out set: the inputs ``inside`` the region against as many
    drawn at random (from ``seed``) among the ``control`` inputs (default: every held-out input)."""
    fails = np.asarray(fails, bool)
    inside = np.asarray(inside, bool)
    if fails.shape != inside.shape or fails.ndim != 1:
        raise DataError(f"evidence: failure flags {fails.shape} and region mask {inside.shape} must be one flag per "
                        "held-out input")
    pool = np.flatnonzero(np.ones_like(fails) if control is None else np.asarray(control, bool))
    n_in = int(inside.sum())
    drawn = pool[control_draw(len(pool), n_in, seed)]
    return compare(int(fails[inside].sum()), n_in, int(fails[drawn].sum()), len(drawn))
