"""A stage's identity: what DVC records for it (its command, every dep's content, every param's value), computed
by the stage itself, and the key of every cached call it makes.

Caveats first: the stage is the one DVC runs (``DVC_STAGE``, which DVC sets for every command) or, run by hand,
the stage of dvc.yaml whose command is this process's; a process that is no stage has no identity, and what it
caches is served to itself only. The deps and params are dvc.yaml's, so the identity holds what
``dvc.lock`` holds (sha256 where DVC keeps md5): the project's modules, the user's model modules, a plug-in's files,
the data and weights, the params (``device`` and ``threads`` included) and the versions of the packages the stage
computes with (``packages.yaml``, :mod:`tasks.packages`). A cached call's key is derived from it (:data:`STAGE`)
plus the call's own arguments, never written by a method: a change to anything the stage depends on misses the
cache, and a rerun of an unchanged stage (after a crash, on another worker) is served from it.
"""

from __future__ import annotations

import hashlib
import json
import os
import shlex
import sys
import uuid
from pathlib import Path
from typing import Any, Dict, List, Optional

from prefect.cache_policies import CachePolicy

from weakspot.hashing import sha256_file

#: Where a stage hands its identity's digest to the processes that run its tasks (Dask workers inherit it).
ENV = "WEAKSPOT_STAGE_IDENTITY"
DVC_YAML = Path("dvc.yaml")
DEFAULT_PARAMS = "params.yaml"


def _load_yaml(path: Path) -> Any:
    import yaml

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    return yaml.load(path.read_text(), Loader=loader)


def dep_digest(path: "str | Path") -> Optional[str]:
    """sha256 of a dep: a file's content, or a folder's listing of its files' paths and contents (hidden files and
    ``__pycache__`` left out, as DVC and git leave them); None when it is missing."""
    p = Path(path)
    if p.is_file():
        return sha256_file(p)
    if not p.is_dir():
        return None
    h = hashlib.sha256()
    for f in sorted(p.rglob("*")):
        r = f.relative_to(p)
        if not f.is_file() or any(part.startswith(".") or part == "__pycache__" for part in r.parts):
            continue
        h.update(r.as_posix().encode() + b"\0" + sha256_file(f).encode() + b"\n")
    return h.hexdigest()


def _entries(items: Any) -> List[str]:
    return [str(next(iter(e))) if isinstance(e, dict) else str(e) for e in items or []]


def _lookup(data: Any, key: str) -> Any:
    node = data
    for part in key.split("."):
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return node


def params_of(stage: Dict[str, Any], root: Path) -> Dict[str, Dict[str, Any]]:
    """``{params file: {key: value}}`` of a dvc.yaml stage's ``params`` (a key alone is params.yaml's)."""
    wanted: Dict[str, List[str]] = {}
    for e in stage.get("params") or []:
        if isinstance(e, dict):
            for file, keys in e.items():
                wanted.setdefault(str(file), []).extend(str(k) for k in keys or [])
        else:
            wanted.setdefault(DEFAULT_PARAMS, []).append(str(e))
    out: Dict[str, Dict[str, Any]] = {}
    for file, keys in wanted.items():
        f = root / file
        data = _load_yaml(f) if f.is_file() else {}
        out[file] = {k: _lookup(data, k) for k in keys}
    return out


def this_stage(root: "str | Path" = ".", argv: Optional[List[str]] = None) -> Optional[str]:
    """The dvc.yaml stage this process runs: ``DVC_STAGE`` where DVC started it, else the stage whose command is
    ``python -m <this module> <args>``; None when there is none."""
    if os.environ.get("DVC_STAGE"):
        return os.environ["DVC_STAGE"].rsplit(":", 1)[-1]
    f = Path(root) / DVC_YAML
    main = getattr(sys.modules.get("__main__"), "__spec__", None)
    if not f.is_file() or main is None:
        return None
    cmd = shlex.join(["python", "-m", main.name, *(sys.argv[1:] if argv is None else argv)])
    for name, st in ((_load_yaml(f) or {}).get("stages") or {}).items():
        if str(st.get("cmd", "")).strip() == cmd:
            return str(name)
    return None


def stage_identity(name: str, root: "str | Path" = ".") -> Dict[str, Any]:
    """``{"stage", "cmd", "deps": {path: sha256}, "params": {file: {key: value}}}`` of dvc.yaml's stage ``name``."""
    from weakspot.errors import ConfigError

    root = Path(root)
    stages = (_load_yaml(root / DVC_YAML) or {}).get("stages") or {}
    if name not in stages:
        raise ConfigError(f"no stage {name!r} in {root / DVC_YAML}; regenerate it (weakspot pipeline)")
    st = stages[name]
    deps = {d: dep_digest(d if os.path.isabs(d) else root / d) for d in _entries(st.get("deps"))}
    return {"stage": name, "cmd": st.get("cmd"), "deps": deps, "params": params_of(st, root)}


def digest(identity: Dict[str, Any]) -> str:
    """sha256 of an identity (its JSON, keys sorted)."""
    return hashlib.sha256(json.dumps(identity, sort_keys=True, default=str).encode()).hexdigest()


_BOUND: Dict[str, Any] = {}


def bind(root: "str | Path" = ".") -> Optional[Dict[str, Any]]:
    """This process's stage identity, computed once and handed to its tasks (:data:`ENV`); None outside a stage."""
    _BOUND.clear()
    name = this_stage(root)
    if name is None:
        os.environ.pop(ENV, None)
        return None
    ident = stage_identity(name, root)
    check_packages(ident)
    os.environ[ENV] = digest(ident)
    _BOUND.update(ident)
    return ident


def bound() -> Dict[str, Any]:
    """The identity :func:`bind` computed for this process's stage, for its lineage: ``{"stage", "sha256", "deps",
    "packages"}`` (the params are the lineage's own); {} outside a stage."""
    if not _BOUND:
        return {}
    packages: Dict[str, Any] = {}
    for file, values in _BOUND["params"].items():
        if Path(file).name == "packages.yaml":
            packages.update(values)
    return {"stage": _BOUND["stage"], "sha256": current(), "deps": _BOUND["deps"], "packages": packages}


def check_packages(identity: Dict[str, Any]) -> None:
    """A ConfigError when a distribution the stage computes with is installed here at another version than its
    identity says (``packages.yaml`` from another environment: a worker installed apart, a lock upgraded since):
    its numbers would be bound to versions that did not make them."""
    from tasks.packages import entry
    from weakspot.errors import ConfigError

    declared: Dict[str, Any] = {}
    for file, values in identity["params"].items():
        if Path(file).name == "packages.yaml":
            declared.update(values)
    here = {n: entry(n) for n in declared}
    wrong = [f"{n} {here[n]} (packages.yaml: {v})" for n, v in declared.items() if here[n] != str(v)]
    if wrong:
        raise ConfigError(
            f"stage {identity['stage']}: this environment differs from packages.yaml: {', '.join(wrong[:5])}"
            + (f" and {len(wrong) - 5} more" if len(wrong) > 5 else "")
            + "; install requirements.lock, or run `weakspot pipeline` to bind the audit to this environment"
        )


#: Outside a stage there is no identity to bind a result to: a key of this process alone, so nothing computed
#: elsewhere (under other params or code) is served, and nothing computed here is served elsewhere.
_UNBOUND = f"unbound-{uuid.uuid4().hex}"


def current() -> str:
    """The digest of the stage this process runs in (outside a stage, a key of this process alone)."""
    return os.environ.get(ENV) or _UNBOUND


def call_key(ref: str, args: Any) -> str:
    """A cached call's key: the stage's identity, the function and the call's own arguments (JSON values)."""
    blob = json.dumps({"stage": current(), "fn": ref, "args": args}, sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()


class StageIdentity(CachePolicy):
    """Prefect's cache policy for a stage's tasks: the stage's identity (combine it with ``INPUTS`` for the call's own
    arguments)."""

    def compute_key(self, task_ctx: Any, inputs: Dict[str, Any], flow_parameters: Dict[str, Any], **kwargs: Any) -> str:
        return current()


STAGE = StageIdentity()
