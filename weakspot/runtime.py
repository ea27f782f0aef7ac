"""The services a method's ``run`` may ask of whoever runs it: a device, progress, other params sections, cached calls
and fan-outs.

Caveats first: :class:`Runtime` runs everything in this process, one call after the other, and caches nothing (a
notebook, a test). The pipeline hands methods its own runtime (``tasks/method.py``): the same calls, each a cached
Prefect task fanned out on Dask when params.yaml's ``execution`` says so, whose key the pipeline derives from the
stage's identity (its code, data, params and packages) and the call's own arguments. A method's ``key`` therefore
names only which call it is among its stage's (a seed, an index, a defence's name), never its params or data, and its
functions take their seeds from their arguments, so the cached and the computed result are the same.

Example
-------
>>> rt = Runtime(device="cpu")
>>> rt.map(pow, [((2, 3), {}), ((3, 2), {})], keys=[{"a": 1}, {"a": 2}])
[8, 9]
"""

from __future__ import annotations

from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

from weakspot.errors import ConfigError
from weakspot.progress import Progress

Call = Tuple[Sequence[Any], Mapping[str, Any]]


def _silent(what: str, done: int, total: int) -> None:
    pass


class Runtime:
    """Run a method's calls in this process.

    Parameters
    ----------
    device : str
        params.yaml's ``device``: ``auto`` (CUDA when present), ``cpu``, ``cuda`` or ``cuda:N``.
    progress : callable, optional
        ``progress(what, done, total)`` (:mod:`weakspot.progress`).
    sections : dict, optional
        Other validated params sections a method reads (``Method.reads``), by name.
    """

    def __init__(
        self, *, device: str = "auto", progress: Optional[Progress] = None, sections: Optional[Dict[str, Any]] = None
    ):
        self.device = device
        self.progress = progress or _silent
        self._sections = dict(sections or {})

    def section(self, name: str) -> Any:
        """The validated params section ``name`` (one the method declares in ``Method.reads``)."""
        if name not in self._sections:
            raise ConfigError(
                f"params section {name!r} was not given to this run (sections: "
                f"{', '.join(sorted(self._sections)) or 'none'}); declare it in Method.reads"
            )
        return self._sections[name]

    def cached(self, fn: Callable[..., Any], *args: Any, key: Mapping[str, Any], label: str = "", **kwargs: Any) -> Any:
        """``fn(*args, **kwargs)``; ``key`` names which call this is among the stage's (JSON values: a seed, an
        index); what the stage depends on is the runtime's to add."""
        return fn(*args, **kwargs)

    def map(
        self,
        fn: Callable[..., Any],
        calls: Sequence[Call],
        *,
        keys: Sequence[Mapping[str, Any]],
        labels: Optional[Sequence[str]] = None,
    ) -> List[Any]:
        """``[fn(*args, **kwargs) for (args, kwargs) in calls]``, in order; ``keys`` as for :meth:`cached`."""
        if len(keys) != len(calls):
            raise ValueError(f"{len(calls)} calls but {len(keys)} keys")
        return [fn(*a, **kw) for a, kw in calls]
