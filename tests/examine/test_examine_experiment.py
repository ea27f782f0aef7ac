"""The examine stages end to end on the fake renderer, whose planted weakness is known: views from the top or the
bottom (|view_elevation| near 90 degrees) squash every class to the same bar."""

import numpy as np
import pandas as pd
import pytest
from pydantic import ValidationError

from weakspot.errors import ConfigError, DataError
from weakspot.examine import ExamineParams, run_examinations, select_instances, train_targets
from weakspot.examine.fake import FakeRenderer, fake_dataset
from weakspot.scene.space import SceneSpace

CLASSES = ["disc", "square", "triangle", "cross"]


def tiny_params(**kw):
    base = dict(
        models=["small_cnn"], epochs=15, lr=0.003, T=30, checkpoints=[0, 10, 20, 30],
        checkpoint_names=[0, 100, 300, 500],
        window=3, examiners=["random", "bo", "rl"], rl=dict(lr=0.05, batch_size=8), random_batch=2, n_random=20,
        tail=20, n_worst=2,
        m_study=dict(arch="small_cnn", values=[1, 10], T=4, examiners=["rl", "bo"]),
        artificial_weakness=dict(arch="small_cnn", T=12, tail=24, examiners=["rl", "bo", "random"]),
    )
    base.update(kw)
    return ExamineParams(**base)


@pytest.fixture(scope="module")
def world():
    space = SceneSpace()
    r = FakeRenderer(classes=CLASSES, resolution=24)
    images, meta = fake_dataset(r, space, instances_per_class=8, views_per_instance=10, val_instances=2)
    params = tiny_params()
    import torch

    torch.set_num_threads(1)
    targets = train_targets(images, meta, params)
    return space, r, images, meta, params, targets


@pytest.fixture(scope="module")
def result(world):
    space, r, images, meta, params, targets = world
    calls = []
    res = run_examinations(r, space, targets, images, meta, params, progress=lambda s, d, n: calls.append((d, n)))
    return res, calls


def test_train_targets_makes_the_main_m_study_and_limited_models(world):
    space, r, images, meta, params, targets = world
    assert sorted(targets) == ["small_cnn", "small_cnn_limited", "small_cnn_m1", "small_cnn_m10"]
    train = meta[meta.split == "train"]
    assert targets["small_cnn_m1"].info["n_train"] == train.groupby(["class", "instance"]).ngroups
    assert targets["small_cnn_m10"].model is targets["small_cnn"].model  # m = 10 is the default model
    n_lim = int(train.view_elevation.between(-30, 30).sum())
    assert targets["small_cnn_limited"].info["n_train"] == n_lim
    assert targets["small_cnn"].classes == CLASSES


def test_metrics_have_the_issue_shape(result):
    res, calls = result
    m = res.metrics
    assert set(m) == {"small_cnn", "artificial_weakness"}
    assert set(m["small_cnn"]) == {"random", "bo", "rl"}
    for e in m["small_cnn"].values():
        assert list(e) == ["T0", "T100", "T300", "T500"]
        assert all(0.0 <= v <= 1.0 for v in e.values())
    assert set(m["artificial_weakness"]) == {"rl", "bo", "random"}
    for v in m["artificial_weakness"].values():
        assert list(v) == ["frac_extreme_elevation"] and 0.0 <= v["frac_extreme_elevation"] <= 1.0
    assert res.check() is res
    assert {"table2", "per_class", "worst", "table3", "artificial_weakness", "factor_order", "strength"} <= set(
        res.tables)
    assert {"curves", "per_class", "tsne", "worst", "artificial_weakness", "factor_order", "strength"} <= set(
        res.figures)
    assert calls and calls[-1][0] == calls[-1][1]  # progress reached its total


def test_examiners_find_the_planted_weakness(result):
    res, _ = result
    worst = res.tables["worst"]
    for e in ("bo", "rl"):
        w = worst[worst.examiner == e]
        # the worst scenes found look from the top or the bottom
        assert np.median(np.abs(w.view_elevation)) > 45
        assert w.p_true.max() < res.metrics["small_cnn"][e]["T0"]
    # T = 0 is the same random protocol for every examiner
    t0 = {e: v["T0"] for e, v in res.metrics["small_cnn"].items()}
    assert len(set(t0.values())) == 1
    # strength mode goes the other way: the best scenes beat the random protocol
    st = res.tables["strength"]
    assert (st.best_found >= st.T0).all()


def test_same_params_same_result(world, result):
    space, r, images, meta, params, targets = world
    p = tiny_params(m_study=dict(enabled=False), artificial_weakness=dict(enabled=False), order_check=False,
                    strength=False)
    a = run_examinations(r, space, targets, images, meta, p)
    b = run_examinations(r, space, targets, images, meta, p)
    assert a.metrics == b.metrics
    pd.testing.assert_frame_equal(a.tables["worst"], b.tables["worst"])
    # and the main numbers do not depend on which side experiments run alongside
    assert a.metrics["small_cnn"] == result[0].metrics["small_cnn"]


def test_renders_are_batched(world):
    space, _, images, meta, _, targets = world
    r = FakeRenderer(classes=CLASSES, resolution=24)
    p = tiny_params(m_study=dict(enabled=False), artificial_weakness=dict(enabled=False), order_check=False,
                    strength=False, examiners=["rl", "bo"])
    run_examinations(r, space, targets, images, meta, p)
    # one call per round (T rounds), not one per scene
    assert r.calls == p.T
    assert r.n_rendered == len(CLASSES) * (p.T * (p.rl.batch_size + 1) + p.n_random)


def test_select_instances_takes_the_most_sure_validation_instance(world):
    space, r, images, meta, params, targets = world
    t = targets["small_cnn"]
    chosen = select_instances(t, images, meta, CLASSES)
    val = meta[meta.split == "validation"]
    pos = meta.index.get_indexer(val.index)
    p = t.true_class_proba(images[pos], val.label.to_numpy())
    means = val.assign(p=p).groupby(["class", "instance"]).p.mean()
    for c in CLASSES:
        assert means[c].idxmax() == chosen[c]


def test_bad_input_is_named(world):
    space, r, images, meta, params, targets = world
    with pytest.raises(DataError, match="missing column"):
        train_targets(images, meta.drop(columns=["split"]), params)
    with pytest.raises(ConfigError, match="'alexnet'"):
        run_examinations(r, space, targets, images, meta, tiny_params(models=["alexnet"]))
    with pytest.raises(ConfigError, match="unknown"):
        run_examinations(r, space, targets, images, meta, tiny_params(classes=["teapot"]))
    with pytest.raises(ValidationError, match="checkpoints"):
        ExamineParams(T=100, checkpoints=[0, 50, 200])
    with pytest.raises(ValidationError, match="extra"):
        ExamineParams(budget=3)
    with pytest.raises(ValidationError):
        ExamineParams(examiners=["cmaes"])


def test_paper_defaults():
    p = ExamineParams()
    assert (p.T, p.checkpoints, p.epochs, p.models) == (500, [0, 100, 300, 500], 40, ["resnet34", "alexnet"])
    assert (p.rl.bins, p.rl.embedding_size, p.rl.hidden_size, p.rl.lr, p.rl.batch_size) == (100, 30, 30, 0.001, 32)
    assert p.bo.init_points == 2
    assert p.m_study.values == [1, 2, 5, 10] and p.m_study.T == 200
    assert p.artificial_weakness.train_range == (-30.0, 30.0) and p.artificial_weakness.T == 250
