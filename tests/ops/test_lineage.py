"""ops.provenance.lineage: the chain behind an artifact or a number, from dvc.yaml, dvc.lock and the artifacts' metadata."""

import hashlib
import json

import pytest
import yaml

from ops.provenance.lineage import format_trace, trace
from weakspot.errors import DataError


def _md5(b: bytes) -> str:
    return hashlib.md5(b).hexdigest()


@pytest.fixture()
def repo(tmp_path):
    """A two-stage pipeline as `weakspot audit` leaves it: prepare-t -> train-t -> gad-t's metrics."""
    (tmp_path / "data/targets/t/prepared").mkdir(parents=True)
    (tmp_path / "data/targets/t/prepared/lineage.json").write_text(
        json.dumps({"stage": "prepare", "code": {"git_commit": "a" * 40}, "ran_at": "2026-11-22T01:00:00+00:00"})
    )
    (tmp_path / "metrics/gad").mkdir(parents=True)
    metric = json.dumps({"seed_0": {"sdr": [1.5, 2.5]}, "gad_sdr": 2.0}).encode()
    (tmp_path / "metrics/gad/t.json").write_bytes(metric)
    (tmp_path / "plots/gad/t").mkdir(parents=True)
    (tmp_path / "plots/gad/t/section.json").write_text(
        json.dumps(
            {
                "lineage": {
                    "stage": "gad",
                    "code": {"git_commit": "b" * 40, "git_dirty": False, "weakspot": "0.1.0", "python": "3.11"},
                    "ran_at": "2026-11-22T02:00:00+00:00",
                    "prefect_flow_run": {"id": "123", "name": "brave-owl"},
                }
            }
        )
    )
    stages = {
        "prepare-t": {
            "cmd": "python -m flows.prepare t",
            "deps": ["flows/prepare.py"],
            "outs": ["data/targets/t/prepared"],
        },
        "gad-t": {
            "cmd": "python -m flows.gad t",
            "deps": ["flows/gad.py", "data/targets/t/prepared"],
            "params": ["gad"],
            "outs": [{"plots/gad/t": {"cache": False}}],
            "metrics": [{"metrics/gad/t.json": {"cache": False}}],
        },
    }
    (tmp_path / "dvc.yaml").write_text(yaml.safe_dump({"stages": stages}))
    lock = {
        "schema": "2.0",
        "stages": {
            "prepare-t": {
                "cmd": "python -m flows.prepare t",
                "deps": [{"path": "flows/prepare.py", "md5": "p" * 32}],
                "outs": [{"path": "data/targets/t/prepared", "md5": "d" * 32 + ".dir"}],
            },
            "gad-t": {
                "cmd": "python -m flows.gad t",
                "deps": [
                    {"path": "data/targets/t/prepared", "md5": "d" * 32 + ".dir"},
                    {"path": "flows/gad.py", "md5": "g" * 32},
                ],
                "params": {"params.yaml": {"gad": {"seed": 0, "budget": 50}}},
                "outs": [{"path": "metrics/gad/t.json", "md5": _md5(metric)}],
            },
        },
    }
    (tmp_path / "dvc.lock").write_text(yaml.safe_dump(lock))
    return tmp_path


def test_a_number_traces_back_through_every_stage_to_its_data(repo):
    t = trace("metrics/gad/t.json", "seed_0.sdr.1", root=repo)
    assert t["value"] == 2.5
    assert [e["stage"] for e in t["chain"]] == ["gad-t", "prepare-t"]
    gad = t["chain"][0]
    assert gad["params"] == {"gad.seed": 0, "gad.budget": 50}
    assert {"path": "data/targets/t/prepared", "md5": "d" * 32 + ".dir", "made_by": "prepare-t"} in gad["deps"]
    assert gad["prefect_flow_run"]["name"] == "brave-owl" and gad["code"]["git_commit"] == "b" * 40
    assert gad["changed_since_run"] is False
    text = format_trace(t)
    for s in (
        "seed_0.sdr.1 = 2.5",
        "made by stage gad-t",
        "gad.budget = 50",
        "brave-owl",
        "bbbbbbbbbbbb",
        "<- its input came from stage prepare-t",
        "2026-11-22T01:00:00",
        "(made by prepare-t)",
    ):
        assert s in text, s


def test_an_artifact_edited_after_the_run_is_flagged(repo):
    (repo / "metrics/gad/t.json").write_text(json.dumps({"gad_sdr": 99.0}))
    t = trace("metrics/gad/t.json", "gad_sdr", root=repo)
    assert t["chain"][0]["changed_since_run"] is True and "changed since the run" in format_trace(t)


def test_clear_errors_for_a_missing_file_a_foreign_file_and_a_missing_key(repo):
    with pytest.raises(DataError, match="not found"):
        trace("metrics/gad/nope.json", root=repo)
    (repo / "notes.txt").write_text("x")
    with pytest.raises(DataError, match="no stage of dvc.yaml produces it"):
        trace("notes.txt", root=repo)
    with pytest.raises(DataError, match=r"no 'sdrr' in 'seed_0.sdrr'.*there: sdr"):
        trace("metrics/gad/t.json", "seed_0.sdrr", root=repo)


def test_a_detail_beside_the_headline_is_found_in_the_stages_results_file(repo):
    (repo / "plots/gad/t/results.json").write_text(json.dumps({"gad_sdr": 2.0, "per_seed": {"3": {"sdr": 7.5}}}))
    t = trace("metrics/gad/t.json", "per_seed.3.sdr", root=repo)  # not in the headline file
    assert t["value"] == 7.5 and t["chain"][0]["stage"] == "gad-t"
    with pytest.raises(DataError, match="no 'nope'"):
        trace("metrics/gad/t.json", "nope", root=repo)
