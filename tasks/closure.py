"""The code a module needs: the import closure behind every stage's DVC deps, params and cached calls' keys.

Caveats first: the closure is read from import statements (at any depth, so a lazy import inside a function counts),
never by running code; a module loaded by a name computed at run time (``importlib.import_module(name)``) is not in
it, so whoever loads one adds its closure (the generic method stage adds the method's entry points, the target
stages the user's model factory). Every module it reaches is one of four kinds (:func:`locate`):

- a **file** outside installed distributions: the project's packages, the user's own modules (a model factory, a
  ``callable`` model) and the package they sit in, a plug-in method installed from a folder (an editable install or
  a folder on ``PYTHONPATH``). Its file is a DVC dependency of the stage and followed further.
- a module of an installed **distribution** (in site-packages): not followed; the distribution's name and version
  (and those of the distributions it requires, transitively) are the stage's ``packages`` params
  (:mod:`tasks.packages`).
- the standard library or a built-in module: neither (Python's own version is a ``packages`` param of every stage).
- not found on this machine: neither (an optional import the code guards).
"""

from __future__ import annotations

import ast
import importlib.util
import os
import sys
import sysconfig
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Dict, FrozenSet, Iterable, List, Optional, Set, Tuple

ROOT = Path(__file__).resolve().parents[1]
PROJECT_PACKAGES = ("weakspot", "flows", "tasks", "ops")
#: Modules a stage loads that decide where its tasks run, never what they compute: no stage's dependency, so changing
#: them (or params.yaml's ``execution``) reruns nothing. tests/test_dask.py checks the results are the same.
WHERE_NOT_WHAT = ("tasks/runner.py",)


@dataclass(frozen=True)
class Located:
    """Where a top-level module lives: ``kind`` is ``file`` (followed; ``base`` is the folder its name is found in),
    ``dist`` (an installed distribution's), ``stdlib`` or ``missing``."""

    kind: str
    base: Optional[Path] = None


def _installed_dirs() -> Tuple[str, ...]:
    paths = sysconfig.get_paths()
    return tuple(sorted({os.path.realpath(paths[k]) for k in ("purelib", "platlib") if paths.get(k)}))


def _stdlib_dirs() -> Tuple[str, ...]:
    paths = sysconfig.get_paths()
    return tuple(sorted({os.path.realpath(paths[k]) for k in ("stdlib", "platstdlib") if paths.get(k)}))


def _under(path: str, dirs: Iterable[str]) -> bool:
    return any(path == d or path.startswith(d + os.sep) for d in dirs)


def _search_path() -> List[Path]:
    """Where a stage finds modules: the repository root (DVC runs ``python -m`` there), then ``sys.path``."""
    out, seen = [], set()
    for entry in [str(ROOT), *sys.path]:
        p = Path(entry or os.getcwd()).resolve()
        if str(p) not in seen and p.is_dir():
            seen.add(str(p))
            out.append(p)
    return out


@lru_cache(maxsize=None)
def locate(top: str) -> Located:
    """Where the top-level module ``top`` lives (see the module's doc); found without running it."""
    if top in PROJECT_PACKAGES:
        return Located("file", ROOT)
    if top in sys.builtin_module_names or top in getattr(sys, "stdlib_module_names", ()):
        return Located("stdlib")
    installed, stdlib = _installed_dirs(), _stdlib_dirs()
    for entry in _search_path():
        real = os.path.realpath(entry)
        for cand in (entry / top / "__init__.py", entry / f"{top}.py"):
            if cand.is_file():
                if _under(real, installed):
                    return Located("dist")
                if _under(real, stdlib):
                    return Located("stdlib")
                return Located("file", entry)
    try:  # an extension module, a namespace package or an editable install's import hook
        spec = importlib.util.find_spec(top)
    except (ImportError, ValueError):
        spec = None
    if spec is None:
        return Located("missing")
    where = spec.origin if spec.origin not in (None, "built-in", "frozen", "namespace") else None
    namespace = where is None and bool(spec.submodule_search_locations)
    if namespace:
        where = next(iter(spec.submodule_search_locations or []), None)
    if where is None:
        return Located("stdlib")
    real = os.path.realpath(where)
    if _under(real, installed):
        return Located("dist")
    if _under(real, stdlib):
        return Located("stdlib")
    p = Path(where)
    if namespace:  # a folder of modules without __init__.py (PEP 420): the user's code as much as a package
        return Located("file", p.parent)
    if p.name == "__init__.py":
        return Located("file", p.parent.parent)
    if p.suffix == ".py":
        return Located("file", p.parent)
    return Located("dist")  # a compiled extension outside site-packages: identified by what installed it, if any


def _module_file(name: str) -> Optional[Path]:
    """The .py file of a module followed by the closure (``None`` for a distribution's, the standard library's or a
    missing module)."""
    loc = locate(name.split(".")[0])
    if loc.kind != "file" or loc.base is None:
        return None
    base = loc.base.joinpath(*name.split("."))
    if (base / "__init__.py").is_file():
        return base / "__init__.py"
    if base.with_suffix(".py").is_file():
        return base.with_suffix(".py")
    return None


def rel(f: Path) -> str:
    """A dependency's path as dvc.yaml holds it: relative to the repository root inside it, absolute outside."""
    f = Path(f).resolve()
    try:
        return str(f.relative_to(ROOT))
    except ValueError:
        return str(f)


def _abs(path: str) -> Path:
    return Path(path) if os.path.isabs(path) else ROOT / path


#: a file's imports by (path, module, mtime, size): each file is parsed once per process while it is unchanged (a
#: dvc.yaml walks the same modules from every stage's flow; parsing them all again took seconds)
_PARSED: Dict[Tuple[str, str, int, int], FrozenSet[str]] = {}


def _imports_of(file: Path, module: str) -> Set[str]:
    """Every module named by an import statement in ``file`` (at any depth: lazy imports count), plus the packages
    that contain them (importing ``a.b.c`` runs ``a/__init__`` and ``a/b/__init__``)."""
    st = file.stat()
    key = (str(file), module, st.st_mtime_ns, st.st_size)
    if key not in _PARSED:
        _PARSED[key] = frozenset(_parse_imports(file, module))
    return set(_PARSED[key])


def _parse(file: Path) -> ast.Module:
    """``file``'s syntax tree. Python 3.11 converts the parsed tree into Python objects with a recursion counter that
    all threads share, so a parse while another thread parses can fail with a spurious ``SystemError: AST constructor
    recursion depth mismatch`` (CPython issue 106905; a stage once failed with it): tried again. Any other error is
    raised at once."""
    source = file.read_text()
    for attempt in range(5):
        try:
            return ast.parse(source, filename=str(file))
        except SystemError as e:
            if "recursion depth mismatch" not in str(e) or attempt == 4:
                raise
    raise AssertionError("unreachable")


def _parse_imports(file: Path, module: str) -> Set[str]:
    tree = _parse(file)
    pkg = module if file.name == "__init__.py" else module.rsplit(".", 1)[0]
    out: Set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = pkg.split(".")
                base = base[: len(base) - node.level + 1]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            out.add(mod)
            out.update(f"{mod}.{a.name}" for a in node.names)  # `from pkg import submodule`
    full: Set[str] = set()
    for m in out:
        parts = m.split(".")
        full.update(".".join(parts[: i + 1]) for i in range(len(parts)) if parts[i])
    return full


def _walk(modules: Iterable[str], skip: Iterable[str] = ()) -> Tuple[Set[Path], Set[str]]:
    """(the files followed, the top-level names of the distributions reached) from ``modules``, transitively; the
    files in ``skip`` (relative paths) are left out, and so is what only they import."""
    skip = set(skip)
    seen: Set[str] = set()
    files: Set[Path] = set()
    dists: Set[str] = set()
    todo: List[str] = []
    for module in modules:
        parts = module.split(".")
        todo += [".".join(parts[: i + 1]) for i in range(len(parts))]  # importing a.b.c runs a/, a/b/ first
    while todo:
        m = todo.pop()
        if m in seen:
            continue
        seen.add(m)
        if locate(m.split(".")[0]).kind == "dist":
            dists.add(m.split(".")[0])
            continue
        f = _module_file(m)
        if f is None or rel(f) in skip:
            continue
        files.add(f)
        todo.extend(_imports_of(f, m) - seen)
    return files, dists


def module_closure(module: str, skip: Iterable[str] = ()) -> List[str]:
    """The files a module needs: itself and every module it imports from outside installed distributions,
    transitively (sorted; relative to the repository root inside it); the files in ``skip`` are left out, and so is
    what only they import."""
    files, _ = _walk([module], skip)
    return sorted(rel(f) for f in files)


def closure(*modules: str) -> List[str]:
    """The files the modules need, all together, without the runner's (:data:`WHERE_NOT_WHAT`) and what only the
    runner imports (the ``execution`` section's model), with the data folders of their packages."""
    files, _ = _walk(modules, skip=WHERE_NOT_WHAT)
    names = {rel(f) for f in files}
    return sorted(names | set(data_folders(names)))


def distributions_imported(*modules: str) -> List[str]:
    """The top-level names of installed distributions' modules the modules import (directly or through the files
    of :func:`closure`), sorted."""
    _, dists = _walk(modules, skip=WHERE_NOT_WHAT)
    return sorted(dists)


def user_package(module: str) -> List[str]:
    """The code of a user's module named in params.yaml (a model factory, a ``callable`` model): the package it sits
    in (its top-level folder, every file) or the module's own file, and the closure of every module they import;
    nothing for a module of an installed distribution or the project's own packages (already deps)."""
    top = module.split(".")[0]
    loc = locate(top)
    if loc.kind != "file" or loc.base is None or top in PROJECT_PACKAGES:
        return []
    folder = loc.base / top
    own = sorted(folder.rglob("*.py")) if folder.is_dir() else [loc.base / f"{top}.py"]  # a namespace package too
    mods = [module] + [".".join(f.relative_to(loc.base).with_suffix("").parts) for f in own]
    mods = [m[: -len(".__init__")] if m.endswith(".__init__") else m for m in mods]
    files, _ = _walk(mods, skip=WHERE_NOT_WHAT)
    names = {rel(f) for f in files} | {rel(f) for f in own if "__pycache__" not in f.parts}
    return sorted(names | set(data_folders(names)))


def data_folders(files: "Set[str] | List[str]") -> List[str]:
    """The data folders of the packages the files are in: subfolders holding no Python module (the report's
    templates), which the code reads as it reads its own modules."""
    out = set()
    for d in {_abs(f).parent for f in files if f.endswith("__init__.py")}:
        for sub in d.iterdir():
            if sub.is_dir() and not sub.name.startswith((".", "__")) and not any(sub.rglob("*.py")):
                out.add(rel(sub))
    return sorted(out)
