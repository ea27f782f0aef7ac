"""`make test` relies on pytest-xdist honouring the groups tests/conftest.py gives in its collection hook (the tests
that share an audited repository on one worker). pytest 9.2 broke that silently (pytest-xdist issue 1386: the group
rides on the node id, which pytest 9.2 no longer lets a plugin change), so the lock holds pytest below 9.2 and this
test fails if an upgrade breaks it again."""

import subprocess
import sys

import pytest

CONFTEST = """
import pytest


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items):
    for item in items:
        if "grouped" in item.name:
            item.add_marker(pytest.mark.xdist_group("shared"))
"""

TESTS = """
import os
import time


def _where(name, tmp_path_factory):
    out = tmp_path_factory.getbasetemp().parent / f"{name}.worker"
    out.write_text(os.environ["PYTEST_XDIST_WORKER"])
    time.sleep(0.2)
""" + "".join(
    f"\n\ndef test_{kind}_{i}(tmp_path_factory):\n    _where('{kind}_{i}', tmp_path_factory)\n"
    for kind in ("grouped", "free")
    for i in range(6)
)


@pytest.mark.pipeline  # a pytest run of its own on two workers
def test_a_group_given_in_the_collection_hook_runs_on_one_worker(tmp_path):
    (tmp_path / "conftest.py").write_text(CONFTEST)
    (tmp_path / "test_probe.py").write_text(TESTS)
    base = tmp_path / "base"
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "2", "--dist", "loadgroup",
         f"--basetemp={base}", "test_probe.py"],
        cwd=tmp_path, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    workers = {p.stem: p.read_text() for p in base.glob("*.worker")}
    assert len(workers) == 12, workers
    assert len({w for name, w in workers.items() if name.startswith("grouped")}) == 1, workers
    assert len(set(workers.values())) == 2, "the free tests should spread over both workers"
