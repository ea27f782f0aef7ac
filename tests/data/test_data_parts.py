"""Splits that respect the model: a model weakspot did not train is never judged on the rows it trained on."""

import struct
import sys

import numpy as np
import pytest

from weakspot.data.dataset import Dataset
from weakspot.data.frames import read_split_parquet, to_frame, write_split_parquet
from weakspot.data.parts import overlapping, row_digests
from weakspot.data.prepare import prepare_target_data
from weakspot.errors import ConfigError, DataError
from weakspot.methods import get as method
from weakspot.targets import TargetParams

CNN = """
import torch.nn as nn


def make(n_classes, input_shape):
    return nn.Sequential(nn.Conv2d(1, 4, 5, stride=3), nn.ReLU(), nn.Flatten(), nn.Linear(4 * 8 * 8, n_classes))
"""


def _write_idx(path, array, magic):
    with open(path, "wb") as fh:
        fh.write(struct.pack(">I", magic))
        for dim in array.shape:
            fh.write(struct.pack(">I", dim))
        fh.write(array.astype(np.uint8).tobytes())


def _digit_images(rng, y):
    """28x28 images: a bright 6x6 patch whose place is the class, on noise (a CNN learns them in a few steps)."""
    img = rng.integers(0, 90, (len(y), 28, 28))
    for i, k in enumerate(y):
        r, c = 2 + 8 * (k // 3), 2 + 8 * (k % 3)
        img[i, r : r + 6, c : c + 6] = rng.integers(150, 256, (6, 6))
    return img


@pytest.fixture(scope="module")
def mnist_copy(tmp_path_factory):
    """A local copy in torchvision's MNIST layout: 600 training images, 200 test images (9 classes used)."""
    root = tmp_path_factory.mktemp("tv")
    raw = root / "MNIST" / "raw"
    raw.mkdir(parents=True)
    rng = np.random.default_rng(0)
    parts = {}
    for part, n in (("train", 600), ("t10k", 200)):
        y = rng.integers(0, 9, n)
        img = _digit_images(rng, y)
        _write_idx(raw / f"{part}-images-idx3-ubyte", img, 2051)
        _write_idx(raw / f"{part}-labels-idx1-ubyte", y, 2049)
        parts[part] = (img, y)
    return root, parts


@pytest.fixture(scope="module")
def user_cnn(mnist_copy, tmp_path_factory):
    """The user's own CNN (a factory in their module and a state_dict) trained on the official train part only."""
    import torch

    folder = tmp_path_factory.mktemp("usermod")
    (folder / "user_cnn.py").write_text(CNN)
    sys.path.insert(0, str(folder))
    import user_cnn

    img, y = mnist_copy[1]["train"]
    torch.manual_seed(0)
    net = user_cnn.make(10, (1, 28, 28))
    X = torch.tensor(img[:, None] / 255.0, dtype=torch.float32)
    opt = torch.optim.Adam(net.parameters(), lr=0.01)
    for _ in range(60):
        opt.zero_grad()
        torch.nn.functional.cross_entropy(net(X), torch.tensor(y)).backward()
        opt.step()
    weights = folder / "cnn.pt"
    torch.save(net.state_dict(), weights)
    yield net, str(weights)
    sys.path.remove(str(folder))


def test_a_user_cnn_on_torchvision_parts_is_never_judged_on_its_training_images(mnist_copy, user_cnn, tmp_path):
    import torch

    from weakspot.evaluate import target_section
    from weakspot.models.spec import load_model

    root, raw = mnist_copy
    net, weights = user_cnn
    t = TargetParams.model_validate(
        {
            "data": {"source": "torchvision:MNIST", "root": str(root)},
            "model": {"kind": "torch", "factory": "user_cnn:make", "weights": weights},
        }
    )
    assert not t.trains and t.has_train
    ds, splits, info = prepare_target_data(t.data, trains=t.trains)
    assert info["kind"] == "official" and info["counts"] == {"train": 600, "val": 0, "test": 200}
    # as the stages see them: written to Parquet and read back
    read = {}
    for name, idx in splits.items():
        write_split_parquet(tmp_path / f"{name}.parquet", to_frame(ds, idx))
        read[name] = read_split_parquet(tmp_path / f"{name}.parquet")
    trained_on = set(row_digests(raw["train"][0][:, None].astype(np.float32) / np.float32(255.0)))
    judged_on = row_digests(np.concatenate([read["test"].X, read["val"].X]))
    assert len(judged_on) == 200 and not trained_on.intersection(judged_on)
    np.testing.assert_array_equal(read["test"].y, raw["t10k"][1])
    # the reported test accuracy is the model's accuracy on the official test part
    clf = load_model(t.model, n_classes=ds.n_classes, input_shape=(1, 28, 28), device="cpu")
    reported = target_section("mine", clf, read["train"], read["val"], read["test"], spec=t.model.model_dump())
    with torch.no_grad():
        direct = (
            net(torch.tensor(raw["t10k"][0][:, None] / 255.0, dtype=torch.float32)).argmax(1).numpy() == raw["t10k"][1]
        ).mean()
    assert reported.metrics["test_accuracy"] == pytest.approx(direct, abs=1e-12)
    assert reported.metrics["val_accuracy"] is None and reported.metrics["train_accuracy"] > 0.5
    # the distribution-modelling methods run on it (its train part is known)
    assert all(method(m).misfit(t) is None for m in ("corner", "hda", "intrinsic"))


def test_a_model_weakspot_trains_on_torchvision_keeps_the_official_test_part(mnist_copy):
    root, raw = mnist_copy
    t = TargetParams.model_validate(
        {"data": {"source": "torchvision:MNIST", "root": str(root)}, "model": {"kind": "builtin", "arch": "lenet"}}
    )
    ds, splits, info = prepare_target_data(t.data, trains=t.trains)
    assert info["val"] == "carved from the train part"
    assert len(splits["train"]) + len(splits["val"]) == 600 and splits["test"].tolist() == list(range(600, 800))
    assert not set(splits["val"]) & set(splits["train"])


def _table(rng, n):
    import pandas as pd

    X = rng.normal(size=(n, 3))
    return pd.DataFrame({"a": X[:, 0], "b": X[:, 1], "c": X[:, 2], "label": (X[:, 0] + X[:, 1] > 0).astype(int)})


def test_a_pretrained_model_s_single_csv_is_all_evaluation_data_and_gad_draws_from_every_row(tmp_path):
    import joblib
    from sklearn.linear_model import LogisticRegression

    from tests.gad.helpers import small_params
    from weakspot.gad.run import run as gad_run
    from weakspot.methods import AuditTarget
    from weakspot.models.spec import load_model
    from weakspot.runtime import Runtime

    rng = np.random.default_rng(1)
    fit_rows, eval_rows = _table(rng, 400), _table(rng, 900)
    est = LogisticRegression().fit(fit_rows[["a", "b", "c"]].to_numpy(), fit_rows["label"])
    joblib.dump(est, tmp_path / "m.pkl")
    eval_rows.to_csv(tmp_path / "eval.csv", index=False)
    t = TargetParams.model_validate(
        {
            "data": {"source": f"csv:{tmp_path / 'eval.csv'}", "label": "label"},
            "model": {"kind": "sklearn", "weights": str(tmp_path / "m.pkl")},
        }
    )
    ds, splits, info = prepare_target_data(t.data, trains=t.trains)
    assert info["kind"] == "evaluation" and info["counts"] == {"train": 0, "val": 0, "test": 900}
    # the methods that need its training rows say why they do not run
    image_user = TargetParams.model_validate(
        {"data": {"source": "digits"}, "model": {"kind": "torch", "factory": "m:f", "weights": "w.pt"}}
    )
    assert all("data.train" in method(m).misfit(image_user) for m in ("corner", "hda", "intrinsic"))
    clf = load_model(t.model, n_classes=2, input_shape=(3,), device="cpu")
    test = ds.subset(splits["test"])
    target = AuditTarget(
        name="mine",
        model=clf,
        classes=ds.classes,
        test=test,
        train=ds.subset(splits["train"]),
        params=t,
        spec={"kind": "sklearn"},
        info=info,
        digest="d",
    )
    out = gad_run(target, small_params(), Runtime(device="cpu"))[0]
    proba = est.predict_proba(eval_rows[["a", "b", "c"]].to_numpy())
    eligible = np.flatnonzero((proba.argmax(1) == 1) & (proba.max(1) > small_params().confidence_threshold))
    np.testing.assert_array_equal(out.eligible, eligible)  # every eligible row of the whole file
    assert np.isnan(out.train_accuracy)


def test_named_parts_merge_classes_by_name_and_drop_test_rows_the_model_trained_on(tmp_path):
    import pandas as pd

    rng = np.random.default_rng(2)
    train, test = _table(rng, 300), _table(rng, 100)
    test = test.iloc[:95]
    test = pd.concat([test, train.iloc[:5]], ignore_index=True)  # five training rows also in the test file
    train["label"] = train["label"].map({0: "no", 1: "yes"})
    test["label"] = test["label"].map({0: "no", 1: "yes"})
    test.loc[test.index[:3], "label"] = "yes"
    train.to_csv(tmp_path / "train.csv", index=False)
    test.to_csv(tmp_path / "test.csv", index=False)
    data = {"train": f"csv:{tmp_path / 'train.csv'}", "test": f"csv:{tmp_path / 'test.csv'}", "label": "label"}
    t = TargetParams.model_validate({"data": data, "model": {"kind": "sklearn", "weights": "m.pkl"}})
    assert t.data.kind == "csv" and t.has_train and len(t.data.files()) == 2
    ds, splits, info = prepare_target_data(t.data, trains=False)
    assert ds.classes == ["no", "yes"] and info["dropped"] == {"test": 5}
    assert len(splits["test"]) == 95 and len(splits["train"]) == 300
    assert not len(overlapping(ds.X, splits["test"], splits["train"]))
    # weakspot's own model: a validation part is carved from the train part
    ds, splits, info = prepare_target_data(t.data, trains=True)
    assert info["val"] == "carved from the train part" and len(splits["train"]) + len(splits["val"]) == 300


def test_parts_errors_name_the_problem(tmp_path):
    rng = np.random.default_rng(3)
    _table(rng, 50).to_csv(tmp_path / "t.csv", index=False)
    _table(rng, 50).drop(columns=["c"]).to_csv(tmp_path / "narrow.csv", index=False)
    with pytest.raises(ValueError, match="need a test part"):
        TargetParams.model_validate({"data": {"train": "csv:t.csv", "label": "label"}})
    with pytest.raises(ValueError, match="either data.source .* or named parts"):
        TargetParams.model_validate({"data": {"source": "csv:t.csv", "test": "csv:t.csv", "label": "label"}})
    with pytest.raises(ValueError, match="different kinds"):
        TargetParams.model_validate({"data": {"train": "csv:t.csv", "test": "parquet:t.parquet", "label": "label"}})
    t = TargetParams.model_validate(
        {"data": {"train": f"csv:{tmp_path / 'narrow.csv'}", "test": f"csv:{tmp_path / 't.csv'}", "label": "label"}}
    )
    with pytest.raises(DataError, match="same feature columns"):
        prepare_target_data(t.data, trains=False)
    t = TargetParams.model_validate({"data": {"test": f"csv:{tmp_path / 't.csv'}", "label": "label"}})
    with pytest.raises(ConfigError, match="give no training rows"):
        prepare_target_data(t.data, trains=True)
    t = TargetParams.model_validate(
        {
            "data": {"source": "keel:phoneme", "bias": {"preset": "phoneme"}},
            "model": {"kind": "sklearn", "weights": "m.pkl"},
        }
    )
    with pytest.raises(ConfigError, match="data.bias builds the training split"):
        prepare_target_data(t.data, trains=t.trains)


def test_row_digests_find_equal_inputs_only():
    X = np.arange(12, dtype=np.float32).reshape(4, 3)
    X[3] = X[0]
    assert overlapping(X, np.array([2, 3]), np.array([0, 1])).tolist() == [3]
    Y = X.copy()
    Y[3, 0] += 1e-6
    assert not len(overlapping(Y, np.array([2, 3]), np.array([0, 1])))
    assert isinstance(Dataset(X=X, y=np.zeros(4, np.int64), classes=["a"]).subset(np.array([0])), Dataset)


def test_named_parts_survive_the_stage_s_dump_and_revalidation():
    """The prepare stage validates the dumped data section again (``model_dump`` then ``model_validate``)."""
    from weakspot.targets import DataParams

    d = DataParams.model_validate({"train": "npz:a.npz", "test": "npz:b.npz"})
    again = DataParams.model_validate(d.model_dump(mode="json"))
    assert again.named_parts == {"train": "npz:a.npz", "test": "npz:b.npz"} and again.source is None
    assert DataParams.model_validate(DataParams().model_dump(mode="json")).source == "digits"


def test_unlabelled_rows_join_as_their_own_part_coded_like_the_labelled_rows(tmp_path):
    rng = np.random.default_rng(4)
    train, test = _table(rng, 200), _table(rng, 300)
    for df in (train, test):
        df["shop"] = rng.choice(["mall", "web"], len(df))
    prod = _table(rng, 50).drop(columns="label")
    prod["shop"] = rng.choice(["mall", "kiosk"], len(prod))  # kiosk: a text the labelled rows never had
    prod = __import__("pandas").concat([prod, train.drop(columns="label").iloc[:3]])  # 3 rows it trained on
    for name, df in (("train", train), ("test", test), ("prod", prod)):
        df.to_csv(tmp_path / f"{name}.csv", index=False)
    t = TargetParams.model_validate(
        {
            "data": {
                "train": f"csv:{tmp_path / 'train.csv'}",
                "test": f"csv:{tmp_path / 'test.csv'}",
                "unlabelled": f"csv:{tmp_path / 'prod.csv'}",
                "label": "label",
            },
            "model": {"kind": "sklearn", "weights": "m.pkl"},
        }
    )
    assert str(tmp_path / "prod.csv") in t.data.files() and "unlabelled csv:" in t.data.described
    ds, splits, info = prepare_target_data(t.data, trains=t.trains)
    assert info["counts"]["unlabelled"] == 50 and info["dropped"] == {"unlabelled": 3}  # its training rows left out
    assert ds.categories["shop"] == ["mall", "web", "kiosk"]  # the labelled codes kept, the new text after them
    u = ds.subset(splits["unlabelled"])
    kiosk = (u.X[:, ds.feature_names.index("shop")] == 2).sum()
    assert kiosk == (prod["shop"].iloc[:50] == "kiosk").sum()
    assert not set(splits["unlabelled"]) & (set(splits["test"]) | set(splits["train"]))
    # a missing feature column and a part given for images are named errors
    prod.drop(columns="a").to_csv(tmp_path / "bad.csv", index=False)
    bad = t.data.model_copy(update={"unlabelled": f"csv:{tmp_path / 'bad.csv'}"})
    with pytest.raises(DataError, match=r"column\(s\) \['a'\] of the labelled data are missing"):
        prepare_target_data(bad, trains=False)
    with pytest.raises(ValueError, match="give a table"):
        TargetParams.model_validate({"data": {"source": "digits", "unlabelled": "npz:x.npz"}})


def test_a_training_sample_is_seeded_in_order_and_all_rows_when_they_fit():
    from weakspot.data.parts import sample_rows

    np.testing.assert_array_equal(sample_rows(1257, 10_000, 0), np.arange(1257))  # digits: every row, as before
    np.testing.assert_array_equal(sample_rows(500, None, 0), np.arange(500))
    a = sample_rows(60_000, 10_000, 0)
    assert len(a) == len(np.unique(a)) == 10_000 and np.all(np.diff(a) > 0) and a.max() < 60_000
    np.testing.assert_array_equal(a, sample_rows(60_000, 10_000, 0))  # the same seed, the same sample
    assert not np.array_equal(a, sample_rows(60_000, 10_000, 1))
