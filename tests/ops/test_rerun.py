"""ops.rerun: a past audit reproduced in a scratch worktree, its outputs compared with the recorded lock; on the tiny
audited ``ops_repo`` (marked ``ops``), a pushed audit pulled by a rerun on another checkout instead of recomputed."""

import subprocess
import sys

import pytest

#: `weakspot` as a user runs it (the console script is ops.cli:main; this works before an install too)
WEAKSPOT = [sys.executable, "-m", "ops.cli"]


def _history(r):
    return sorted(p.stem for p in (r.path / "history").glob("*.parquet"))


def test_a_rerun_compares_every_output_of_the_audits_stages_with_the_lock(tmp_path):
    import hashlib

    import yaml

    from ops.rerun import compare_outputs

    (tmp_path / "metrics/train").mkdir(parents=True)
    (tmp_path / "metrics/train/a.json").write_text('{"x": 1}\n')
    (tmp_path / "metrics/train/b.json").write_text('{"x": 2}\n')
    md5 = hashlib.md5(b'{"x": 1}\n').hexdigest()
    lock = {
        "schema": "2.0",
        "stages": {
            "train-a": {
                "cmd": "x",
                "outs": [{"path": "metrics/train/a.json", "md5": md5}, {"path": "plots/train/a", "md5": "abc.dir"}],
            },
            "train-b": {"cmd": "x", "outs": [{"path": "metrics/train/b.json", "md5": md5}]},
            "train-c": {"cmd": "x", "outs": [{"path": "metrics/train/c.json", "md5": md5}]},
            "gone": {"cmd": "x", "outs": [{"path": "metrics/gone.json", "md5": md5}]},
        },
    }
    (tmp_path / "audit.lock").write_text(yaml.safe_dump(lock))
    (tmp_path / "dvc.yaml").write_text(
        yaml.safe_dump({"stages": {s: {"cmd": "x"} for s in ("train-a", "train-b", "train-c")}})
    )
    rows = {r["path"]: r["status"] for r in compare_outputs(tmp_path / "audit.lock", tmp_path)}
    assert rows == {
        "metrics/train/a.json": "identical",
        "plots/train/a": "folder (not compared)",
        "metrics/train/b.json": "differs",
        "metrics/train/c.json": "missing",
    }


def test_a_checkout_from_before_the_move_is_audited_by_its_own_weakspot_cli(tmp_path):
    from ops.rerun import cli_module

    assert cli_module(tmp_path) == "weakspot.cli"
    (tmp_path / "ops").mkdir()
    (tmp_path / "ops/cli.py").write_text("")
    assert cli_module(tmp_path) == "ops.cli"


@pytest.mark.ops
def test_a_pushed_audit_is_pulled_by_a_rerun_instead_of_recomputed(ops_repo, tmp_path):
    r = ops_repo
    remote = tmp_path / "remote"
    env = {**r.env, "WEAKSPOT_DVC_REMOTE": str(remote)}
    push = subprocess.run([*WEAKSPOT, "audit", "--push"], cwd=r.path, env=env, capture_output=True, text=True)
    assert push.returncode == 0, push.stdout[-3000:] + push.stderr[-3000:]
    assert any(remote.rglob("*")), "nothing was pushed"
    audit_id = _history(r)[-1]
    out = subprocess.run(
        [*WEAKSPOT, "rerun", audit_id, "--pull", "--keep", "--workdir", str(tmp_path / "wt")],
        cwd=r.path,
        env=env,
        capture_output=True,
        text=True,
    )
    text = out.stdout + out.stderr
    assert out.returncode == 0 and "REPRODUCED" in text, text[-4000:]
    for stage in ("prepare-phoneme", "train-phoneme", "gad-phoneme"):
        assert f"Running stage '{stage}'" not in text, f"{stage} was recomputed, not pulled"
    subprocess.run(["git", "worktree", "remove", "--force", str(tmp_path / "wt")], cwd=r.path)
