"""The one progress convention of the library: ``progress(what, done, total)``.

Caveats first: ``what`` names the phase (``"examine"``, ``"render"``, ``"train small_cnn: epoch"``); a trailing
parenthesised note (``"train: epoch (loss 0.412)"``) is status, not a new phase, so :func:`printer` keeps counting the
phase's rate across it. ``done`` counts up to ``total`` within a phase; a callback must be cheap (it may be called
once per batch).

Example
-------
>>> cb = printer("demo")
>>> for i in range(1, 4):
...     cb("work (step)", i, 3)  # doctest: +ELLIPSIS
  demo: work (step) 1/3...
  demo: work (step) 2/3...
  demo: work (step) 3/3...
"""

from __future__ import annotations

import time
from typing import Any, Callable, Dict, Optional

Progress = Callable[[str, int, int], None]
"""``progress(what, done, total)``: phase ``what`` has done ``done`` of ``total`` units."""


def phase_of(what: str) -> str:
    """The phase name of a ``what`` string: everything before a trailing ``" (...)"`` status note."""
    if what.endswith(")") and " (" in what:
        return what[: what.rindex(" (")]
    return what


def _duration(seconds: float) -> str:
    """``"40 s"``, ``"3 min"``, ``"1.5 h"``."""
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def printer(prefix: str, *, print_fn: Optional[Callable[[str], None]] = None) -> Progress:
    """A progress callback that prints a line when a phase starts, every ~10% of it, and at its end (with a rate).

    Parameters
    ----------
    prefix : str
        Printed at the start of every line (e.g. the stage name).
    print_fn : callable(str), optional
        Where lines go; default ``print(..., flush=True)``.
    """
    state: Dict[str, Any] = {"phase": None, "next": 0, "t0": 0.0}

    def out(line: str) -> None:
        if print_fn is None:
            print(line, flush=True)
        else:
            print_fn(line)

    def cb(what: str, done: int, total: int) -> None:
        phase = phase_of(str(what))
        if phase != state["phase"] or done < state.get("last", 0):
            state.update(phase=phase, next=0, t0=time.time())
        state["last"] = done
        if done >= state["next"] or done == total:
            secs = time.time() - state["t0"]
            if secs <= 1 or not done:
                rate = ""
            elif done >= secs:
                rate = f" ({done / secs:.1f}/s)"
            else:
                rate = f" ({secs / done:.1f} s each)"
            if rate and 0 < done < total:  # the phase's remaining time at its rate so far
                rate = rate[:-1] + f", about {_duration((total - done) * secs / done)} left)"
            out(f"  {prefix}: {what} {done}/{total}{rate}")
            state["next"] = done + max(1, int(total) // 10)

    return cb


def tqdm_progress(desc: Optional[str] = None, **tqdm_kwargs) -> Progress:
    """A progress callback that drives one tqdm bar per phase (closed when the phase reaches its total)."""
    from tqdm.auto import tqdm

    state: Dict[str, Any] = {"phase": None, "bar": None}

    def cb(what: str, done: int, total: int) -> None:
        phase = phase_of(str(what))
        bar = state["bar"]
        if phase != state["phase"] or bar is None:
            if bar is not None:
                bar.close()
            bar = state["bar"] = tqdm(total=int(total), desc=f"{desc}: {phase}" if desc else phase, **tqdm_kwargs)
            state["phase"] = phase
        if what != phase:
            bar.set_postfix_str(what[len(phase) + 2 : -1], refresh=False)
        bar.update(int(done) - bar.n)
        if done >= total:
            bar.close()
            state["bar"] = None

    return cb
