"""The auditor measured like a classifier (issue 34): on null models (no weak spot to find) the audits that confirm
anything stay within the false discovery rate, and a planted region comes back first with its conditions.

The bound asserted on the null audits is the 99th percentile of Binomial(audits, FDR): an auditor whose null audits
confirm something at most FDR of the time fails this test less than 1% of the time."""

from types import SimpleNamespace

import numpy as np
from scipy.stats import binom

from weakspot.data.dataset import Dataset
from weakspot.evidence import FDR, correct
from weakspot.segments.config import SegmentsParams
from weakspot.segments.run import run

AUDITS = 30


def _bound(n: int) -> int:
    return int(binom.ppf(0.99, n, FDR))


def _table(n, seed, d=4):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1, 1, (n, d)).astype(np.float32)
    return Dataset(
        X=X,
        y=(X[:, 0] + 0.5 * X[:, 1] > 0).astype(np.int64),
        classes=["neg", "pos"],
        feature_names=[f"f{i}" for i in range(d)],
    ), rng


class Fixed:
    """A model whose answers are given per row (looked up by the row itself)."""

    def __init__(self, X, pred, k=2, conf=0.9):
        self.keys = {x.tobytes(): int(p) for x, p in zip(X, pred)}
        self.k, self.conf = k, conf

    def predict_proba(self, X):
        pred = np.array([self.keys[x.tobytes()] for x in np.asarray(X, np.float64)])
        p = np.full((len(X), self.k), (1 - self.conf) / (self.k - 1))
        p[np.arange(len(X)), pred] = self.conf
        return p


#: null audits of weak segments, three kinds in turn: enough that the test has power (issue 47)
NULL_AUDITS = 402


def _null(kind: str, seed: int, n: int = 1200):
    """A null model (no weak spot to find) of ``kind``: ``flips-2``/``flips-3``, a right model whose answers are
    replaced by another class at random on 10% of the rows; ``noise``, the best model on labels 10% flipped."""
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1, 1, (n, 4)).astype(np.float32)
    k = 3 if kind == "flips-3" else 2
    s = X[:, 0] + 0.5 * X[:, 1]
    y = np.digitize(s, [-0.5, 0.5]).astype(np.int64) if k == 3 else (s > 0).astype(np.int64)
    other = (y + rng.integers(1, k, n)) % k
    flip = rng.random(n) < 0.1
    ds = Dataset(X=X, y=y, classes=[f"c{i}" for i in range(k)], feature_names=[f"f{i}" for i in range(4)])
    if kind == "noise":
        noisy = Dataset(X=ds.X, y=np.where(flip, other, y), classes=ds.classes, feature_names=ds.feature_names)
        return noisy, Fixed(ds.X, y, k=k)
    return ds, Fixed(ds.X, np.where(flip, other, y), k=k)


def test_null_models_confirm_a_weak_spot_in_at_most_the_false_discovery_rate_of_audits():
    """402 null audits, three kinds in turn (random flips on 2 and on 3 classes, label noise; the 3-class flips
    confirmed something in 9% of audits in issue 47's measurement). The bound is Binomial(402, FDR)'s 99th
    percentile: an auditor at the 5% goal fails this test less than 1% of the time, one at 10% passes it less than
    10% of the time (both computed below, not assumed)."""
    bound = _bound(NULL_AUDITS)
    assert binom.sf(bound, NULL_AUDITS, FDR) < 0.01 and binom.sf(bound, NULL_AUDITS, 2 * FDR) >= 0.9
    hits = {"flips-2": 0, "flips-3": 0, "noise": 0}
    kinds = list(hits)
    for s in range(NULL_AUDITS):
        kind = kinds[s % 3]
        ds, model = _null(kind, 1000 + s)
        hits[kind] += bool(run(SimpleNamespace(test=ds, model=model), SegmentsParams(seed=s), None).confirmed)
    assert sum(hits.values()) <= bound, (hits, bound)


def test_an_attack_whose_success_does_not_depend_on_the_class_confirms_no_fragile_class():
    """The intrinsic method's class evidence on a model whose attack turns 30% of any class's correct inputs wrong
    (and that misclassifies 20% of one class cleanly: a clean error is not the attack's, so that class must not come
    out fragile)."""
    from weakspot.intrinsic.findings import class_evidence

    hits = 0
    for s in range(AUDITS * 2):
        rng = np.random.default_rng(100 + s)
        y = rng.integers(0, 5, 400)
        pred = np.where((y == 2) & (rng.random(400) < 0.2), 3, y)
        worst = np.where(rng.random(400) < 0.3, (y + 1) % 5, pred)
        kl = rng.exponential(1.0, 400) + (pred != y)  # the clean errors look least stable
        e = SimpleNamespace(kl=kl, pred=pred, pred_worst=worst)
        hits += any(ev.confirmed for ev in correct([ev for _, ev in class_evidence(e, y, 5, seed=s)]))
    assert hits <= _bound(AUDITS * 2), (hits, _bound(AUDITS * 2))


def test_a_planted_category_and_range_of_one_class_in_a_three_class_table_comes_back_first_with_both_conditions():
    """Three classes by x; a text column 'city'. The model never learnt class 2 in city 'Lyon' with 0.4 < x <= 0.9
    (it answers class 1 there); elsewhere it is wrong on 5% of rows at random."""
    rng = np.random.default_rng(7)
    n = 3000
    x = rng.uniform(-1, 1, n)
    city = rng.integers(0, 4, n)
    z = rng.normal(0, 1, n)
    y = np.digitize(x, [-1 / 3, 1 / 3]).astype(np.int64)
    X = np.column_stack([x, city, z]).astype(np.float32)
    ds = Dataset(
        X=X,
        y=y,
        classes=["low", "mid", "high"],
        feature_names=["x", "city", "z"],
        categories={"city": ["Paris", "Lyon", "Nice", "Lille"]},
    )
    planted = (city == 1) & (x > 0.4) & (x <= 0.9)
    pred = np.where(planted, 1, np.where(rng.random(n) < 0.05, (y + 1) % 3, y))
    res = run(SimpleNamespace(test=ds, model=Fixed(ds.X, pred, k=3)), SegmentsParams(), None)
    top = res.segments[0]
    assert top.evidence.confirmed and top.kind == "segment", top.text
    assert top.rule.cats == {"city": frozenset({1})} and set(top.rule.ranges) == {"x"}, top.text
    lo, hi = top.rule.ranges["x"]
    assert abs(lo - 0.4) < 0.05 and (hi is None or abs(hi - 0.9) < 0.05), top.text
    inside = top.rule.mask(ds.X, ds.feature_names, ds.y)
    jaccard = (inside & planted).sum() / (inside | planted).sum()
    assert jaccard > 0.8, (top.text, jaccard)
    assert "city = Lyon" in top.text
