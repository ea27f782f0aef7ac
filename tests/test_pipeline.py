"""The pipeline end to end, as a user runs it: `weakspot audit` (dvc repro of Prefect flows), per-target incremental
reruns, a user's own model added with no code, bad inputs. (Byte-identical reruns: tests/ops/test_rerun.py reruns a
recorded audit with `weakspot rerun`; every method has a same-seed-same-result test of its own.)

Runs in throwaway copies of the repository with the `smoke` profile (every stage, tiny budgets).
"""

import hashlib
import json
import pickle
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
#: least sure of.
TOY = {
    "weakspot/toy/__init__.py": """
from weakspot.methods import Method, register_method
from weakspot.toy.config import ToyParams

register_method(Method("toy", "Toy: least confident rows", "none (a test plug-in)", params=ToyParams,
                       run="weakspot.toy.run:run"))
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
    section = StageResult(metrics={"least_confidence": float(conf.min()), "n_test": int(len(conf))},
                          title=f"Toy ({target.name})", summary=[f"The {params.top} least confident test rows."])
    return MethodReport(section=section, findings=found)
""",
}


def _audited_smoke(folder: Path) -> None:
    from conftest import Repo, _copy_repo

    r = _smoke(Repo(_copy_repo(folder)))
    for f, text in TOY.items():
        (r.path / f).parent.mkdir(parents=True, exist_ok=True)
        (r.path / f).write_text(text.lstrip())
    r.audit()


def smoke_copy(tmp_path_factory):
    """The smoke audit of every target (and the toy method), run once for the whole test run; each module that uses
    it (this one, test_pipeline_changes.py) gets a copy of its own, so the two run on separate pytest-xdist workers."""
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
        assert {"ae_prop", "pred_loss", "fid", "queries_per_seed"} <= set(hm["hda"])
        assert {"hda", "pgd", "coverage", "foda"} <= set(hm) and set(hm["indicator_pearson"]) == {
            "gradient",
            "separation",
        }
        assert {"hda", "pgd", "coverage", "none"} <= set(hm["finetune"])
        assert f"id='hda-{t}'" in page
        spec = json.loads((repo.path / f"data/targets/{t}/repaired_hda/model.json").read_text())
        assert spec["repaired_by"].startswith("hda") and (repo.path / spec["weights"]).is_file()
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
    from ops.lineage import flatten

    files = sorted(str(f.relative_to(repo.path)) for f in (repo.path / "metrics").rglob("*.json"))
    assert len(files) >= 15
    widths = {}
    for f in files:  # DVC's own table of each file: Path, then one column per (flattened) metric
        out = repo.dvc("metrics", "show", f, "--md").stdout
        header = next(line for line in out.splitlines() if line.startswith("| Path"))
        widths[f] = len(header.strip().strip("|").split("|")) - 1
    assert all(2 <= n <= 15 for n in widths.values()), widths
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


def test_a_users_csv_and_pickled_sklearn_model_are_audited_by_gad_with_no_code(repo_factory):
    """A table with two text columns and the user's pickled ColumnTransformer + forest: no code, GAD and weak segments
    run on the texts as the model takes them, and the planted weak clinic is named by its text."""
    import numpy as np
    import pandas as pd
    from sklearn.compose import ColumnTransformer
    from sklearn.datasets import load_breast_cancer
    from sklearn.ensemble import RandomForestClassifier
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import OneHotEncoder, StandardScaler

    r = repo_factory("usermodel")
    data = load_breast_cancer(as_frame=True)
    df = data.frame.iloc[:, [0, 1, 2, 3, 4, 30]].rename(columns=lambda c: c.replace(" ", "_"))
    rng = np.random.default_rng(0)
    df.insert(2, "clinic", rng.choice(["north", "south", "east", "west"], len(df)))
    df.insert(4, "scanner", rng.choice(["old", "new"], len(df)))
    (r.path / "data/mine").mkdir(parents=True)
    train = rng.random(len(df)) < 0.3  # the user's model saw a third of the rows: its train part
    df[train].to_csv(r.path / "data/mine/train.csv", index=False)
    df[~train].to_csv(r.path / "data/mine/test.csv", index=False)
    production = df[~train].drop(columns="target").iloc[::2]  # rows no one has labelled (GAD ranks them to label)
    production.to_csv(r.path / "data/mine/production.csv", index=False)
    numeric = [c for c in df.columns if c not in ("clinic", "scanner", "target")]
    model = make_pipeline(
        ColumnTransformer(
            [("num", StandardScaler(), numeric), ("cat", OneHotEncoder(handle_unknown="ignore"), ["clinic", "scanner"])]
        ),
        RandomForestClassifier(n_estimators=20, max_depth=3, random_state=0),
    )
    fit_y = df["target"].where(df["clinic"] != "east", 0)  # planted: its labels said every east patient malignant
    model.fit(df.drop(columns="target")[train], fit_y[train])
    (r.path / "data/mine/model.pkl").write_bytes(pickle.dumps(model))
    # only the new target, plus a small GAD protocol
    import yaml

    from conftest import set_targets

    params = set_targets(
        yaml.safe_load((r.path / "params.yaml").read_text()),
        {
            "mine": {
                "data": {
                    "train": "csv:data/mine/train.csv",
                    "test": "csv:data/mine/test.csv",
                    "unlabelled": "csv:data/mine/production.csv",
                    "label": "target",
                },
                "model": {"kind": "sklearn", "weights": "data/mine/model.pkl"},
            }
        },
    )
    params["gad"].update(design_points=2000, epochs=3, max_steps=300, replicates=5, budget=10, pool_size=40)
    params["examine"]["study"] = {
        "m_study": {"enabled": False},
        "artificial_weakness": {"enabled": False},
        "order_check": False,
        "strength": False,
        "epochs": 1,
    }
    (r.path / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    r.audit()
    dvc_yaml = (r.path / "dvc.yaml").read_text()
    assert "gad-mine" in dvc_yaml and "data/mine/model.pkl" in dvc_yaml and "examine-mine" not in dvc_yaml
    assert "data/mine/train.csv" in dvc_yaml and "data/mine/test.csv" in dvc_yaml  # both parts hashed as deps
    prepared = json.loads((r.path / "data/targets/mine/prepared/lineage.json").read_text())
    assert prepared["counts"] == {
        "train": int(train.sum()),
        "val": 0,
        "test": int((~train).sum()),
        "unlabelled": len(production),
    }
    assert "data/mine/production.csv" in dvc_yaml
    found = pd.read_parquet(r.path / "findings/mine/gad.parquet")
    assert len(found) >= 1 and {"weak_spot", "severity", "prediction", "confidence"} <= set(found.columns)
    to_label = pd.read_csv(r.path / "findings/mine/gad_to_label.csv")
    assert set(to_label["clinic"]) <= {"north", "south", "east", "west"}  # the texts, as the user's table has them
    assert (to_label["part"] == "unlabelled").all() and to_label["row"].max() < len(production)
    gad_metrics = _results(r.path, "gad/mine")
    m = gad_metrics.get("mine", gad_metrics)
    assert m["n_unlabelled"] == len(production) and m["n_to_label"] == len(to_label)
    segments = pd.read_parquet(r.path / "findings/mine/segments.parquet")
    named = segments[segments["confirmed"] & segments["weak_spot"].str.contains("clinic = east")]
    assert len(named), segments[["weak_spot", "confirmed", "lift"]].to_string()
    page = (r.path / "reports/index.html").read_text()
    first = page.index("Weak spots of mine")
    assert found["weak_spot"].iloc[0][:30] in page[first:]  # its findings head its section
    # the same model and params from Python (weakspot.audit, in this process): the same findings as the pipeline
    import weakspot
    from weakspot.io import write_parquet

    test = df[~train]
    res = weakspot.audit(
        model,
        test.drop(columns="target"),
        test["target"],
        df[train].drop(columns="target"),
        df[train]["target"].to_numpy(),
        methods=["gad", "segments"],
        params=params,
        name="mine",
        device="cpu",
        X_unlabelled=production,
    )
    for method in ("gad", "segments"):
        api = res.findings[res.findings["method"] == method].drop(columns="method").reset_index(drop=True)
        write_parquet(r.path / f"api_{method}.parquet", api)
        pd.testing.assert_frame_equal(
            pd.read_parquet(r.path / f"api_{method}.parquet"),
            pd.read_parquet(r.path / f"findings/mine/{method}.parquet"),
        )


def test_a_users_image_folder_and_npz_arrays_are_audited_end_to_end(repo_factory):
    """Digits as a user keeps images: class folders of PNGs (weakspot trains a LeNet on them) and .npz train/test
    parts; prepare, train, weak segments and the report run with no code, and an unreadable image stops prepare
    (the other folder errors: tests/data/test_image_sources.py)."""
    import numpy as np
    import pandas as pd
    import yaml
    from PIL import Image
    from sklearn.datasets import load_digits

    from conftest import set_targets

    r = repo_factory("userimages")
    d = load_digits()
    pixels = (d.images * 255 / 16).astype(np.uint8)
    for i in range(0, 900):
        folder = r.path / "data/imgs" / f"digit{d.target[i]}"
        folder.mkdir(parents=True, exist_ok=True)
        Image.fromarray(pixels[i]).save(folder / f"{i}.png")
    np.savez(r.path / "data/train.npz", x=pixels[900:1500], y=d.target[900:1500])
    np.savez(r.path / "data/test.npz", x=pixels[1500:], y=d.target[1500:])
    small = {"model": {"kind": "builtin", "arch": "lenet"}, "train": {"epochs": 5, "seed": 0}, "methods": ["segments"]}
    params = set_targets(
        yaml.safe_load((r.path / "params.yaml").read_text()),
        {
            "folder": {"data": {"source": "imagefolder:data/imgs"}, **small},
            "arrays": {"data": {"train": "npz:data/train.npz", "test": "npz:data/test.npz"}, **small},
        },
    )
    params.pop("examine", None)
    (r.path / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    r.audit()
    dvc_yaml = (r.path / "dvc.yaml").read_text()
    assert all(f in dvc_yaml for f in ("data/imgs", "data/train.npz", "data/test.npz"))
    counts = json.loads((r.path / "data/targets/arrays/prepared/lineage.json").read_text())["counts"]
    assert counts["test"] == len(d.target) - 1500 and counts["train"] + counts["val"] == 600
    for t in ("folder", "arrays"):
        found = pd.read_parquet(r.path / f"findings/{t}/segments.parquet")
        assert {"lift", "lift_lo", "lift_hi", "confirmed", "n_confirm"} <= set(found.columns)
    page = (r.path / "reports/index.html").read_text()
    assert "imagefolder:data/imgs" in page and "npz:data/test.npz" in page
    (r.path / "data/imgs/digit0/broken.png").write_bytes(b"not a png")  # a new file: the data's digest changes
    _fails_cleanly(r, "prepare", "cannot read image", "folder")


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
