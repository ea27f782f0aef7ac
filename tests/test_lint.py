"""Lint, format and types, run by ``make test``: ruff's lint rules and its formatter's check over the project, and
mypy over the library (weakspot/). Their settings are pyproject.toml's [tool.ruff] and [tool.mypy]."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", *args], cwd=ROOT, capture_output=True, text=True, timeout=600)


def test_ruff_finds_nothing():
    out = _run("ruff", "check", "--no-cache", ".")
    assert out.returncode == 0, out.stdout + out.stderr


def test_the_code_is_as_ruff_formats_it():
    out = _run("ruff", "format", "--check", "--no-cache", ".")
    assert out.returncode == 0, out.stdout + out.stderr


def test_mypy_finds_nothing_in_the_library():
    out = _run("mypy", "--no-incremental")
    assert out.returncode == 0 and "Success: no issues found" in out.stdout, out.stdout[-5000:] + out.stderr


def test_test_modules_outside_packages_have_unique_names():
    """pytest imports a test folder without ``__init__.py`` by its file's bare name (rootdir-relative import mode), so
    two such files with one name stop the collection of every group ("import file mismatch"), on a clean clone only."""
    seen: dict[str, Path] = {}
    clashes = []
    for path in sorted((ROOT / "tests").rglob("test_*.py")):
        if (path.parent / "__init__.py").exists():
            continue
        if path.name in seen:
            clashes.append(f"{seen[path.name].relative_to(ROOT)} and {path.relative_to(ROOT)}")
        seen[path.name] = path
    assert not clashes, "test files that share a name outside a package: " + "; ".join(clashes)
