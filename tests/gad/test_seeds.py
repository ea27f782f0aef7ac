"""Another split seed re-draws the target's split and retrains its model as the prepare and train stages do."""

import numpy as np
import pytest

from weakspot.errors import ConfigError
from weakspot.gad.datasets import make_preset_split
from weakspot.gad.seeds import reseeded_target
from weakspot.targets import TargetParams

SPEC = {
    "data": {"source": "keel:phoneme", "bias": {"preset": "phoneme", "seed": 4, "n_train": 400, "n_test": 300}},
    "model": {"kind": "builtin", "arch": "svm_grid"},
    "train": {"seed": 2, "options": {"kernels": ["rbf"], "C": [1.0], "gamma": ["scale"], "cv": 2}},
}


def test_offset_zero_is_the_target_s_own_split_and_others_redraw_it():
    t = TargetParams.model_validate(SPEC)
    clf0, s0, info0 = reseeded_target(t, 0, name="phoneme", device="cpu")
    ref = make_preset_split("phoneme", seed=4, n_train=400, n_test=300)  # the same preset, the target's own seed
    np.testing.assert_array_equal(s0.X_test, ref.X_test)
    np.testing.assert_array_equal(s0.y_train, ref.y_train)
    assert s0.info["class_of_interest"] == 1 and s0.info["preset"] == "phoneme" and s0.log_mae
    assert info0["kernel"] == "rbf" and clf0.n_classes == 2
    clf1, s1, _ = reseeded_target(t, 1, name="phoneme", device="cpu")
    ref1 = make_preset_split("phoneme", seed=5, n_train=400, n_test=300)  # offset 1: bias seed 4 + 1
    np.testing.assert_array_equal(s1.X_test, ref1.X_test)
    assert not np.array_equal(s1.X_test, s0.X_test) and s1.info["seed_offset"] == 1
    # the black box is retrained on the new training rows: it differs from the offset-0 one
    assert not np.allclose(clf0.predict_proba(s1.X_test), clf1.predict_proba(s1.X_test))
    p = clf1.predict_proba(s1.X_test)
    assert p.shape == (300, 2) and np.allclose(p.sum(axis=1), 1)


def test_a_user_s_model_cannot_be_retrained_and_bad_offsets_are_refused():
    user = TargetParams.model_validate({**SPEC, "model": {"kind": "sklearn", "weights": "model.joblib"}})
    with pytest.raises(ConfigError, match="cannot retrain"):
        reseeded_target(user, 1, name="mine")
    with pytest.raises(ConfigError, match="offset"):
        reseeded_target(TargetParams.model_validate(SPEC), -1, name="phoneme")
