"""Argument checks shared by the library's algorithms: one message shape for every bad number.

Caveat first: each check raises :class:`~weakspot.errors.ConfigError` whose message names who asked (``who``: the
function or the params key), the argument, the value given and what is allowed; it returns the value as the type the
caller computes with. Booleans are not numbers here (``True`` is no step count).

>>> check_clip((0, 1), "pgd")
(0.0, 1.0)
>>> check_number(0.5, "eps", "pgd", low=0)
0.5
>>> check_int(3, "steps", "pgd", low=1)
3
"""

from __future__ import annotations

import math
from typing import Any, Optional, Tuple

from weakspot.errors import ConfigError


def _is_number(value: Any) -> bool:
    import numpy as np

    return isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, (bool, np.bool_))


def check_number(
    value: Any,
    name: str,
    who: str,
    *,
    low: Optional[float] = None,
    high: Optional[float] = None,
    low_open: bool = True,
    high_open: bool = False,
) -> float:
    """``value`` as a finite float within (``low``, ``high``] (``low_open``/``high_open``: the ends excluded)."""
    ok = _is_number(value) and math.isfinite(float(value))
    if ok and low is not None:
        ok = float(value) > low if low_open else float(value) >= low
    if ok and high is not None:
        ok = float(value) < high if high_open else float(value) <= high
    if not ok:
        lo = "" if low is None else f"{'>' if low_open else '>='} {low:g}"
        hi = "" if high is None else f"{'<' if high_open else '<='} {high:g}"
        rule = " and ".join(r for r in (lo, hi) if r) or "finite"
        raise ConfigError(f"{who}: {name} = {value!r}: must be a finite number {rule}".rstrip())
    return float(value)


def check_int(value: Any, name: str, who: str, *, low: int = 1) -> int:
    """``value`` as an int >= ``low``."""
    import numpy as np

    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)) or value < low:
        raise ConfigError(f"{who}: {name} = {value!r}: must be an integer >= {low}")
    return int(value)


def check_clip(clip: Any, who: str) -> Tuple[float, float]:
    """``clip`` as the data's range ``(low, high)``: finite, low < high."""
    try:
        lo, hi = (float(c) for c in clip)
    except (TypeError, ValueError):
        raise ConfigError(f"{who}: clip = {clip!r}: must be (low, high), the data's range") from None
    if not (math.isfinite(lo) and math.isfinite(hi) and lo < hi):
        raise ConfigError(f"{who}: clip = {clip!r}: must be finite (low, high) with low < high")
    return lo, hi
