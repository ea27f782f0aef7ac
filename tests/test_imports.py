"""Import contracts over the project's modules (weakspot, flows, tasks, ops), read from their import statements at any
depth (a lazy import inside a function counts), never by running them:

- the library (``weakspot``) imports neither Prefect nor DVC, nor the pipeline (``flows``, ``tasks``) nor the
  operations (``ops``), not even for type annotations;
- the import graph of the project's modules has no cycle. Imports under ``if TYPE_CHECKING:`` are left out of this
  graph: they never run, so they make no import circle (``weakspot.methods`` names ``weakspot.targets.TargetParams``
  in annotations only, while ``weakspot.targets`` asks ``weakspot.methods`` for the method names);
- ``ops`` imports nothing of ``flows``, and no stage (``flows``) or its tasks (``tasks``) imports ``ops``: the report
  stage reads what the verdict wrote (issue 48);
- no module touches a private interface of Prefect or DVC: no ``prefect._internal``, no ``prefect.server``, no private
  attribute (``._name``) of either tool's objects.

Two more tests run code: a stage's lineage names torch's version without importing torch, and the closure's parse
survives Python 3.11's spurious parser error.
"""

import ast
from pathlib import Path
from typing import Dict, Iterator, List, Set

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("weakspot", "flows", "tasks", "ops")
#: What the library must not import: the orchestration (Prefect, prefect-dask), DVC (and its own packages), the
#: pipeline and the operations.
FORBIDDEN_IN_LIBRARY = ("prefect", "prefect_dask", "dvc", "flows", "tasks", "ops")


def _modules() -> Dict[str, Path]:
    """Every project module's dotted name -> its file."""
    out = {}
    for pkg in PACKAGES:
        for f in sorted((ROOT / pkg).rglob("*.py")):
            parts = f.relative_to(ROOT).with_suffix("").parts
            out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = f
    return out


def _type_checking(node: ast.AST) -> bool:
    """``if TYPE_CHECKING:`` (or ``if typing.TYPE_CHECKING:``)."""
    test = node.test if isinstance(node, ast.If) else None
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _nodes(tree: ast.AST, type_checking: bool) -> Iterator[ast.AST]:
    """Every node of ``tree`` (``ast.walk``), without the bodies of ``if TYPE_CHECKING:`` unless ``type_checking``."""
    todo = [tree]
    while todo:
        node = todo.pop()
        yield node
        if not type_checking and _type_checking(node):
            todo.extend(node.orelse)
            continue
        todo.extend(ast.iter_child_nodes(node))


def _imported(module: str, file: Path, type_checking: bool = True) -> Set[str]:
    """The dotted names the import statements of ``file`` name: ``import a.b`` -> a.b; ``from a import b`` -> a.b
    (``b`` may be a module or a name in ``a``); relative imports resolved against ``module``'s package."""
    pkg = module if file.name == "__init__.py" else module.rpartition(".")[0]
    out: Set[str] = set()
    for node in _nodes(ast.parse(file.read_text(), filename=str(file)), type_checking):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = pkg.split(".")[: len(pkg.split(".")) - node.level + 1]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            out.update(f"{mod}.{a.name}" for a in node.names)
    return out


def _graph() -> Dict[str, Set[str]]:
    """Project module -> the project modules it imports: for each imported name, the most specific module it names
    (``from a import b``: ``a.b`` when that is a module, else ``a``); a module's own name and the imports under
    ``if TYPE_CHECKING:`` left out."""
    mods = _modules()
    graph = {}
    for name, f in mods.items():
        edges = set()
        for imp in _imported(name, f, type_checking=False):
            parts = imp.split(".")
            hit = next((".".join(parts[:i]) for i in range(len(parts), 0, -1) if ".".join(parts[:i]) in mods), None)
            if hit is not None and hit != name:
                edges.add(hit)
        graph[name] = edges
    return graph


def _cycles(graph: Dict[str, Set[str]]) -> List[List[str]]:
    """One cycle (``[a, b, ..., a]``) in each strongly connected component of more than one module (Tarjan)."""
    index: Dict[str, int] = {}
    low: Dict[str, int] = {}
    stack: List[str] = []
    on: Set[str] = set()
    comps: List[Set[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = set()
            while True:
                w = stack.pop()
                on.discard(w)
                comp.add(w)
                if w == v:
                    break
            if len(comp) > 1:
                comps.append(comp)

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return [_one_cycle(graph, comp) for comp in comps]


def _one_cycle(graph: Dict[str, Set[str]], comp: Set[str]) -> List[str]:
    """A path from the component's first module back to itself, inside the component (breadth first: a short one)."""
    start = min(comp)
    paths = {start: [start]}
    todo = [start]
    while todo:
        v = todo.pop(0)
        for w in sorted(graph[v] & comp):
            if w == start:
                return paths[v] + [start]
            if w not in paths:
                paths[w] = paths[v] + [w]
                todo.append(w)
    raise AssertionError(f"no cycle through {start} in {sorted(comp)}")


def test_the_modules_are_found():
    mods = _modules()
    assert {"weakspot.config", "flows.method", "tasks.runner", "ops.cli", "tasks.settings"} <= set(mods)
    assert len([m for m in mods if m.startswith("weakspot.")]) > 30


def test_the_library_imports_no_orchestration_pipeline_or_operations():
    bad = []
    for name, f in _modules().items():
        if name.split(".")[0] != "weakspot":
            continue
        for imp in sorted(_imported(name, f)):
            if imp.split(".")[0] in FORBIDDEN_IN_LIBRARY:
                bad.append(f"{f.relative_to(ROOT)} imports {imp}")
    assert not bad, "the library (weakspot/) must stay pure:\n" + "\n".join(bad)


def test_the_project_import_graph_has_no_cycle():
    cycles = _cycles(_graph())
    assert not cycles, "import cycles:\n" + "\n".join(" -> ".join(c) for c in cycles)


def test_the_cycle_finder_finds_a_planted_cycle_and_type_only_imports_are_no_edge(tmp_path):
    f = tmp_path / "m.py"
    f.write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import a.t\nelse:\n    import a.e\n"
        "def f():\n    from . import lazy\n"
    )
    assert _imported("a.m", f) == {"typing.TYPE_CHECKING", "a.t", "a.e", "a.lazy"}
    assert _imported("a.m", f, type_checking=False) == {"typing.TYPE_CHECKING", "a.e", "a.lazy"}
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": set(), "e": {"e"}}
    assert _cycles(graph) == [["a", "b", "c", "a"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def test_operations_import_no_flow_and_no_stage_imports_operations():
    bad = []
    for name, edges in _graph().items():
        top = name.split(".")[0]
        wrong = {"ops": "flows", "flows": "ops", "tasks": "ops"}.get(top)
        bad += [f"{name} imports {e}" for e in sorted(edges) if e.split(".")[0] == wrong]
    assert not bad, "\n".join(bad)


def _private_import(name: str) -> bool:
    """An import of Prefect's private modules (``prefect._internal``, any ``prefect._x``) or its server's internals
    (``prefect.server``): its client, CLI, settings, deployments, work pools and automations are the interface."""
    parts = name.split(".")
    return parts[0] == "prefect" and len(parts) > 1 and (parts[1].startswith("_") or parts[1] == "server")


def _private_attributes(text: str) -> List[str]:
    """``obj._x`` read off an object a module did not make (``self._x``, ``cls._x`` and dunders are allowed)."""
    found = []
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__"):
            owner = node.value
            if not (isinstance(owner, ast.Name) and owner.id in ("self", "cls")):
                found.append(f"{node.lineno}: .{node.attr}")
    return found


def test_no_module_uses_a_private_interface_of_prefect_or_dvc():
    """Issue 48: public interfaces only. No module of ours imports ``prefect._internal`` (or any ``prefect._x``) or a
    ``prefect.server`` module (nor DVC's modules: the test below), and the modules that drive Prefect and DVC (ops/,
    flows/, tasks/) read no private attribute of an object (``runner._client``); their own private helpers
    (``module._helper``) are theirs."""
    ours = {name.rsplit(".", 1)[-1] for name in _modules()}
    own_names = {
        n.name
        for f in _modules().values()
        for n in ast.walk(ast.parse(f.read_text()))
        if isinstance(n, (ast.FunctionDef, ast.ClassDef, ast.AsyncFunctionDef))
    }
    bad = [
        f"{f.relative_to(ROOT)} imports {imp}"
        for name, f in _modules().items()
        for imp in sorted(_imported(name, f))
        if _private_import(imp)
    ]
    for name, f in sorted(_modules().items()):
        if name.split(".")[0] in ("ops", "flows", "tasks"):
            for hit in _private_attributes(f.read_text()):
                attr = hit.rsplit(".", 1)[-1]
                if attr not in own_names and attr.lstrip("_") not in ours and attr not in ours:
                    bad.append(f"{f.relative_to(ROOT)}:{hit}")
    assert not bad, "\n".join(bad)


def test_the_private_interface_check_finds_planted_uses():
    assert _private_import("prefect._internal.schemas.validators") and _private_import("prefect.server.api.server")
    assert not _private_import("prefect.client.orchestration") and not _private_import("prefect.deployments")
    assert _private_attributes("x = runner._client\n") == ["1: ._client"]
    assert _private_attributes("self._x = 1\ncls._y = 2\nprint(a.__dict__)\n") == []


def test_nothing_imports_dvc_its_cli_is_the_interface():
    """DVC is driven through its command line (ops/engine/dvc.py, ops/engine/stage_flow.py) and its files (dvc.yaml, dvc.lock), never
    through its Python modules, whose internals change from one minor version to the next."""
    bad = [
        f"{f.relative_to(ROOT)} imports {imp}"
        for name, f in _modules().items()
        for imp in sorted(_imported(name, f))
        if imp.split(".")[0] == "dvc"
    ]
    assert not bad, "\n".join(bad)


def test_no_pipeline_or_operations_module_imports_another_only_for_its_side_effect():
    """An import kept although nothing of it is used (ruff's F401, silenced) is an import for a side effect: the
    pipeline's params sections are read through tasks.settings' own readers, and a flow's package settings come with the
    package, so flows/, tasks/ and ops/ hold none."""
    found = [
        f"{path.relative_to(ROOT)}:{i}"
        for pkg in ("flows", "tasks", "ops")
        for path in sorted((ROOT / pkg).rglob("*.py"))
        for i, line in enumerate(path.read_text().splitlines(), 1)
        if "noqa: F401" in line
    ]
    assert not found, found


def test_a_stages_lineage_does_not_import_torch():
    """The code version in every artifact's lineage names the installed torch without importing it: a tabular stage
    never loads torch (it cost seconds of CPU per stage)."""
    import subprocess
    import sys

    code = (
        "import sys; from tasks.common import code_version; v = code_version(); "
        "assert 'torch' not in sys.modules, 'torch imported'; print(v['torch'])"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr[-2000:]
    import torch

    assert out.stdout.strip() == torch.__version__  # the build tag included (the metadata's version lacks it)


def test_a_spurious_parser_error_is_tried_again(tmp_path, monkeypatch):
    """Python 3.11's parser can raise a spurious SystemError when two threads parse at once (CPython issue 106905):
    the import closure tries the parse again instead of failing the stage; a real syntax error still fails."""
    import ast

    from tasks import closure

    f = tmp_path / "m.py"
    f.write_text("import json\nfrom os import path\n")
    real, calls = ast.parse, []

    def flaky(*args, **kwargs):
        calls.append(1)
        if len(calls) == 1:
            raise SystemError("AST constructor recursion depth mismatch (before=57, after=76)")
        return real(*args, **kwargs)

    monkeypatch.setattr(ast, "parse", flaky)
    assert {"json", "os", "os.path"} <= closure._parse_imports(f, "m")
    assert len(calls) == 2
    f.write_text("import (\n")
    with pytest.raises(SyntaxError):
        closure._parse_imports(f, "m")
