"""kill -9 in the middle of a stage and the audit that resumes it, then that resumed audit rerun from scratch and
byte-identical (`weakspot rerun`), on a copy of the tiny audited repository (``ops_repo``, marked ``ops``). The two
tests run in this order on one copy: the second reruns the audit the first resumed."""

import json
import time
from pathlib import Path

import pytest

from test_audit import WEAKSPOT, _history, _kill_tree, _params, _start, _write


@pytest.mark.ops
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
    out = r.audit()  # the kernel released the dead audit's lock: this one takes it and resumes the stage
    text = out.stdout + out.stderr
    assert f"the audit of process {proc.pid} on " in text and "ended without releasing its lock" in text
    assert "Running stage 'gad-phoneme'" in text
    assert "phoneme seed 0: replicates" not in text, "seed 0 was recomputed instead of taken from the task cache"
    assert "phoneme seed 1: replicates" in text, text[-3000:]
    assert metrics.read_bytes() != old
    assert not list(r.path.glob("metrics/**/.*.partial-*"))


@pytest.mark.ops
def test_rerun_of_the_resumed_audit_reproduces_its_metrics_byte_for_byte(ops_repo):
    """The audit resumed after kill -9 against an uninterrupted one: `weakspot rerun` recomputes every stage from
    scratch in a worktree (own DVC cache, own Prefect results) and compares its metrics with the recorded lock."""
    r = ops_repo
    audit_id = _history(r)[-1]
    out = r.run(*WEAKSPOT, "rerun", audit_id, "--json", check=False)
    res = json.loads(out.stdout[out.stdout.index("{\n") :])
    metrics = [row for row in res["rows"] if row["metric"]]
    assert {row["path"] for row in metrics} >= {"metrics/train/phoneme.json", "metrics/gad/phoneme.json"}
    assert all(row["status"] == "identical" for row in metrics), metrics
    assert res["reproduced"] and out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert not Path(res["worktree"]).exists()  # removed once reproduced
