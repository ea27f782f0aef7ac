"""The auditor's own error rates (issue 34): how often it confirms a weak spot on models that have none, how often
it names a planted weak spot first, and the peers on the same models, side by side.

* **Null models** (no weak spot to find), ``--audits`` audits of each kind, each on fresh data and a fresh seed:
  ``flips-2``/``flips-3``: a right model whose answers are replaced at random by another class on 10% of the rows
  (errors independent of the input; 2 and 3 classes); ``noise``: the best possible model on labels of which 10% were
  flipped at random (its errors are label noise); ``images``: the random flips on 8x8 images of random brightness and
  contrast (segments in image properties); ``attack``: a model whose attack success is the same for every class
  (30% of the correct inputs), 20% of one class misclassified cleanly (the intrinsic method's class evidence);
  ``scenes``: a scene model that fails 30% of the renders at random (the examiner's weak regions, on the elevation
  world of its tests: a fake renderer, no Blender). Per
  kind: the share of audits that confirm anything, with its 95% Clopper-Pearson interval, and the false confirmed
  weak spots per audit. Goal: at most 5% of null audits confirm anything.
* **Planted models**, one known weak region each (test rows; ``--planted-rows`` rows): numeric thresholds, a
  conjunction of two categories, a category and a numeric range in a 3-class table, a real scikit-learn model whose
  training rows of one class above a threshold were dropped, an image class, dark images (of every class, and of one
  class), a class an attack turns wrong more often, and a scene viewpoint band (the examiner's regions on the
  elevation world: class flat fails at |view_elevation| > 45 degrees; the Jaccard is over a uniform sample of the
  scene space). Per model: whether the planted region is the first confirmed
  weak spot of its kind (the first one overlaps it with Jaccard >= 0.5), in the top 3, and the Jaccard of the best
  confirmed match. Goal: at least 90% ranked first.
* **The peers** on the same tabular models (planted and ``--peer-nulls`` nulls): Microsoft's Error Analysis,
  Deepchecks' WeakSegmentsPerformance and SliceLine at their documented defaults, run by
  ``benchmarks/peers_calibration.py`` in a venv of their own (``.venv-peers``, see ``peers-requirements.txt``), scored
  the same way (their first reported region's Jaccard; a null with any region reported counts as a false report).

Run (about 15 minutes on 2 cores with the defaults; ``--no-peers`` without the peers' venv):

    .venv/bin/python benchmarks/bench_calibration.py [--audits 100] [--no-peers] [--out FILE.json]

It prints a markdown table per part and writes every number to ``--out`` (default
``benchmarks/results/calibration.json``).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any, Dict, List, Optional

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from weakspot.data.dataset import Dataset  # noqa: E402
from weakspot.evidence import FDR, correct  # noqa: E402
from weakspot.segments.config import SegmentsParams  # noqa: E402
from weakspot.segments.run import run as segments  # noqa: E402


class Answers:
    """A pre-trained model given by its answers: each row's predicted class, looked up by the row itself."""

    def __init__(self, X: np.ndarray, pred: np.ndarray, k: int, conf: float = 0.9):
        self.keys = {x.tobytes(): int(p) for x, p in zip(np.asarray(X, np.float32), pred)}
        self.k, self.conf = k, conf

    def predict_proba(self, X: np.ndarray) -> np.ndarray:
        pred = np.array([self.keys[x.tobytes()] for x in np.asarray(X, np.float32)])
        p = np.full((len(X), self.k), (1 - self.conf) / (self.k - 1))
        p[np.arange(len(X)), pred] = self.conf
        return p


@dataclass
class Case:
    """One audited model: its test rows, its answers, the planted region (None: a null model)."""

    name: str
    ds: Dataset
    pred: np.ndarray
    planted: Optional[np.ndarray] = None
    what: str = ""
    frame: Any = None  # the test rows as the peers read them (text categories), tabular cases only
    extra: Dict[str, Any] = field(default_factory=dict)


# ----------------------------------------------------------------------------------------------------------- data
def _numeric(n: int, rng: np.random.Generator, d: int = 4, k: int = 2) -> Dataset:
    X = rng.uniform(-1, 1, (n, d)).astype(np.float32)
    y = (X[:, 0] > 0).astype(np.int64) if k == 2 else np.digitize(X[:, 0], [-1 / 3, 1 / 3]).astype(np.int64)
    return Dataset(X=X, y=y, classes=[f"c{i}" for i in range(k)], feature_names=[f"f{i}" for i in range(d)])


def _frame(ds: Dataset) -> Any:
    import pandas as pd

    df = pd.DataFrame(ds.X.astype(np.float64), columns=ds.feature_names)
    for c, texts in (ds.categories or {}).items():
        df[c] = [texts[int(v)] for v in df[c]]
    return df


def _flip(y: np.ndarray, where: np.ndarray, k: int, rng: np.random.Generator) -> np.ndarray:
    """``y`` with the rows ``where`` answered as another class (uniform among the others)."""
    other = (y + rng.integers(1, k, len(y))) % k
    return np.where(where, other, y)


def _images(n: int, rng: np.random.Generator, k: int = 3) -> Dataset:
    level = rng.uniform(0.1, 0.9, n)
    spread = rng.uniform(0.01, 0.2, n)
    X = (level[:, None, None, None] + spread[:, None, None, None] * rng.normal(0, 1, (n, 1, 8, 8))).clip(0, 1)
    return Dataset(
        X=X.astype(np.float32), y=rng.integers(0, k, n).astype(np.int64), classes=[f"c{i}" for i in range(k)]
    )


def null_case(kind: str, seed: int, n: int) -> Case:
    rng = np.random.default_rng(seed)
    if kind in ("flips-2", "flips-3"):
        k = int(kind[-1])
        ds = _numeric(n, rng, k=k)
        return Case(f"{kind}/{seed}", ds, _flip(ds.y, rng.random(n) < 0.1, k, rng), frame=_frame(ds))
    if kind == "noise":
        right = _numeric(n, rng)
        ds = Dataset(
            X=right.X,
            y=_flip(right.y, rng.random(n) < 0.1, 2, rng),
            classes=right.classes,
            feature_names=right.feature_names,
        )
        return Case(f"{kind}/{seed}", ds, right.y.copy(), frame=_frame(ds))
    if kind == "images":
        ds = _images(n, rng)
        return Case(f"{kind}/{seed}", ds, _flip(ds.y, rng.random(n) < 0.1, 3, rng))
    raise ValueError(kind)


def planted_cases(n: int) -> List[Case]:
    rng = np.random.default_rng(12345)
    out = []
    for name, rule, what in [
        ("two thresholds", lambda X: (X[:, 2] > 0.3) & (X[:, 3] <= -0.2), "f2 > 0.3 and f3 <= -0.2"),
        ("one threshold", lambda X: X[:, 1] > 0.6, "f1 > 0.6"),
        ("a band", lambda X: (X[:, 2] > 0.2) & (X[:, 2] <= 0.6), "0.2 < f2 <= 0.6"),
        (
            "three conditions",
            lambda X: (X[:, 1] <= -0.3) & (X[:, 2] > 0.0) & (X[:, 3] > 0.2),
            "f1 <= -0.3 and f2 > 0 and f3 > 0.2",
        ),
    ]:
        ds = _numeric(n, rng)
        planted = rule(ds.X)
        pred = _flip(ds.y, planted | (rng.random(n) < 0.05), 2, rng)
        out.append(Case(name, ds, pred, planted, what, frame=_frame(ds)))
    # categories: city x plan (2 classes), city and a range of x for one class (3 classes)
    x, city, plan, z = rng.uniform(-1, 1, n), rng.integers(0, 4, n), rng.integers(0, 3, n), rng.normal(0, 1, n)
    cats = {"city": ["Paris", "Lyon", "Nice", "Lille"], "plan": ["basic", "plus", "gold"]}
    X = np.column_stack([x, city, plan, z]).astype(np.float32)
    y2 = (x + 0.3 * z > 0).astype(np.int64)
    ds = Dataset(X=X, y=y2, classes=["no", "yes"], feature_names=["x", "city", "plan", "z"], categories=cats)
    planted = (city == 2) & (plan == 2)
    out.append(
        Case(
            "two categories",
            ds,
            _flip(y2, planted | (rng.random(n) < 0.05), 2, rng),
            planted,
            "city = Nice and plan = gold",
            frame=_frame(ds),
        )
    )
    y3 = np.digitize(x, [-1 / 3, 1 / 3]).astype(np.int64)
    ds = Dataset(X=X, y=y3, classes=["low", "mid", "high"], feature_names=["x", "city", "plan", "z"], categories=cats)
    planted = (city == 1) & (x > 0.4) & (x <= 0.9)
    pred = np.where(planted, 1, _flip(y3, rng.random(n) < 0.05, 3, rng))
    out.append(
        Case(
            "category and range, 3 classes",
            ds,
            pred,
            planted,
            "city = Lyon and 0.4 < x <= 0.9 (class high)",
            frame=_frame(ds),
        )
    )
    # a real model: its training rows of class 1 with f1 > 0.5 were dropped
    from sklearn.ensemble import HistGradientBoostingClassifier

    tr, te = _numeric(4000, rng), _numeric(n, rng)

    def rule(X: np.ndarray) -> np.ndarray:  # class 1: f0 > 0 below f1 = 0.5, f0 > 0.5 above it
        return np.where(X[:, 1] <= 0.5, X[:, 0] > 0, X[:, 0] > 0.5).astype(np.int64)

    y_tr, y_te = rule(tr.X), rule(te.X)
    keep = ~((y_tr == 1) & (tr.X[:, 1] > 0.5))
    clf = HistGradientBoostingClassifier(random_state=0).fit(tr.X[keep], y_tr[keep])
    ds = Dataset(X=te.X, y=y_te, classes=te.classes, feature_names=te.feature_names)
    out.append(
        Case(
            "class 1 above f1 = 0.5 left out of training",
            ds,
            clf.predict(te.X).astype(np.int64),
            (y_te == 1) & (te.X[:, 1] > 0.5),
            "class 1 and f1 > 0.5 (a HistGradientBoosting model)",
            frame=_frame(ds),
        )
    )
    # images
    for name, rule, what in [
        ("an image class", lambda d, r: (d.y == 2) & (r.random(len(d)) < 0.6), "class c2 (60% of it fails)"),
        ("dark images", lambda d, r: d.X.mean(axis=(1, 2, 3)) < 0.3, "brightness < 0.3"),
        ("low-contrast images", lambda d, r: d.X.std(axis=(1, 2, 3)) < 0.05, "contrast < 0.05"),
        (
            "dark images of one class",
            lambda d, r: (d.y == 1) & (d.X.mean(axis=(1, 2, 3)) < 0.35),
            "class c1 and brightness < 0.35",
        ),
    ]:
        ds = _images(n, rng)
        fails = rule(ds, rng)
        planted = (ds.y == 2) if name == "an image class" else fails
        extra = {"recall": True} if name == "an image class" else {}  # a class alone: the recall table's
        out.append(Case(name, ds, _flip(ds.y, fails | (rng.random(n) < 0.05), 3, rng), planted, what, extra=extra))
    from tests.examine.examine_helpers import ElevationModel
    from weakspot.scene.space import SceneSpace

    band = np.array([abs(s["view_elevation"]) > 45.5 for s in _scenes(SceneSpace())])
    out.append(
        Case(
            "a scene viewpoint band (the examiner)",
            Dataset(X=np.zeros((len(band), 1), np.float32), y=np.zeros(len(band), np.int64), classes=["flat", "tall"]),
            np.zeros(len(band), np.int64),
            band,
            "class flat at view_elevation beyond +-45 deg",
            extra={"scene": ElevationModel()},
        )
    )
    for c, share in ((2, 0.6), (0, 0.5)):
        y = rng.integers(0, 5, n)
        out.append(
            Case(
                f"an attack-fragile class ({share:.0%})",
                Dataset(X=np.zeros((n, 1), np.float32), y=y, classes=[f"c{i}" for i in range(5)]),
                y.copy(),
                y == c,
                f"class c{c} under attack",
                extra={"attack": (c, share)},
            )
        )
    return out


# ------------------------------------------------------------------------------------------------- scene regions
class Coin:
    """A null scene model: it fails 30% of the renders at random, whatever the scene."""

    n_classes = 2

    def __init__(self, seed: int):
        self.rng = np.random.default_rng(seed)

    def predict_proba(self, x: np.ndarray) -> np.ndarray:
        p = np.where(self.rng.random(len(x)) < 0.3, 0.2, 0.8)
        return np.stack([p, 1 - p], axis=1)


def scene_regions(model: Any, seed: int) -> List[Dict[str, Any]]:
    """The examiner's confirmed weak regions of one class on the elevation world of its tests (a fake renderer whose
    image is |view_elevation|; random, BO and RL sessions of 20 scenes each), each with its mask on :func:`_scenes`'
    uniform sample of the scene space."""
    import pandas as pd

    from tests.examine.examine_helpers import ElevationRenderer, tiny_params
    from weakspot.examine.inputs import examined_model
    from weakspot.examine.regions import find_regions, inside_any
    from weakspot.examine.sessions import make_sessions, render_scenes, run_sessions
    from weakspot.scene.space import SceneSpace

    space = SceneSpace()
    params = tiny_params(T=20, checkpoints=[0, 20], examiners=["random", "bo", "rl"], n_random=20, repeats=1, seed=seed)
    models = {"m": examined_model(model, ["flat", "tall"])}
    meta = pd.DataFrame(
        {"class": ["flat"] * 4, "label": 0, "instance": [1, 3, 4, 5], "split": ["train", "val", "val", "test"]}
    )
    sessions = make_sessions(
        params, space, models, {"m": {"flat": 3}}, ["flat"], "main", "m", params.examiners, params.T, repeats=1
    )
    r = ElevationRenderer()
    run_sessions(sessions, r, models, chunk=256, progress=None)
    regs = find_regions(
        sessions, space, meta, r, models, params.regions, params.seed, lambda rr, sc: render_scenes(rr, sc, 256)
    )
    sample = _scenes(space)
    return [
        {
            "text": g.text(),
            "mask": np.array([inside_any(g.boxes, s) for s in sample]),
            "lo": g.evidence.lift_lo_adjusted,
        }
        for g in regs
        if g.confirmed
    ]


def _scenes(space: Any, n: int = 5000) -> List[Dict[str, float]]:
    rng = np.random.default_rng(0)
    names = list(space.fixed) + list(space.searched)
    return [
        {k: float(space.bounds[k][0] + rng.random() * (space.bounds[k][1] - space.bounds[k][0])) for k in names}
        for _ in range(n)
    ]


# ------------------------------------------------------------------------------------------------------- weakspot
def attack_evidence(y: np.ndarray, fragile: Optional[int], share: float, seed: int) -> List[Any]:
    """The intrinsic method's class evidence on a synthetic attack: 30% of correct inputs turned wrong (``share``
    of class ``fragile``), 20% of class 2 misclassified cleanly; ``[(class, Evidence)]`` after the correction."""
    from weakspot.intrinsic.findings import class_evidence

    rng = np.random.default_rng(seed)
    n = len(y)
    pred = np.where((y == 2) & (rng.random(n) < 0.2), 3, y)
    rate = np.where(y == fragile, share, 0.3) if fragile is not None else np.full(n, 0.3)
    worst = np.where(rng.random(n) < rate, (y + 1) % 5, pred)
    kl = rng.exponential(1.0, n) + (worst != y)
    chosen = class_evidence(SimpleNamespace(kl=kl, pred=pred, pred_worst=worst), y, 5, seed=seed)
    return list(zip([c for c, _ in chosen], correct([e for _, e in chosen])))


def audit(case: Case, seed: int = 0) -> List[Dict[str, Any]]:
    """weakspot's confirmed weak spots on the case, ranked: ``[{"text", "mask", "lift_lo_adjusted"}]``."""
    if "scene" in case.extra:
        return scene_regions(case.extra["scene"], seed)
    if "attack" in case.extra or case.name.startswith("attack/"):
        fragile, share = case.extra.get("attack", (None, 0.3))
        out = [
            {"text": f"class c{c}", "mask": case.ds.y == c, "lo": e.lift_lo_adjusted}
            for c, e in attack_evidence(case.ds.y, fragile, share, seed)
            if e.confirmed
        ]
        return sorted(out, key=lambda r: -r["lo"])
    if case.extra.get("recall"):  # the class alone: the model's recall table (weakspot.recall), not a region
        from weakspot.recall import class_recall

        k = len(case.ds.classes)
        table = class_recall(np.eye(k)[case.pred], case.ds.y, case.ds.classes)
        worse = table[table["recalled_worse"]].sort_values("lift_lo_adjusted", ascending=False)
        return [
            {
                "text": f"class {r['class']} (recall table)",
                "mask": case.ds.y == case.ds.classes.index(r["class"]),
                "lo": r["lift_lo_adjusted"],
            }
            for r in worse.to_dict("records")
        ]
    res = segments(
        SimpleNamespace(test=case.ds, model=Answers(case.ds.X, case.pred, len(case.ds.classes))),
        SegmentsParams(seed=seed),
        None,
    )
    return [
        {
            "text": s.text,
            "mask": s.rule.mask(res.features.values, res.features.names, case.ds.y),
            "lo": s.evidence.lift_lo_adjusted,
        }
        for s in res.confirmed
    ]


def jaccard(a: np.ndarray, b: np.ndarray) -> float:
    union = int((a | b).sum())
    return float((a & b).sum() / union) if union else 0.0


def score(found: List[Dict[str, Any]], planted: np.ndarray) -> Dict[str, Any]:
    js = [jaccard(f["mask"], planted) for f in found]
    inside = [float((f["mask"] & planted).sum() / max(int(f["mask"].sum()), 1)) for f in found[:1]]
    return {
        "first": bool(js and js[0] >= 0.5),
        "top3": any(j >= 0.5 for j in js[:3]),
        "first_precision": round(inside[0], 3) if inside else 0.0,
        "best_jaccard": round(max(js), 3) if js else 0.0,
        "first_text": found[0]["text"] if found else "",
        "n_confirmed": len(found),
    }


def clopper_pearson(k: int, n: int) -> List[float]:
    from scipy.stats import beta

    lo = float(beta.ppf(0.025, k, n - k + 1)) if k else 0.0
    hi = float(beta.ppf(0.975, k + 1, n - k)) if k < n else 1.0
    return [round(lo, 4), round(hi, 4)]


# ---------------------------------------------------------------------------------------------------------- peers
def run_peers(cases: List[Case], python: str) -> Dict[str, Any]:
    """The peers' reported regions on ``cases`` (tabular), through benchmarks/peers_calibration.py in their venv."""
    with tempfile.TemporaryDirectory() as d:
        spec = []
        for i, c in enumerate(cases):
            df = c.frame.copy()
            df["y"], df["pred"] = c.ds.y, c.pred
            df.to_csv(os.path.join(d, f"case{i}.csv"), index=False)
            spec.append(
                {
                    "name": c.name,
                    "csv": f"case{i}.csv",
                    "features": list(c.frame.columns),
                    "categorical": sorted(c.ds.categories or {}),
                    "classes": len(c.ds.classes),
                }
            )
        with open(os.path.join(d, "cases.json"), "w") as f:
            json.dump(spec, f)
        out = os.path.join(d, "out.json")
        subprocess.run([python, os.path.join(ROOT, "benchmarks", "peers_calibration.py"), d, out], check=True)
        with open(out) as f:
            return json.load(f)


def _peer_masks(regions: List[Dict[str, Any]], n: int) -> List[Dict[str, Any]]:
    out = []
    for r in regions:
        m = np.zeros(n, bool)
        m[np.asarray(r["rows"], int)] = True
        out.append({"text": r["text"], "mask": m})
    return out


# ----------------------------------------------------------------------------------------------------------- main
def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--audits", type=int, default=300, help="null audits of each kind")
    ap.add_argument("--rows", type=int, default=1200, help="test rows of a null model")
    ap.add_argument("--planted-rows", type=int, default=3000, help="test rows of a planted model")
    ap.add_argument("--peer-nulls", type=int, default=20, help="null models of each tabular kind given to the peers")
    ap.add_argument("--no-peers", action="store_true")
    ap.add_argument("--peers-python", default=os.path.join(ROOT, ".venv-peers", "bin", "python"))
    ap.add_argument("--out", default=os.path.join(ROOT, "benchmarks", "results", "calibration.json"))
    a = ap.parse_args(argv)
    t0 = time.time()
    result: Dict[str, Any] = {
        "settings": {k: v for k, v in vars(a).items() if k != "peers_python"},
        "fdr": FDR,
        "null": {},
        "planted": [],
        "peers": {},
    }
    # null audits
    print(f"## Null models: audits that confirm any weak spot ({a.audits} audits each, {a.rows} test rows)\n")
    print("| null | audits | with a confirmed weak spot | share (95% CI) | false weak spots per audit |")
    print("|---|---|---|---|---|")
    kinds = ["flips-2", "flips-3", "noise", "images", "attack", "scenes"]
    for kind in kinds:
        hits, false = 0, 0
        for s in range(a.audits):
            if kind == "scenes":
                found = scene_regions(Coin(10_000 + s), 10_000 + s)
            elif kind == "attack":
                y = np.random.default_rng(10_000 + s).integers(0, 5, a.rows // 3)
                found = [e for _, e in attack_evidence(y, None, 0.3, s) if e.confirmed]
            else:
                found = audit(null_case(kind, 10_000 + s, a.rows), seed=s)
            hits += bool(found)
            false += len(found)
        ci = clopper_pearson(hits, a.audits)
        result["null"][kind] = {
            "audits": a.audits,
            "with_confirmed": hits,
            "share": hits / a.audits,
            "ci95": ci,
            "false_per_audit": false / a.audits,
        }
        print(
            f"| {kind} | {a.audits} | {hits} | {hits / a.audits:.1%} ({ci[0]:.1%}-{ci[1]:.1%}) | "
            f"{false / a.audits:.3f} |"
        )
    total = sum(v["with_confirmed"] for v in result["null"].values())
    n_all = a.audits * len(kinds)
    result["null"]["all"] = {
        "audits": n_all,
        "with_confirmed": total,
        "share": total / n_all,
        "ci95": clopper_pearson(total, n_all),
    }
    ci = result["null"]["all"]["ci95"]
    print(f"| all | {n_all} | {total} | {total / n_all:.1%} ({ci[0]:.1%}-{ci[1]:.1%}) | |\n")
    # planted
    cases = planted_cases(a.planted_rows)
    print(f"## Planted models: the planted region among the confirmed weak spots ({a.planted_rows} test rows)\n")
    print(
        "| model | planted region | first | top 3 | best Jaccard | share of the first inside the planted region | "
        "weakspot's first confirmed weak spot |"
    )
    print("|---|---|---|---|---|---|---|")
    for c in cases:
        sc = score(audit(c), c.planted)
        result["planted"].append({"name": c.name, "planted": c.what, **sc})
        print(
            f"| {c.name} | {c.what} | {'yes' if sc['first'] else 'no'} | {'yes' if sc['top3'] else 'no'} | "
            f"{sc['best_jaccard']:.2f} | {sc['first_precision']:.0%} | {sc['first_text'] or '(none)'} |"
        )
    n_first = sum(r["first"] for r in result["planted"])
    result["recall_first"] = n_first / len(cases)
    print(
        f"\nRanked first: {n_first} of {len(cases)} ({n_first / len(cases):.0%}); in the top 3: "
        f"{sum(r['top3'] for r in result['planted'])} of {len(cases)}.\n"
    )
    # peers
    tab = [c for c in cases if c.frame is not None]
    if not a.no_peers:
        if not os.path.exists(a.peers_python):
            print(f"(peers skipped: {a.peers_python} missing; see benchmarks/peers-requirements.txt)")
        else:
            nulls = [
                null_case(k, 20_000 + s, a.rows) for k in ("flips-2", "flips-3", "noise") for s in range(a.peer_nulls)
            ]
            peers = run_peers(tab + nulls, a.peers_python)
            names = ["weakspot", "erroranalysis", "deepchecks", "sliceline"]
            rows: Dict[str, Dict[str, Any]] = {
                p: {"first": 0, "jaccard": [], "null_reports": 0, "errors": 0, "seconds": 0.0} for p in names
            }
            for c in tab + nulls:
                found = {"weakspot": audit(c)}
                for p in names[1:]:
                    got = peers.get(c.name, {}).get(p, {})
                    rows[p]["errors"] += bool(got.get("error"))
                    rows[p]["seconds"] += float(got.get("seconds") or 0.0)
                    found[p] = _peer_masks(got.get("regions", []), len(c.ds))
                for p in names:
                    if c.planted is None:
                        rows[p]["null_reports"] += bool(found[p])
                    else:
                        sc = score(found[p], c.planted)
                        rows[p]["first"] += sc["first"]
                        rows[p]["jaccard"].append(jaccard(found[p][0]["mask"], c.planted) if found[p] else 0.0)
            result["peers"] = {p: {**r, "jaccard": [round(j, 3) for j in r["jaccard"]]} for p, r in rows.items()}
            result["peers_cases"] = {"planted": [c.name for c in tab], "nulls": len(nulls)}
            print(f"## Side by side: {len(tab)} planted tabular models, {len(nulls)} null ones\n")
            print(
                "| tool | planted region first | mean Jaccard of the first region | nulls with a region "
                "reported | errors |"
            )
            print("|---|---|---|---|---|")
            for p, r in rows.items():
                print(
                    f"| {p} | {r['first']} of {len(tab)} | {np.mean(r['jaccard']) if r['jaccard'] else 0:.2f} | "
                    f"{r['null_reports']} of {len(nulls)} | {r['errors']} |"
                )
    result["seconds"] = round(time.time() - t0, 1)
    os.makedirs(os.path.dirname(a.out), exist_ok=True)
    with open(a.out, "w") as f:
        json.dump(result, f, indent=1)
    print(f"\n{result['seconds']} s; every number in {a.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
