"""GAD's entry point: one protocol run per split seed through the runtime, seed 0 on the audited model and split."""

import numpy as np

from tests.gad.helpers import small_params
from weakspot.data.dataset import Dataset
from weakspot.gad.run import run, seed_outcome, target_split
from weakspot.methods import AuditTarget
from weakspot.runtime import Runtime


def _audit_target(target, params=None):
    clf, split, info = target
    train = Dataset(X=split.X_train, y=split.y_train, classes=split.classes, feature_names=split.feature_names)
    test = Dataset(X=split.X_test, y=split.y_test, classes=split.classes, feature_names=split.feature_names)
    return AuditTarget(
        name="phoneme",
        model=clf,
        classes=split.classes,
        test=test,
        train=train,
        params=params,
        spec={"kind": "builtin", "arch": "svm_grid", "info": info},
        info={**split.info, "class_of_interest": 1, "log_mae": True},
        digest="d1",
    )


def test_target_split_is_the_prepared_split_in_float64(target):
    _, split, _ = target
    s = target_split(_audit_target(target))
    assert s.name == "phoneme" and s.log_mae and s.classes == ["nasal", "oral"]
    assert s.X_test.dtype == np.float64 and s.info["n_test"] == len(split.X_test)
    np.testing.assert_array_equal(s.X_test, split.X_test)  # float64 copies of float32 values round-trip
    np.testing.assert_array_equal(s.y_train, split.y_train)


def test_a_user_s_model_runs_seed_0_only_and_equals_the_protocol_on_its_split(target, outcome):
    out = run(_audit_target(target), small_params(seeds=[0, 1, 2]), Runtime(device="cpu"))
    assert [o.split_seed for o in out] == [0]
    o = out[0]
    np.testing.assert_array_equal(o.eligible, outcome.eligible)
    for s in outcome.sdr:  # same seed (gad.seed and the target's name), same rows: the same run
        np.testing.assert_array_equal(o.errors[s], outcome.errors[s])
    assert o.black_box_info == outcome.black_box_info


class _Recorder:
    """A runtime that records the fan-out instead of running it."""

    device = "cpu"
    progress = None

    def map(self, fn, calls, *, keys, labels=None):
        self.fn, self.calls, self.keys, self.labels = fn, calls, keys, labels
        return [None] * len(calls)


class _Trains:
    trains = True

    def model_dump(self, mode="json"):
        return {"data": "spec"}


def test_a_model_weakspot_trains_fans_out_one_cached_call_per_split_seed(target):
    rec = _Recorder()
    t = _audit_target(target, params=_Trains())
    p = small_params(seeds=[0, 3])
    assert run(t, p, rec) == [None, None]
    assert rec.fn is seed_outcome and len(rec.calls) == 2
    (args0, kw0), (args1, kw1) = rec.calls
    assert args0[0] is t and args1[0] is None and (args0[2], args1[2]) == (0, 3)
    assert kw0["target_params"] is None and kw1["target_params"] == {"data": "spec"}
    # each call's key names which call it is, its split seed, and nothing the stage's identity holds (the params,
    # the target's data and model: tasks/identity.py derives the cache key from them)
    assert rec.keys == [{"split_seed": 0}, {"split_seed": 3}]
    assert rec.labels == ["phoneme, split seed 0", "phoneme, split seed 3"]
