"""ops.lock: two audits at once -- the second refuses, naming the first; a stale lock is taken over."""

import json
import subprocess
import sys

import pytest

from ops.lock import LOCK, AuditRunning, audit_lock


def test_a_second_audit_refuses_and_names_the_first(tmp_path):
    with audit_lock(tmp_path, "weakspot audit --force", say=None) as lock:
        info = json.loads(lock.read_text())
        with pytest.raises(AuditRunning, match=rf"process {info['pid']} on .*weakspot audit --force.*kill"):
            with audit_lock(tmp_path, say=None):
                pass
        assert lock.is_file()  # the refused audit left the first one's lock alone
    assert not (tmp_path / LOCK).exists()  # released at the end


def test_a_lock_from_another_live_process_also_refuses(tmp_path):
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        import socket

        (tmp_path / LOCK).parent.mkdir(parents=True)
        (tmp_path / LOCK).write_text(json.dumps({"pid": proc.pid, "host": socket.gethostname(),
                                                 "started": "2026-11-22T02:00:00+00:00", "command": "weakspot audit"}))
        with pytest.raises(AuditRunning, match=str(proc.pid)):
            with audit_lock(tmp_path, say=None):
                pass
    finally:
        proc.kill()
        proc.wait()


def test_a_stale_lock_of_a_dead_process_is_taken_over(tmp_path):
    import socket

    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    (tmp_path / LOCK).parent.mkdir(parents=True)
    (tmp_path / LOCK).write_text(json.dumps({"pid": dead.pid, "host": socket.gethostname(), "started": "x"}))
    said = []
    with audit_lock(tmp_path, say=said.append) as lock:
        assert json.loads(lock.read_text())["pid"] != dead.pid
    assert said and "stale" in said[0] and str(dead.pid) in said[0]
