"""The install is the lock: this environment holds every distribution of requirements.lock at the version it pins, and
nothing else (as ``pip freeze`` lists an environment: weakspot itself, pip, setuptools and wheel left out), so a fresh
clone runs the versions CI tested. ``make lock`` refreshes the lock on purpose."""

import importlib.metadata
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
NOT_FROZEN = {"weakspot", "pip", "setuptools", "wheel", "distribute"}


def _name(n: str) -> str:
    return re.sub(r"[-_.]+", "-", n).lower()


def _pins() -> dict:
    pins = {}
    for line in (ROOT / "requirements.lock").read_text().splitlines():
        m = re.match(r"([A-Za-z0-9][A-Za-z0-9._-]*)(\[[^\]]*\])?==([^\s\\;]+)", line)
        if m:
            pins[_name(m.group(1))] = m.group(3)
    return pins


def test_every_locked_distribution_is_pinned_with_its_hashes():
    text = (ROOT / "requirements.lock").read_text()
    blocks = re.split(r"\n(?=[A-Za-z0-9])", text)[1:]  # each starts at a requirement's line; the first is the header
    assert len(blocks) == len(_pins()) > 100
    for b in blocks:
        assert "==" in b.splitlines()[0] and "--hash=sha256:" in b, b[:200]


def test_the_environment_is_the_lock():
    pins = {n: v for n, v in _pins().items() if n not in NOT_FROZEN}
    installed = {_name(d.metadata["Name"]): d.version for d in importlib.metadata.distributions()}
    installed = {n: v for n, v in installed.items() if n not in NOT_FROZEN}
    missing = {n: v for n, v in pins.items() if n not in installed}
    other = {n: (installed[n], v) for n, v in pins.items() if n in installed and installed[n] != v}
    extra = sorted(set(installed) - set(pins))
    assert not missing and not other and not extra, (
        f"not installed: {missing}; other versions (installed, locked): {other}; not in the lock: {extra}"
    )
