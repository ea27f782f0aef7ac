"""Running weakspot every night, as its users do (issue 12), on a tiny audited copy of the repository (``ops_repo``:
one tabular target, GAD on tiny budgets): a regression planted between two audits, two audits at once, kill -9 in
the middle of a stage and the audit that resumes it, an exact rerun of a past audit, and a rerun on another checkout
that pulls from the DVC remote instead of recomputing.
"""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

pytestmark = [pytest.mark.slow, pytest.mark.ops]

WEAKSPOT = str(Path(sys.executable).parent / "weakspot")


def _params(r):
    return yaml.safe_load((r.path / "params.yaml").read_text())


def _write(r, raw):
    (r.path / "params.yaml").write_text(yaml.safe_dump(raw, sort_keys=False))


def _history(r):
    return sorted(p.stem for p in (r.path / "history").glob("*.parquet"))


def _start(r, *args, log):
    return subprocess.Popen([WEAKSPOT, *args], cwd=r.path, env=r.env, stdout=log, stderr=subprocess.STDOUT,
                            text=True, start_new_session=True)


def _kill_tree(proc):
    """kill -9 the audit and everything it started (dvc, the stage, the Prefect server), as a power cut would."""
    import psutil

    try:
        procs = [psutil.Process(proc.pid)] + psutil.Process(proc.pid).children(recursive=True)
    except psutil.NoSuchProcess:
        procs = []
    for p in procs:
        try:
            p.send_signal(signal.SIGKILL)
        except psutil.NoSuchProcess:
            pass
    proc.wait(timeout=30)


def test_a_weaker_model_is_flagged_by_the_next_audit_and_a_concurrent_audit_refuses(ops_repo, tmp_path):
    r = ops_repo
    before = _history(r)
    raw = _params(r)
    # the planted regression: the target's model replaced by a weaker one (a linear SVM with a tiny C)
    raw["targets"]["phoneme"]["train"]["options"] = {"kernels": ["linear"], "C": [0.001], "gamma": ["scale"],
                                                     "cv": 2}
    _write(r, raw)
    with open(tmp_path / "first.log", "w+") as log:
        first = _start(r, "audit", log=log)
        lock = r.path / ".dvc/tmp/weakspot-audit.lock"
        deadline = time.time() + 60
        while not lock.is_file() and time.time() < deadline and first.poll() is None:
            time.sleep(0.2)
        assert lock.is_file(), "the first audit never took the lock"
        second = r.run(WEAKSPOT, "audit", check=False)  # started while the first runs
        rc = first.wait(timeout=600)
        log.seek(0)
        text = log.read()
    assert second.returncode == 2, second.stdout + second.stderr
    assert f"another audit is running in this repository: process {first.pid}" in second.stderr
    assert rc == 3, text[-3000:]  # exit 3: a regression
    assert "REGRESSION: train/phoneme:test_accuracy" in text
    after = _history(r)
    assert len(after) == len(before) + 1  # only the first audit was recorded; the refused one touched nothing
    comp = json.loads((r.path / "history" / f"{after[-1]}.comparison.json").read_text())
    bad = {row["metric"]: row for row in comp["rows"] if row["regression"]}
    assert "train/phoneme:test_accuracy" in bad and bad["train/phoneme:test_accuracy"]["change"] < -0.01
    page = (r.path / "reports/index.html").read_text()
    assert "Since the last audit" in page and "REGRESSION" in page and "train/phoneme:test_accuracy" in page
    assert r.dvc("status").stdout.strip().endswith("Data and pipelines are up to date.")


def test_kill_9_in_the_middle_of_a_stage_leaves_no_half_artifact_and_the_next_audit_resumes(ops_repo, tmp_path):
    r = ops_repo
    raw = _params(r)
    raw["gad"]["budget"] = raw["gad"]["budget"] - 1  # gad-phoneme must run again (both seeds)
    _write(r, raw)
    metrics = r.path / "metrics/gad/phoneme.json"
    old = metrics.read_bytes()
    lock_before = (r.path / "dvc.lock").read_bytes()
    with open(tmp_path / "killed.log", "w+") as log:
        proc = _start(r, "audit", log=log)
        deadline = time.time() + 400
        text = ""
        while time.time() < deadline and proc.poll() is None:
            log.seek(0)
            text = log.read()
            # each seed's task trains a pseudo-model ("extract"), attacks, then runs the replicates: a second
            # "extract" means seed 0's task is done and stored and seed 1's is under way
            if text.count("extract: epochs 1/") >= 2 and "phoneme seed 0: replicates" in text:
                break
            time.sleep(0.3)
        assert proc.poll() is None, text[-3000:]
        _kill_tree(proc)
    # the old artifact whole, or none (DVC removes a stage's outputs before it runs): never half a file
    assert not metrics.exists() or metrics.read_bytes() == old
    assert (r.path / "dvc.lock").read_bytes() == lock_before
    for d in ("metrics", "plots", "findings", "data"):
        for f in (r.path / d).rglob("*"):
            if f.is_file() and f.suffix == ".json" and ".partial-" not in f.name:
                json.loads(f.read_text())  # every JSON artifact parses
    out = r.audit()  # takes over the dead audit's lock, resumes the stage
    text = out.stdout + out.stderr
    assert "Running stage 'gad-phoneme'" in text
    assert "phoneme seed 0: replicates" not in text, "seed 0 was recomputed instead of taken from the task cache"
    assert "phoneme seed 1: replicates" in text, text[-3000:]
    assert metrics.read_bytes() != old
    assert not list(r.path.glob("metrics/**/.*.partial-*"))


def test_rerun_of_the_resumed_audit_reproduces_its_metrics_byte_for_byte(ops_repo):
    """The audit resumed after kill -9 against an uninterrupted one: `weakspot rerun` recomputes every stage from
    scratch in a worktree (own DVC cache, own Prefect results) and compares its metrics with the recorded lock."""
    r = ops_repo
    audit_id = _history(r)[-1]
    out = r.run(WEAKSPOT, "rerun", audit_id, "--json", check=False)
    res = json.loads(out.stdout[out.stdout.index("{\n"):])
    metrics = [row for row in res["rows"] if row["metric"]]
    assert {row["path"] for row in metrics} >= {"metrics/train/phoneme.json", "metrics/gad/phoneme.json"}
    assert all(row["status"] == "identical" for row in metrics), metrics
    assert res["reproduced"] and out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert not Path(res["worktree"]).exists()  # removed once reproduced


def test_a_pushed_audit_is_pulled_by_a_rerun_instead_of_recomputed(ops_repo, tmp_path):
    r = ops_repo
    remote = tmp_path / "remote"
    env = {**r.env, "WEAKSPOT_DVC_REMOTE": str(remote)}
    push = subprocess.run([WEAKSPOT, "audit", "--push"], cwd=r.path, env=env, capture_output=True, text=True)
    assert push.returncode == 0, push.stdout[-3000:] + push.stderr[-3000:]
    assert any(remote.rglob("*")), "nothing was pushed"
    audit_id = _history(r)[-1]
    out = subprocess.run([WEAKSPOT, "rerun", audit_id, "--pull", "--keep", "--workdir", str(tmp_path / "wt")],
                         cwd=r.path, env=env, capture_output=True, text=True)
    text = out.stdout + out.stderr
    assert out.returncode == 0 and "REPRODUCED" in text, text[-4000:]
    for stage in ("prepare-phoneme", "train-phoneme", "gad-phoneme"):
        assert f"Running stage '{stage}'" not in text, f"{stage} was recomputed, not pulled"
    subprocess.run(["git", "worktree", "remove", "--force", str(tmp_path / "wt")], cwd=r.path)
