"""ops.engine.lock: two audits at once -- the second refuses, naming the first (process, host, start time, command); a lock
whose holder was killed (SIGKILL) does not block the next audit."""

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from ops.engine.lock import INFO, LOCK, AuditRunning, audit_lock

ROOT = Path(__file__).resolve().parents[2]

#: A second process that takes the lock of the checkout in argv[1] and holds it until it is killed.
HOLD = """
import sys, time
from ops.engine.lock import audit_lock
with audit_lock(sys.argv[1], "weakspot audit --force", say=None):
    print("held", flush=True)
    time.sleep(300)
"""


@pytest.fixture()
def holder(tmp_path):
    """Another process holding the audit lock of ``tmp_path`` (killed at the end if the test did not)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    proc = subprocess.Popen([sys.executable, "-c", HOLD, str(tmp_path)], env=env, stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "held"
    yield proc
    proc.kill()
    proc.wait()


def test_a_second_audit_refuses_and_names_the_first(tmp_path):
    with audit_lock(tmp_path, "weakspot audit --force", say=None) as lock:
        assert lock == tmp_path / LOCK
        info = json.loads((tmp_path / INFO).read_text())
        assert info["pid"] == os.getpid() and info["host"] == socket.gethostname()
        with pytest.raises(
            AuditRunning,
            match=rf"process {info['pid']} on {info['host']}, started "
            rf"{re.escape(info['started'])} \(weakspot audit --force\).*kill {info['pid']}",
        ):
            with audit_lock(tmp_path, say=None):
                pass
        assert json.loads((tmp_path / INFO).read_text()) == info  # the refused audit left the first one's alone
    assert not (tmp_path / INFO).exists()  # released at the end: the next audit takes it, silently
    said = []
    with audit_lock(tmp_path, say=said.append):
        pass
    assert said == []


def test_another_process_holds_the_lock_until_it_is_killed_with_sigkill(tmp_path, holder):
    with pytest.raises(
        AuditRunning,
        match=rf"another audit is running in this repository: process {holder.pid} "
        rf"on {socket.gethostname()}, started .*\(weakspot audit --force\)",
    ):
        with audit_lock(tmp_path, say=None):
            pass
    holder.send_signal(signal.SIGKILL)  # no clean-up runs: the side file stays, the kernel drops the flock
    holder.wait()
    assert json.loads((tmp_path / INFO).read_text())["pid"] == holder.pid
    said = []
    with audit_lock(tmp_path, say=said.append):
        assert json.loads((tmp_path / INFO).read_text())["pid"] == os.getpid()
    assert len(said) == 1 and f"process {holder.pid}" in said[0] and "ended without releasing" in said[0]


def test_weakspot_audit_exits_2_naming_the_running_audit(tmp_path, holder):
    """What the user sees: `weakspot audit` in a checkout whose audit runs refuses before touching anything."""
    shutil.copy(ROOT / "params.yaml", tmp_path / "params.yaml")
    (tmp_path / "flows").mkdir()
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    out = subprocess.run(
        [sys.executable, "-m", "ops.cli", "audit"], cwd=tmp_path, env=env, capture_output=True, text=True
    )
    assert out.returncode == 2, out.stdout + out.stderr
    assert (
        f"weakspot: error: another audit is running in this repository: process {holder.pid} on {socket.gethostname()}"
    ) in out.stderr and "(weakspot audit --force)" in out.stderr
    assert not (tmp_path / "dvc.yaml").exists()  # refused before regenerating anything
