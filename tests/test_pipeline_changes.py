"""The smoke audit changed as users change it: a method's code edited (only its stages rerun), the examiner's
budget changed (no model retrained; DVC's params, metrics and plots diffs), a second model added on the same data (its
own corner stage). On a copy of the smoke audit of tests/test_pipeline.py (``repo``), in this file's order."""

import json

import pytest
from test_pipeline import _results, _snapshot, _stages, _touch_status, smoke_copy

pytestmark = [pytest.mark.pipeline, pytest.mark.timeout(3600)]  # the first test may wait for the smoke audit's build


@pytest.fixture(scope="module")
def repo(tmp_path_factory):
    return smoke_copy(tmp_path_factory)


def test_a_change_to_one_methods_code_reruns_only_that_methods_stages(repo):
    import yaml

    from weakspot import methods as methods_registry

    stages = yaml.safe_load((repo.path / "dvc.yaml").read_text())["stages"]
    assert _stages(repo.dvc("status").stdout) == set()
    methods = sorted({s.split()[3] for s in (st["cmd"] for st in stages.values()) if "flows.method" in s})
    assert len(methods) >= 3
    for m in methods:
        # its stages: one per target it fits, and a shared stage of its own (the examiner's study) if it has one
        own = {name for name in stages if name.startswith((f"{m}-", f"{m}_"))}
        on_targets = {name for name, st in stages.items() if st["cmd"].startswith(f"python -m flows.method {m} ")}
        # its entry point: only its own stages (the report follows them when they rerun)
        assert _touch_status(repo, f"weakspot/{m}/run.py") == on_targets, m
        # its params model: the report also names every method and checks where each runs, so it reruns too; so do
        # the stages of a method that declares it reads this method's section (HDA builds intrinsic's min-max model;
        # the toy plug-in lives in the copy only and reads nothing)
        readers = {
            name
            for r in methods
            if r in methods_registry.available() and m in methods_registry.get(r).reads
            for name, st in stages.items()
            if st["cmd"].startswith(f"python -m flows.method {r} ")
        }
        assert _touch_status(repo, f"weakspot/{m}/config.py") == own | readers | {"report"}, m


def test_changing_examine_T_does_not_retrain_a_model(repo):
    before = _snapshot(repo.path)
    # the audited state committed, so that DVC's own diffs have a revision to compare with
    repo.run("git", "add", "-A")
    repo.run("git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "audited")
    repo.set_params(examine={"T": 5, "checkpoints": [0, 3, 5]})
    try:
        changed = _stages(repo.dvc("status").stdout)
        assert changed == {"examine-scenes"}, changed  # (the report follows once the examination reran)
        out = repo.dvc("repro").stdout
        assert "Running stage 'examine-scenes'" in out and "Running stage 'train-" not in out, out
        after = _snapshot(repo.path)
        assert all(before[k] == after[k] for k in before if k.startswith("data/")), "a model or data file changed"
        # DVC's views keep working on the per-target stages
        assert "examine.T" in repo.dvc("params", "diff").stdout
        assert "metrics/examine/scenes.json" in repo.dvc("metrics", "diff").stdout
        assert repo.dvc("plots", "diff", "-o", str(repo.path / ".plots-diff")).returncode == 0
        dag = repo.dvc("dag").stdout
        assert all(s in dag for s in ("train-digits", "examine-scenes", "hda-scenes", "report"))
    finally:
        repo.set_params(examine={"T": 6, "checkpoints": [0, 3, 6]})


def test_a_second_model_on_the_same_data_gets_its_own_corner_stage_and_generator(repo):
    """A second target on the digits data (another architecture) gets its own corner cases, from a generator of the
    same training images trained in its own stage: a cached call is keyed on its stage's identity (issue 46), so no
    result crosses from one stage to another."""
    import yaml

    p = repo.path / "params.yaml"
    text = p.read_text()
    params = yaml.safe_load(text)
    params["targets"]["digits_mlp"] = {
        **params["targets"]["digits"],
        "model": {"kind": "builtin", "arch": "mlp"},
        "train": {"epochs": 3, "seed": 0},
    }
    p.write_text(yaml.safe_dump(params, sort_keys=False))
    try:
        out = repo.audit("corner-digits_mlp").stdout  # that stage and what it needs (the new target's training)
        gen = [
            json.loads((repo.path / f"plots/corner/{t}/section.json").read_text())["lineage"]["generator"]
            for t in ("digits", "digits_mlp")
        ]
        assert gen[0]["pixels"] == gen[1]["pixels"]  # the same training images
        assert "Running stage 'corner-digits_mlp'" in out and "Running stage 'corner-digits'" not in out
        m = _results(repo.path, "corner/digits_mlp")
        assert m["n_seeds"] == 40 and m != _results(repo.path, "corner/digits")
    finally:
        p.write_text(text)
