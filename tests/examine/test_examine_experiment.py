"""The examine entry points end to end on the fake renderer, whose planted weakness is known: views from the top or
the bottom (|view_elevation| near 90 degrees) squash every class to the same bar."""

import io
import json

import numpy as np
import pandas as pd
import pytest
import torch
from pydantic import ValidationError

from weakspot.errors import ConfigError, DataError
from weakspot.examine.config import ExamineParams
from weakspot.examine.examiners import EXAMINERS
from weakspot.examine.experiment import FINDING_COLUMNS, examine_target, run_study, select_instances
from weakspot.examine.fake import FakeRenderer, fake_dataset
from weakspot.models import ARCHS, CallableClassifier, TorchClassifier, train_torch_classifier
from weakspot.scene.dataset import images_to_input
from weakspot.scene.space import SceneSpace

CLASSES = ["disc", "square", "triangle", "cross"]


def tiny_params(**kw):
    base = dict(
        T=30, checkpoints=[0, 10, 20, 30],
        window=3, examiners=["random", "bo", "rl"], rl=dict(lr=0.05, batch_size=8), random_batch=2, n_random=20,
        tail=20, n_worst=2,
        study=dict(
            arch="small_cnn", epochs=15, lr=0.003,
            m_study=dict(values=[1, 10], T=4, examiners=["rl", "bo"]),
            artificial_weakness=dict(T=12, tail=24, examiners=["rl", "bo", "random"])),
    )
    base.update(kw)
    return ExamineParams(**base)


def _train_target(images, meta, seed=0):
    train = meta[meta.split == "train"]
    pos = meta.index.get_indexer(train.index)
    x = images_to_input(images[pos])
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        module = ARCHS.get("small_cnn")(tuple(x.shape[1:]), len(CLASSES))
    train_torch_classifier(module, x, train.label.to_numpy(), epochs=15, lr=0.003, batch_size=64, seed=seed,
                           device="cpu", augment="hflip")
    return TorchClassifier(module, n_classes=len(CLASSES), device="cpu")


@pytest.fixture(scope="module")
def world():
    space = SceneSpace()
    r = FakeRenderer(classes=CLASSES, resolution=24)
    images, meta = fake_dataset(r, space, instances_per_class=8, views_per_instance=10, val_instances=2)
    torch.set_num_threads(1)
    clf = _train_target(images, meta)
    return space, r, images, meta, tiny_params(), clf


@pytest.fixture(scope="module")
def examined(world):
    space, r, images, meta, params, clf = world
    calls = []
    res, findings = examine_target(r, space, clf, CLASSES, images, meta, params,
                                   progress=lambda w, d, n: calls.append((w, d, n)))
    return res, findings, calls


@pytest.fixture(scope="module")
def study(world):
    space, r, images, meta, params, _ = world
    calls = []
    res = run_study(r, space, images, meta, params, device="cpu", progress=lambda w, d, n: calls.append((w, d, n)))
    return res, calls


def test_examine_target_metrics_have_model_independent_keys(examined):
    res, _, calls = examined
    m = res.metrics
    assert set(m) == {"random", "bo", "rl", "per_class", "renders", "at_equal_renders", "classes_t0_below_half"}
    for e in ("random", "bo", "rl"):
        assert list(m[e]) == ["T0", "T10", "T20", "T30"]  # keyed by the iterations that ran
        assert all(0.0 <= v <= 1.0 for v in m[e].values())
    # renders: RL a batch of 8 per iteration, BO one, random 2; compared at BO's render counts
    assert m["renders"] == {"random": {"T0": 0, "T10": 20, "T20": 40, "T30": 60},
                            "bo": {"T0": 0, "T10": 10, "T20": 20, "T30": 30},
                            "rl": {"T0": 0, "T10": 80, "T20": 160, "T30": 240}}
    assert all(list(m["at_equal_renders"][e]) == ["R10", "R20", "R30"] for e in ("random", "bo", "rl"))
    assert set(m["per_class"]) == set(CLASSES)
    assert set(m["per_class"]["disc"]) == {"random", "bo", "rl"}
    assert set(m["per_class"]["disc"]["bo"]) == {"T0", "T30", "min_found", "gp_length_scale_min"}
    assert set(m["per_class"]["disc"]["rl"]) == {"T0", "T30", "min_found"}
    assert m["per_class"]["disc"]["bo"]["gp_length_scale_min"] > 0
    st = res.tables["settings"].set_index("setting")
    assert bool(st.loc["T", "differs"]) and st.loc["T", "ran"] == "30" and not bool(st.loc["bo.init_points", "differs"])
    assert "T500" not in json.dumps(m) and "T500" not in " ".join(res.summary + res.headline)
    json.dumps(m)  # writable as metrics/examine.json
    assert res.check() is res
    assert set(res.tables) == {"table2", "per_class", "worst", "equal_renders", "t0_per_class", "settings"}
    assert set(res.figures) == {"curves", "curves_renders", "per_class", "tsne", "worst"}
    assert res.headline
    assert calls and calls[-1][0] == "examine" and calls[-1][1] == calls[-1][2]  # progress reached its total


def test_examiners_find_the_planted_weakness(examined):
    res, findings, _ = examined
    worst = res.tables["worst"]
    for e in ("bo", "rl"):
        w = worst[worst.examiner == e]
        # the worst scenes found look from the top or the bottom
        assert np.median(np.abs(w.view_elevation)) > 45
        assert w.p_true.max() < res.metrics[e]["T0"]
    # T = 0 is the same random protocol for every examiner
    assert len({res.metrics[e]["T0"] for e in ("random", "bo", "rl")}) == 1
    elev = [json.loads(f)["view_elevation"] for f in findings[findings.kind == "class_condition"].factors]
    assert np.median(np.abs(elev)) > 45


def test_findings_table(world, examined):
    from PIL import Image

    _, all_findings, _ = examined
    assert list(all_findings.columns) == list(FINDING_COLUMNS)
    # a class with T0 < 0.5 is a finding of its own: the model never learnt it
    t0 = {c: v["random"]["T0"] for c, v in examined[0].metrics["per_class"].items()}
    unlearnt = all_findings[all_findings.kind == "unlearnt_class"]
    assert sorted(unlearnt.label) == sorted(c for c, v in t0.items() if v < 0.5)
    assert sorted(examined[0].metrics["classes_t0_below_half"]) == sorted(unlearnt.label)
    assert np.allclose(unlearnt.severity, [1 - t0[c] for c in unlearnt.label])
    findings = all_findings[all_findings.kind == "class_condition"]
    assert sorted(findings.label) == sorted(CLASSES) and len(findings) == len(CLASSES)
    assert findings.severity.is_monotonic_decreasing
    assert ((findings.severity >= 0) & (findings.severity <= 1)).all()
    assert ((findings.confidence >= 1 / len(CLASSES) - 1e-9) & (findings.confidence <= 1)).all()
    assert findings.prediction.isin(CLASSES).all()
    res = examined[0]
    for _, row in findings.iterrows():
        assert row.weak_spot.startswith(f"class {row.label} under rendering conditions ")
        factors = json.loads(row.factors)
        assert set(factors) == set(SceneSpace().bounds)  # searched and fixed (sun) factors
        img = np.asarray(Image.open(io.BytesIO(row.image)))
        assert img.shape == (24, 24, 3)
        # severity is 1 - the lowest true-class probability BO and RL reached
        low = min(res.metrics["per_class"][row.label][e]["min_found"] for e in ("bo", "rl"))
        assert row.severity == pytest.approx(1 - low)
        if row.severity > 0.5 and row.prediction == row.label:
            pytest.fail("a class whose true-class probability fell below 0.5 cannot be predicted with top-1")


def test_class_names_map_outputs(world):
    """classes[i] names output i: the same classifier with permuted outputs and an extra class unknown to the
    scene (probability 0) gives the same examination; the extra class is not examined."""
    space, r, images, meta, _, clf = world
    p = tiny_params(T=6, checkpoints=[0, 6], examiners=["rl", "bo"], classes=None)
    perm = [2, 0, 3, 1]

    def permuted(x):
        q = clf.predict_proba(x)[:, perm]
        return np.concatenate([q, np.zeros((len(q), 1))], axis=1)

    other = CallableClassifier(permuted, n_classes=5)
    names = [CLASSES[i] for i in perm] + ["teapot"]
    a, fa = examine_target(r, space, clf, CLASSES, images, meta, p.model_copy(update={"classes": CLASSES}))
    b, fb = examine_target(r, space, other, names, images, meta, p.model_copy(update={"classes": CLASSES}))
    assert a.metrics == b.metrics
    pd.testing.assert_frame_equal(fa, fb)
    # without params.classes, the classes of the model that the scene has, in the model's order
    c, fc = examine_target(r, space, other, names, images, meta, p)
    assert list(c.metrics["per_class"]) == [n for n in names if n != "teapot"]


def test_same_params_same_result(world, examined):
    space, r, images, meta, params, clf = world
    a, fa, _ = examined
    b, fb = examine_target(r, space, clf, CLASSES, images, meta, params)
    assert a.metrics == b.metrics
    pd.testing.assert_frame_equal(a.tables["worst"], b.tables["worst"])
    pd.testing.assert_frame_equal(fa, fb)


def test_renders_are_batched(world):
    space, _, images, meta, _, clf = world
    r = FakeRenderer(classes=CLASSES, resolution=24)
    p = tiny_params(examiners=["rl", "bo"], T=5, checkpoints=[0, 5])
    examine_target(r, space, clf, CLASSES, images, meta, p)
    # one call per round (T rounds), not one per scene
    assert r.calls == p.T
    assert r.n_rendered == len(CLASSES) * (p.T * (p.rl.batch_size + 1) + p.n_random)


def test_select_instances_takes_the_most_sure_unseen_instance(world):
    space, r, images, meta, params, clf = world
    chosen = select_instances(clf, CLASSES, images, meta)
    val = meta[meta.split != "train"]
    pos = meta.index.get_indexer(val.index)
    p = clf.predict_proba(images_to_input(images[pos]))[np.arange(len(pos)), val.label.to_numpy()]
    means = val.assign(p=p).groupby(["class", "instance"]).p.mean()
    for c in CLASSES:
        assert means[c].idxmax() == chosen[c]


def test_study_trains_its_models_and_runs_the_experiments(world, study):
    space, r, images, meta, params, _ = world
    res, calls = study
    models = res.tables["models"].set_index("model")
    assert sorted(models.index) == ["small_cnn", "small_cnn_limited", "small_cnn_m1", "small_cnn_m10"]
    train = meta[meta.split == "train"]
    assert models.loc["small_cnn_m1", "n_train"] == train.groupby(["class", "instance"]).ngroups
    assert models.loc["small_cnn_m10", "n_train"] == len(train)  # m = 10 is the full model
    assert models.loc["small_cnn_limited", "n_train"] == len(train)  # rendered afresh, same size (Sec. 4.4)
    assert models.loc["small_cnn", "unseen_accuracy"] > 0.6
    m = res.metrics
    assert set(m) == {"m_study", "artificial_weakness", "order_check", "strength"}
    assert set(m["m_study"]) == {"rl", "bo", "T0"} and set(m["m_study"]["rl"]) == {"m=1", "m=10"}
    aw = m["artificial_weakness"]
    assert set(aw) == {"rl", "bo", "random", "chance"} and aw["chance"] == pytest.approx(2 / 3)
    for e in ("rl", "bo", "random"):
        assert list(aw[e]) == ["frac_outside_train_range"] and 0.0 <= aw[e]["frac_outside_train_range"] <= 1.0
    json.dumps(m)
    assert {"models", "table3", "artificial_weakness", "factor_order", "strength"} == set(res.tables)
    assert {"artificial_weakness", "artificial_tsne", "factor_order", "strength"} == set(res.figures)
    assert res.tables["artificial_weakness"].examiner.iloc[-1].startswith("chance")
    # strength mode goes the other way: the best scenes beat the random protocol
    st = res.tables["strength"]
    assert (st.best_found >= st.T0).all()
    phases = [w.split(" (")[0] for w, _, _ in calls]
    assert "train small_cnn: epoch" in phases and phases[-1] == "examine"
    assert calls[-1][1] == calls[-1][2]


def test_study_can_run_one_experiment(world):
    space, r, images, meta, _, _ = world
    p = tiny_params(study=dict(epochs=1, m_study=dict(enabled=False), artificial_weakness=dict(enabled=False),
                               order_check=False, strength=True, strength_examiner="bo"), T=3,
                    checkpoints=[0, 3], classes=["disc", "cross"])
    res = run_study(r, space, images, meta, p, device="cpu")
    assert set(res.metrics) == {"strength"} and len(res.tables["strength"]) == 2
    # study.classes: the order check and strength mode on a subset of the examined classes
    p = tiny_params(study=dict(epochs=1, m_study=dict(enabled=False), artificial_weakness=dict(enabled=False),
                               order_check=False, strength=True, strength_examiner="bo", classes=["cross"]), T=3,
                    checkpoints=[0, 3], classes=["disc", "cross"])
    res = run_study(r, space, images, meta, p, device="cpu")
    assert res.tables["strength"]["class"].tolist() == ["cross"]
    with pytest.raises(ConfigError, match=r"study\.classes: unknown \['teapot'\]"):
        run_study(r, space, images, meta, p.model_copy(update={"study": p.study.model_copy(
            update={"classes": ["teapot"]})}), device="cpu")


def test_bad_input_is_named(world):
    space, r, images, meta, params, clf = world
    with pytest.raises(DataError, match="missing column"):
        examine_target(r, space, clf, CLASSES, images, meta.drop(columns=["split"]), params)
    with pytest.raises(DataError, match="uint8"):
        examine_target(r, space, clf, CLASSES, images.astype(np.float32), meta, params)
    with pytest.raises(ConfigError, match=r"classes: unknown \['teapot'\]"):
        examine_target(r, space, clf, CLASSES, images, meta, tiny_params(classes=["teapot"]))
    with pytest.raises(ConfigError, match="4 outputs but 3 class names"):
        examine_target(r, space, clf, CLASSES[:3], images, meta, params)
    with pytest.raises(DataError, match="split == 'train'"):
        run_study(r, space, images, meta.assign(split="validation"), params, device="cpu")
    with pytest.raises(ValidationError, match="checkpoints"):
        ExamineParams(T=100, checkpoints=[0, 50, 200])
    with pytest.raises(ValidationError, match="extra"):
        ExamineParams(budget=3)
    for old in ({"models": ["small_cnn"]}, {"epochs": 3}):  # the audited model is given from outside now
        with pytest.raises(ValidationError, match="extra"):
            ExamineParams(**old)
    with pytest.raises(ValidationError, match="valid names: bo, random, rl"):
        ExamineParams(examiners=["cmaes"])
    with pytest.raises(ValidationError, match="cmaes"):
        ExamineParams(study=dict(m_study=dict(examiners=["cmaes"])))
    with pytest.raises(ValidationError, match="cmaes"):
        ExamineParams(study=dict(strength_examiner="cmaes"))
    with pytest.raises(ValidationError, match="unknown architecture 'vgg'"):
        ExamineParams(study=dict(arch="vgg"))


def test_examiner_names_come_from_the_registry():
    from weakspot.examine.examiners import register_examiner
    from weakspot.examine.examiners import RandomExaminer

    assert "sobol_test" not in EXAMINERS
    register_examiner("sobol_test")(type("SobolTest", (RandomExaminer,), {}))
    try:
        assert ExamineParams(examiners=["sobol_test"]).examiners == ["sobol_test"]
    finally:
        EXAMINERS._items.pop("sobol_test")


def test_paper_defaults():
    p = ExamineParams()
    assert (p.T, p.checkpoints, p.examiners) == (500, [0, 100, 300, 500], ["random", "bo", "rl"])
    assert (p.study.arch, p.study.epochs, p.study.lr, p.study.learning_rate()) == ("small_cnn", 40, None, 0.001)
    assert ExamineParams(study=dict(arch="resnet34")).study.learning_rate() == 0.005  # Sec. 4.1
    assert (p.rl.bins, p.rl.embedding_size, p.rl.hidden_size, p.rl.lr, p.rl.batch_size) == (100, 30, 30, 0.001, 32)
    assert p.bo.init_points == 2
    assert p.study.m_study.values == [1, 2, 5, 10] and p.study.m_study.T == 200
    assert p.study.artificial_weakness.train_range == (-30.0, 30.0) and p.study.artificial_weakness.T == 250
    assert p.study.order_check and p.study.strength


def test_the_planted_weakness_training_set_is_rendered_inside_the_range(world):
    """Sec. 4.4 limits the elevation *when rendering* the training data: the same rows (class, instance, view) as the
    training split, the factor inside the range and every other factor drawn afresh, reproducibly."""
    from weakspot.examine.experiment import render_limited_training_set

    space, r, images, meta, params, _ = world
    train = meta[meta.split == "train"]
    a_img, a = render_limited_training_set(r, space, train, "view_elevation", (-30, 30), seed=0, chunk=37)
    b_img, b = render_limited_training_set(r, space, train, "view_elevation", (-30, 30), seed=0)
    assert len(a_img) == len(a) == len(train) and np.array_equal(a_img, b_img) and a.equals(b)
    assert a.view_elevation.between(-30, 30).all() and a.view_elevation.std() > 10  # spread over the range
    assert (a[["class", "instance", "label"]].to_numpy() == train[["class", "instance", "label"]].to_numpy()).all()
    lo, hi = space.bounds["view_azimuth"]
    assert a.view_azimuth.between(lo, hi).all() and a.view_azimuth.std() > 0.2 * (hi - lo)
    assert not np.allclose(a.view_azimuth.to_numpy(), train.view_azimuth.to_numpy())
    with pytest.raises(ConfigError, match="must lie inside view_elevation's bounds"):
        render_limited_training_set(r, space, train, "view_elevation", (-120, 30))
