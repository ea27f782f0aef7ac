"""A user's own data and models, audited with no code, in one audit of several targets: a CSV with text columns and
a pickled scikit-learn pipeline, digits kept as a folder of PNGs and as .npz arrays, and (issue 37) tables with
missing values under a pickled HistGradientBoosting pipeline and its skl2onnx export, XGBoost and LightGBM models,
a torch CNN exported to ONNX and to TorchScript.

The audit is built once for the module (tests read it; the one test that changes a file runs last, on the data it
breaks itself). One audit of every user target rather than one per test: each audit pays a Prefect server, and it
runs its stages in the checkout, without workers (docs/results/test-suite.md).
"""

import json
import pickle
from pathlib import Path

import pytest

from conftest import Repo, _copy_repo, built_once, set_targets

pytestmark = [pytest.mark.pipeline, pytest.mark.timeout(3600)]


def _mine():
    """The CSV target's table and model: breast-cancer rows with two text columns, the user's ColumnTransformer and
    forest fitted on a third of them with a planted weak clinic (its labels said every east patient malignant)."""
    import numpy as np
    from sklearn.compose import ColumnTransformer
    from sklearn.datasets import load_breast_cancer
    from sklearn.ensemble import RandomForestClassifier
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import OneHotEncoder, StandardScaler

    data = load_breast_cancer(as_frame=True)
    df = data.frame.iloc[:, [0, 1, 2, 3, 4, 30]].rename(columns=lambda c: c.replace(" ", "_"))
    rng = np.random.default_rng(0)
    df.insert(2, "clinic", rng.choice(["north", "south", "east", "west"], len(df)))
    df.insert(4, "scanner", rng.choice(["old", "new"], len(df)))
    train = rng.random(len(df)) < 0.3  # the user's model saw a third of the rows: its train part
    production = df[~train].drop(columns="target").iloc[::2]  # rows no one has labelled (GAD ranks them to label)
    numeric = [c for c in df.columns if c not in ("clinic", "scanner", "target")]
    model = make_pipeline(
        ColumnTransformer(
            [("num", StandardScaler(), numeric), ("cat", OneHotEncoder(handle_unknown="ignore"), ["clinic", "scanner"])]
        ),
        RandomForestClassifier(n_estimators=20, max_depth=3, random_state=0),
    )
    fit_y = df["target"].where(df["clinic"] != "east", 0)
    model.fit(df.drop(columns="target")[train], fit_y[train])
    return df, train, production, model


def _write_mine(root: Path) -> dict:
    df, train, production, model = _mine()
    (root / "data/mine").mkdir(parents=True)
    df[train].to_csv(root / "data/mine/train.csv", index=False)
    df[~train].to_csv(root / "data/mine/test.csv", index=False)
    production.to_csv(root / "data/mine/production.csv", index=False)
    (root / "data/mine/model.pkl").write_bytes(pickle.dumps(model))
    return {
        "mine": {
            "data": {
                "train": "csv:data/mine/train.csv",
                "test": "csv:data/mine/test.csv",
                "unlabelled": "csv:data/mine/production.csv",
                "label": "target",
            },
            "model": {"kind": "sklearn", "weights": "data/mine/model.pkl"},
        }
    }


def _write_images(root: Path) -> dict:
    """Digits as a user keeps images: class folders of PNGs (weakspot trains a LeNet on them) and .npz parts."""
    import numpy as np
    from PIL import Image
    from sklearn.datasets import load_digits

    d = load_digits()
    pixels = (d.images * 255 / 16).astype(np.uint8)
    for i in range(0, 900):
        folder = root / "data/imgs" / f"digit{d.target[i]}"
        folder.mkdir(parents=True, exist_ok=True)
        Image.fromarray(pixels[i]).save(folder / f"{i}.png")
    np.savez(root / "data/train.npz", x=pixels[900:1500], y=d.target[900:1500])
    np.savez(root / "data/test.npz", x=pixels[1500:], y=d.target[1500:])
    small = {"model": {"kind": "builtin", "arch": "lenet"}, "train": {"epochs": 5, "seed": 0}, "methods": ["segments"]}
    return {
        "folder": {"data": {"source": "imagefolder:data/imgs"}, **small},
        "arrays": {"data": {"train": "npz:data/train.npz", "test": "npz:data/test.npz"}, **small},
    }


def _write_exported(root: Path) -> dict:
    """Issue 37's targets: the missing-values table's model pickled and exported with skl2onnx, XGBoost and
    LightGBM pickles, a small CNN trained on the digits of the .npz parts exported to ONNX and to TorchScript."""
    from user_models import fit_briefly, small_cnn, write_sklearn_onnx, write_torch_exports
    from user_tables import missing_parts, write_boosted_models, write_missing_csv_and_model

    targets = write_missing_csv_and_model(root)
    targets["missing"]["methods"] = ["segments", "gad"]
    train, _, model = missing_parts(root)
    write_sklearn_onnx(root / "data/missing", train.drop(columns="target"), None, model=model, stem="exported")
    targets["missing_onnx"] = {
        "data": dict(targets["missing"]["data"]),
        "model": {"kind": "onnx", "weights": "data/missing/exported.onnx"},
        "methods": ["segments"],
    }
    targets.update(write_boosted_models(root))
    from sklearn.datasets import load_digits

    d = load_digits()  # the CNN is fitted on the rows of the .npz train part, never on its test part (1500 on)
    X, y = (d.images[:1500] / 16.0).astype("float32")[:, None], d.target[:1500]
    cnn = fit_briefly(small_cnn(), X, y, epochs=30)
    write_torch_exports(root / "data/cnn", cnn)
    images = {"train": "npz:data/train.npz", "test": "npz:data/test.npz"}
    targets["cnn_onnx"] = {"data": images, "model": {"kind": "onnx", "weights": "data/cnn/cnn.onnx"}}
    targets["cnn_onnx"]["methods"] = ["segments"]
    targets["cnn_torchscript"] = {
        "data": images,
        "model": {"kind": "torchscript", "weights": "data/cnn/cnn.ts.pt", "outputs": "logits"},
        "methods": ["segments", "robustness"],
    }
    return targets


def _audited(folder: Path) -> None:
    import yaml

    r = Repo(_copy_repo(folder))
    targets = {**_write_mine(r.path), **_write_images(r.path), **_write_exported(r.path)}
    params = set_targets(yaml.safe_load((r.path / "params.yaml").read_text()), targets)
    params["gad"].update(design_points=2000, epochs=3, max_steps=300, replicates=5, budget=10, pool_size=40)
    # plain `dvc repro` in the checkout: these tests read what the stages wrote (workers: tests/ops/test_workers.py)
    params["execution"]["in_checkout"] = True
    params["examine"]["study"] = {
        "m_study": {"enabled": False},
        "artificial_weakness": {"enabled": False},
        "order_check": False,
        "strength": False,
        "epochs": 1,
    }
    (r.path / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    r.audit()


@pytest.fixture(scope="module")
def users(tmp_path_factory) -> Repo:
    return Repo(built_once(tmp_path_factory, "users-audited", _audited))


def _results(root: Path, stage_target: str) -> dict:
    return json.loads((root / "plots" / stage_target / "results.json").read_text())


def test_a_users_csv_and_pickled_sklearn_model_are_audited_by_gad_with_no_code(users, tmp_path):
    """A table with two text columns and the user's pickled ColumnTransformer + forest: no code, GAD and weak segments
    run on the texts as the model takes them, and the planted weak clinic is named by its text."""
    import pandas as pd
    import yaml

    r = users
    df, train, production, model = _mine()
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

    params = yaml.safe_load((r.path / "params.yaml").read_text())
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
        write_parquet(tmp_path / f"api_{method}.parquet", api)  # as stored: the same dtypes as the stage's file
        pd.testing.assert_frame_equal(
            pd.read_parquet(tmp_path / f"api_{method}.parquet"),
            pd.read_parquet(r.path / f"findings/mine/{method}.parquet"),
        )
    # one family, the target (issue 47): the pipeline's gates (8 other targets beside) and the API confirm the same
    from ops.verdict.gates import confirmed_weak_spots

    stages = yaml.safe_load((r.path / "dvc.yaml").read_text())["stages"]
    assert {s for s in stages if s.endswith("-mine")} == {"prepare-mine", "train-mine", "gad-mine", "segments-mine"}
    pipeline = [
        (s["method"], s["weak_spot"], s["family"]) for s in confirmed_weak_spots(r.path) if s["target"] == "mine"
    ]
    api = list(zip(res.weak_spots["method"], res.weak_spots["weak_spot"], res.weak_spots["family"]))
    assert pipeline and sorted(pipeline) == sorted(api)


def test_a_users_image_folder_and_npz_arrays_are_audited_end_to_end(users):
    """Digits as a user keeps images: class folders of PNGs (weakspot trains a LeNet on them) and .npz train/test
    parts; prepare, train, weak segments and the report run with no code."""
    import pandas as pd

    r = users
    dvc_yaml = (r.path / "dvc.yaml").read_text()
    assert all(f in dvc_yaml for f in ("data/imgs", "data/train.npz", "data/test.npz"))
    counts = json.loads((r.path / "data/targets/arrays/prepared/lineage.json").read_text())["counts"]
    assert counts["test"] == 1797 - 1500 and counts["train"] + counts["val"] == 600
    for t in ("folder", "arrays"):
        found = pd.read_parquet(r.path / f"findings/{t}/segments.parquet")
        assert {"lift", "lift_lo", "lift_hi", "confirmed", "n_confirm"} <= set(found.columns)
    page = (r.path / "reports/index.html").read_text()
    assert "imagefolder:data/imgs" in page and "npz:data/test.npz" in page


def _segments(r: Repo, target: str):
    import pandas as pd

    return pd.read_parquet(r.path / f"findings/{target}/segments.parquet")


def test_a_weak_spot_where_a_value_is_missing_is_named_by_weak_segments(users):
    """10% of ``income`` missing and some ``city`` cells empty, a pickled HistGradientBoosting pipeline that never saw
    a ``yes`` without an income: no code, the values reach the model as they are, weak segments confirm
    ``income is missing``, and the report states the share missing per column."""
    r = users
    seg = _segments(r, "missing")
    named = seg[seg["confirmed"] & (seg["weak_spot"] == "income is missing")]
    assert len(named) == 1, seg[["weak_spot", "confirmed", "lift", "lift_lo"]].to_string()
    assert named["lift_lo"].iloc[0] > 1
    lineage = json.loads((r.path / "data/targets/missing/prepared/lineage.json").read_text())
    assert "income" in json.dumps(lineage)  # the share missing per column, recorded at prepare
    page = (r.path / "reports/index.html").read_text()
    section = page[page.index("Weak spots of missing") + len("Weak spots of missing") :]
    assert "income is missing" in section[: section.find("Weak spots of ", 1) if "Weak spots of " in section else None]
    assert (r.path / "findings/missing/gad.parquet").is_file()  # GAD ran on the table with missing values


def test_the_onnx_export_gives_the_pickles_predictions_and_confirmed_weak_spots(users):
    """The same scikit-learn model, pickled and exported with skl2onnx (kind: onnx): the same predictions on the test
    rows (missing values included) and the same confirmed weak spots."""
    import numpy as np
    import pandas as pd

    r = users
    test = pd.read_csv(r.path / "data/missing/test.csv").drop(columns="target")
    pickled = pickle.loads((r.path / "data/missing/model.pkl").read_bytes())
    from weakspot.models.exported import load_onnx

    onnx = load_onnx(r.path / "data/missing/exported.onnx", n_classes=2)
    np.testing.assert_allclose(onnx.predict_proba(test), pickled.predict_proba(test), atol=1e-5)
    # inside the audit too: a table is never rounded on its way to the model (float64), so the pickle answers the
    # audit's test rows as it answers the CSV, and so does its float32 ONNX graph (float32 storage changed 6 rows)
    y = pd.read_csv(r.path / "data/missing/test.csv")["target"].to_numpy()
    on_csv = float(np.mean(pickled.classes_[pickled.predict_proba(test).argmax(axis=1)] == y))
    audited = {t: _results(r.path, f"train/{t}")["test_accuracy"] for t in ("missing", "missing_onnx")}
    assert audited["missing"] == audited["missing_onnx"] == on_csv, (audited, on_csv)
    confirmed = {t: set(_segments(r, t).query("confirmed")["weak_spot"]) for t in ("missing", "missing_onnx")}
    assert confirmed["missing"] and confirmed["missing"] == confirmed["missing_onnx"], confirmed
    assert "data/missing/exported.onnx" in (r.path / "dvc.yaml").read_text()  # the graph hashed as a dep


def test_xgboost_and_lightgbm_models_are_audited_by_segments_and_gad(users):
    """An XGBoost and a LightGBM classifier (scikit-learn API, pickled) on a table with missing numeric and text
    cells: weak segments and GAD ran on each with no code."""
    import pandas as pd

    for t in ("xgboost", "lightgbm"):
        seg = _segments(users, t)
        assert {"lift", "lift_lo", "confirmed", "n_confirm"} <= set(seg.columns) and len(seg)
        gad = pd.read_parquet(users.path / f"findings/{t}/gad.parquet")
        assert {"weak_spot", "severity"} <= set(gad.columns)
        acc = json.loads((users.path / f"metrics/train/{t}.json").read_text())["test_accuracy"]
        assert acc > 0.7, (t, acc)


def test_a_torch_cnn_exported_to_onnx_and_torchscript_is_audited(users):
    """One small CNN exported twice: ONNX (black box: weak segments) and TorchScript (white box: the robustness
    curve too, with no factory); both score the test images as the CNN does."""
    accs = {
        t: json.loads((users.path / f"metrics/train/{t}.json").read_text())["test_accuracy"]
        for t in ("cnn_onnx", "cnn_torchscript")
    }
    assert abs(accs["cnn_onnx"] - accs["cnn_torchscript"]) < 1e-9 and accs["cnn_onnx"] > 0.5, accs
    assert len(_segments(users, "cnn_onnx")) and len(_segments(users, "cnn_torchscript"))
    assert (users.path / "metrics/robustness/cnn_torchscript.json").is_file()
    dvc_yaml = (users.path / "dvc.yaml").read_text()
    assert "robustness-cnn_onnx" not in dvc_yaml and "data/cnn/cnn.ts.pt" in dvc_yaml


def test_an_unreadable_image_stops_prepare_and_loses_nothing(users):
    """A new file in the image folder that is not an image: prepare stops with a message that names it, and nothing
    of the audit is lost or half-written (the other folder errors: tests/data/test_image_sources.py). Last in the
    module: it changes the folder."""
    from test_pipeline import _fails_cleanly

    (users.path / "data/imgs/digit0/broken.png").write_bytes(b"not a png")  # a new file: the data's digest changes
    _fails_cleanly(users, "prepare", "cannot read image", "folder")
