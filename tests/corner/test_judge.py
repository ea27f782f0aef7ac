"""The independent realism judge and its controls, on planted answers: real held-out images pass its nearness and
sharpness tests about as often as its quantile says, noise and blurred images fail them, a generator whose boundary
lies outside the data gives corner cases the judge fails, and the gate tells a faithful generator from a blurring one."""

import numpy as np
import pytest
import torch

from weakspot.corner.controls import counts, generator_gate, judged_sets, paper_lr_margins, random_codes
from weakspot.corner.judge import fit_judge, reference_epochs, split_heldout, wilson
from weakspot.errors import DataError

from .conftest import intensity_images


@pytest.fixture(scope="module")
def digits_judge():
    from weakspot.data import load_source

    torch.set_num_threads(1)
    ds = load_source("digits")
    X, y = np.asarray(ds.X, np.float32), np.asarray(ds.y, np.int64)
    perm = np.random.default_rng(0).permutation(len(X))
    tr, te = perm[:1200], perm[1200:]
    judge = fit_judge(X[tr], y[tr], X[te], y[te], 10, epochs=8, max_steps=400, seed=0)
    return judge, X[tr], y[tr], X[te], y[te]


def test_real_held_out_images_pass_and_noise_and_blur_fail(digits_judge):
    judge, X, y, Xt, yt = digits_judge
    assert judge.accuracy > 0.85  # a usable reference on real digits
    _, ctl = split_heldout(len(Xt), 0)
    real = Xt[ctl]
    p = judge.reference.predict_proba(real)
    top = np.argsort(-p, axis=1)[:, :2]
    v = judge.verdict(real, top[:, 0], top[:, 1])
    assert v["pair"].all()  # its own top two: agrees by construction
    assert 0.85 <= v["near"].mean() <= 1.0 and 0.85 <= v["sharp"].mean() <= 1.0
    noise = np.random.default_rng(1).uniform(0, 1, real.shape).astype(np.float32)
    vn = judge.verdict(noise, top[:, 0], top[:, 1])
    assert vn["near"].mean() < 0.05 and vn["passed"].mean() < 0.05
    # blurred real images (a 3x3 box filter): no longer as sharp as real ones
    from scipy.ndimage import uniform_filter

    blur = uniform_filter(real, size=(1, 1, 3, 3), mode="nearest")
    vb = judge.verdict(blur, top[:, 0], top[:, 1])
    assert vb["sharp"].mean() < v["sharp"].mean() - 0.5 and vb["passed"].mean() < 0.2


def test_a_wrong_pair_fails_and_bad_input_is_refused(digits_judge):
    judge, X, y, Xt, yt = digits_judge
    p = judge.reference.predict_proba(Xt[:40])
    top = np.argsort(-p, axis=1)
    v = judge.verdict(Xt[:40], top[:, 0], top[:, 5])  # the 6th most likely class is never in the top two
    assert not v["pair"].any() and not v["passed"].any()
    with pytest.raises(DataError):
        judge.verdict(Xt[:4, :, :4], np.zeros(4), np.ones(4))
    with pytest.raises(DataError):
        fit_judge(X, y, Xt[:5], yt[:5], 10)


def test_corner_cases_outside_the_data_fail_the_judge_and_random_codes_fail_more_than_real_codes(
    gap_generator, wide_generator, mean_threshold_clf
):
    """Known answer: the gap generator's data sit at intensities [0.05, 0.3] and [0.7, 0.95], the classifier's
    boundary at 0.5, in the gap; a corner case there is far from every training image."""
    from weakspot.corner.search import search_corner_cases

    X, g = gap_generator
    y = (X.mean((1, 2, 3)) > 0.5).astype(np.int64)
    Xh = intensity_images(80, [(0.05, 0.3), (0.7, 0.95)], seed=7)
    yh = (Xh.mean((1, 2, 3)) > 0.5).astype(np.int64)
    judge = fit_judge(X, y, Xh, yh, 2, epochs=5, seed=0)
    seeds = random_codes(g.codes, 24, seed=0)
    s = search_corner_cases(mean_threshold_clf, g, seeds, steps=30, lr=0.05, schedule="cosine")
    corner = s.prob_margin_after < 0.05
    assert corner.sum() >= 5
    out = judged_sets(mean_threshold_clf, g, judge, s, corner, Xh, 200, 0.05, seed=0)
    assert out["sets"]["corner"]["near"] == 0 and out["sets"]["corner"]["passed"] == 0
    # random codes decoded by the toy generator are farther from the data than real held-out images
    real = out["sets"]["real"]
    assert out["sets"]["random"]["near"] / 200 < real["near"] / real["n"] - 0.5
    assert out["yield"]["search"] == 0 and out["yield"]["n_random"] == 200


def test_the_gate_tells_a_faithful_generator_from_a_blurring_one(mean_threshold_clf):
    X = intensity_images(60, [(0.1, 0.9)], seed=4)
    y = (X.mean((1, 2, 3)) > 0.5).astype(np.int64)

    class Faithful:
        def reconstruct_np(self, x):
            return x

    class Grey:  # every image decoded to the mean grey: the classifier's boundary, a coin toss
        def reconstruct_np(self, x):
            return np.full_like(x, 0.5 + 1e-3)

    ok = generator_gate(mean_threshold_clf, None, Faithful(), X, y, 0.8)
    bad = generator_gate(mean_threshold_clf, None, Grey(), X, y, 0.8)
    assert ok["holds"] and ok["ratio"] == 1.0 and ok["n"] == 60
    assert not bad["holds"] and bad["ratio"] < 0.8 and bad["model_on_reconstructions"] == pytest.approx(np.mean(y == 1))


def test_the_paper_step_is_rerun_on_the_first_seeds(wide_generator, mean_threshold_clf):
    from weakspot.corner.config import CornerParams
    from weakspot.corner.search import search_corner_cases

    X, g = wide_generator
    seeds = random_codes(g.codes, 12, seed=1)
    p = CornerParams(steps=30, paper_lr_seeds=8, realism_weight=0.0)
    out = paper_lr_margins(mean_threshold_clf, g, seeds, None, p, False)
    ref = search_corner_cases(mean_threshold_clf, g, seeds[:8], steps=30, lr=0.001)
    assert out["n_seeds"] == 8 and out["lr"] == 0.001
    assert out["margin_after"] == pytest.approx(float(np.median(ref.margin_after)))
    assert (
        paper_lr_margins(mean_threshold_clf, g, seeds, None, p.model_copy(update={"paper_lr_seeds": 0}), False) is None
    )


def test_helpers():
    codes = np.array([[0.0, -1.0], [2.0, 3.0], [1.0, 0.0]])
    r = random_codes(codes, 500, seed=0)
    assert r.shape == (500, 2) and (r >= codes.min(0)).all() and (r <= codes.max(0)).all()
    assert reference_epochs(1259, 20, 600) == 20 and reference_epochs(4000, 20, 600) == 9
    lo, hi = wilson(30, 170)
    assert lo < 30 / 170 < hi and wilson(0, 0) is None
    c = counts(
        {
            "pair": np.array([1, 1, 0], bool),
            "near": np.ones(3, bool),
            "sharp": np.ones(3, bool),
            "passed": np.array([1, 1, 0], bool),
        }
    )
    assert (c["n"], c["passed"], c["pair"]) == (3, 2, 2) and c["share"] == pytest.approx(2 / 3)
    a, b = split_heldout(11, 0)
    assert len(a) == 5 and len(b) == 6 and not set(a) & set(b)
