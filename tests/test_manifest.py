"""tasks.manifest: what today's dvc.yaml declares, read from a small hand-written one, and what lies under the
pipeline's artifact roots that it does not (stale), removed by ops.engine.audit.remove_stale with nothing declared touched."""

import pytest

DVC_YAML = """
stages:
  prepare-a:
    cmd: python -m flows.prepare a
    deps: [flows/prepare.py, data/external/a.csv]
    outs: [data/targets/a/prepared, plots/prepare/a]
    metrics: [metrics/prepare/a.json]
  train-a:
    cmd: python -m flows.train a
    deps: [data/targets/a/prepared]
    outs: [data/targets/a/model/, plots/train/a]
    metrics:
    - metrics/train/a.json:
        cache: false
  train-b:
    cmd: python -m flows.train b
    deps: [data/targets/a/repaired_hda/model.pt]
    outs: [data/targets/b/model, plots/train/b]
    metrics: [metrics/train/b.json]
  segments-a:
    cmd: python -m flows.method segments a
    outs: [plots/segments/a, findings/a/segments.parquet]
    metrics: [metrics/segments/a.json]
    plots: [plots/segments/a/curve.csv]
  report:
    cmd: python -m flows.report
    deps: [plots/train/a, history]
    outs:
    - reports/index.html:
        cache: false
plots:
- plots/train/a/reliability.csv: {x: confidence, y: accuracy}
"""

#: What a workspace holds after the target ``gone`` and the method ``gad`` were removed from params.yaml: the
#: declared outputs, and what DVC left of the stages that are no longer there.
DECLARED = [
    "data/targets/a/prepared/test.parquet",
    "data/targets/a/model/model.joblib",
    "data/targets/a/repaired_hda/model.pt",  # another target's weights (a dep), inside a removed stage's folder
    "data/targets/a/repaired_hda/model.json",
    "data/targets/b/model/model.joblib",
    "plots/prepare/a/section.json",
    "plots/train/a/section.json",
    "plots/train/a/reliability.csv",
    "plots/train/b/section.json",
    "plots/segments/a/section.json",
    "metrics/prepare/a.json",
    "metrics/train/a.json",
    "metrics/train/b.json",
    "metrics/segments/a.json",
    "findings/a/segments.parquet",
    "reports/index.html",
    "reports/junit.xml",  # reports/ is no artifact root: nothing there is judged
    "data/external/a.csv",
]
STALE = [
    "data/render/images/0.png",
    "data/targets/gone/prepared/test.parquet",
    "data/targets/gone/model/model.joblib",
    "plots/train/gone/section.json",
    "plots/gad/a/section.json",
    "plots/gad/a/curve.csv",
    "metrics/train/gone.json",
    "metrics/gad/a.json",
    "findings/gone/segments.parquet",
    "findings/a/gad.parquet",
    "findings/a/gad_to_label.csv",
]


#: A file of the user's own under a removed target's folder: no stage wrote it, DVC's cache does not hold it.
USERS = "data/targets/gone/raw.csv"
#: What DVC recorded of the stages that are gone (dvc.lock, and an audit's copy of it in the history store).
LOCK = {
    "stages": {
        "render": {"outs": [{"path": "data/render", "md5": "1.dir"}]},
        "train-gone": {"outs": [{"path": "data/targets/gone/model"}, {"path": "plots/train/gone"}]},
        "prepare-gone": {"outs": [{"path": "data/targets/gone/prepared"}, {"path": "metrics/train/gone.json"}]},
        "segments-gone": {"outs": [{"path": "findings/gone/segments.parquet"}]},
    }
}
HISTORY_LOCK = {
    "stages": {
        "gad-a": {
            "outs": [
                {"path": "plots/gad/a"},
                {"path": "metrics/gad/a.json"},
                {"path": "findings/a/gad.parquet"},
                {"path": "findings/a/gad_to_label.csv"},
            ]
        }
    }
}


#: What the removal takes: the largest recorded entries (a folder all of whose contents a stage wrote is one).
EXPECTED_GONE = [
    "data/render",
    "data/targets/gone/model",
    "data/targets/gone/prepared",
    "findings/a/gad.parquet",
    "findings/a/gad_to_label.csv",
    "findings/gone",
    "metrics/gad",
    "metrics/train/gone.json",
    "plots/empty",
    "plots/gad",
    "plots/train/gone",
]


@pytest.fixture
def workspace(tmp_path):
    import yaml

    (tmp_path / "dvc.yaml").write_text(DVC_YAML)
    (tmp_path / "dvc.lock").write_text(yaml.safe_dump(LOCK))
    (tmp_path / "history").mkdir()
    (tmp_path / "history/20260101T000000Z-x.dvc.lock").write_text(yaml.safe_dump(HISTORY_LOCK))
    for rel in DECLARED + STALE + [USERS]:
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(rel)
    (tmp_path / "plots/empty").mkdir()
    return tmp_path


def test_the_manifest_lists_every_stages_outs_metrics_and_plots(workspace):
    from tasks.manifest import read_manifest

    m = read_manifest(workspace)
    assert m.root == workspace.resolve()
    assert m.stages["train-a"] == ("data/targets/a/model", "plots/train/a", "metrics/train/a.json")
    assert m.stages["segments-a"][-1] == "plots/segments/a/curve.csv" and m.stages["report"] == ("reports/index.html",)
    assert len(m.outputs) == len(set(m.outputs)) == 14
    assert {"data/external/a.csv", "data/targets/a/repaired_hda/model.pt", "history"} <= m.deps


@pytest.mark.parametrize(
    "path, declared",
    [
        ("metrics/train/a.json", True),
        ("plots/train/a", True),
        ("plots/train/a/section.json", True),  # inside a declared folder
        ("data/targets/a/model/model.joblib", True),  # "model/" in dvc.yaml
        ("plots/train/ab/section.json", False),  # a sibling whose name starts the same
        ("plots/train", False),  # holds declared outputs, is none
        ("metrics/train/gone.json", False),
        ("findings/a/gad.parquet", False),
        ("data/targets/a/repaired_hda/model.pt", False),  # read by a stage, made by none
    ],
)
def test_a_path_is_declared_when_it_is_or_lies_inside_a_declared_output(workspace, path, declared):
    from tasks.manifest import read_manifest

    m = read_manifest(workspace)
    assert m.declares(path) is declared
    assert m.declares(workspace / path) is declared  # an absolute path inside the root


def test_files_lists_only_declared_files(workspace):
    from tasks.manifest import read_manifest

    m = read_manifest(workspace)
    rel = [f.relative_to(workspace).as_posix() for f in m.files("metrics", "**/*.json")]
    assert rel == ["metrics/prepare/a.json", "metrics/segments/a.json", "metrics/train/a.json", "metrics/train/b.json"]
    assert [f.name for f in m.files("findings", "*/*.parquet")] == ["segments.parquet"]
    assert m.files("nowhere") == []


def test_stale_names_the_largest_undeclared_entries_under_the_artifact_roots(workspace):
    from tasks.manifest import read_manifest

    assert read_manifest(workspace).stale() == [
        "data/render",  # a whole root no stage declares any more (no scene target)
        "data/targets/gone",
        "findings/a/gad.parquet",
        "findings/a/gad_to_label.csv",
        "findings/gone",
        "metrics/gad",
        "metrics/train/gone.json",
        "plots/empty",
        "plots/gad",
        "plots/train/gone",
    ]


def test_remove_stale_removes_them_and_touches_nothing_declared(workspace, monkeypatch):
    from ops.engine.audit import remove_stale

    before = {rel: ((workspace / rel).stat().st_mtime_ns, (workspace / rel).read_text()) for rel in DECLARED}
    gone = remove_stale(workspace)
    assert gone == EXPECTED_GONE, gone
    assert not any((workspace / rel).exists() for rel in STALE)
    # a file no stage wrote (DVC's cache does not hold it: nothing could restore it) stays; no reader reads it
    assert (workspace / USERS).read_text() == USERS and "data/targets/gone/raw.csv" not in gone
    assert not (workspace / "plots/gad").exists() and not (workspace / "plots/empty").exists()  # folders too
    after = {rel: ((workspace / rel).stat().st_mtime_ns, (workspace / rel).read_text()) for rel in DECLARED}
    assert after == before
    left = sorted(p.name for p in workspace.rglob("*") if ".stale-" in p.name)
    assert left == []  # nothing half removed
    assert remove_stale(workspace) == []  # a second run finds nothing


def test_no_dvc_yaml_is_no_manifest(tmp_path):
    from tasks.manifest import read_manifest
    from weakspot.errors import DataError

    with pytest.raises(DataError, match="no dvc.yaml in .*weakspot pipeline"):
        read_manifest(tmp_path)


def test_the_stage_graph_reads_entries_with_the_manifests_helper():
    from ops.engine.graph import entry_paths
    from tasks import manifest

    assert entry_paths is manifest.entry_paths
    assert entry_paths(["a/", {"b": {"cache": False}}, "c"]) == ["a", "b", "c"]
