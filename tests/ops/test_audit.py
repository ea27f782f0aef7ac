"""ops.engine.audit: the history record and comparison that set the exit code, the sweep of partial files; then `weakspot
audit` as its users run it every night (issue 12), on a tiny audited copy of the repository (``ops_repo``: one tabular
target, GAD on tiny budgets, marked ``ops``): a regression planted between two audits, two audits at once, a gate. (kill -9 in the middle of a
stage and the audit that resumes it: test_resume.py; exact reruns: test_rerun.py.)
"""

import json
import signal
import subprocess
import sys
import time

import pytest
import yaml
from conftest import declare

#: `weakspot` as a user runs it (the console script is ops.cli:main; this works before an install too)
WEAKSPOT = [sys.executable, "-m", "ops.cli"]


def _metrics(root, acc):
    if not (root / "dvc.yaml").is_file():
        declare(root, "metrics/train/digits.json")  # the audit's manifest: what its readers read
    (root / "metrics/train").mkdir(parents=True, exist_ok=True)
    (root / "metrics/train/digits.json").write_text(json.dumps({"test_accuracy": acc, "n_test": 268}))


def test_audit_exits_3_on_a_regression_and_0_otherwise(tmp_path, monkeypatch):
    from ops.engine.audit import record_and_compare

    monkeypatch.chdir(tmp_path)
    (tmp_path / "params.yaml").write_text(
        json.dumps(
            {
                "history": {
                    "dir": "history",
                    "rules": [{"metric": "train/*:test_accuracy", "worse": "down", "tolerance": 0.01}],
                }
            }
        )
    )
    _metrics(tmp_path, 0.99)
    assert record_and_compare() == 0  # the first audit: nothing to compare with
    time.sleep(1.1)
    _metrics(tmp_path, 0.99)
    assert record_and_compare() == 0
    time.sleep(1.1)
    _metrics(tmp_path, 0.90)
    assert record_and_compare() == 3
    comps = sorted((tmp_path / "history").glob("*.comparison.json"))
    assert len(comps) == 3 and json.loads(comps[-1].read_text())["rows"][0]["regression"] is True


def test_an_interrupted_runs_partial_files_are_swept(tmp_path):
    from ops.engine.audit import sweep_partials
    from weakspot.io import atomic_path

    (tmp_path / "metrics").mkdir()
    with pytest.raises(KeyboardInterrupt):
        with atomic_path(tmp_path / "metrics/a.json") as tmp:
            tmp.write_text('{"half":')
            raise KeyboardInterrupt  # what kill -9 leaves is the same file, minus the clean-up
    assert not (tmp_path / "metrics/a.json").exists()
    left = tmp_path / "metrics/.a.json.partial-x1.json"
    left.write_text('{"half":')
    (tmp_path / "metrics/b.json").write_text("{}")
    assert sweep_partials(tmp_path) == ["metrics/.a.json.partial-x1.json"]
    assert (tmp_path / "metrics/b.json").is_file() and not left.exists()


# ------------------------------------------------------------------------------------------ on ops_repo


def _params(r):
    return yaml.safe_load((r.path / "params.yaml").read_text())


def _write(r, raw):
    (r.path / "params.yaml").write_text(yaml.safe_dump(raw, sort_keys=False))


def _history(r):
    return sorted(p.stem for p in (r.path / "history").glob("*.parquet"))


def _start(r, *args, log):
    return subprocess.Popen(
        [*WEAKSPOT, *args],
        cwd=r.path,
        env=r.env,
        stdout=log,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )


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


@pytest.mark.ops
def test_a_weaker_model_is_flagged_by_the_next_audit_and_a_concurrent_audit_refuses(ops_repo, tmp_path):
    r = ops_repo
    before = _history(r)
    raw = _params(r)
    # the planted regression: the target's model replaced by a weaker one (a linear SVM with a tiny C)
    raw["targets"]["phoneme"]["train"]["options"] = {"kernels": ["linear"], "C": [0.001], "gamma": ["scale"], "cv": 2}
    _write(r, raw)
    with open(tmp_path / "first.log", "w+") as log:
        first = _start(r, "audit", log=log)
        # the holder's side file (the lock file itself stays between audits): the first audit has the lock
        from ops.engine.lock import INFO

        def holds() -> bool:
            try:
                return json.loads((r.path / INFO).read_text())["pid"] == first.pid
            except (OSError, ValueError, KeyError):
                return False

        deadline = time.time() + 60
        while not holds() and time.time() < deadline and first.poll() is None:
            time.sleep(0.2)
        assert holds(), "the first audit never took the lock"
        second = r.run(*WEAKSPOT, "audit", check=False)  # started while the first runs
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


@pytest.mark.ops
def test_a_gate_above_a_metric_fails_the_audit_in_junit_and_summary_and_relaxed_passes(ops_repo):
    import xml.etree.ElementTree as ET

    r = ops_repo
    original = (r.path / "params.yaml").read_text()
    raw = _params(r)
    try:
        raw["gates"] = {"conditions": [{"metric": "train/phoneme:test_accuracy", "op": ">=", "value": 1.01}]}
        _write(r, raw)
        failed = r.run(*WEAKSPOT, "audit", check=False)
        assert failed.returncode == 3, failed.stdout[-3000:] + failed.stderr[-3000:]
        assert "FAIL gate train/phoneme:test_accuracy >= 1.01" in failed.stdout
        junit = ET.parse(r.path / "reports/junit.xml").getroot()
        fail = junit.find("testsuite[@name='gates']/testcase/failure")
        assert fail is not None and "train/phoneme:test_accuracy = 0." in fail.get("message")
        assert int(junit.get("failures")) >= 1 and junit.find("testsuite[@name='methods']/testcase") is not None
        summary = (r.path / "reports/summary.md").read_text()
        assert summary.startswith("## weakspot audit: FAIL") and "`train/phoneme:test_accuracy >= 1.01`" in summary
        page = (r.path / "reports/index.html").read_text()
        assert "id='conditions'" in page and "train/phoneme:test_accuracy &gt;= 1.01" in page
        raw["gates"]["conditions"][0]["value"] = 0.0
        _write(r, raw)
        passed = r.run(*WEAKSPOT, "audit", check=False)
        assert passed.returncode == 0, passed.stdout[-3000:] + passed.stderr[-3000:]
        assert (r.path / "reports/summary.md").read_text().startswith("## weakspot audit: PASS")
        assert ET.parse(r.path / "reports/junit.xml").getroot().find(".//failure") is None
    finally:
        (r.path / "params.yaml").write_text(original)
