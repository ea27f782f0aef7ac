"""ops.provenance.rerun: a past audit reproduced in a scratch worktree, its outputs compared with the recorded lock; on the tiny
audited ``ops_repo`` (marked ``ops``), a pushed audit pulled by a rerun on another checkout instead of recomputed, after
a target and a method it audited left the params (and the workspace, the report, the verdict files and the history)."""

import json
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

    from ops.provenance.rerun import compare_outputs

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
    from ops.provenance.rerun import cli_module

    assert cli_module(tmp_path) == "weakspot.cli"
    (tmp_path / "ops").mkdir()
    (tmp_path / "ops/cli.py").write_text("")
    assert cli_module(tmp_path) == "ops.cli"


def _audit(r, env, *args):
    proc = subprocess.run([*WEAKSPOT, "audit", *args], cwd=r.path, env=env, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc.stdout


def _verdict_files(r):
    """What the audit in ``r`` reported: its page, junit.xml, summary.md and its comparison (rule and gate rows)."""
    latest = sorted((r.path / "history").glob("*.comparison.json"))[-1]
    return {
        "report": (r.path / "reports/index.html").read_text(),
        "junit": (r.path / "reports/junit.xml").read_text(),
        "summary": (r.path / "reports/summary.md").read_text(),
        "comparison": latest.read_text(),
    }


@pytest.mark.ops
def test_a_removed_target_and_method_leave_the_audit_and_a_pushed_audit_before_is_pulled_by_a_rerun(ops_repo, tmp_path):
    """Issue 46: a target removed from params.yaml and a method dropped from another target's list. The next audit
    removes their outputs from the workspace (DVC leaves them), and its report (header, targets table, sections),
    junit.xml, summary.md, gates, comparison and history name neither; the audit before, pushed, is still rerun
    from the DVC remote's run-cache, nothing recomputed, its outputs (the removed ones among them) identical."""
    import pandas as pd
    import yaml

    r = ops_repo
    remote = tmp_path / "remote"
    env = {**r.env, "WEAKSPOT_DVC_REMOTE": str(remote)}
    params = r.path / "params.yaml"
    text = params.read_text()
    raw = yaml.safe_load(text)
    raw["targets"]["phoneme_b"] = {**raw["targets"]["phoneme"], "methods": ["segments"]}
    params.write_text(yaml.safe_dump(raw, sort_keys=False))
    try:
        out = _audit(r, env, "--push")  # the audit before: two targets, GAD on phoneme
        assert any(remote.rglob("*")), "nothing was pushed"
        before_id = _history(r)[-1]
        assert "report: 2 targets, 7 sections" in out
        assert "id='group-gad-phoneme'" in _verdict_files(r)["report"]  # what the assertions below look for is there
        kept = {
            f: (r.path / f).read_bytes() for f in ("metrics/train/phoneme.json", "findings/phoneme/segments.parquet")
        }
        gad = (r.path / "findings/phoneme/gad.parquet").read_bytes()

        raw["targets"].pop("phoneme_b")
        raw["targets"]["phoneme"]["methods"] = ["segments"]  # GAD dropped from phoneme
        params.write_text(yaml.safe_dump(raw, sort_keys=False))
        out = _audit(r, env)
        assert "removed 13 output(s) that dvc.yaml no longer declares" in out, out[-3000:]
        assert "Running stage 'report'" in out and "Running stage 'segments-phoneme'" not in out
        for gone in ("data/targets/phoneme_b", "plots/train/phoneme_b", "metrics/gad", "findings/phoneme/gad.parquet"):
            assert not (r.path / gone).exists(), gone
        assert {f: (r.path / f).read_bytes() for f in kept} == kept  # nothing declared touched
        # the header, the targets table and the sections count today's targets; nothing names what was removed
        assert "report: 1 targets, 3 sections" in out and "targets: 1 ·" in _verdict_files(r)["report"]
        for name, page in _verdict_files(r).items():
            for removed in ("phoneme_b", "gad/phoneme", "gad-phoneme", "gad_to_label"):
                assert removed not in page, (name, removed)
        comparison = json.loads(_verdict_files(r)["comparison"])
        assert comparison["previous"] == before_id and [g["passed"] for g in comparison["gates"]] == [True]
        assert comparison["gates"][0]["numbers"].startswith("1 of 1 hold: train/phoneme:test_accuracy = ")
        recorded = pd.read_parquet(r.path / "history" / f"{_history(r)[-1]}.parquet")
        assert sorted({m.split(":")[0] for m in recorded["metric"]}) == [
            "prepare/phoneme",
            "segments/phoneme",
            "train/phoneme",
        ]

        res = subprocess.run(
            [*WEAKSPOT, "rerun", before_id, "--pull", "--keep", "--workdir", str(tmp_path / "wt")],
            cwd=r.path,
            env=env,
            capture_output=True,
            text=True,
        )
        text_ = res.stdout + res.stderr
        assert res.returncode == 0 and "7 of 7 metrics files byte-identical" in text_, text_[-4000:]
        assert "verdict: REPRODUCED" in text_
        for stage in ("prepare-phoneme", "train-phoneme", "gad-phoneme", "train-phoneme_b", "segments-phoneme_b"):
            assert f"Running stage '{stage}'" not in text_, f"{stage} was recomputed, not pulled"
        wt = tmp_path / "wt"
        for f in ("metrics/train/phoneme_b.json", "metrics/gad/phoneme.json", "findings/phoneme/gad.parquet"):
            assert (wt / f).is_file(), f  # the removed outputs, restored
        assert (wt / "findings/phoneme/gad.parquet").read_bytes() == gad
        subprocess.run(["git", "worktree", "remove", "--force", str(wt)], cwd=r.path)
    finally:
        params.write_text(text)
