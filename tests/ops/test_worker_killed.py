"""A worker killed with SIGKILL in the middle of a stage, together with its flow run's process tree (issues 35, 48): no
process of it is left to report anything, so Prefect notices through the flow run's missing heartbeats (the
automation of ops/engine/lost.py marks it Crashed), the audit's flow runs the stage again on a live worker, and it completes with the bytes of an undisturbed audit of the same params (``ops_repo``, whose stages ran in the
checkout: test_workers.py shows the bytes are the same either way), nothing is lost or duplicated. Marked ``ops``: a
throwaway repository audited through two local process workers."""

import json
import signal
import subprocess
import time

import pytest
from test_workers import WEAKSPOT, _descendants, _flow_runs, _lock


@pytest.mark.ops
def test_a_worker_killed_mid_stage_and_the_audit_completes_with_the_same_bytes(ops_repo, repo_factory, tmp_path):
    """kill -9 of the worker running train-phoneme (and of the stage it runs, as a power cut would): Prefect marks
    its flow run Crashed once three heartbeats (30 s each) are missed, and the stage runs again on the live worker; every metric is the bytes of the undisturbed audit's (``ops_repo``: the
    same params but for ``execution.in_checkout``, audited without a kill)."""
    import psutil

    from conftest import write_tiny_params

    r = write_tiny_params(repo_factory("killed"))
    work = tmp_path / "work"
    r.env["WEAKSPOT_WORKDIR"] = str(work)
    with open(tmp_path / "audit.log", "w+") as log:
        proc = subprocess.Popen(
            [*WEAKSPOT, "audit", "--workers", "2", "--gpu-workers", "0"],
            cwd=r.path,
            env=r.env,
            stdout=log,
            stderr=subprocess.STDOUT,
            text=True,
        )
        killed = None
        deadline = time.time() + 300
        while killed is None and time.time() < deadline and proc.poll() is None:
            time.sleep(0.5)
            for p in _descendants(proc.pid):
                try:
                    cmd = " ".join(p.cmdline())
                except psutil.NoSuchProcess:
                    continue
                if "worker start" in cmd and any(
                    "train-phoneme" in " ".join(c.cmdline()) for c in _descendants(p.pid) if c.is_running()
                ):
                    killed = [p] + _descendants(p.pid)
                    for q in killed:
                        try:
                            q.send_signal(signal.SIGKILL)
                        except psutil.NoSuchProcess:  # a process of the stage that ended meanwhile
                            pass
                    break
        rc = proc.wait(timeout=600)
        log.seek(0)
        text = log.read()
    assert killed, "no worker was seen running train-phoneme:\n" + text[-3000:]
    assert rc == 0, text[-3000:]
    assert "train-phoneme: its flow run crashed; running it again (attempt 2)" in text, text[-3000:]
    for f in ("train/phoneme.json", "gad/phoneme.json", "segments/phoneme.json", "prepare/phoneme.json"):
        assert (r.path / "metrics" / f).read_bytes() == (ops_repo.path / "metrics" / f).read_bytes(), f
    lock = _lock(r.path)
    assert sorted(lock) == sorted(["prepare-phoneme", "train-phoneme", "segments-phoneme", "gad-phoneme", "report"])
    assert not [p for p in (r.path / ".dvc-store").rglob("*") if p.name.endswith((".tmp", ".partial"))]
    assert r.dvc("status").stdout.strip().endswith("Data and pipelines are up to date.")
    runs = _flow_runs(r)
    assert sorted(s for _, s in runs["train-phoneme"]) == ["COMPLETED", "CRASHED"]
    # the estimate was said before any stage ran; each stage's time is recorded beside its estimate (the killed
    # stage's: the run that completed)
    assert text.index("weakspot: estimated time on this machine") < text.index("submitted to the cpu pool"), text[:3000]
    assert "weakspot: gad-phoneme done in " in text and "(estimated " in text
    times = json.loads(next((r.path / "history").glob("*.stages.json")).read_text())["stages"]
    assert sorted(times) == sorted(["prepare-phoneme", "train-phoneme", "segments-phoneme", "gad-phoneme"])
    assert all(t["seconds"] > 0 and t["estimate"] > 0 and t["counted"] for t in times.values()), times
