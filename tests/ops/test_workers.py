"""Stages on workers (ops.engine.graph, ops.engine.snapshot, ops.engine.audit_flow, ops.engine.stage_flow, ops.engine.workers): the stage graph of a
generated dvc.yaml, the workspace snapshot, the scheduler on a known graph (a failure stops only what needs it, a
dead worker's stage is submitted again); then on throwaway repositories (marked ``ops``): local process workers and
a gpu pool give the bytes of ``weakspot audit --in-checkout`` (plain ``dvc repro`` in the checkout), a bad target
beside two good ones (on workers and in the checkout), and a change to a module train imports retraining the model
(in the checkout). (A worker killed with SIGKILL mid-stage: test_worker_killed.py.)
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
WEAKSPOT = [sys.executable, "-m", "ops.cli"]


# ------------------------------------------------------------------------------------------ the graph, the snapshot


def test_the_stage_graph_is_read_from_dvc_yaml(tmp_path):
    from ops.engine.graph import downstream, stage_graph, upstream
    from ops.engine.pipeline import dvc_yaml
    from weakspot.config import read_yaml

    (tmp_path / "dvc.yaml").write_text(dvc_yaml(read_yaml(ROOT / "params.yaml")))
    g = stage_graph(tmp_path / "dvc.yaml")
    assert g["prepare-phoneme"] == [] and g["train-phoneme"] == ["prepare-phoneme"]
    assert set(g["gad-phoneme"]) == {"prepare-phoneme", "train-phoneme"}
    assert "render" in g["prepare-scenes"]  # the scenes target's data are rendered
    assert {"intrinsic-digits", "gad-phoneme", "segments-scenes"} <= set(g["report"])
    after = downstream(g, "prepare-digits")
    assert {"train-digits", "intrinsic-digits", "hda-digits", "report"} <= set(after)
    assert not any(s.endswith("-phoneme") or s.endswith("-scenes") for s in after)
    assert upstream(g, ["gad-phoneme"]) == ["prepare-phoneme", "train-phoneme", "gad-phoneme"]


def _git(*args, cwd):
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=True).stdout.strip()


def test_the_snapshot_holds_uncommitted_changes_and_touches_nothing(tmp_path):
    from ops.engine.snapshot import snapshot

    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"}
    os.environ.update(env)
    _git("init", "-q", cwd=tmp_path)
    (tmp_path / ".gitignore").write_text("/metrics\n")
    (tmp_path / "params.yaml").write_text("a: 1\n")
    _git("add", "-A", cwd=tmp_path)
    _git("commit", "-qm", "first", cwd=tmp_path)
    head = _git("rev-parse", "HEAD", cwd=tmp_path)
    ref, sha = snapshot(tmp_path)
    assert sha == head  # nothing uncommitted: HEAD itself
    (tmp_path / "params.yaml").write_text("a: 2\n")  # the usual case: params edited, not committed
    (tmp_path / "new.py").write_text("x = 1\n")
    (tmp_path / "metrics").mkdir()
    (tmp_path / "metrics/m.json").write_text("{}")  # ignored: an output, DVC's to restore
    status = _git("status", "--porcelain", cwd=tmp_path)
    ref, sha = snapshot(tmp_path)
    assert sha != head and ref.startswith("refs/weakspot/audits/") and _git("rev-parse", ref, cwd=tmp_path) == sha
    assert _git("show", f"{sha}:params.yaml", cwd=tmp_path) == "a: 2"
    assert _git("show", f"{sha}:new.py", cwd=tmp_path) == "x = 1"
    assert "metrics/m.json" not in _git("ls-tree", "-r", "--name-only", sha, cwd=tmp_path)
    assert _git("rev-parse", f"{sha}^", cwd=tmp_path) == head
    # the user's branch, index and files as they were
    assert _git("rev-parse", "HEAD", cwd=tmp_path) == head and _git("status", "--porcelain", cwd=tmp_path) == status


def test_workers_elsewhere_clone_the_audits_commit_from_a_git_remote(tmp_path, monkeypatch):
    from ops.engine.audit import git_source
    from ops.engine.snapshot import snapshot

    os.environ.update(
        {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"}
    )
    work, bare = tmp_path / "work", tmp_path / "bare.git"
    work.mkdir()
    _git("init", "-q", "--bare", str(bare), cwd=tmp_path)
    _git("init", "-q", cwd=work)
    (work / "params.yaml").write_text("a: 1\n")
    _git("add", "-A", cwd=work)
    _git("commit", "-qm", "first", cwd=work)
    _git("remote", "add", "origin", str(bare), cwd=work)
    (work / "params.yaml").write_text("a: 2\n")
    ref, sha = snapshot(work)
    monkeypatch.chdir(work)
    monkeypatch.delenv("WEAKSPOT_GIT_REMOTE", raising=False)
    assert git_source(ref, sha) == str(work.resolve())  # workers on this machine clone the checkout
    monkeypatch.setenv("WEAKSPOT_GIT_REMOTE", "origin")
    assert git_source(ref, sha) == str(bare)
    # what a worker elsewhere does (ops/engine/stage_flow.py): clone, fetch the ref, check out the commit
    clone = tmp_path / "clone"
    _git("clone", "-q", "--no-checkout", str(bare), str(clone), cwd=tmp_path)
    _git("fetch", "-q", str(bare), ref, cwd=clone)
    _git("checkout", "-q", "--detach", sha, cwd=clone)
    assert (clone / "params.yaml").read_text() == "a: 2\n"


def test_a_clone_gets_the_inputs_git_ignores_from_the_checkout_and_no_output(tmp_path):
    from ops.engine.stage_flow import copy_ignored_inputs

    repo, work = tmp_path / "repo", tmp_path / "work"
    dvc_yaml = {
        "stages": {
            "prepare-mine": {
                "cmd": "python -m flows.prepare mine",
                "deps": ["flows/prepare.py", "data/mine/train.csv", "models"],
                "outs": ["data/targets/mine/prepared"],
            },
            "train-mine": {
                "cmd": "python -m flows.train mine",
                "deps": ["data/targets/mine/prepared", "flows/train.py"],
                "outs": ["data/targets/mine/model"],
                "metrics": [{"metrics/train/mine.json": {"cache": False}}],
            },
        }
    }
    for root in (repo, work):
        (root / "flows").mkdir(parents=True)
        (root / "flows/prepare.py").write_text(f"# {root.name}\n")
        (root / "dvc.yaml").write_text(yaml.safe_dump(dvc_yaml))
    (repo / "data/mine").mkdir(parents=True)
    (repo / "data/mine/train.csv").write_text("a,y\n1,0\n")  # ignored by git: not in the clone
    (repo / "models").mkdir()
    (repo / "models/net.pt").write_bytes(b"weights")
    (repo / "data/targets/mine/prepared").mkdir(parents=True)
    (repo / "data/targets/mine/prepared/train.parquet").write_bytes(b"an output: DVC's to restore")
    assert copy_ignored_inputs(repo, work) == ["data/mine/train.csv", "models"]
    assert (work / "data/mine/train.csv").read_text() == "a,y\n1,0\n" and (work / "models/net.pt").is_file()
    assert (work / "flows/prepare.py").read_text() == "# work\n"  # what the clone has is its own
    assert not (work / "data/targets").exists()
    assert copy_ignored_inputs(repo, work) == []


# ------------------------------------------------------------------------------------------ the audit's flow


class FakeDeployments:
    """``prefect.deployments.run_deployment`` for the audit flow's tests: each call is a child flow run that ends at
    once; ``fail`` stages fail, ``crash`` stages crash on their first attempt (a lost worker)."""

    def __init__(self, fail=(), crash=()):
        import threading

        self.fail, self.crash = set(fail), set(crash)
        self.submitted, self.priorities, self.nice, self.pools = [], {}, {}, {}
        self.lock = threading.Lock()

    def __call__(self, name, parameters, scheduled_time, flow_run_name, tags, timeout, poll_interval):
        import uuid
        from types import SimpleNamespace

        from prefect.states import Completed, Crashed, Failed

        stage = parameters["stage"]
        with self.lock:
            self.submitted.append(stage)
            attempt = self.submitted.count(stage)
        self.priorities[stage] = scheduled_time
        self.nice[stage] = parameters["nice"]
        self.pools[stage] = name
        if stage in self.fail:
            state = Failed(message=f"{stage}: DataError: bad data")
        elif stage in self.crash and attempt == 1:
            state = Crashed(message="no heartbeat for 90 s: its worker or machine was lost")
        else:
            state = Completed()
        import datetime

        start = datetime.datetime(2026, 1, 1, tzinfo=datetime.timezone.utc)  # each stage "took" 1 s per letter
        end = start + datetime.timedelta(seconds=len(stage))
        return SimpleNamespace(id=uuid.uuid4(), state=state, start_time=start, end_time=end)


@pytest.fixture(scope="module")
def prefect_api(tmp_path_factory):
    """A temporary Prefect server (``prefect server start``) for the audit flow's tests."""
    import prefect_db
    from prefect.settings import PREFECT_API_URL, temporary_settings

    from tasks.server import temporary_server

    home = prefect_db.fresh_home(tmp_path_factory.mktemp("prefect-home"), os.environ)
    with temporary_server(home) as url, temporary_settings(updates={PREFECT_API_URL: url}):
        yield url


def _run(graph, fake, retries=1, monkeypatch=None):
    """The stages of ``graph`` through :func:`ops.engine.audit_flow.run_stages` in a flow run, with ``fake`` for
    run_deployment."""
    import prefect.deployments
    from prefect import flow

    from ops.engine.audit_flow import run_stages, runner

    monkeypatch.setattr(prefect.deployments, "run_deployment", fake)

    @flow(name="weakspot-audit-test", task_runner=runner(len(graph)), persist_result=False)
    def audit():
        return run_stages(
            list(graph),
            graph,
            lambda s: "gpu" if s.startswith("intrinsic") else "cpu",
            lambda pool: f"weakspot-stage/stage-{pool}",
            {"repo": "r"},
            audit="test",
            retries=retries,
            say=lambda m: None,
        )

    return audit()


GRAPH = {
    "prepare-a": [],
    "train-a": ["prepare-a"],
    "gad-a": ["prepare-a", "train-a"],
    "prepare-b": [],
    "train-b": ["prepare-b"],
    "intrinsic-b": ["prepare-b", "train-b"],
    "prepare-c": [],
    "train-c": ["prepare-c"],
}


def test_a_failed_stage_stops_only_the_stages_that_need_it(prefect_api, monkeypatch):
    fake = FakeDeployments(fail={"train-b"})
    out = _run(GRAPH, fake, monkeypatch=monkeypatch)
    assert out.failed.keys() == {"train-b"} and "DataError: bad data" in out.failed["train-b"]
    assert out.not_run == {"intrinsic-b": "train-b"}
    assert sorted(out.done) == sorted(set(GRAPH) - {"train-b", "intrinsic-b"})
    assert not out.complete
    # each stage run once (Prefect's wait_for kept it until what it needs completed); none of a failed stage's
    # dependants; the white-box stage on the gpu pool's deployment
    assert sorted(fake.submitted) == sorted(set(GRAPH) - {"intrinsic-b"})
    assert fake.pools["gad-a"] == "weakspot-stage/stage-cpu"
    # each completed stage's seconds: its flow run's own, from its start to its end (what the estimate is checked on)
    assert {r["stage"]: r["seconds"] for r in out.runs} == {s: float(len(s)) for s in out.done}


#: a stage graph like the default audit's: the rendered scenes' chain (render, its data, its model, four methods) and a
#: table target's quick chain that stands alone
SCENES_AND_A_TABLE = {
    "prepare-a": [],
    "train-a": ["prepare-a"],
    "render": [],
    "prepare-s": ["render"],
    "train-s": ["prepare-s"],
    **{f"m{i}-s": ["prepare-s", "train-s"] for i in range(4)},
}


def test_the_stages_with_most_after_them_go_first():
    """The rendered scenes' chain (render, its data, its model, four methods) is taken before quick stages that stand
    alone: each stage's priority is the number of stages after it, and the tasks are submitted in that order."""
    from ops.engine.audit_flow import order

    after = order(list(SCENES_AND_A_TABLE), SCENES_AND_A_TABLE)
    assert list(after)[:3] == ["render", "prepare-s", "train-s"]
    assert after == {
        "render": 6,
        "prepare-s": 5,
        "train-s": 4,
        "prepare-a": 1,
        "train-a": 0,
        **{f"m{i}-s": 0 for i in range(4)},
    }


def test_stages_nothing_waits_for_run_at_a_lower_cpu_priority_and_are_scheduled_later(prefect_api, monkeypatch):
    """The stage most stages wait for gets the normal nice 0, a leaf (no stage after it) nice 10, the others in
    proportion; a pool's workers take the earliest scheduled run first, and the longest chain is scheduled first."""
    from ops.engine.audit_flow import LEAF_NICE, niceness

    assert [niceness(n, 6) for n in (0, 3, 6)] == [LEAF_NICE, LEAF_NICE // 2, 0] and 0 < LEAF_NICE <= 19
    fake = FakeDeployments()
    out = _run(SCENES_AND_A_TABLE, fake, monkeypatch=monkeypatch)
    assert out.complete
    assert fake.nice["render"] == 0 and fake.nice["m0-s"] == fake.nice["train-a"] == LEAF_NICE
    assert fake.nice["render"] < fake.nice["prepare-s"] < fake.nice["train-s"] < fake.nice["prepare-a"]
    assert fake.priorities["render"] < fake.priorities["prepare-s"] < fake.priorities["prepare-a"]


def test_a_stage_at_a_lower_priority_lowers_its_own_session_too():
    """A worker's flow run is a session of its own; where Linux groups sessions (autogroup), only the session's nice
    ranks one stage against another, so the flow run lowers it for its whole session (the stage's command included)."""
    import subprocess
    import sys

    probe = (
        "from ops.engine.stage_flow import lower_priority; import os; "
        "print(lower_priority(7), os.nice(0), open('/proc/self/autogroup').read().split()[-1] "
        "if os.path.exists('/proc/self/autogroup') else 'none')"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, check=True, start_new_session=True
    )
    prefix, own, group = out.stdout.strip().rsplit(" ", 2)
    assert prefix == "['nice', '-n', '7']" and own == "0"  # the command is niced; the flow run itself is not
    assert group in ("7", "none"), out.stdout  # its session is lowered where the kernel groups sessions


def test_a_crashed_stage_runs_again_and_a_failed_one_does_not(prefect_api, monkeypatch):
    """A Crashed child flow run (a lost worker, as Prefect's heartbeat automation marks it) is run again by the
    task's retry; a Failed one is not (it would fail the same way); with no retries left a crash is a failure."""
    fake = FakeDeployments(crash={"train-a", "train-c"}, fail={"train-b"})
    out = _run(GRAPH, fake, retries=1, monkeypatch=monkeypatch)
    assert set(out.failed) == {"train-b"} and fake.submitted.count("train-b") == 1
    assert fake.submitted.count("train-a") == 2 and fake.submitted.count("train-c") == 2
    assert {"train-a", "train-c", "gad-a"} <= set(out.done)
    fake = FakeDeployments(crash={"train-a"})
    out = _run(GRAPH, fake, retries=0, monkeypatch=monkeypatch)
    assert "train-a" in out.failed and "lost" in out.failed["train-a"] and out.not_run == {"gad-a": "train-a"}


def test_the_lost_worker_automation_expects_a_heartbeat_within_three():
    """Prefect's documented zombie detection: after a heartbeat of a weakspot flow run, another heartbeat or a final
    state within three heartbeats, else the run is marked Crashed."""
    from ops.engine.lost import MISSED, automation

    a = automation(30)
    assert MISSED == 3 and a.trigger.within.total_seconds() == 90 and a.trigger.posture.value == "Proactive"
    assert a.trigger.after == {"prefect.flow-run.heartbeat"}
    assert {"prefect.flow-run.heartbeat", "prefect.flow-run.Completed", "prefect.flow-run.Crashed"} <= a.trigger.expect
    assert a.actions[0].state.value == "CRASHED"


def test_stages_of_methods_that_need_gradients_go_to_the_gpu_pool(tmp_path):
    import tasks.settings  # noqa: F401
    from ops.engine.audit import gpu_steps
    from weakspot.config import load_section

    _, ex = load_section("execution", ROOT / "params.yaml")
    assert {"intrinsic", "corner", "robustness"} <= set(gpu_steps(ex)) and "gad" not in gpu_steps(ex)
    p = tmp_path / "params.yaml"
    raw = yaml.safe_load((ROOT / "params.yaml").read_text())
    raw["execution"]["pools"] = {"gpu": ["render", "hda"]}
    p.write_text(yaml.safe_dump(raw))
    assert gpu_steps(load_section("execution", p)[1]) == ["render", "hda"]


# ------------------------------------------------------------------------------------------ on throwaway repositories

#: the white-box target of these tests: digits' LeNet for one epoch, the robustness curve on 20 inputs
TINY_DIGITS = {
    "data": {"source": "digits", "fractions": [0.7, 0.15, 0.15], "seed": 0},
    "model": {"kind": "builtin", "arch": "lenet"},
    "train": {"epochs": 1, "seed": 0},
    "methods": ["robustness"],
}


def _pool_params(r):
    from conftest import TINY_GAD, TINY_TARGET, set_targets
    from weakspot.config import deep_merge

    p = r.path / "params.yaml"
    phoneme = {**TINY_TARGET, "methods": ["gad"]}  # a leaf on each pool: GAD (cpu) and the robustness curve (gpu)
    raw = set_targets(yaml.safe_load(p.read_text()), {"phoneme": phoneme, "digits": TINY_DIGITS})
    raw["gad"] = deep_merge(raw["gad"], TINY_GAD)
    raw["robustness"] = deep_merge(raw["robustness"], {"n_inputs": 20, "pgd_steps": 2, "eps": [0.0, 0.1]})
    raw.pop("examine", None)
    raw["gates"] = {"fail": False, "conditions": []}
    p.write_text(yaml.safe_dump(raw, sort_keys=False))
    return r


@pytest.fixture(scope="module")
def pool_repo(repo_factory):
    """Two targets (phoneme's SVM with GAD; digits' LeNet with the robustness curve) audited by two
    local cpu workers and one gpu worker (a CPU worker standing in for the GPU agent)."""
    r = _pool_params(repo_factory("pools"))
    r.env["WEAKSPOT_WORKDIR"] = str(r.path.parent / "work")
    proc = r.run(*WEAKSPOT, "audit", "--workers", "2", "--gpu-workers", "1")
    r.log = proc.stdout + proc.stderr
    return r


def _flow_runs(r, flow="weakspot-stage"):
    """Prefect's flow-run records of the flow ``flow`` (None: every flow) in the repository's Prefect database: run
    name -> (work pool, state) of each run."""
    from ops.engine.server import prefect_server

    async def read(url):
        from prefect.client.orchestration import PrefectClient
        from prefect.client.schemas.filters import FlowFilter, FlowFilterName

        async with PrefectClient(url) as client:
            if flow is None:
                return await client.read_flow_runs()
            return await client.read_flow_runs(flow_filter=FlowFilter(name=FlowFilterName(any_=[flow])))

    import asyncio

    with prefect_server({**r.env, "PREFECT_HOME": str(r.path / ".prefect")}) as env:
        runs = asyncio.run(read(env["PREFECT_API_URL"]))
    out = {}
    for fr in runs:
        out.setdefault(fr.name, []).append((fr.work_pool_name, fr.state.type.value if fr.state else None))
    return out


def _lock(path):
    return yaml.safe_load((path / "dvc.lock").read_text())["stages"]


def _what_ran(stage):
    """A dvc.lock entry without the hashes of the folders that hold lineage (the prepared data, the model, the report
    sections record when and in which Prefect run they were made: lineage, not results): its command, params, code
    deps and the hashes of its metrics and findings."""
    keep = dict(stage)
    lineage = ("data/targets/", "data/render", "plots/")
    keep["deps"] = sorted(
        (d["path"], d.get("md5") if not d["path"].startswith(lineage) else None) for d in stage.get("deps", [])
    )
    keep["outs"] = sorted(
        (o["path"], o.get("md5"))
        for o in stage.get("outs", [])
        if o["path"].startswith("metrics/") or o["path"].startswith("findings/")
    )
    return keep


@pytest.mark.ops
def test_workers_and_a_gpu_pool_give_the_bytes_of_plain_dvc_repro(pool_repo, repo_factory):
    from ops.engine.graph import stage_graph

    r = pool_repo
    assert "robustness-digits submitted to the gpu pool" in r.log and "gad-phoneme submitted to the cpu pool" in r.log
    # the leaves ran at nice 10, the stage most others wait for at the normal priority
    started = {ln.split(":")[0]: ln for ln in r.log.splitlines() if ": dvc repro " in ln}
    assert started["gad-phoneme"].endswith("(nice 10)"), started
    assert any("(nice" not in ln for ln in started.values()), started  # the stage most others wait for: nice 0
    plain = _pool_params(repo_factory("plain"))
    log = plain.run(*WEAKSPOT, "audit", "--in-checkout").stdout  # no workers: plain `dvc repro` in the checkout
    assert (
        "weakspot: dvc repro --keep-going " + " ".join(s for s in stage_graph(r.path / "dvc.yaml") if s != "report")
        in log
    )
    assert "submitted to the" not in log and "local cpu worker" not in log
    mine = sorted(p.relative_to(r.path / "metrics") for p in (r.path / "metrics").rglob("*.json"))
    theirs = sorted(p.relative_to(plain.path / "metrics") for p in (plain.path / "metrics").rglob("*.json"))
    assert mine == theirs and len(mine) >= 6
    for f in mine:
        assert (r.path / "metrics" / f).read_bytes() == (plain.path / "metrics" / f).read_bytes(), f
    a, b = _lock(r.path), _lock(plain.path)
    assert set(a) == set(b)
    for s in set(b) - {"report"}:  # the report depends on the history, whose audits differ in their times
        assert _what_ran(a[s]) == _what_ran(b[s]), s
    # the lineage says where each stage ran
    lin = json.loads((r.path / "plots/robustness/digits/section.json").read_text())["lineage"]
    assert lin["worker"]["pool"] == "gpu" and lin["worker"]["flow_run"]
    assert json.loads((r.path / "plots/gad/phoneme/section.json").read_text())["lineage"]["worker"]["pool"] == "cpu"
    assert "worker" not in json.loads((plain.path / "plots/gad/phoneme/section.json").read_text())["lineage"]
    # in the checkout: no flow run on a pool, each stage's own flow run on the audit's server
    runs = _flow_runs(plain, None)
    assert runs["train-digits"] == [(None, "COMPLETED")] and not [p for v in runs.values() for p, _ in v if p], runs
    # from Prefect's own records: the white-box stage ran on the gpu pool, the others on the cpu pool, once each
    runs = _flow_runs(r)
    assert runs["robustness-digits"] == [("weakspot-gpu", "COMPLETED")]
    for s in ("prepare-phoneme", "train-phoneme", "gad-phoneme", "prepare-digits", "train-digits"):
        assert runs[s] == [("weakspot-cpu", "COMPLETED")], s


def _descendants(pid):
    import psutil

    try:
        return psutil.Process(pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return []


@pytest.mark.ops
def test_a_bad_target_beside_two_good_ones_is_named_and_the_others_audited(pool_repo):
    r = pool_repo
    params = (r.path / "params.yaml").read_text()
    raw = yaml.safe_load(params)
    raw["targets"]["broken"] = {
        "data": {"source": "csv:data/broken.csv", "label": "y"},
        "model": {"kind": "builtin", "arch": "svm_grid"},
    }
    (r.path / "data/broken.csv").write_text("a,b,y\n1,2,0\n3,x,1\n4,5\n")  # a short row: not a table
    (r.path / "params.yaml").write_text(yaml.safe_dump(raw, sort_keys=False))
    proc = r.run(*WEAKSPOT, "audit", "--workers", "2", "--gpu-workers", "0", check=False)
    text = proc.stdout + proc.stderr
    assert proc.returncode == 4, text[-3000:]  # incomplete (a failed gate is 3)
    assert "prepare-broken FAILED" in text and "train-broken not run" in text
    for f in ("findings/phoneme/gad.parquet", "findings/digits/robustness.parquet", "metrics/train/digits.json"):
        assert (r.path / f).is_file(), f
    summary = (r.path / "reports/summary.md").read_text()
    assert summary.startswith("## weakspot audit: INCOMPLETE")
    assert "`prepare-broken` | broken |" in summary and "broken.csv" in summary
    page = (r.path / "reports/index.html").read_text()
    assert page.index("id='failures'") < page.index("id='target-phoneme'") and "prepare-broken" in page
    junit = (r.path / "reports/junit.xml").read_text()
    assert 'name="stages"' in junit and 'errors="4"' in junit
    comp = sorted((r.path / "history").glob("*.comparison.json"))[-1]
    c = json.loads(comp.read_text())
    assert c["complete"] is False and {f["stage"] for f in c["failures"]} >= {"prepare-broken", "train-broken"}
    # in the checkout too (`dvc repro --keep-going`): the good targets untouched, the same verdict and failure rows
    here = r.run(*WEAKSPOT, "audit", "--in-checkout", check=False)
    text = here.stdout + here.stderr
    assert here.returncode == 4, text[-3000:]
    assert "prepare-broken failed" in text and "Running stage 'gad-phoneme'" not in text, text[-3000:]
    summary = (r.path / "reports/summary.md").read_text()
    assert summary.startswith("## weakspot audit: INCOMPLETE") and "`prepare-broken` | broken |" in summary
    assert "broken.csv" in summary, summary
    c = json.loads(sorted((r.path / "history").glob("*.comparison.json"))[-1].read_text())
    failed = {f["stage"]: f["failed"] for f in c["failures"]}
    assert failed["prepare-broken"] is True and failed["train-broken"] is False, failed
    (r.path / "params.yaml").write_text(params)  # the next test audits the two good targets


@pytest.mark.ops
def test_a_change_to_a_module_train_imports_retrains_the_model(pool_repo):
    """weakspot/device.py (outside weakspot.models and weakspot.data) changes: DVC reruns train-phoneme and its
    model is trained again, not handed back from Prefect's cache."""
    from tasks.closure import closure

    r = pool_repo
    assert "weakspot/device.py" in closure("flows.train")
    f = r.path / "weakspot/device.py"
    f.write_text(f.read_text() + "\n# a change to a module train imports\n")
    assert "train-phoneme" in r.dvc("status", "train-phoneme").stdout
    proc = r.run(*WEAKSPOT, "audit", "train-phoneme", "--in-checkout")  # where it runs is not this test's subject
    assert "Running stage 'train-phoneme'" in proc.stdout
    assert r.dvc("status", "train-phoneme").stdout.strip().endswith("Data and pipelines are up to date.")

    async def read(url):
        from prefect.client.orchestration import PrefectClient
        from prefect.client.schemas.filters import TaskRunFilter, TaskRunFilterName
        from prefect.client.schemas.sorting import TaskRunSort

        async with PrefectClient(url) as client:
            return await client.read_task_runs(
                task_run_filter=TaskRunFilter(name=TaskRunFilterName(like_="train_builtin")),
                sort=TaskRunSort.EXPECTED_START_TIME_DESC,
            )

    import asyncio

    from ops.engine.server import prefect_server

    with prefect_server({**r.env, "PREFECT_HOME": str(r.path / ".prefect")}) as env:
        runs = asyncio.run(read(env["PREFECT_API_URL"]))
    f.write_text(f.read_text().replace("\n# a change to a module train imports\n", ""))  # as it was
    # the latest training task: run (Completed), not handed back from the cache (Cached)
    assert runs and runs[0].state.name == "Completed", [(t.name, t.state.name) for t in runs[:4]]
