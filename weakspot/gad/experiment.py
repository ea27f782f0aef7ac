"""The protocol of Sec. V-C of seeds/001 on a given target (model + splits), its findings, and the report section.

Caveats first:

* GAD audits a model it is given (:func:`run_target`); it only ever calls ``clf.predict_proba`` (black box). Labels
  are the target's class codes; the class of interest is ``class_index``. The ground truth is used only to play the
  oracle of the protocol and to grade findings, never by the searches' scores.
* A pool is drawn from the *eligible* test instances -- predicted as the class of interest with confidence above
  ``confidence_threshold`` (0.65) -- as ``min(pool_size, pool_max_fraction x eligible)`` of them, so that on a small
  test set (Yeast) the replicates still differ; the pool size actually used is in Table I.
* The attack and the adversarial distances are computed once for every eligible instance (an instance's partner does
  not depend on the pool); the LOESS curve ``F`` and so GAD are refitted on every pool, as Eq. 2 prescribes, and
  once on all eligible instances for the findings (:func:`findings_of`).
* Seeds for the design, the network and the pools come from ``seed`` (:func:`dataset_seed` derives one per target
  from the run's seed and the target's name), so a run is reproducible and targets are independent.
* What varies: one :func:`run_target` is one split and one black box. The caller repeats it over split seeds
  (``gad.seeds``, :mod:`weakspot.gad.seeds`) and hands every run to :func:`result_of`, which groups them by target:
  metrics, the headline and the figures report the mean over seeds with a 95% Student-t interval over seeds (and
  the min-max), next to each seed's own figures; the interval over one black box's overlapping pools is narrower
  than the spread from one split to the next.
* GAD's numbers mean something only where the pseudo-model mimics the black box: where its R^2 (the lower of
  held-out design points and the evaluation data) is below ``min_pseudo_r2`` on any seed, GAD's SDR is not
  reported for the target (metrics keep the R^2 and ``gad_reliable: false``; the headline and findings say why).
"""

from __future__ import annotations

import json
import time
import zlib
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple

import numpy as np

from weakspot.errors import ConfigError, DataError
from weakspot.gad.attack import gad_attack
from weakspot.gad.config import GadParams
from weakspot.gad.datasets import Split
from weakspot.gad.distance import mae
from weakspot.gad.extract import extract_pseudo_model
from weakspot.gad.loess import gad_scores
from weakspot.gad.sdr import mean_ci95, reliability, sdr_curve
from weakspot.gad.search import Pool, make_search, search_label
from weakspot.progress import Progress
from weakspot.result import StageResult



#: fewest queries per search for which the Sec. V-C protocol still runs (ours)
MIN_BUDGET = 10

#: Table I of seeds/001, keyed by the bias preset a target's split comes from (weakspot.data.BIAS_PRESETS)
PAPER_TABLE_I: Dict[str, Dict[str, Any]] = {
    "phoneme": {"dataset": "Phoneme", "train_accuracy": 0.81, "test_accuracy": 0.81, "kernel": "Radial",
                "pseudo_r2": 0.99, "loess": "Log MAE", "note": ""},
    "yeast1": {"dataset": "Yeast", "train_accuracy": 0.92, "test_accuracy": 0.74, "kernel": "Linear",
               "pseudo_r2": 0.99, "loess": "MAE", "note": "the paper's Yeast is NUC against MIT only"},
    "breast_cancer": {"dataset": "Pang04", "train_accuracy": None, "test_accuracy": None, "kernel": None,
                      "pseudo_r2": None, "loess": "Log MAE",
                      "note": "Pang04 (98% / 81%, Radial, R^2 0.86) is not available here; breast_cancer stands in, "
                              "so no paper figure compares"},
}


def dataset_seed(seed: int, name: str, split_seed: int = 0) -> int:
    """A 32-bit seed for one target (or data set) and split seed, from the run's seed and the target's name.

    Split seed 0 gives the seed of earlier versions (one split per target), so the audited model's run is unchanged.
    """
    key = name if not split_seed else f"{name}/split{int(split_seed)}"
    return int(np.random.SeedSequence([int(seed) % (2**63), zlib.crc32(key.encode())]).generate_state(1)[0])


@dataclass
class DatasetOutcome:
    """Everything measured on one target (inputs of the findings, metrics, tables and figures)."""

    name: str  # the target's name (= split.name)
    split: Split
    black_box_info: Dict[str, Any]  # what the caller says about the model (Table I: arch, kernel, C, gamma)
    class_index: int  # the class of interest (a class code)
    n_classes: int
    train_accuracy: float  # NaN without training rows
    test_accuracy: float
    pseudo_r2: float
    pseudo_r2_eval: float
    test_prediction: np.ndarray  # (n_test,) int64 argmax of predict_proba
    test_confidence: np.ndarray  # (n_test,) confidence of the prediction
    test_predicted_coi: np.ndarray  # (n_test,) bool
    test_correct: np.ndarray  # (n_test,) bool
    eligible: np.ndarray  # indices into the test split
    distance: np.ndarray  # (n_eligible,) MAE to the adversarial partner (units of feature_scale)
    flipped: np.ndarray  # (n_eligible,) bool
    steps: np.ndarray  # (n_eligible,)
    gad: np.ndarray  # (n_eligible,) Eq. 2 residual, LOESS on all eligible rows; +inf where never flipped
    confidence_threshold: float
    pool_size: int
    budget: int = 0  # queries per search actually run: gad.budget, or the pool size where the data allow fewer
    errors: Dict[str, np.ndarray] = field(default_factory=dict)  # search -> (R, B) bool
    confidence: Dict[str, np.ndarray] = field(default_factory=dict)  # search -> (R, B)
    sdr: Dict[str, np.ndarray] = field(default_factory=dict)  # search -> (R, B)
    example: Dict[str, np.ndarray] = field(default_factory=dict)  # first replicate's pool for Fig. 1
    seconds: Dict[str, float] = field(default_factory=dict)
    split_seed: int = 0  # the split / black-box seed offset (gad.seeds); 0 = the target as trained
    min_pseudo_r2: float = 0.5  # the gate this run was judged by (gad.min_pseudo_r2)
    pools: np.ndarray = field(default_factory=lambda: np.zeros((0, 0), dtype=np.int64))  # (R, pool) into eligible

    @property
    def class_name(self) -> str:
        return self.split.class_name(self.class_index)

    @property
    def pseudo_r2_gate(self) -> float:
        """The lower of the pseudo-model's R^2 on held-out design points and on the test data (NaN fails)."""
        vals = (self.pseudo_r2, self.pseudo_r2_eval)
        return float("nan") if any(np.isnan(v) for v in vals) else float(min(vals))

    @property
    def gad_reliable(self) -> bool:
        """The pseudo-model mimics the black box well enough (R^2 gate) for adversarial distances to mean anything."""
        r2 = self.pseudo_r2_gate
        return bool(np.isfinite(r2) and r2 >= self.min_pseudo_r2)


def _scale(X: np.ndarray, how: str) -> np.ndarray:
    if how == "raw":
        return np.ones(X.shape[1])
    span = X.max(axis=0) - X.min(axis=0)
    return np.where(span > 0, span, 1.0)


def run_target(
    clf: Any,
    split: Split,
    params: GadParams,
    *,
    class_index: int,
    device: str = "auto",
    progress: Optional[Progress] = None,
    seed: int = 0,
    model_info: Optional[Dict[str, Any]] = None,
    split_seed: int = 0,
) -> DatasetOutcome:
    """Algorithm 1, Algorithm 2, GAD and every search over ``params.replicates`` pools, on a given model.

    Parameters
    ----------
    clf : Classifier
        The model under audit, used only through ``clf.predict_proba(X) -> (n, k)`` (checked probabilities, e.g. a
        :class:`weakspot.models.SklearnClassifier`) and ``clf.n_classes``. It is not refitted.
    split : Split
        The target's splits; labels are its class codes ``0..k-1``. Only ``X_test``/``y_test`` enter the audit
        (``X_train`` gives the training accuracy of Table I; it may be empty).
    params : GadParams
    class_index : int
        The class of interest: *eligible* test rows are those predicted as ``class_index`` with confidence
        ``> params.confidence_threshold``; an error is a prediction that differs from ``y_test``; the pseudo-model
        learns ``P(class_index | x)``.
    device : {"auto", "cpu", "cuda"}
        Where the pseudo-model trains and the attack's gradients run.
    progress : callable(what, done, total), optional
    seed : int
        Seeds the design, the network and the pools (see :func:`dataset_seed`).
    model_info : dict, optional
        Shown in Table I (keys ``arch``, ``kernel``, ``C``, ``gamma``, e.g. the ``info`` of a built-in scikit-learn
        architecture); default ``{"model": repr(clf)}``.
    split_seed : int
        Which split / black-box seed this run is (``gad.seeds``; 0 = the target as trained); a label only.

    Raises
    ------
    ConfigError
        ``class_index`` outside ``0..n_classes-1``.
    DataError
        Mismatched split shapes, or too few eligible rows for a pool of ``budget`` queries.
    """
    t0 = time.perf_counter()
    seconds: Dict[str, float] = {}
    k = int(getattr(clf, "n_classes", 0) or 0)
    if not callable(getattr(clf, "predict_proba", None)) or k < 2:
        raise ConfigError(f"{split.name}: the model must offer predict_proba(X) and n_classes >= 2, got {type(clf).__name__}")
    if isinstance(class_index, bool) or not isinstance(class_index, (int, np.integer)) or not 0 <= class_index < k:
        raise ConfigError(f"{split.name}: class_index = {class_index!r}; must be a class code in 0..{k - 1}")
    ci = int(class_index)
    X_test = np.asarray(split.X_test, dtype=np.float64)
    y_test = np.asarray(split.y_test)
    if X_test.ndim != 2 or len(X_test) != len(y_test) or X_test.shape[1] != len(split.feature_names):
        raise DataError(
            f"{split.name}: X_test {X_test.shape}, y_test {y_test.shape} and {len(split.feature_names)} feature names "
            "do not match"
        )
    X_train = np.asarray(split.X_train, dtype=np.float64)
    if len(X_train):
        train_pred = clf.predict_proba(X_train).argmax(axis=1)
        train_acc = float((train_pred == np.asarray(split.y_train)).mean())
    else:
        train_acc = float("nan")
    proba = clf.predict_proba(X_test)
    test_pred = proba.argmax(axis=1).astype(np.int64)
    test_conf = proba.max(axis=1)
    correct = test_pred == y_test
    seconds["black_box"] = time.perf_counter() - t0

    t = time.perf_counter()
    ext = extract_pseudo_model(
        clf, X_test, class_index=ci, n_points=params.design_points, epochs=params.epochs,
        hidden=params.hidden_units, batch_size=params.batch_size, lr=params.lr,
        holdout_fraction=params.holdout_fraction, data_fraction=params.design_data_fraction,
        jitter=params.design_jitter, seed=seed, device=device, progress=progress,
    )
    seconds["extract"] = time.perf_counter() - t

    eligible = np.flatnonzero((test_pred == ci) & (test_conf > params.confidence_threshold))
    n_elig = len(eligible)
    pool_n = min(params.pool_size, int(np.floor(params.pool_max_fraction * n_elig)))
    # A small test split (a user's table) cannot fill a pool of `budget` queries: the searches then get as many
    # queries as a pool holds (labelled as such in metrics, Table I and the headline); below MIN_BUDGET, no protocol.
    if pool_n < min(params.budget, MIN_BUDGET):
        raise DataError(
            f"{split.name}: only {n_elig} test predictions of the class of interest ({split.class_name(ci)!r}) have "
            f"confidence > {params.confidence_threshold}, so a pool holds {pool_n} < {min(params.budget, MIN_BUDGET)} "
            "queries; enlarge the test split (data.fractions) or raise gad.pool_max_fraction"
        )
    t = time.perf_counter()
    scale = _scale(X_test, params.feature_scale)
    X_el = X_test[eligible]
    att = gad_attack(
        clf, ext.model, X_el, class_index=ci, step_size=params.step_size, max_steps=params.max_steps,
        scale=scale, refine_iters=params.refine_iters, device=device, progress=progress,
    )
    dist = mae(X_el, att.x_adv, scale=scale)
    seconds["attack"] = time.perf_counter() - t

    t = time.perf_counter()
    err_el = ~correct[eligible]
    conf_el = test_conf[eligible]
    gad_all = gad_scores(
        conf_el, dist, log=split.log_mae, frac=params.loess_frac, iterations=params.loess_iterations, flipped=att.flipped
    )
    out = DatasetOutcome(
        name=split.name, split=split, black_box_info=dict(model_info) if model_info else {"model": repr(clf)},
        class_index=ci, n_classes=k, train_accuracy=train_acc, test_accuracy=float(correct.mean()),
        pseudo_r2=ext.r2_design, pseudo_r2_eval=ext.r2_eval, test_prediction=test_pred, test_confidence=test_conf,
        test_predicted_coi=test_pred == ci, test_correct=correct, eligible=eligible, distance=dist,
        flipped=att.flipped, steps=att.steps, gad=gad_all, confidence_threshold=params.confidence_threshold,
        pool_size=pool_n, budget=min(params.budget, pool_n), split_seed=int(split_seed),
        min_pseudo_r2=params.min_pseudo_r2, pools=np.zeros((params.replicates, pool_n), dtype=np.int64),
    )
    R, B = params.replicates, min(params.budget, pool_n)
    for s in params.searches:
        out.errors[s] = np.zeros((R, B), dtype=bool)
        out.confidence[s] = np.zeros((R, B))
    rng = np.random.default_rng(seed)
    sp = params.search
    kwargs = dict(
        log=split.log_mae, frac=params.loess_frac, iterations=params.loess_iterations,
        threshold=params.confidence_threshold, bandwidth=sp.bandwidth, l2=sp.facility_l2,
        exploration=sp.lakkaraju_exploration, discount=sp.lakkaraju_discount,
        prior_strength=sp.bansal_weld_prior_strength,
    )
    for r in range(R):
        idx = np.sort(rng.choice(n_elig, size=pool_n, replace=False))  # drawn from the eligible rows only
        out.pools[r] = idx
        pool = Pool(features=X_el[idx], confidence=conf_el[idx], distance=dist[idx], flipped=att.flipped[idx])
        err_pool = err_el[idx]
        oracle = lambda i, e=err_pool: bool(e[i])  # noqa: E731 - the ground truth plays the oracle (Sec. V-C)
        for s in params.searches:
            n_clusters = sp.lakkaraju_clusters if s == "lakkaraju" else sp.bansal_weld_clusters
            search = make_search(s, random_state=seed + 7919 * (r + 1), n_clusters=n_clusters, **kwargs)
            order = np.asarray(search.select(pool, B, oracle))
            if len(order) != B or len(np.unique(order)) != B:
                raise DataError(f"search {s!r} returned {len(np.unique(order))} distinct indices; expected {B}")
            out.errors[s][r] = err_pool[order]
            out.confidence[s][r] = pool.confidence[order]
            if r == 0 and s == "gad":
                target = np.log(np.maximum(pool.distance, 1e-12)) if split.log_mae else pool.distance
                gad = search.scores(pool)
                fin = np.isfinite(gad)
                out.example = {
                    "confidence": pool.confidence[fin], "target": target[fin], "fitted": (target - gad)[fin],
                    "chosen": np.flatnonzero(np.isin(np.flatnonzero(fin), order)), "error": err_pool[fin],
                }
        if progress is not None:
            progress(f"{split.name} seed {split_seed}: replicates", r + 1, R)
    for s in params.searches:
        out.sdr[s] = sdr_curve(out.errors[s], out.confidence[s])
    seconds["searches"] = time.perf_counter() - t
    seconds["total"] = time.perf_counter() - t0
    out.seconds = seconds
    return out


RESERVED_COLUMNS = ("rank", "prediction", "confidence", "adversarial_distance", "gad_score", "row")
FINDING_COLUMNS = ("weak_spot", "kind", "severity", "severity_meaning", "label", "prediction", "confidence", "example")


def _feature_columns(names: List[str]) -> List[str]:
    """Feature names for the findings tables; one equal to a reserved column gets the prefix ``feature:``."""
    return [f"feature:{n}" if n in RESERVED_COLUMNS else str(n) for n in names]


def _fmt(v: float) -> str:
    return f"{v:.4g}"


def _example(names: List[str], x: np.ndarray) -> str:
    """A row's feature values as a JSON object (7 significant digits: the data are float32)."""
    return json.dumps({str(c): float(f"{float(v):.7g}") for c, v in zip(names, x)})


def findings_of(outcome: DatasetOutcome, *, top: int = 20) -> Tuple["Any", "Any"]:
    """GAD's findings on one target: the rows to label, ranked, and a summary of where they concentrate.

    Parameters
    ----------
    outcome : DatasetOutcome
        From :func:`run_target`.
    top : int, default 20
        How many of the top-ranked rows the summary describes.

    Returns
    -------
    weak_spots : pandas.DataFrame
        Columns ``weak_spot, kind, severity, severity_meaning, label, prediction, confidence, example`` (the shared
        findings shape). First one ``kind = "feature_range"`` row: the 1-3 features whose interquartile range over
        the ``top`` GAD-ranked rows is narrowest relative to their range over all eligible rows, named with the top
        rows' 25th-75th percentiles (``"feature range: Iy in [-1.2, 0.1], Aa in [...]"``); its ``severity`` is the
        share of errors among those rows over the share among all eligible rows (ground truth, audit only: a lift,
        1 = no better than chance; 0 when no eligible row is an error); ``label`` the most common true class among
        them, ``prediction`` the class of interest, ``confidence`` their mean confidence, ``example`` the top row.
        Then up to five ``kind = "input"`` rows, the top-ranked rows the attack flipped, with ``severity`` their
        ``gad_score``. ``label`` and ``prediction`` are class names (codes where the split has none); ``example``
        is a JSON object of the row's feature values.
    to_label : pandas.DataFrame
        What a person acts on: every eligible test row (predicted as the class of interest with confidence above
        the threshold), most likely confident error first. Columns ``rank`` (1 = label first), the feature columns
        (original names and units; a name clashing with another column gets the prefix ``feature:``),
        ``prediction`` (class code), ``confidence``, ``adversarial_distance`` (MAE to the adversarial partner, in
        units of each feature's range when ``feature_scale="range"``), ``gad_score``, ``row`` (index into the test
        split). No ground truth. ``gad_score = F(p) - (log-)MAE``, i.e. minus the GAD of Eq. 2 with the LOESS ``F``
        fitted on all eligible rows: how much less perturbation than the confidence leads one to expect flipped the
        prediction. It is sorted descending (the paper queries the lowest GAD first); rows the attack never flipped
        get ``-inf`` and come last.

    Where GAD is unreliable (:attr:`DatasetOutcome.gad_reliable` is False: the pseudo-model failed the R^2 gate),
    ``weak_spots`` is one ``kind = "method_caveat"`` row saying so and why (severity 0), and ``to_label`` lists the
    same rows lowest confidence first (Sec. I's fallback) with ``gad_score`` NaN: no GAD ranking is offered.
    """
    import pandas as pd

    o = outcome
    split = o.split
    if isinstance(top, bool) or not isinstance(top, (int, np.integer)) or top < 1:
        raise ConfigError(f"findings_of: top = {top!r}; must be a positive integer")
    rows = np.asarray(o.eligible, dtype=np.int64)
    X = np.asarray(split.X_test, dtype=np.float64)[rows]
    reliable = o.gad_reliable
    score = -np.asarray(o.gad, dtype=np.float64)  # higher = more likely a confident error; -inf: never flipped
    if reliable:
        order = np.lexsort((rows, -score))  # descending score, ties by row
    else:  # no GAD ranking: lowest confidence first (Sec. I), ties by row
        order = np.lexsort((rows, o.test_confidence[rows]))
        score = np.full(len(rows), np.nan)
    feats = _feature_columns(list(split.feature_names))
    to_label = pd.DataFrame(X[order], columns=feats)
    to_label.insert(0, "rank", np.arange(1, len(order) + 1, dtype=np.int64))
    to_label["prediction"] = o.test_prediction[rows][order].astype(np.int64)
    to_label["confidence"] = o.test_confidence[rows][order]
    to_label["adversarial_distance"] = np.asarray(o.distance, dtype=np.float64)[order]
    to_label["gad_score"] = score[order]
    to_label["row"] = rows[order]

    truth = np.asarray(split.y_test)[rows][order]
    wrong = ~np.asarray(o.test_correct)[rows][order]
    pred_name = o.class_name
    units = "log-MAE" if split.log_mae else "MAE"
    spots: List[Dict[str, Any]] = []
    n = len(order)
    if not reliable:
        spots.append({
            "weak_spot": f"GAD is unreliable on {o.name}: {unreliable_reason(o)}",
            "kind": "method_caveat",
            "severity": 0.0,
            "severity_meaning": (
                "no GAD finding: the pseudo-model does not mimic the black box, so distances to its adversarial "
                "partners say nothing about the black box; the rows to label are listed lowest confidence first"
            ),
            "label": "",
            "prediction": pred_name,
            "confidence": float(o.test_confidence[rows].mean()) if n else float("nan"),
            "example": "",
        })
    elif n:
        k = min(int(top), n)
        top_X = X[order][:k]
        q_top = np.quantile(top_X, [0.25, 0.75], axis=0)
        q_all = np.quantile(X, [0.25, 0.75], axis=0)
        iqr_top, iqr_all = q_top[1] - q_top[0], q_all[1] - q_all[0]
        with np.errstate(invalid="ignore", divide="ignore"):
            ratio = np.where(iqr_all > 0, iqr_top / iqr_all, np.inf)
        ranked = np.argsort(ratio, kind="stable")
        chosen = [j for j in ranked[:3] if ratio[j] < 0.5] or [int(ranked[0])]
        spot = "feature range: " + ", ".join(
            f"{split.feature_names[j]} in [{_fmt(q_top[0, j])}, {_fmt(q_top[1, j])}]" for j in chosen
        )
        base = float(wrong.mean())
        share = float(wrong[:k].mean())
        severity = share / base if base > 0 else 0.0
        vals, counts = np.unique(truth[:k], return_counts=True)
        conc = ", ".join(
            f"{split.feature_names[j]} IQR {ratio[j]:.0%} of the eligible rows'" for j in chosen
        )
        spots.append({
            "weak_spot": spot,
            "kind": "feature_range",
            "severity": float(severity),
            "severity_meaning": (
                f"share of the top-{k} GAD-ranked rows that are errors (ground truth, audit only) against the base error "
                f"rate of the eligible rows: {share:.0%} vs {base:.0%} of {n} confident (> {o.confidence_threshold:g}) "
                f"{pred_name!r} predictions (1 = no concentration); ranges are the top rows' 25th-75th percentiles "
                f"({conc})"
            ),
            "label": split.class_name(vals[np.argmax(counts)]),
            "prediction": pred_name,
            "confidence": float(o.test_confidence[rows][order][:k].mean()),
            "example": _example(split.feature_names, X[order][0]),
        })
        for i in range(min(5, n)):
            if not np.isfinite(score[order][i]):
                break
            spots.append({
                "weak_spot": f"test row {int(rows[order][i])} (GAD rank {i + 1} of {n})",
                "kind": "input",
                "severity": float(score[order][i]),
                "severity_meaning": (
                    f"GAD score F(p) - {units} to the adversarial partner: how much less perturbation ({units} units) "
                    "than the LOESS on confidence expects flipped this confident prediction (minus Eq. 2 of seeds/001); "
                    "higher = more likely a confident error"
                ),
                "label": split.class_name(truth[i]),
                "prediction": split.class_name(to_label["prediction"].iloc[i]),
                "confidence": float(to_label["confidence"].iloc[i]),
                "example": _example(split.feature_names, X[order][i]),
            })
    weak_spots = pd.DataFrame(spots, columns=list(FINDING_COLUMNS))
    return weak_spots, to_label


def unreliable_reason(o: DatasetOutcome) -> str:
    """Why GAD's numbers are withheld for a run whose pseudo-model failed the R^2 gate (one clause)."""
    return (f"the pseudo-model's R^2 is {o.pseudo_r2:.3f} on held-out design points and {o.pseudo_r2_eval:.3f} on the "
            f"test rows (split seed {o.split_seed}; gad.min_pseudo_r2 asks both >= {o.min_pseudo_r2:g}), so it did not "
            "learn the black box and the adversarial distances GAD ranks by mean nothing")


def _auc(value: np.ndarray, positive: np.ndarray) -> float:
    """P(a positive row has a higher ``value`` than a negative one), ties counting half; NaN without both kinds."""
    from scipy.stats import rankdata

    pos = np.asarray(positive, dtype=bool)
    n1, n0 = int(pos.sum()), int((~pos).sum())
    if n1 == 0 or n0 == 0:
        return float("nan")
    ranks = rankdata(np.asarray(value, dtype=np.float64))
    return float((ranks[pos].sum() - n1 * (n1 + 1) / 2.0) / (n1 * n0))


def error_aucs(o: DatasetOutcome) -> Tuple[float, float]:
    """How well a low GAD, and a low confidence, single out the errors among the eligible rows (ground truth, audit
    only): AUCs, 0.5 = no better than chance. GAD's premise (Sec. IV-A) is that errors flip with less perturbation
    than their confidence predicts, i.e. a GAD AUC above 0.5."""
    err = ~np.asarray(o.test_correct)[o.eligible]
    return _auc(-np.asarray(o.gad), err), _auc(-np.asarray(o.test_confidence)[o.eligible], err)


def lowest_gad_error_rate(o: DatasetOutcome) -> Tuple[float, float]:
    """Error rate among the eligible rows GAD ranks first -- the lowest-GAD ``budget / pool_size`` share, the share a
    search queries from a pool -- and among all eligible rows (ground truth, audit only)."""
    err = ~np.asarray(o.test_correct)[o.eligible]
    if not len(err):
        return float("nan"), float("nan")
    k = max(1, int(round(len(err) * o.budget / max(o.pool_size, 1))))
    first = np.lexsort((np.arange(len(err)), np.asarray(o.gad)))[:k]
    return float(err[first].mean()), float(err.mean())


def group_runs(outcomes: List[DatasetOutcome]) -> Dict[str, List[DatasetOutcome]]:
    """The runs of each target (in order of first appearance), sorted by split seed; the first is the audited one."""
    groups: Dict[str, List[DatasetOutcome]] = {}
    for o in outcomes:
        groups.setdefault(o.name, []).append(o)
    for name, runs in groups.items():
        runs.sort(key=lambda o: o.split_seed)
        seeds = [o.split_seed for o in runs]
        if len(set(seeds)) != len(seeds):
            raise DataError(f"{name}: more than one run for a split seed ({seeds}); give each run its own split_seed")
        if any(list(o.sdr) != list(runs[0].sdr) for o in runs):
            raise DataError(f"{name}: the runs of different split seeds ran different searches")
    return groups


def _r(v: Any) -> Optional[float]:
    """Rounded for the metrics file; None (JSON null) where not a finite number."""
    return round(float(v), 4) if v is not None and np.isfinite(v) else None


def _nanmean(values: List[float]) -> float:
    v = np.asarray(values, dtype=np.float64)
    return float(np.nanmean(v)) if np.isfinite(v).any() else float("nan")


def _seed_stats(o: DatasetOutcome, budget: int) -> Dict[str, Dict[str, float]]:
    """Per search: mean SDR after ``budget`` queries over the pools, its 95% interval over pools, errors found and
    expected (means over the pools)."""
    out = {}
    for s, curve in o.sdr.items():
        mean, lo, hi = mean_ci95(curve[:, budget - 1])
        out[s] = {"sdr": float(mean), "lo": float(lo), "hi": float(hi),
                  "errors": float(o.errors[s][:, :budget].sum(axis=1).mean()),
                  "expected": float((1.0 - o.confidence[s][:, :budget]).sum(axis=1).mean())}
    return out


def _across(runs: List[DatasetOutcome], budget: int) -> Dict[str, Dict[str, float]]:
    """Per search, over the seeds: mean, 95% Student-t interval (over the pools where one seed ran), min, max of the
    per-seed mean SDR, and the mean errors found and expected."""
    stats = [_seed_stats(o, budget) for o in runs]
    out = {}
    for s in runs[0].sdr:
        vals = np.array([st[s]["sdr"] for st in stats])
        if len(runs) > 1:
            mean, lo, hi = (float(v) for v in mean_ci95(vals))
        else:
            mean, lo, hi = stats[0][s]["sdr"], stats[0][s]["lo"], stats[0][s]["hi"]
        out[s] = {"sdr": mean, "lo": lo, "hi": hi, "min": float(np.nanmin(vals)) if np.isfinite(vals).any() else np.nan,
                  "max": float(np.nanmax(vals)) if np.isfinite(vals).any() else np.nan,
                  "errors": float(np.mean([st[s]["errors"] for st in stats])),
                  "expected": float(np.mean([st[s]["expected"] for st in stats]))}
    return out


def metrics_of(outcomes: List[DatasetOutcome]) -> Dict[str, Any]:
    """``metrics/gad/<target>.json``, keyed by target name; the runs of one target (its split seeds) are pooled.

    Per target: ``sdr`` (mean over seeds of each seed's mean SDR after ``budget`` queries), ``sdr_ci95`` (95%
    Student-t interval over seeds; over the pools where one seed ran: ``interval_over``), ``sdr_range`` (min, max
    over seeds), ``errors`` and ``errors_expected`` (means over seeds), ``seeds``, ``replicates``, ``pool_size``
    (the audited run's), ``gad_reliable`` with ``min_pseudo_r2`` and ``pseudo_r2_lowest`` (the R^2 gate), ``pseudo_r2``
    (the audited model's, Table I), ``gad_error_auc`` and ``confidence_error_auc`` (means over seeds; see
    :func:`error_aucs`), the audited model's ``train_accuracy`` and ``test_accuracy``, and ``per_seed``: the same
    figures for each seed (``sdr_ci95_pools``: the interval over that seed's pools) with its black box and pool.
    Where GAD is unreliable its SDR, interval and counts are null.
    """
    m: Dict[str, Any] = {}
    for name, runs in group_runs(outcomes).items():
        budget = min(int(o.budget or next(iter(o.sdr.values())).shape[1]) for o in runs)
        audited = runs[0]
        reliable = all(o.gad_reliable for o in runs)
        searches = list(audited.sdr)
        per_seed: Dict[str, Any] = {}
        for o in runs:
            st = _seed_stats(o, budget)
            hide = {"gad"} if not o.gad_reliable else set()
            auc_gad, auc_conf = error_aucs(o)
            info = o.black_box_info
            per_seed[str(o.split_seed)] = {
                "sdr": {s: None if s in hide else _r(st[s]["sdr"]) for s in searches},
                "sdr_ci95_pools": {s: None if s in hide else [_r(st[s]["lo"]), _r(st[s]["hi"])] for s in searches},
                "errors": {s: None if s in hide else _r(st[s]["errors"]) for s in searches},
                "errors_expected": {s: None if s in hide else _r(st[s]["expected"]) for s in searches},
                "pseudo_r2": _r(o.pseudo_r2), "pseudo_r2_eval": _r(o.pseudo_r2_eval), "gad_reliable": o.gad_reliable,
                "gad_error_auc": None if hide else _r(auc_gad), "confidence_error_auc": _r(auc_conf),
                "lowest_gad_error_rate": None if hide else _r(lowest_gad_error_rate(o)[0]),
                "eligible_error_rate": _r(lowest_gad_error_rate(o)[1]),
                "train_accuracy": _r(o.train_accuracy), "test_accuracy": _r(o.test_accuracy),
                "n_eligible": int(len(o.eligible)), "pool_size": int(o.pool_size),
                "kernel": info.get("kernel"), "C": info.get("C"),
            }
        acr = _across(runs, budget)
        hide = {"gad"} if not reliable else set()
        aucs = [error_aucs(o) for o in runs]
        m[name] = {
            "budget": budget, "replicates": int(next(iter(audited.errors.values())).shape[0]),
            "pool_size": int(audited.pool_size), "seeds": [int(o.split_seed) for o in runs], "n_seeds": len(runs),
            "interval_over": "seeds" if len(runs) > 1 else "pools",
            "sdr": {s: None if s in hide else _r(acr[s]["sdr"]) for s in searches},
            "sdr_ci95": {s: None if s in hide else [_r(acr[s]["lo"]), _r(acr[s]["hi"])] for s in searches},
            "sdr_range": {s: None if s in hide else [_r(acr[s]["min"]), _r(acr[s]["max"])] for s in searches},
            "errors": {s: None if s in hide else _r(acr[s]["errors"]) for s in searches},
            "errors_expected": {s: None if s in hide else _r(acr[s]["expected"]) for s in searches},
            "gad_reliable": reliable, "min_pseudo_r2": _r(audited.min_pseudo_r2),
            "pseudo_r2": _r(audited.pseudo_r2), "pseudo_r2_lowest": _r(min(o.pseudo_r2_gate for o in runs)),
            "gad_error_auc": None if hide else _r(_nanmean([a[0] for a in aucs])),
            "confidence_error_auc": _r(_nanmean([a[1] for a in aucs])),
            "train_accuracy": _r(audited.train_accuracy), "test_accuracy": _r(audited.test_accuracy),
            "per_seed": per_seed,
        }
    return m


def _paper(o: DatasetOutcome) -> Dict[str, Any]:
    """Table I of the paper for the preset this target's split comes from (empty for a data set not in the paper)."""
    return PAPER_TABLE_I.get(str(o.split.info.get("preset", "")), {})


def _design_label(params: GadParams) -> str:
    f = params.design_data_fraction
    return (f"LHS {1 - f:.0%} + jittered test rows {f:.0%}" if f > 0 else "LHS")


def tables_of(outcomes: List[DatasetOutcome], params: GadParams) -> Dict[str, Any]:
    """``table_i`` (Table I: one row per target and split seed, with the paper's figures next to ours),
    ``sdr_across_seeds`` (per target and search: mean SDR over seeds, 95% t interval, min-max), ``sdr_by_seed``
    (per target, seed and search: mean SDR over the pools with its interval over pools) and ``sdr_curves`` (long:
    after each query, the mean over seeds with its interval)."""
    import pandas as pd

    groups = group_runs(outcomes)
    rows, by_seed, across, long = [], [], [], []
    for name, runs in groups.items():
        budget = min(int(o.budget or next(iter(o.sdr.values())).shape[1]) for o in runs)
        reliable = all(o.gad_reliable for o in runs)
        for o in runs:
            i, pp = o.black_box_info, _paper(o)
            auc_gad, auc_conf = error_aucs(o)
            rows.append({
                "target": o.name, "seed": o.split_seed, "class_of_interest": o.class_name,
                "model": i.get("arch", i.get("model")), "kernel": i.get("kernel"), "C": i.get("C"),
                "gamma": None if i.get("gamma") is None else str(i.get("gamma")),
                "train_accuracy": round(o.train_accuracy, 4), "test_accuracy": round(o.test_accuracy, 4),
                "paper_train_accuracy": pp.get("train_accuracy"), "paper_test_accuracy": pp.get("test_accuracy"),
                "paper_kernel": pp.get("kernel"),
                "pseudo_r2": round(o.pseudo_r2, 4), "pseudo_r2_eval": round(o.pseudo_r2_eval, 4),
                "paper_pseudo_r2": pp.get("pseudo_r2"), "gad_reliable": o.gad_reliable,
                "N": params.design_points, "design": _design_label(params),
                "loess": "Log MAE" if o.split.log_mae else "MAE",
                "n_train": o.split.info.get("n_train", len(o.split.X_train)),
                "n_test": o.split.info.get("n_test", len(o.split.X_test)), "n_eligible": len(o.eligible),
                "pool_size": o.pool_size, "budget": o.budget,
                "eligible_error_rate": round(float(1.0 - o.test_correct[o.eligible].mean()), 4),
                "eligible_expected_error_rate": round(float((1.0 - o.test_confidence[o.eligible]).mean()), 4),
                "gad_error_auc": round(auc_gad, 4) if o.gad_reliable else None,
                "lowest_gad_error_rate": round(lowest_gad_error_rate(o)[0], 4) if o.gad_reliable else None,
                "confidence_error_auc": round(auc_conf, 4),
                "never_flipped": int((~o.flipped).sum()), "median_steps": float(np.median(o.steps)),
                "paper_note": (f"paper: {pp['dataset']}" + (f"; {pp['note']}" if pp.get("note") else "")) if pp else
                "not in the paper",
            })
            st = _seed_stats(o, budget)
            for s in o.sdr:
                shown = o.gad_reliable or s != "gad"
                by_seed.append({
                    "target": o.name, "seed": o.split_seed, "search": s, "label": search_label(s),
                    "sdr": round(st[s]["sdr"], 4) if shown else None,
                    "sdr_lo_pools": round(st[s]["lo"], 4) if shown else None,
                    "sdr_hi_pools": round(st[s]["hi"], 4) if shown else None,
                    "errors": round(st[s]["errors"], 4) if shown else None,
                    "errors_expected": round(st[s]["expected"], 4) if shown else None,
                })
        acr = _across(runs, budget)
        for s in runs[0].sdr:
            shown = reliable or s != "gad"
            a = acr[s]
            across.append({
                "target": name, "search": s, "label": search_label(s), "n_seeds": len(runs),
                "replicates": int(next(iter(runs[0].errors.values())).shape[0]), "budget": budget,
                "sdr_mean": round(a["sdr"], 4) if shown else None,
                "sdr_lo": round(a["lo"], 4) if shown else None, "sdr_hi": round(a["hi"], 4) if shown else None,
                "interval_over": "seeds" if len(runs) > 1 else "pools",
                "sdr_min": round(a["min"], 4) if shown else None, "sdr_max": round(a["max"], 4) if shown else None,
                "errors_mean": round(a["errors"], 4) if shown else None,
                "errors_expected_mean": round(a["expected"], 4) if shown else None,
            })
            if not shown:
                continue
            sm, slo, shi = _curve_band([o.sdr[s][:, :budget] for o in runs])
            em, elo, ehi = _curve_band([np.cumsum(o.errors[s][:, :budget], axis=1) for o in runs])
            for q in range(budget):
                long.append({
                    "target": name, "search": s, "query": q + 1, "n_seeds": len(runs),
                    "sdr_mean": float(sm[q]), "sdr_lo": float(slo[q]), "sdr_hi": float(shi[q]),
                    "errors_mean": float(em[q]), "errors_lo": float(elo[q]), "errors_hi": float(ehi[q]),
                })
    return {"table_i": pd.DataFrame(rows), "sdr_across_seeds": pd.DataFrame(across),
            "sdr_by_seed": pd.DataFrame(by_seed), "sdr_curves": pd.DataFrame(long)}


def _curve_band(per_seed: List[np.ndarray]) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Mean curve and 95% interval: over the seeds' mean curves (t interval over seeds), or over one seed's pools."""
    if len(per_seed) == 1:
        return mean_ci95(per_seed[0])
    with np.errstate(invalid="ignore"):
        means = np.vstack([np.nanmean(c, axis=0) for c in per_seed])
    return mean_ci95(means)


def _grid(n: int):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, n, figsize=(4.6 * n, 3.8), squeeze=False)
    return fig, axes[0]


def figures_of(outcomes: List[DatasetOutcome], params: GadParams) -> Dict[str, Any]:
    """Figs. 1-5 of the paper, one panel per target (curves: mean over split seeds with the 95% interval over seeds;
    Figs. 1-2: the audited model), and ``sdr_by_seed``: each seed's mean SDR per search with the mean over seeds."""
    figs: Dict[str, Any] = {}
    groups = group_runs(outcomes)
    n = len(groups)
    colors = {s: f"C{i % 10}" for i, s in enumerate(sorted({s for o in outcomes for s in o.sdr}))}

    def shown(runs: List[DatasetOutcome], s: str) -> bool:
        return s != "gad" or all(o.gad_reliable for o in runs)

    def band_label(runs: List[DatasetOutcome]) -> str:
        return f"95% t over {len(runs)} seeds" if len(runs) > 1 else "95% CI over pools"

    for key, ylabel, what in (("sdr_curves", "mean SDR", "sdr"), ("errors_found", "mean errors found", "errors")):
        fig, axes = _grid(n)  # Fig. 3 and Fig. 4
        for ax, (name, runs) in zip(axes, groups.items()):
            budget = min(int(o.budget or next(iter(o.sdr.values())).shape[1]) for o in runs)
            q = np.arange(1, budget + 1)
            top = 0.0
            for s in runs[0].sdr:
                if not shown(runs, s):
                    continue
                curves = [o.sdr[s][:, :budget] if what == "sdr" else np.cumsum(o.errors[s][:, :budget], axis=1)
                          for o in runs]
                m, lo, hi = _curve_band(curves)
                ax.plot(q, m, color=colors[s], label=search_label(s))
                ax.fill_between(q, lo, hi, color=colors[s], alpha=0.15, linewidth=0)
                top = max(top, float(np.nanmax(m)))
            if what == "sdr":
                ax.axhline(1.0, color="k", lw=0.8, ls="--")
                if top > 5:
                    ax.set_yscale("log")
            reps = next(iter(runs[0].errors.values())).shape[0]
            title = f"{name}: {len(runs)} seed(s) x {reps} pools of {runs[0].pool_size}" + (
                "" if all(o.gad_reliable for o in runs) else "\n(GAD unreliable: not shown)")
            ax.set(title=title, xlabel="queries", ylabel=f"{ylabel} ({band_label(runs)})")
        axes[0].legend(fontsize=7)
        figs[key] = fig

    fig, axes = _grid(n)  # each seed's SDR at the budget
    for ax, (name, runs) in zip(axes, groups.items()):
        budget = min(int(o.budget or next(iter(o.sdr.values())).shape[1]) for o in runs)
        names = [s for s in runs[0].sdr if shown(runs, s)]
        stats = [_seed_stats(o, budget) for o in runs]
        acr = _across(runs, budget)
        for j, s in enumerate(names):
            vals = [st[s]["sdr"] for st in stats]
            offs = np.linspace(-0.15, 0.15, len(vals)) if len(vals) > 1 else np.zeros(1)
            ax.scatter(j + offs, vals, s=14, color=colors[s], alpha=0.8)
            a = acr[s]
            ax.errorbar(j + 0.3, a["sdr"], yerr=[[a["sdr"] - a["lo"]], [a["hi"] - a["sdr"]]], fmt="o", color="k",
                        ms=4, capsize=3)
        ax.axhline(1.0, color="k", lw=0.8, ls="--")
        ax.set_xticks(range(len(names)), [search_label(s) for s in names], rotation=45, ha="right", fontsize=7)
        ax.set(title=f"{name}: {len(runs)} split seed(s)", ylabel=f"SDR after {budget} queries")
    figs["sdr_by_seed"] = fig

    fig, axes = _grid(n)  # Fig. 5
    for ax, (name, runs) in zip(axes, groups.items()):
        names = [s for s in runs[0].confidence if shown(runs, s)]
        ax.boxplot([np.concatenate([o.confidence[s].ravel() for o in runs]) for s in names], showfliers=False)
        ax.set_xticks(range(1, len(names) + 1), [search_label(s) for s in names], rotation=45, ha="right", fontsize=7)
        ax.set(title=f"{name} ({len(runs)} seed(s))", ylabel="confidence of queried points")
    figs["confidence_boxplots"] = fig

    fig, axes = _grid(n)  # Fig. 2
    for ax, runs in zip(axes, groups.values()):
        o = runs[0]
        sel = o.test_predicted_coi
        lo = 1.0 / o.n_classes  # the least possible top-label confidence (0.5 for two classes, as Fig. 2)
        rel = reliability(o.test_confidence[sel], o.test_correct[sel], bins=params.reliability_bins, lo=lo)
        e = rel["edges"]
        w = e[1] - e[0]
        ok = rel["count"] > 0
        acc = np.where(ok, rel["accuracy"], 0.0)
        mid = 0.5 * (e[1:] + e[:-1])
        ax.bar(e[:-1], acc, width=w, align="edge", color="C0", alpha=0.7, edgecolor="k", label="observed accuracy")
        over = ok & (acc < mid)
        ax.bar(e[:-1][over], (mid - acc)[over], bottom=acc[over], width=w, align="edge", color="red", alpha=0.5, label="overconfidence")
        ax.plot([lo, 1], [lo, 1], "k--", lw=0.8)
        ax.set(title=f"{o.name} seed {o.split_seed} ({o.class_name!r} predicted)", xlabel="confidence", ylabel="accuracy",
               xlim=(lo, 1), ylim=(0, 1))
    axes[0].legend(fontsize=7, loc="upper left")
    figs["reliability"] = fig

    fig, axes = _grid(n)  # Fig. 1
    for ax, runs in zip(axes, groups.values()):
        o = runs[0]
        ex = o.example
        if not ex or not o.gad_reliable:
            ax.text(0.5, 0.5, "GAD unreliable here" if not o.gad_reliable else "no pool", ha="center",
                    transform=ax.transAxes)
            ax.set(title=o.name)
            continue
        c, y, f = ex["confidence"], ex["target"], ex["fitted"]
        chosen = np.zeros(len(c), dtype=bool)
        chosen[ex["chosen"]] = True
        ax.scatter(c[~chosen], y[~chosen], s=8, color="0.6", label="pool")
        ax.scatter(c[chosen], y[chosen], s=14, color="gold", edgecolor="k", linewidth=0.3, label="queried (lowest GAD)")
        err = ex["error"]
        ax.scatter(c[err], y[err], s=30, marker="x", color="red", label="error")
        k = np.argsort(c)
        ax.plot(c[k], f[k], color="C0", lw=2, label="LOESS F(p)")
        ax.set(title=f"{o.name} seed {o.split_seed}, pool 1", xlabel="confidence",
               ylabel="log MAE" if o.split.log_mae else "MAE")
    if axes[0].get_legend_handles_labels()[0]:
        axes[0].legend(fontsize=7)
    figs["loess_fit"] = fig
    return figs


def _fmt_sdr(a: Dict[str, float]) -> str:
    return f"{a['sdr']:.2f} [{a['lo']:.2f}, {a['hi']:.2f}]"


def result_of(outcomes: List[DatasetOutcome], params: GadParams) -> StageResult:
    """The GAD stage's result: the runs of every target and split seed (grouped by target name) become ``metrics``
    (:func:`metrics_of`), tables ``table_i``, ``sdr_across_seeds``, ``sdr_by_seed``, ``sdr_curves``
    (:func:`tables_of`), figures ``sdr_curves`` (Fig. 3), ``errors_found`` (Fig. 4), ``sdr_by_seed``,
    ``confidence_boxplots`` (Fig. 5), ``reliability`` (Fig. 2), ``loess_fit`` (Fig. 1) (:func:`figures_of`), and
    the report section's text; the headline reports the mean over seeds."""
    metrics = metrics_of(outcomes)
    groups = group_runs(outcomes)
    first = next(iter(groups.values()))
    k = len(first)
    summary = [
        "Generalized Adversarial Distance (Bennette et al., seeds/001) looks for predictions a black-box classifier "
        "makes with high confidence yet gets wrong. A pseudo-model is extracted from the black box's confidences on "
        f"{params.design_points:,} design points ({_design_label(params)}; Algorithm 1, the jittered rows ours); "
        "each confident prediction is pushed across the black box's boundary by signed-gradient steps on it "
        "(Algorithm 2); GAD is how much less perturbation an instance needed than a LOESS fit on confidence expects "
        "(Eq. 2), and the search queries the lowest GAD first.",
        f"Protocol (Sec. V-C), repeated over split seeds (gad.seeds {params.seeds}; ours: the paper reports one split): "
        "each seed re-draws the target's split and retrains its model as the target's spec says (the grid search may "
        "pick another kernel or C), seed 0 being the audited model whose rows the findings rank. Per seed, "
        f"{params.replicates} replicates, each a random pool of confident (> {params.confidence_threshold}) "
        f"predictions of the class of interest (up to {params.pool_size} rows; Table I's pool_size), {params.budget} "
        "queries per search (fewer where a pool is smaller: Table I's budget), the ground truth as oracle. Figures are "
        "the mean over seeds of each seed's mean SDR, with a 95% Student-t interval over seeds and the min-max; the "
        "interval over one seed's pools (sdr_by_seed table) is narrower because those pools overlap. SDR (Eq. 1) is "
        "errors found over errors expected from the confidences: 1 means errors turn up as often as the confidence "
        "predicts, above 1 means the search found overconfidence. Caveat: where the confidences approach 1 the "
        "expected count is tiny and one error makes SDR very large, so read SDR together with the errors found "
        "(Fig. 4) and the confidences queried (Fig. 5).",
    ]
    for name, runs in groups.items():
        mm = metrics[name]
        o = runs[0]
        acr = _across(runs, mm["budget"])
        reliable = mm["gad_reliable"]
        boxes = "; ".join(
            f"seed {r.split_seed}: {r.black_box_info.get('kernel') or r.black_box_info.get('arch') or r.black_box_info.get('model')}"
            + (f" C={r.black_box_info['C']:g}" if r.black_box_info.get("C") is not None else "")
            + f" (train {r.train_accuracy:.0%}, test {r.test_accuracy:.0%}, pseudo R^2 {r.pseudo_r2:.3f})" for r in runs)
        pp = _paper(o)
        paper = (f" The paper's {pp['dataset']} SVM (Table I): train {pp['train_accuracy']:.0%}, test "
                 f"{pp['test_accuracy']:.0%}, {pp['kernel']}." if pp.get("train_accuracy") is not None else
                 (f" {pp['note']}." if pp else ""))
        parts = ", ".join(f"{search_label(s)} {_fmt_sdr(acr[s])} (seeds {acr[s]['min']:.2f}-{acr[s]['max']:.2f})"
                          for s in o.sdr if reliable or s != "gad")
        summary.append(
            f"{name} (class of interest {o.class_name!r}), {len(runs)} split seed(s), {mm['replicates']} pools of "
            f"{mm['pool_size']} per seed: black boxes {boxes}.{paper} Mean SDR after {mm['budget']} queries over the "
            f"seeds, 95% t interval over seeds in brackets: {parts}."
            + (f" Highest: {search_label(max((s for s in o.sdr if reliable or s != 'gad'), key=lambda s: acr[s]['sdr']))}." if o.sdr else "")
        )
        if not reliable:
            bad = [r for r in runs if not r.gad_reliable]
            summary.append(f"Caveat: GAD is unreliable on {name} and its SDR is not reported: "
                           + "; ".join(unreliable_reason(r) for r in bad) + ".")
        elif "gad" in acr and "random" in acr and not acr["gad"]["sdr"] > acr["random"]["sdr"]:
            top, base = zip(*(lowest_gad_error_rate(r) for r in runs))
            summary.append(
                f"Caveat: on {name} GAD does not beat random search (mean SDR {acr['gad']['sdr']:.2f} against "
                f"{acr['random']['sdr']:.2f}). Why (ground truth, audit only): among the eligible rows a low GAD singles "
                f"out the errors with AUC {mm['gad_error_auc']:.2f} (mean over seeds; per seed "
                + ", ".join(f"{v['gad_error_auc']:.2f}" for v in mm["per_seed"].values() if v["gad_error_auc"] is not None)
                + f"), where 0.5 is chance and GAD's premise -- errors flip with less perturbation than their confidence "
                f"predicts -- needs more; the confidence alone singles them out with AUC {mm['confidence_error_auc']:.2f}. "
                f"The rows GAD queries first, the lowest-GAD {o.budget / max(o.pool_size, 1):.0%} of the eligible rows, "
                f"are errors at {np.mean(top):.0%} (mean over seeds; per seed "
                + ", ".join(f"{v:.0%}" for v in top) + f") against {np.mean(base):.0%} among all eligible rows. On this "
                "black box the confident errors do not sit closer to the boundary than their confidence says"
                + (", and the rows that flip with the least perturbation for their confidence are errors less often "
                   "than the rest" if np.mean(top) < np.mean(base) else "")
                + ", so querying the lowest GAD first does no better than random search.")
    items = [
        {"table": "table_i", "caption": "Table I: per target and split seed, the class of interest, the black box (model, kernel, C, gamma, train and test accuracy) next to the paper's (paper_*: Phoneme and Yeast from the paper's Table I; Pang04 is not available here), pseudo-model R^2 on held-out design points and on the test data with the gate's verdict, design, LOESS target, split and pool sizes, the error rate among confident predictions of the class of interest against the rate their confidences predict, how well a low GAD and a low confidence single out those errors (AUC, ground truth), and how many the attack never flipped."},
        {"table": "sdr_across_seeds", "caption": "Mean SDR after the budget over split seeds, per search: 95% Student-t interval over seeds (over pools where one seed ran), min-max over seeds, errors found and expected."},
        {"figure": "sdr_by_seed", "caption": "SDR after the budget: each split seed's mean over its pools (dots) and the mean over seeds with its 95% t interval (black); the dashed line is SDR = 1."},
        {"figure": "sdr_curves", "caption": "Fig. 3: mean SDR after each query, mean over split seeds with its 95% interval over seeds; the dashed line is SDR = 1 (errors at the rate the confidence predicts)."},
        {"figure": "errors_found", "caption": "Fig. 4: mean number of errors found after each query (mean over split seeds, 95% interval over seeds)."},
        {"figure": "confidence_boxplots", "caption": "Fig. 5: confidences of the queried points, per search, all seeds and pools."},
        {"figure": "reliability", "caption": "Fig. 2: reliability of the audited model's predictions of the class of interest on the test split; red marks overconfidence."},
        {"figure": "loess_fit", "caption": "Fig. 1: (log-)MAE to the adversarial partner against confidence for the audited model's first pool, the LOESS fit F, the points GAD queries (gold) and the errors (red x)."},
        {"table": "sdr_by_seed", "caption": "Per split seed and search: mean SDR over the pools with its 95% interval over pools, errors found and expected."},
        {"table": "sdr_curves", "caption": "SDR and errors found after each query, per target and search, mean over split seeds (long format)."},
    ]
    title = "GAD: black-box search for high-confidence errors" + (f" ({first[0].name})" if len(groups) == 1 else "")
    return StageResult(
        metrics=metrics, tables=tables_of(outcomes, params), figures=figures_of(outcomes, params), title=title,
        summary=summary, items=items, headline=[_headline(name, metrics[name]) for name in groups],
    ).check()


def _headline(name: str, m: Dict[str, Any]) -> str:
    """One line for "At a glance": GAD against random search at the budget, the mean over split seeds with its
    interval over seeds, errors found next to SDR; or why GAD is not reported."""
    budget, k = m["budget"], m["n_seeds"]
    ran = (f"over {k} split seeds ({m['replicates']} pools of {m['pool_size']} each)" if k > 1 else
           f"on one split ({m['replicates']} pools of {m['pool_size']})")
    paper = [s for s in m["sdr"] if s != "low_confidence" and m["sdr"][s] is not None]  # low_confidence: not the paper's
    exp = m["errors_expected"]
    rnd = (f"random search's {m['errors'].get('random', float('nan')):.1f} of {exp.get('random', float('nan')):.2f} "
           f"expected (SDR {m['sdr'].get('random', float('nan')):.2f})") if m["sdr"].get("random") is not None else ""
    if not m["gad_reliable"]:
        return (f"{name}: GAD is unreliable here and reports no SDR: the pseudo-model did not learn the black box "
                f"(lowest R^2 {m['pseudo_r2_lowest'] if m['pseudo_r2_lowest'] is not None else float('nan'):.3f} < "
                f"gad.min_pseudo_r2 {m['min_pseudo_r2']:g}), so its adversarial distances mean nothing"
                + (f"; with {budget} labels, {ran}, {rnd}." if rnd else "."))
    lo, hi = m["sdr_ci95"]["gad"]
    best = max(paper, key=lambda s: m["sdr"][s])
    few = exp.get("gad", 1.0) < 1.0
    beats = m["sdr"]["gad"] > m["sdr"].get("random", float("inf"))
    interval = "95% t over seeds" if k > 1 else "95% CI over pools"
    return (f"{name}: {ran}, with {budget} labels GAD finds {m['errors']['gad']:.1f} high-confidence errors where the "
            f"confidences expect {exp['gad']:.2f} (mean SDR {m['sdr']['gad']:.2f}, {interval} [{lo:.2f}, {hi:.2f}]"
            + (f", seeds {m['sdr_range']['gad'][0]:.2f}-{m['sdr_range']['gad'][1]:.2f}" if k > 1 else "") + ")"
            + (f" against {rnd}" if rnd else "") + f"; best of the paper's searches here: {search_label(best)} "
            f"(SDR {m['sdr'][best]:.2f})."
            + ("" if beats or not rnd else " GAD does not beat random search on this target (see the caveat).")
            + (" Caveat: fewer than one error is expected among GAD's queries, so one error more or less moves SDR "
               "a lot; read the error counts." if few else ""))
