"""The project files a module needs: the import closure behind every stage's DVC deps and every cached call's key.

Caveats first: the closure is read from import statements (at any depth, so a lazy import inside a function counts),
never by running code; a module loaded by a name computed at run time (``importlib.import_module(name)``) is not in
it, so whoever loads one adds its closure (the generic method stage adds the method's entry points).
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Dict, FrozenSet, Iterable, List, Optional, Set, Tuple

ROOT = Path(__file__).resolve().parents[1]
PROJECT_PACKAGES = ("weakspot", "flows", "tasks", "ops")
#: Modules a stage loads that decide where its tasks run, never what they compute: no stage's dependency, so changing
#: them (or params.yaml's ``execution``) reruns nothing. tests/test_dask.py checks the results are the same.
WHERE_NOT_WHAT = ("tasks/runner.py",)


def _module_file(name: str) -> Optional[Path]:
    """The .py file of a project module (``None`` for third-party modules)."""
    if name.split(".")[0] not in PROJECT_PACKAGES:
        return None
    parts = name.split(".")
    base = ROOT.joinpath(*parts)
    if (base / "__init__.py").is_file():
        return base / "__init__.py"
    if base.with_suffix(".py").is_file():
        return base.with_suffix(".py")
    return None


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
        full.update(".".join(parts[: i + 1]) for i in range(len(parts)))
    return full


def module_closure(module: str, skip: Iterable[str] = ()) -> List[str]:
    """The project files a module needs: itself and every project module it imports, transitively (sorted,
    relative to the repository root); the files in ``skip`` are left out, and so is what only they import."""
    skip = set(skip)
    seen: Set[str] = set()
    files: Set[Path] = set()
    parts = module.split(".")
    todo = [".".join(parts[: i + 1]) for i in range(len(parts))]  # importing a.b.c runs a/ and a/b/__init__ first
    while todo:
        m = todo.pop()
        if m in seen:
            continue
        seen.add(m)
        f = _module_file(m)
        if f is None or str(f.relative_to(ROOT)) in skip:
            continue
        files.add(f)
        todo.extend(_imports_of(f, m) - seen)
    return sorted(str(f.relative_to(ROOT)) for f in files)


def closure(*modules: str) -> List[str]:
    """The project files the modules need, all together, without the runner's (:data:`WHERE_NOT_WHAT`) and what only
    the runner imports (the ``execution`` section's model)."""
    files: Set[str] = set()
    for m in modules:
        files.update(module_closure(m, skip=WHERE_NOT_WHAT))
    return sorted(files | set(data_folders(files)))


def data_folders(files: "Set[str] | List[str]") -> List[str]:
    """The data folders of the packages the files are in: subfolders holding no Python module (the report's
    templates), which the code reads as it reads its own modules."""
    out = set()
    for d in {Path(f).parent for f in files if f.endswith("__init__.py")}:
        for sub in (ROOT / d).iterdir():
            if sub.is_dir() and not sub.name.startswith((".", "__")) and not any(sub.rglob("*.py")):
                out.add(str(sub.relative_to(ROOT)))
    return sorted(out)


_DIGESTS: dict = {}


def closure_digest(*modules: str) -> str:
    """sha256 over the files of :func:`closure` (each data folder's files included): the code identity of a cached
    call, the same files that make the stage's DVC deps, so a change that reruns a stage in DVC also misses Prefect's
    cache (and nothing else does)."""
    import hashlib

    if modules not in _DIGESTS:
        h = hashlib.sha256()
        for rel in closure(*modules):
            p = ROOT / rel
            for f in sorted(x for x in p.rglob("*") if x.is_file()) if p.is_dir() else [p]:
                if "__pycache__" in f.parts:
                    continue
                h.update(str(f.relative_to(ROOT)).encode())
                h.update(f.read_bytes())
        _DIGESTS[modules] = h.hexdigest()
    return _DIGESTS[modules]
