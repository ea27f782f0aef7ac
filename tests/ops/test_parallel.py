"""ops.parallel on a throwaway DVC project with a known answer: two stages that need only a first one run at the same
time (their run intervals overlap), a third that needs both starts after both; dvc.lock is what `dvc repro` writes
(a plain `dvc status` then finds nothing to do), a second run skips every stage, and a failing stage lets its
independent sibling finish and be committed while the stage that needs it never starts."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
DVC = str(Path(sys.executable).parent / "dvc")

#: A stage's command: wait, write its start and end times and its output.
STEP = ("import json, sys, time; t0 = time.time(); time.sleep({sleep}); "
        "open('{name}.out', 'w').write(''.join(open(f).read() for f in sys.argv[1:]) + '{name};'); "
        "json.dump([t0, time.time()], open('{name}.time', 'w'))")


def _project(root: Path, fail: str = "") -> None:
    def stage(name, deps, sleep):
        code = STEP.format(name=name, sleep=sleep) + ("; sys.exit(2)" if name == fail else "")
        return {"cmd": f'"{sys.executable}" -c "{code}" ' + " ".join(f"{d}.out" for d in deps),
                "deps": [f"{d}.out" for d in deps] or ["seed.txt"], "outs": [f"{name}.out", {f"{name}.time":
                                                                                          {"cache": False}}]}
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    subprocess.run([DVC, "init", "-q"], cwd=root, check=True)
    (root / "seed.txt").write_text("seed")
    stages = {"a": stage("a", [], 0), "b": stage("b", ["a"], 3), "c": stage("c", ["a"], 1.5),
              "d": stage("d", ["b", "c"], 0)}
    (root / "dvc.yaml").write_text(yaml.safe_dump({"stages": stages}, sort_keys=False))


def _times(root: Path, name: str):
    return json.loads((root / f"{name}.time").read_text())


def reproduce(here: Path, jobs: int) -> subprocess.CompletedProcess:
    """``python -m ops.parallel`` in the project, as :func:`ops.dvc.repro` runs it."""
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""),
           "PATH": str(Path(sys.executable).parent) + os.pathsep + os.environ["PATH"]}
    return subprocess.run([sys.executable, "-m", "ops.parallel", "--jobs", str(jobs)], cwd=here, env=env,
                          capture_output=True, text=True, timeout=300)


@pytest.fixture()
def here(tmp_path):
    return tmp_path


def test_independent_stages_overlap_and_the_lock_is_dvc_s(here):
    _project(here)
    run = reproduce(here, 2)
    assert run.returncode == 0, run.stderr
    (b0, b1), (c0, c1), (d0, _) = _times(here, "b"), _times(here, "c"), _times(here, "d")
    assert max(b0, c0) < min(b1, c1), "b and c (3 s and 1.5 s, both needing only a) did not run at the same time"
    assert d0 >= max(b1, c1), "d started before the stages it needs had finished"
    assert "Running stage 'b':" in run.stdout and "2 stages at once: " in run.stdout, run.stdout
    assert (here / "d.out").read_text() == "a;b;a;c;d;"
    status = subprocess.run([DVC, "status", "--json"], cwd=here, capture_output=True, text=True, check=True)
    assert json.loads(status.stdout) == {}, status.stdout  # dvc.lock records every stage as `dvc repro` would
    lock = yaml.safe_load((here / "dvc.lock").read_text())["stages"]
    assert set(lock) == {"a", "b", "c", "d"} and all("md5" in o for s in lock.values() for o in s["outs"])
    alone = here.with_name(here.name + "-alone")  # the same project through plain `dvc repro`: its dvc.lock lists the stages in plan order
    _project(alone)
    subprocess.run([DVC, "repro", "-q"], cwd=alone, check=True, capture_output=True)
    assert list(lock) == list(yaml.safe_load((alone / "dvc.lock").read_text())["stages"]), \
        "dvc.lock's order followed the finish order (c before b), not the plan's"
    again = reproduce(here, 2)
    assert again.returncode == 0, again.stderr
    out = again.stdout
    assert out.count("didn't change, skipping") == 4 and "Running stage" not in out


def test_one_at_a_time_runs_in_order(here):
    _project(here)
    assert reproduce(here, 1).returncode == 0
    (b0, b1), (c0, c1) = _times(here, "b"), _times(here, "c")
    assert b1 <= c0 or c1 <= b0


def test_a_failed_stage_lets_its_sibling_finish(here):
    _project(here, fail="b")
    run = reproduce(here, 2)
    assert run.returncode == 1
    err = run.stderr
    assert "failed to reproduce 'b'" in err
    assert (here / "c.out").is_file() and not (here / "d.out").exists()
    lock = yaml.safe_load((here / "dvc.lock").read_text())["stages"]
    assert set(lock) == {"a", "c"}  # what finished is committed; the failed stage and what needs it are not
    status = json.loads(subprocess.run([DVC, "status", "--json"], cwd=here, capture_output=True, text=True).stdout)
    assert "c" not in status and "b" in status
