"""GAD on tables with missing values (issue 37): the design keeps the rows' missingness, the attack never moves a
missing cell, a distance is over the observed features, the baselines' features and the findings read them."""

import json

import numpy as np

from weakspot.gad.attack import gad_attack
from weakspot.gad.datasets import Split
from weakspot.gad.distance import mae
from weakspot.gad.extract import extract_pseudo_model
from weakspot.gad.protocol import run_target
from weakspot.models import CallableClassifier

from .conftest import LinearPseudo
from .helpers import small_params


class MissingAsZero:
    """A black box that takes NaN as a model fitted on it does: p(class 1) = sigmoid(w.x + b), a missing x_i
    adding nothing (``nansum``)."""

    def __init__(self, w, b=0.0):
        self.w, self.b = np.asarray(w, float), float(b)
        self.seen_nan = False

    def __call__(self, X):
        X = np.asarray(X, float)
        self.seen_nan |= bool(np.isnan(X).any())
        p = 1.0 / (1.0 + np.exp(-(np.nansum(X * self.w, axis=1) + self.b)))
        return np.column_stack([1 - p, p])


def test_the_attack_never_moves_a_missing_cell_and_the_distance_is_over_the_observed_ones():
    w = np.array([1.0, 1.0, 0.5])
    X = np.array([[0.4, np.nan, 0.2], [0.3, 0.2, 0.1], [np.nan, 0.5, np.nan]])
    fn = MissingAsZero(w)
    res = gad_attack(CallableClassifier(fn, n_classes=2), LinearPseudo(w), X, step_size=0.01, device="cpu")
    assert res.flipped.all() and fn.seen_nan
    np.testing.assert_array_equal(np.isnan(res.x_adv), np.isnan(X))  # the partner keeps the instance's gaps
    assert (np.nansum(res.x_adv * w, axis=1) < 0).all()  # and is on the flipped side of the black box
    d = mae(X, res.x_adv)
    assert np.isfinite(d).all()
    np.testing.assert_allclose(d[0], np.abs(X[0, [0, 2]] - res.x_adv[0, [0, 2]]).mean())
    assert mae(np.array([[np.nan]]), np.array([[np.nan]])).tolist() == [0.0]  # nothing observed: nothing moved


def test_the_pseudo_model_learns_a_black_box_that_takes_missing_values():
    rng = np.random.default_rng(0)
    X = rng.uniform(-1, 1, (800, 3))
    X[rng.random(800) < 0.2, 0] = np.nan
    fn = MissingAsZero([3.0, -2.0, 1.0], b=-1.0)
    ext = extract_pseudo_model(
        CallableClassifier(fn, n_classes=2), X, n_points=2500, epochs=8, hidden=32, lr=3e-3, seed=1, device="cpu"
    )
    assert fn.seen_nan and ext.r2_design > 0.9 and ext.r2_eval > 0.9, (ext.r2_design, ext.r2_eval)
    assert np.isfinite(ext.lo).all() and np.isfinite(ext.confidence(X)).all()


def _split(n=900, seed=2):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1, 1, (n, 3))
    X[:, 2] = rng.integers(0, 3, n)  # a categorical column
    y = (X[:, 0] + 0.5 * X[:, 1] > 0).astype(int)
    X[rng.random(n) < 0.15, 0] = np.nan
    X[rng.random(n) < 0.1, 2] = np.nan
    return Split(
        name="gaps", X_train=X[:0], y_train=y[:0], X_test=X, y_test=y, feature_names=["a", "b", "city"],
        classes=["no", "yes"], categories={"city": ["n", "s", "e"]},
    )  # fmt: skip


def test_the_baselines_features_read_a_missing_value_as_the_mean_with_an_indicator():
    split = _split()
    F = split.one_hot(split.X_test)
    assert F.shape[1] == 1 + 1 + 1 + 3 + 1 and np.isfinite(F).all()  # a, its gap; b; city's 3, its gap
    gone = np.isnan(split.X_test[:, 0])
    assert (F[:, 1] == gone).all() and np.allclose(F[gone, 0], np.nanmean(split.X_test[:, 0]))
    assert split.text_of(2, np.nan) is None and split.text_of(2, 1.0) == "s"


def test_the_protocol_and_its_findings_run_on_a_table_with_missing_values():
    from weakspot.gad.findings import findings_of

    split = _split()
    fn = MissingAsZero([2.0, 1.0, 0.0])
    o = run_target(CallableClassifier(fn, n_classes=2), split, small_params(), class_index=1, device="cpu", seed=3)
    assert o.gad_reliable and np.isfinite(o.distance).all(), (o.pseudo_r2, o.pseudo_r2_eval)
    X_el = split.X_test[o.eligible]
    assert np.isnan(X_el).any()
    spots, to_label = findings_of(o)
    assert len(to_label) == len(o.eligible) and to_label["a"].isna().any()
    for example in spots["example"]:
        assert example == "" or isinstance(json.loads(example), dict)  # strict JSON: a missing value is null
