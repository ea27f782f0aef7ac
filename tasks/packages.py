"""The installed distributions a stage computes with, and their versions: part of every stage's identity.

Caveats first: a stage's distributions are those whose modules its code imports (:func:`tasks.closure.
distributions_imported`), without the orchestrators (:data:`ORCHESTRATION`: they decide where and when a stage runs,
never what it computes), and Python itself. Each one's entry in ``packages.yaml`` (:func:`entry`) is its version and,
where it requires others, a digest of every distribution it requires, transitively (their metadata's requirements,
markers evaluated, with the extras one asks of another), so an upgraded requirement (cuDNN under torch) changes the
entry of what requires it. ``packages.yaml`` is generated beside dvc.yaml from this environment (``weakspot audit``
rewrites both), with the requirements' versions listed under ``_requirements`` for a person (no stage's param); each
stage's DVC params name the entries it imports, so an upgraded distribution reruns the stages that compute with it,
and no others.
"""

from __future__ import annotations

import importlib.metadata as md
import platform
import re
from functools import lru_cache
from pathlib import Path
from typing import Dict, Iterable, List, Set, Tuple

PACKAGES_FILE = Path("packages.yaml")
PYTHON = "python"
#: Distributions that run stages and schedule them: no stage's identity (a computing distribution that requires one
#: brings it back in).
ORCHESTRATION = frozenset({"prefect", "prefect-dask", "dask", "distributed", "dvc"})


def canonical(name: str) -> str:
    """A distribution's name as PEP 503 normalises it (``scikit_learn`` -> ``scikit-learn``): no dots, so it is one
    DVC params key."""
    return re.sub(r"[-_.]+", "-", name).lower()


@lru_cache(maxsize=1)
def _installed() -> Dict[str, md.Distribution]:
    out: Dict[str, md.Distribution] = {}
    for d in md.distributions():
        name = d.metadata["Name"]
        if name and canonical(name) not in out:  # the first on sys.path wins, as for imports
            out[canonical(name)] = d
    return out


@lru_cache(maxsize=1)
def _top_level() -> Dict[str, List[str]]:
    return {k: [canonical(v) for v in vs] for k, vs in md.packages_distributions().items()}


def requires(name: str) -> frozenset:
    """The distributions ``name`` requires (markers evaluated for this machine; its optional extras left out)."""
    return frozenset(n for n, _ in _requires(canonical(name), frozenset()))


@lru_cache(maxsize=None)
def _requires(name: str, extras: frozenset) -> frozenset:
    """``{(distribution, the extras asked of it)}`` that ``name`` requires with ``extras`` (torch asks
    ``cuda-toolkit[cublas, ...]``: the extras bring the CUDA libraries)."""
    from packaging.requirements import InvalidRequirement, Requirement

    dist = _installed().get(name)
    out: Set[Tuple[str, frozenset]] = set()
    for line in (dist.requires or []) if dist is not None else []:
        try:
            req = Requirement(line)
        except InvalidRequirement:
            continue
        if req.marker is not None and not any(req.marker.evaluate({"extra": e}) for e in ("", *extras)):
            continue
        if canonical(req.name) in _installed():
            out.add((canonical(req.name), frozenset(req.extras)))
    return frozenset(out)


def direct(top_level: Iterable[str]) -> List[str]:
    """The distributions behind the imported top-level module names ``top_level``, without the orchestrators;
    ``python`` first: a stage's ``packages.yaml`` params."""
    return [PYTHON] + sorted({d for t in top_level for d in _top_level().get(t, []) if d not in ORCHESTRATION})


def distributions(top_level: Iterable[str]) -> List[str]:
    """The distributions behind the imported top-level module names ``top_level``, with what they require,
    transitively; without the orchestrators; ``python`` first."""
    return [PYTHON] + sorted({n for d in direct(top_level)[1:] for n in [d, *required(d)]})


def required(name: str) -> List[str]:
    """Every distribution ``name`` requires, transitively (with the extras one asks of another), sorted."""
    todo: List[Tuple[str, frozenset]] = list(_requires(canonical(name), frozenset()))
    seen: Set[Tuple[str, frozenset]] = set()
    while todo:
        d = todo.pop()
        if d not in seen:
            seen.add(d)
            todo.extend(_requires(*d) - seen)
    return sorted({n for n, _ in seen} - {canonical(name)})


def entry(name: str) -> str:
    """``name``'s entry in ``packages.yaml``: its version as installed here, and where it requires others, their
    number and a digest of their names and versions (``2.14.1 with 29 requirements sha256:...``)."""
    import hashlib

    version = versions([name]).get(name, "not installed")
    reqs = [] if name == PYTHON else required(name)
    if not reqs:
        return version
    blob = "\n".join(f"{n}=={v}" for n, v in versions(reqs).items())
    return f"{version} with {len(reqs)} requirements sha256:{hashlib.sha256(blob.encode()).hexdigest()[:16]}"


def versions(names: Iterable[str]) -> Dict[str, str]:
    """``{name: version}`` of the distributions ``names`` as installed here (``python``: Python's version)."""
    inst = _installed()
    out: Dict[str, str] = {}
    for n in names:
        if n == PYTHON:
            out[n] = platform.python_version()
        elif n in inst:
            out[n] = str(inst[n].version)
    return out


REQUIREMENTS = "_requirements"


def packages_yaml(names: Iterable[str]) -> str:
    """The text of ``packages.yaml`` for the distributions ``names`` the stages import: each one's :func:`entry`,
    then every distribution they require with its version (``_requirements``, for a person: no stage's param)."""
    import yaml

    names = sorted(set(names))
    reqs = sorted({r for n in names if n != PYTHON for r in required(n)} - set(names))
    head = (
        "# GENERATED by `weakspot pipeline` from this environment (tasks/packages.py): the version of every installed\n"
        "# distribution a stage imports (with a digest of what it requires); each stage's DVC params name those it\n"
        "# imports.\n"
    )
    body = {n: entry(n) for n in names} | {REQUIREMENTS: versions(reqs)}
    return head + yaml.safe_dump(body, sort_keys=False, width=120)
