"""The pipeline end to end, as a user runs it: `weakspot audit` (dvc repro of Prefect flows), per-target incremental
reruns, a user's own model added with no code, bad inputs. (Byte-identical reruns: tests/ops/test_rerun.py reruns a
recorded audit with `weakspot rerun`; every method has a same-seed-same-result test of its own.)

Runs in throwaway copies of the repository with the `smoke` profile (every stage, tiny budgets).
"""

import hashlib
import json
import sys
from pathlib import Path

import pytest

# the first test also builds the smoke audit of every target (tens of minutes on 2 busy cores): a timeout of its own
pytestmark = [pytest.mark.pipeline, pytest.mark.timeout(3600)]

ROOT = Path(__file__).resolve().parents[1]
TARGETS = ["digits", "phoneme", "scenes"]


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _snapshot(root: Path) -> dict:
    out = {}
    for d in ("data/targets", "data/render", "metrics", "plots", "findings", "reports"):
        for f in sorted((root / d).rglob("*")):
            if f.is_file():
                out[str(f.relative_to(root))] = _sha(f)
    return out


def _results(root: Path, stage_target: str) -> dict:
    """Every metric of a stage (its metrics file holds the headline only: tasks/headline.py)."""
    return json.loads((root / "plots" / stage_target / "results.json").read_text())


def _smoke(r):
    import yaml

    r.set_params(**yaml.safe_load((ROOT / "profiles/smoke.yaml").read_text()))
    return r


def _stages(status: str) -> set:
    """Stage names that `dvc status` reports as changed."""
    return {
        line.strip().rstrip(":")
        for line in status.splitlines()
        if line and not line.startswith(("\t", " ")) and line.rstrip().endswith(":")
    }


#: A method as a user adds one: a package with its registration, its params model and its entry point, nothing else
#: (docs/contributing/adding-a-method.md names exactly these three files). It reports the test rows the model is
#: least sure of; its registration declares what the pipeline needs of it (its report order and headline metric).
TOY = {
    "weakspot/toy/__init__.py": """
from weakspot.methods import Method, StageSpec, register_method
from weakspot.toy.config import ToyParams

register_method(Method("toy", "Toy: least confident rows", "none (a test plug-in)", params=ToyParams,
                       run="weakspot.toy.run:run", stage=StageSpec(order=60, headline=("least_confidence", "n_test"))))
""",
    "weakspot/toy/config.py": """
from pydantic import BaseModel, ConfigDict, Field


class ToyParams(BaseModel):
    model_config = ConfigDict(extra="forbid")
    top: int = Field(3, ge=1)
""",
    "weakspot/toy/run.py": """
import numpy as np
import pandas as pd

from weakspot.methods import MethodReport
from weakspot.result import StageResult


def run(target, params, runtime):
    p = target.model.predict_proba(target.test.X)
    conf = p.max(axis=1)
    worst = np.argsort(conf, kind="stable")[: params.top]
    found = pd.DataFrame({"weak_spot": [f"test row {i}" for i in worst], "kind": "input",
                          "severity": 1 - conf[worst], "severity_meaning": "1 - the model's top probability",
                          "label": [target.classes[target.test.y[i]] for i in worst],
                          "prediction": [target.classes[p[i].argmax()] for i in worst], "confidence": conf[worst]})
    section = StageResult(metrics={"least_confidence": float(conf.min()), "mean_confidence": float(conf.mean()),
                                   "n_test": int(len(conf))},
                          title=f"Toy ({target.name})", summary=[f"The {params.top} least confident test rows."])
    return MethodReport(section=section, findings=found)
""",
}


def smoke_with_toy(folder: Path):
    """A copy of the repository in ``folder`` with the smoke profile and the toy method package (not yet audited;
    ``benchmarks/bench_tiny_audit.py --smoke`` times its audit)."""
    from conftest import Repo, _copy_repo

    r = _smoke(Repo(_copy_repo(folder)))
    # plain `dvc repro` in the checkout: these tests read what the stages wrote (workers: tests/ops/test_workers.py);
    # HDA's whole study (baselines, Tables 3-9, the repaired model) on digits, its default audit depth on scenes
    # (intrinsic's and corner's studies too: their defended copies, Table 4, the FGSM comparison)
    study = {"per_target": {"digits": {"depth": "study"}}}
    r.set_params(execution={"in_checkout": True}, hda=study)
    r.set_params(intrinsic={"depth": "study"}, corner={"depth": "study"})
    for f, text in TOY.items():
        (r.path / f).parent.mkdir(parents=True, exist_ok=True)
        (r.path / f).write_text(text.lstrip())
    return r


def _audited_smoke(folder: Path) -> None:
    smoke_with_toy(folder).audit()


def smoke_copy(tmp_path_factory):
    """The smoke audit of every target (and the toy method), run once for the whole test run; each module that uses
    it (this one, test_pipeline_changes.py) gets a copy of its own, so the two can run on separate pytest-xdist
    workers (tests/conftest.py's ``FIRST`` hands out the second late, once the audit is likely built)."""
    from conftest import built_once, copy_repo

    src = built_once(tmp_path_factory, "pipeline-audited", _audited_smoke)
    return copy_repo(src, tmp_path_factory.mktemp("pipeline"))


@pytest.fixture(scope="module")
def repo(tmp_path_factory):
    return smoke_copy(tmp_path_factory)


def test_a_toy_method_package_is_audited_on_every_target_with_nothing_else_touched(repo):
    import pandas as pd

    for t in TARGETS:  # a new package is a new method: it runs on every target it fits (all: it asks for nothing)
        m = _results(repo.path, f"toy/{t}")
        assert 0 < m["least_confidence"] <= 1 and m["n_test"] > 0
        assert len(pd.read_parquet(repo.path / f"findings/{t}/toy.parquet")) == 3
        # what the pipeline needs of it, as its registration declares: its headline metric, its report order
        assert 0 < m["mean_confidence"] <= 1  # in its results file, not among the headline it declared
        assert json.loads((repo.path / f"metrics/toy/{t}.json").read_text()) == {
            "least_confidence": m["least_confidence"],
            "n_test": m["n_test"],
        }
        assert json.loads((repo.path / f"plots/toy/{t}/section.json").read_text())["order"] == 60
    import yaml

    stages = yaml.safe_load((repo.path / "dvc.yaml").read_text())["stages"]
    assert stages["toy-digits"]["cmd"] == "python -m flows.method toy digits"
    assert "weakspot/toy" in stages["toy-digits"]["deps"] or "weakspot/toy/run.py" in stages["toy-digits"]["deps"]
    page = (repo.path / "reports/index.html").read_text()
    assert "Toy: least confident rows" in page and "id='toy-phoneme'" in page


def _touch_status(repo, rel: str) -> set:
    """The stages `dvc status` lists after a comment is appended to ``rel`` (then put back)."""
    f = repo.path / rel
    text = f.read_text()
    f.write_text(text + "\n# a comment\n")
    try:
        return _stages(repo.dvc("status").stdout)
    finally:
        f.write_text(text)


def test_a_change_to_the_scene_renderer_reruns_only_what_renders(repo):
    assert _touch_status(repo, "weakspot/scene/renderer.py") == {"render", "examine-scenes", "examine_study"}


def test_full_run_audits_every_target_with_every_method_that_fits(repo):
    m = json.loads((repo.path / "metrics/train/digits.json").read_text())
    assert m["test_accuracy"] >= 0.9  # a short run; the default profile's 0.99 is checked by `make audit`
    page = (repo.path / "reports/index.html").read_text()
    for t in TARGETS:  # the report opens with each target's weak spots
        assert f"Weak spots of {t}" in page
    assert page.index("Weak spots of digits") < page.index("id='gad-phoneme'")
    assert "Not run on this target: needs tabular data" in page  # gad on digits: a reason, never an error
    gad = json.loads((repo.path / "metrics/gad/phoneme.json").read_text())
    assert "sdr" in json.dumps(gad)
    to_label = (repo.path / "findings/phoneme/gad_to_label.csv").read_text().splitlines()
    assert to_label[0].startswith("rank,") and "label" not in to_label[0].split(",") and len(to_label) > 10
    import pandas as pd

    for t in ("digits", "scenes"):  # corner cases on both white-box image targets, none on the tabular one
        cm = _results(repo.path, f"corner/{t}")
        assert {
            "n_seeds",
            "margin_before",
            "margin_after",
            "realistic_yield",
            "tv_corner",
            "tv_fgsm",
            "top_class_pairs",
        } <= set(cm) and cm["n_seeds"] == 40
        assert f"id='corner-{t}'" in page
    assert not (repo.path / "metrics/corner/phoneme.json").exists()
    for t in ("digits", "scenes"):  # intrinsic robustness on both white-box image targets, with the smoke's defences
        im = _results(repo.path, f"intrinsic/{t}")
        for d in ("none", "minmax", "distillation"):
            assert {"psi", "psi_softmax", "clean_acc", "fgsm_acc", "pgd30_acc", "cw30_acc", "autoattack_acc"} <= set(
                im[d]
            )
        assert abs(im["reparam"]["none"]["x100"] / im["reparam"]["none"]["x1"] - 1) < 0.01
        assert f"id='intrinsic-{t}'" in page
        assert pd.read_parquet(repo.path / f"findings/{t}/intrinsic.parquet")["kind"].iloc[0] == "threat_model"
    assert not (repo.path / "metrics/intrinsic/phoneme.json").exists()
    for t in ("digits", "scenes"):  # HDA on both image targets: the metrics, findings and the repaired model
        hm = _results(repo.path, f"hda/{t}")
        assert {"ae_prop", "pred_loss", "queries_per_seed"} <= set(hm["hda"]) and "hda" in hm["random_seeds"]
        assert f"id='hda-{t}'" in page
        spec = json.loads((repo.path / f"data/targets/{t}/repaired_hda/model.json").read_text())
        if t == "digits":  # hda.depth: study (set above): the paper's comparisons and the repaired model
            assert hm["depth"] == "study" and "fid" in hm["hda"]
            assert {"hda", "pgd", "coverage", "foda"} <= set(hm) and set(hm["indicator_pearson"]) == {
                "gradient",
                "separation",
            }
            assert {"hda", "pgd", "coverage", "none"} <= set(hm["finetune"])
            assert spec["repaired_by"].startswith("hda") and (repo.path / spec["weights"]).is_file()
        else:  # the default depth, audit: HDA's GA around the selected and random seeds, no repair (and says why)
            assert hm["depth"] == "audit" and "fid" not in hm["hda"] and list(hm["random_seeds"]) == ["hda"]
            assert not {"pgd", "coverage", "foda", "finetune", "indicator_pearson"} & set(hm)
            assert spec["repaired_by"] is None and "hda.depth: study" in spec["why"] and "weights" not in spec
            assert not (repo.path / f"data/targets/{t}/repaired_hda/model.pt").exists()
    assert not (repo.path / "metrics/hda/phoneme.json").exists()
    # lineage on demand: one number back to its data, with params, hashes, code version, time and Prefect run
    out = repo.run(sys.executable, "-m", "ops.cli", "lineage", "metrics/hda/digits.json", "hda.ae_prop").stdout
    assert out.startswith("metrics/hda/digits.json  hda.ae_prop = ")
    for s in (
        "made by stage hda-digits",
        "hda.n_seeds = 6",
        "(made by train-digits)",
        "stage prepare-digits",
        "Prefect flow run",
        "code: git ",
    ):
        assert s in out, (s, out[:2000])
    ex = pd.read_parquet(repo.path / "findings/scenes/examine.parquet")
    reg = ex[ex["kind"] == "factor_region"]  # a region per examined class with failing and passing scenes
    em = _results(repo.path, "examine/scenes")
    assert len(reg) == em["regions"]["proposed"] <= 3 and set(ex["kind"]) <= {"factor_region", "unlearnt_class"}
    assert (reg["n_confirm"] == 8).all() and (reg["n_control"] == 8).all()  # the smoke's fresh renders per region
    with_image = reg[reg["failures"] > 0]
    assert with_image["image"].map(lambda b: bytes(b[:8]) == b"\x89PNG\r\n\x1a\n").all()
    assert len(em["repeats"]["rl"]["per_repeat"]) == 2
    lin = json.loads((repo.path / "plots/train/digits/section.json").read_text())["lineage"]
    assert lin["params"]["targets.digits"]["train"]["epochs"] == 25
    assert lin["code"]["git_commit"] and all(len(h) == 64 for h in lin["inputs"].values())
    assert (repo.path / "data/targets/digits/model/model.pt").is_file()
    assert oct((repo.path / "metrics/train/digits.json").stat().st_mode & 0o777) != oct(0o600)  # readable as umask says


def test_the_corner_prose_rebuilt_from_the_audits_results_has_no_stray_number(repo):
    """On the smoke audit's corner results (the results file beside the report section; the metrics file holds the
    headline only): every number in the headline and summary rebuilt from them is a metric or a setting."""
    from tests.corner.test_prose import allowed, stray_numbers
    from weakspot.corner.prose import headline_of, summary_of
    from weakspot.config import load_section

    paths = sorted((repo.path / "plots" / "corner").glob("*/results.json"))
    assert paths, "the smoke audit ran no corner stage"
    for path in paths:
        m = json.loads(path.read_text())
        _, params = load_section("corner", str(repo.path / "params.yaml"), target=path.parent.name)
        text = " ".join(headline_of(m, params) + summary_of(m, params, m["discriminator"], []))
        assert stray_numbers(text, allowed(m, params)) == [], (path, text)


def test_dvc_metrics_show_fits_a_terminal_each_file_its_headline(repo):
    from ops.provenance.lineage import flatten

    files = sorted(str(f.relative_to(repo.path)) for f in (repo.path / "metrics").rglob("*.json"))
    assert len(files) >= 15
    # DVC's own reading of every file, in one call: `dvc metrics show FILE` prints a column per flattened metric (its
    # table is read for one file below; the others' widths are counted from the same JSON)
    shown = json.loads(repo.dvc("metrics", "show", "--json").stdout)[""]["data"]
    assert sorted(shown) == files
    widths = {f: len(flatten(shown[f]["data"])) for f in files}
    assert all(2 <= n <= 15 for n in widths.values()), widths
    one = repo.dvc("metrics", "show", "metrics/hda/digits.json", "--md").stdout  # its table: Path and those columns
    header = next(line for line in one.splitlines() if line.startswith("| Path"))
    assert len(header.strip().strip("|").split("|")) - 1 == widths["metrics/hda/digits.json"], header
    # every detail is beside it, for the report, the history and the gates; the headline holds the same values
    head, full = (
        flatten(json.loads((repo.path / "metrics/hda/digits.json").read_text())),
        flatten(_results(repo.path, "hda/digits")),
    )
    assert {"hda_ae_prop", "hda_fid"} <= set(head) and len(full) > 5 * len(head)
    assert all(full[k] == v for k, v in head.items())


def test_changing_one_target_reruns_only_that_targets_stages(repo):
    repo.set_params(targets={"digits": {"train": {"epochs": 24}}})
    changed = _stages(repo.dvc("status").stdout)
    repo.set_params(targets={"digits": {"train": {"epochs": 25}}})
    # the report reads the targets' params; the intrinsic stage trains its defended models as the target trains, and
    # HDA's adversarially trained model is the intrinsic stage's
    assert changed == {"train-digits", "intrinsic-digits", "hda-digits", "report"}, changed


def _fails_cleanly(repo, stage, pattern, target=None):
    before = _snapshot(repo.path)
    proc = repo.stage(stage, target)
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert pattern in proc.stderr, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr
    assert _snapshot(repo.path) == before  # nothing earlier was lost or half-written
    return proc.stderr


@pytest.fixture
def restore_params(repo):
    p = repo.path / "params.yaml"
    text = p.read_text()
    yield
    p.write_text(text)


def test_malformed_yaml_stops_the_stage(repo, restore_params):
    (repo.path / "params.yaml").write_text("targets:\n  digits: {train: {epochs: [3}\n")
    _fails_cleanly(repo, "train", "malformed YAML at line", "digits")


def test_unknown_key_stops_the_stage(repo, restore_params):
    repo.set_params(targets={"digits": {"train": {"epoch": 3}}})
    _fails_cleanly(repo, "train", "unknown key 'targets.digits.train.epoch'", "digits")


def test_wrong_type_stops_the_stage(repo, restore_params):
    repo.set_params(targets={"digits": {"train": {"epochs": "ten"}}})
    _fails_cleanly(repo, "train", "targets.digits.train.epochs = 'ten'", "digits")


def test_unknown_target_stops_the_stage(repo, restore_params):
    _fails_cleanly(repo, "train", "no target 'nope'; targets: digits, phoneme, scenes", "nope")


def test_missing_data_file_stops_prepare(repo, restore_params):
    repo.set_params(targets={"digits": {"data": {"source": "csv:data/absent.csv", "label": "y"}}})
    _fails_cleanly(repo, "prepare", "data/absent.csv", "digits")


def _user_model(repo, body: str):
    (repo.path / "usermodels.py").write_text("import numpy as np\n\n" + body)


def test_wrong_model_output_shape_stops_train(repo, restore_params):
    _user_model(repo, "def make():\n    return lambda x: np.full((len(x), 3), 1 / 3)\n")
    repo.set_params(targets={"digits": {"model": {"kind": "callable", "factory": "usermodels:make", "arch": None}}})
    _fails_cleanly(repo, "train", "expected (n, k)", "digits")


def test_nan_probabilities_stop_train(repo, restore_params):
    _user_model(repo, "def make():\n    return lambda x: np.full((len(x), 10), np.nan)\n")
    repo.set_params(targets={"digits": {"model": {"kind": "callable", "factory": "usermodels:make", "arch": None}}})
    _fails_cleanly(repo, "train", "NaN", "digits")
