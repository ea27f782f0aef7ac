"""Numbers as the metrics files and the report show them: one rounding rule and one way to print a number.

Caveat first: a number that is not finite (NaN, inf) or missing becomes ``None`` (JSON null) in the metrics, never a
string, so a metrics file stays readable by ``dvc metrics`` and by the history's comparisons.

>>> rounded(0.123456), rounded(float("nan")), rounded(None), rounded(2.5, 0)
(0.1235, None, None, 2.0)
>>> fmt(0.000123456), fmt(12345.6), fmt(1.5)
('0.000123', '1.23e+04', '1.5')
"""

from __future__ import annotations

import math
from typing import Any, Optional


def rounded(value: Any, digits: int = 4) -> Optional[float]:
    """``value`` rounded to ``digits`` decimals for a metrics file; ``None`` when missing or not finite."""
    if value is None:
        return None
    v = float(value)
    return round(v, digits) if math.isfinite(v) else None


def stored(value: Any, digits: int = 4) -> float:
    """``value`` as a metrics file stores it (:func:`rounded`), for prose that states a metric: formatting the raw
    value instead would round twice and could write a last digit the metrics do not hold (0.0027253 is "0.00273",
    its stored 0.002725 is "0.00272"). Not finite: the value itself, so the prose still says nan or inf."""
    r = rounded(value, digits)
    return float(value) if r is None else r


def fmt(value: Any, digits: int = 3) -> str:
    """``value`` to ``digits`` significant digits for prose (``"n/a"`` when missing or not finite)."""
    if value is None:
        return "n/a"
    v = float(value)
    return f"{v:.{digits}g}" if math.isfinite(v) else "n/a"


def bound(v: Any) -> str:
    """One end of a lift's interval, ``"1.31"``: two decimals, more where two would put a value above 1 at 1 (or
    below 1 at 1), so it never reads as touching 1 when it does not; ``inf`` when unbounded."""
    v = float(v)
    if not math.isfinite(v):
        return "inf" if v > 0 else "n/a"
    s = f"{v:.2f}"
    for d in range(2, 7):
        s = f"{v:.{d}f}"
        if (float(s) > 1) == (v > 1) and (float(s) < 1) == (v < 1):
            return s
    return s


def interval(lo: Any, hi: Any) -> str:
    """A lift's interval, ``"1.3-5.8"``: each end as :func:`bound` writes it."""
    return f"{bound(lo)}-{bound(hi)}"
