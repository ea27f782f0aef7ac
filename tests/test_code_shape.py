"""The shape of the library's code: short functions, and every method package laid out the same way (DESIGN.md "A
method package"), so that a method can be read, changed and rerun on its own."""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MAX_LINES = 120


def _functions(path: Path):
    """(name, line, lines of its body): the code after its signature and docstring, which the formatter lays out one
    parameter per line and which says what the function does rather than doing it."""
    tree = ast.parse(path.read_text(), filename=str(path))
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body[1:] if ast.get_docstring(node) and len(node.body) > 1 else node.body
            yield node.name, node.lineno, node.end_lineno - body[0].lineno + 1


def test_no_function_body_in_the_library_is_longer_than_120_lines():
    long = [
        f"{p.relative_to(ROOT)}:{line} {name} ({n} lines)"
        for p in sorted((ROOT / "weakspot").rglob("*.py"))
        for name, line, n in _functions(p)
        if n > MAX_LINES
    ]
    assert not long, "split these functions:\n" + "\n".join(long)


def test_every_method_package_has_its_registration_params_and_entry_point():
    from weakspot import methods

    for m in methods.all_methods():
        pkg = ROOT / "weakspot" / m.name
        if not pkg.is_dir():  # a method from another installed package (entry point)
            continue
        assert {"__init__.py", "config.py", "run.py"} <= {p.name for p in pkg.glob("*.py")}, m.name
        assert m.run.startswith(f"weakspot.{m.name}."), m.run
        init = ast.parse((pkg / "__init__.py").read_text())
        imported = {n.module for n in ast.walk(init) if isinstance(n, ast.ImportFrom)}
        # registering a method loads its params model and nothing heavier
        assert imported <= {f"weakspot.{m.name}.config", "weakspot.methods", "__future__"}, (m.name, imported)
