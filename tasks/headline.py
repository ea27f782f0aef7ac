"""A stage's headline metrics: the few numbers ``metrics/<stage>/<t>.json`` holds for ``dvc metrics show`` and
``dvc metrics diff``; every detail goes to the results file beside the report section (``plots/<stage>/<t>/
results.json``), which the report, the history and the gates read.

A method names its headline in its registration (``Method.stage.headline``, :class:`weakspot.methods.StageSpec`):
shell patterns over the dotted keys (``*.sdr.gad``); a
pattern starting with ``!`` drops the keys it matches (``!*.per_seed.*``). Its section's key metrics (the report's
cards) are always in. A stage that names none keeps every key when it has at most :data:`LIMIT`, else its key metrics
(a plug-in without cards: its first :data:`LIMIT` keys).
"""

from __future__ import annotations

import fnmatch
from typing import Any, Dict, Iterable, List, Sequence

#: The most columns one metrics file should give ``dvc metrics show`` (a terminal's width at ~12 characters each).
LIMIT = 15


def flat_keys(d: Any, prefix: str = "") -> List[str]:
    """The dotted keys of a nested dict's leaves (lists and scalars are leaves), in order."""
    if isinstance(d, dict) and d:
        return [k for key, v in d.items() for k in flat_keys(v, f"{prefix}.{key}" if prefix else str(key))]
    return [prefix] if prefix else []


def _put(out: Dict[str, Any], d: Dict[str, Any], key: str) -> None:
    """Copy the leaf at ``key`` of ``d`` into ``out`` under the same nesting."""
    if key in d:
        out[key] = d[key]
        return
    for k, v in d.items():
        if isinstance(v, dict) and key.startswith(f"{k}."):
            _put(out.setdefault(k, {}), v, key[len(k) + 1 :])
            return


def select(metrics: Dict[str, Any], patterns: Sequence[str] = (), always: Iterable[str] = ()) -> Dict[str, Any]:
    """The headline of ``metrics``: the keys in ``always`` and those ``patterns`` admit, nested as in ``metrics``."""
    keys = flat_keys(metrics)
    always = [k for k in always if k in keys]
    take, drop = [p for p in patterns if not p.startswith("!")], [p[1:] for p in patterns if p.startswith("!")]
    if not take:
        chosen = keys if len(keys) <= LIMIT else (always or keys[:LIMIT])
    else:
        chosen = always + [
            k
            for k in keys
            if k not in always
            and any(fnmatch.fnmatchcase(k, p) for p in take)
            and not any(fnmatch.fnmatchcase(k, p) for p in drop)
        ]
    out: Dict[str, Any] = {}
    for k in keys:  # in the metrics' own order
        if k in chosen:
            _put(out, metrics, k)
    return out
