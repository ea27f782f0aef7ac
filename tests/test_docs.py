"""The documentation: the MkDocs site builds in strict mode (every broken link, missing page or griffe warning about a
docstring fails it), and every ``>>>`` example in the library's docstrings runs as a doctest and gives what it says.
"""

import doctest
import importlib
import io
import pkgutil
import re
import subprocess
import sys
from itertools import takewhile
from pathlib import Path

import torch

import weakspot

ROOT = Path(__file__).resolve().parents[1]
METHOD_PAGES = ("segments", "gad", "examine", "intrinsic", "corner", "robustness", "hda")


def test_the_site_builds_in_strict_mode_with_the_method_pages_and_the_api_reference(tmp_path):
    site = tmp_path / "site"
    out = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--clean", "-d", str(site)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    params = (ROOT / "params.yaml").read_text()
    for m in METHOD_PAGES:  # use_directory_urls: false, so the pages open from disk too
        page = (site / "methods" / f"{m}.html").read_text()
        assert "On the default audit" in page and "this machine's default audit" in page, m
        # its settings are params.yaml's section as it is (docs/hooks.py), not a copy: its first key's line is there
        key = next(ln for ln in params.split(f"\n{m}:\n", 1)[1].splitlines() if ln.strip() and not ln.startswith("#"))
        assert key.strip().split(":")[0] in page and "params.yaml: " not in page, m
    api = (site / "reference" / "api.html").read_text()
    # mkdocstrings rendered weakspot.api's members, not just the page's own text
    assert 'id="weakspot.api.audit"' in api and 'id="weakspot.api.Audit"' in api
    assert "weak_spots" in api
    assert (site / "img" / "report-top.png").is_file()


def _modules():
    """Every module of the ``weakspot`` package (imported), in name order."""
    names = sorted(m.name for m in pkgutil.walk_packages(weakspot.__path__, "weakspot."))
    # every module imports with the project's own dependencies (bpy, torch, ART are required ones): none is skipped
    return [weakspot] + [importlib.import_module(n) for n in names]


def _examples_in_the_source() -> int:
    """``>>>`` lines in the library's source files that doctest runs (not marked ``+SKIP``), counted from the text
    alone: a floor for what the finder must find, so a module or docstring the finder missed cannot pass unseen."""
    n = 0
    for f in sorted((ROOT / "weakspot").rglob("*.py")):
        lines = f.read_text().splitlines()
        for i, line in enumerate(lines):
            if re.match(r"\s*>>> ", line):
                example = [line] + list(takewhile(lambda s: re.match(r"\s*\.\.\. ", s), lines[i + 1 :]))
                n += not any("doctest: +SKIP" in s for s in example)  # a directive on any of its lines skips it
    return n


def test_every_docstring_example_in_the_library_runs():
    finder = doctest.DocTestFinder(exclude_empty=True)
    runner = doctest.DocTestRunner(verbose=False)
    tests = [t for m in _modules() for t in finder.find(m, m.__name__)]
    report = []
    # some examples seed torch's global generator (torch.manual_seed): the tests after these in the same process get
    # it back as it was
    rng, threads = torch.random.get_rng_state(), torch.get_num_threads()
    try:
        for t in sorted(tests, key=lambda t: t.name):
            before = runner.failures
            buf = io.StringIO()
            runner.run(t, out=buf.write)
            if runner.failures > before:
                report.append(buf.getvalue())
    finally:
        torch.random.set_rng_state(rng)
        torch.set_num_threads(threads)
    failed, attempted = runner.summarize(verbose=False)
    assert failed == 0, "\n".join(report)
    expected = _examples_in_the_source()
    assert expected >= 180  # 182 when this test was written: a count far below it means the count itself broke
    assert attempted >= expected, (attempted, expected)
