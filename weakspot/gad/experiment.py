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


def dataset_seed(seed: int, name: str) -> int:
    """A 32-bit seed for one target (or data set), from the run's seed and its name."""
    return int(np.random.SeedSequence([int(seed) % (2**63), zlib.crc32(name.encode())]).generate_state(1)[0])


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

    @property
    def class_name(self) -> str:
        return self.split.class_name(self.class_index)


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
        holdout_fraction=params.holdout_fraction, seed=seed, device=device, progress=progress,
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
        pool_size=pool_n, budget=min(params.budget, pool_n),
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
        idx = np.sort(rng.choice(n_elig, size=pool_n, replace=False))
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
            progress(f"{split.name}: replicates", r + 1, R)
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
    """
    import pandas as pd

    o = outcome
    split = o.split
    if isinstance(top, bool) or not isinstance(top, (int, np.integer)) or top < 1:
        raise ConfigError(f"findings_of: top = {top!r}; must be a positive integer")
    rows = np.asarray(o.eligible, dtype=np.int64)
    X = np.asarray(split.X_test, dtype=np.float64)[rows]
    score = -np.asarray(o.gad, dtype=np.float64)  # higher = more likely a confident error; -inf: never flipped
    order = np.lexsort((rows, -score))  # descending score, ties by row
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
    if n:
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


def metrics_of(outcomes: List[DatasetOutcome]) -> Dict[str, Any]:
    """``metrics/gad.json``, keyed by target name: mean SDR at the budget with its 95% interval, mean errors found,
    pseudo R^2, train and test accuracy (train NaN without training rows)."""
    m: Dict[str, Any] = {}
    for o in outcomes:
        sdr, ci, errs, expd = {}, {}, {}, {}
        for s, curve in o.sdr.items():
            mean, lo, hi = mean_ci95(curve[:, -1])
            sdr[s] = round(float(mean), 4)
            ci[s] = [round(float(lo), 4), round(float(hi), 4)]
            errs[s] = round(float(o.errors[s].sum(axis=1).mean()), 4)
            expd[s] = round(float((1.0 - o.confidence[s]).sum(axis=1).mean()), 4)
        m[o.name] = {
            "sdr": sdr, "sdr_ci95": ci, "errors": errs, "errors_expected": expd,
            "pseudo_r2": round(float(o.pseudo_r2), 4),
            "train_accuracy": round(o.train_accuracy, 4), "test_accuracy": round(o.test_accuracy, 4),
            "budget": int(o.budget or next(iter(o.sdr.values())).shape[1]),
        }
    return m


def tables_of(outcomes: List[DatasetOutcome], params: GadParams) -> Dict[str, Any]:
    """``table_i`` (Table I, one row per target, with its class of interest and model) and ``sdr_curves`` (long)."""
    import pandas as pd

    rows = []
    for o in outcomes:
        i = o.black_box_info
        rows.append({
            "target": o.name, "class_of_interest": o.class_name, "model": i.get("arch", i.get("model")),
            "kernel": i.get("kernel"), "C": i.get("C"),
            "gamma": None if i.get("gamma") is None else str(i.get("gamma")),
            "train_accuracy": round(o.train_accuracy, 4), "test_accuracy": round(o.test_accuracy, 4),
            "pseudo_r2": round(o.pseudo_r2, 4), "pseudo_r2_eval": round(o.pseudo_r2_eval, 4),
            "N": params.design_points, "loess": "Log MAE" if o.split.log_mae else "MAE",
            "n_train": o.split.info["n_train"], "n_test": o.split.info["n_test"], "n_eligible": len(o.eligible),
            "pool_size": o.pool_size, "budget": o.budget,
            "eligible_error_rate": round(float(1.0 - o.test_correct[o.eligible].mean()), 4),
            "eligible_expected_error_rate": round(float((1.0 - o.test_confidence[o.eligible]).mean()), 4),
            "never_flipped": int((~o.flipped).sum()),
            "median_steps": float(np.median(o.steps)),
        })
    long = []
    for o in outcomes:
        for s, curve in o.sdr.items():
            m, lo, hi = mean_ci95(curve)
            cum = np.cumsum(o.errors[s], axis=1)
            em, elo, ehi = mean_ci95(cum)
            for q in range(curve.shape[1]):
                long.append({
                    "target": o.name, "search": s, "query": q + 1, "sdr_mean": float(m[q]), "sdr_lo": float(lo[q]),
                    "sdr_hi": float(hi[q]), "errors_mean": float(em[q]), "errors_lo": float(elo[q]), "errors_hi": float(ehi[q]),
                })
    return {"table_i": pd.DataFrame(rows), "sdr_curves": pd.DataFrame(long)}


def _grid(n: int):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, n, figsize=(4.6 * n, 3.8), squeeze=False)
    return fig, axes[0]


def figures_of(outcomes: List[DatasetOutcome], params: GadParams) -> Dict[str, Any]:
    """Figs. 1-5 of the paper, one panel per target."""
    figs: Dict[str, Any] = {}
    n = len(outcomes)
    colors = {s: f"C{i % 10}" for i, s in enumerate(sorted({s for o in outcomes for s in o.sdr}))}

    fig, axes = _grid(n)  # Fig. 3
    for ax, o in zip(axes, outcomes):
        q = np.arange(1, next(iter(o.sdr.values())).shape[1] + 1)
        top = 0.0
        for s, curve in o.sdr.items():
            m, lo, hi = mean_ci95(curve)
            ax.plot(q, m, color=colors[s], label=search_label(s))
            ax.fill_between(q, lo, hi, color=colors[s], alpha=0.15, linewidth=0)
            top = max(top, float(np.nanmax(m)))
        ax.axhline(1.0, color="k", lw=0.8, ls="--")
        if top > 5:
            ax.set_yscale("log")
        ax.set(title=o.name, xlabel="queries", ylabel="mean SDR (95% CI)")
    axes[0].legend(fontsize=7)
    figs["sdr_curves"] = fig

    fig, axes = _grid(n)  # Fig. 4
    for ax, o in zip(axes, outcomes):
        q = np.arange(1, next(iter(o.errors.values())).shape[1] + 1)
        for s, e in o.errors.items():
            m, lo, hi = mean_ci95(np.cumsum(e, axis=1))
            ax.plot(q, m, color=colors[s], label=search_label(s))
            ax.fill_between(q, lo, hi, color=colors[s], alpha=0.15, linewidth=0)
        ax.set(title=o.name, xlabel="queries", ylabel="mean errors found (95% CI)")
    axes[0].legend(fontsize=7)
    figs["errors_found"] = fig

    fig, axes = _grid(n)  # Fig. 5
    for ax, o in zip(axes, outcomes):
        names = list(o.confidence)
        ax.boxplot([o.confidence[s].ravel() for s in names], showfliers=False)
        ax.set_xticks(range(1, len(names) + 1), [search_label(s) for s in names], rotation=45, ha="right", fontsize=7)
        ax.set(title=o.name, ylabel="confidence of queried points")
    figs["confidence_boxplots"] = fig

    fig, axes = _grid(n)  # Fig. 2
    for ax, o in zip(axes, outcomes):
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
        ax.set(title=f"{o.name} ({o.class_name!r} predicted)", xlabel="confidence", ylabel="accuracy", xlim=(lo, 1), ylim=(0, 1))
    axes[0].legend(fontsize=7, loc="upper left")
    figs["reliability"] = fig

    fig, axes = _grid(n)  # Fig. 1
    for ax, o in zip(axes, outcomes):
        ex = o.example
        if not ex:
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
        ax.set(title=o.name, xlabel="confidence", ylabel="log MAE" if o.split.log_mae else "MAE")
    axes[0].legend(fontsize=7)
    figs["loess_fit"] = fig
    return figs


def result_of(outcomes: List[DatasetOutcome], params: GadParams) -> StageResult:
    """The GAD stage's result across targets: ``metrics`` (:func:`metrics_of`, keyed by target name), tables
    ``table_i`` and ``sdr_curves`` (:func:`tables_of`), figures ``sdr_curves`` (Fig. 3), ``errors_found`` (Fig. 4),
    ``confidence_boxplots`` (Fig. 5), ``reliability`` (Fig. 2), ``loess_fit`` (Fig. 1) (:func:`figures_of`), and
    the report section's text."""
    metrics = metrics_of(outcomes)
    summary = [
        "Generalized Adversarial Distance (Bennette et al., seeds/001) looks for predictions a black-box classifier "
        "makes with high confidence yet gets wrong. A pseudo-model is extracted from the black box's confidences on a "
        f"Latin hypercube of {params.design_points:,} points (Algorithm 1); each confident prediction is pushed across "
        "the black box's boundary by signed-gradient steps on it (Algorithm 2); GAD is how much less perturbation an "
        "instance needed than a LOESS fit on confidence expects (Eq. 2), and the search queries the lowest GAD first.",
        f"Protocol (Sec. V-C): {params.replicates} replicates, each a random pool of confident (> "
        f"{params.confidence_threshold}) predictions of the class of interest, {params.budget} queries per search (fewer where a target's pool is "
        "smaller: Table I's budget column), the "
        "ground truth as oracle. SDR (Eq. 1) is errors found over errors expected from the confidences: 1 means errors "
        "turn up as often as the confidence predicts, above 1 means the search found overconfidence. Caveat: where "
        "the black box's confidences approach 1 the expected count is tiny and one error makes SDR very large, so read "
        "SDR together with the errors found (Fig. 4) and the confidences queried (Fig. 5); Table I gives each target's "
        "actual and expected error rates among the confident predictions, i.e. how much overconfidence there is to find.",
    ]
    for o in outcomes:
        mm = metrics[o.name]
        best = max(mm["sdr"], key=lambda s: mm["sdr"][s])
        parts = ", ".join(f"{search_label(s)} {v:.2f} [{mm['sdr_ci95'][s][0]:.2f}, {mm['sdr_ci95'][s][1]:.2f}]" for s, v in mm["sdr"].items())
        summary.append(
            f"{o.name} (class of interest {o.class_name!r}): black box "
            f"{o.black_box_info.get('kernel') or o.black_box_info.get('arch') or o.black_box_info.get('model')} (train {o.train_accuracy:.0%}, test "
            f"{o.test_accuracy:.0%}), pseudo R^2 {o.pseudo_r2:.3f}; mean SDR after {metrics[o.name]['budget']} queries with 95% "
            f"intervals: {parts}. Highest: {search_label(best)}."
        )
    items = [
        {"table": "table_i", "caption": "Table I: per target, the class of interest, the black box (model, kernel, C, gamma, accuracies), pseudo-model R^2 on held-out design points and on the test data, LOESS target, split and pool sizes, the error rate among confident predictions of the class of interest against the rate their confidences predict, and how many the attack never flipped."},
        {"figure": "sdr_curves", "caption": "Fig. 3: mean SDR after each query over the replicates, with 95% intervals; the dashed line is SDR = 1 (errors at the rate the confidence predicts)."},
        {"figure": "errors_found", "caption": "Fig. 4: mean number of errors found after each query."},
        {"figure": "confidence_boxplots", "caption": "Fig. 5: confidences of the queried points, per search."},
        {"figure": "reliability", "caption": "Fig. 2: reliability of the black box's predictions of the class of interest on the test split; red marks overconfidence."},
        {"figure": "loess_fit", "caption": "Fig. 1: (log-)MAE to the adversarial partner against confidence for the first replicate's pool, the LOESS fit F, the points GAD queries (gold) and the errors (red x)."},
        {"table": "sdr_curves", "caption": "SDR and errors found after each query, per target and search (long format)."},
    ]
    return StageResult(
        metrics=metrics, tables=tables_of(outcomes, params), figures=figures_of(outcomes, params),
        title="GAD: black-box search for high-confidence errors" + (f" ({outcomes[0].name})" if len(outcomes) == 1 else ""),
        summary=summary, items=items, headline=[_headline(o.name, metrics[o.name], metrics[o.name]["budget"]) for o in outcomes],
    ).check()


def _headline(name: str, m: Dict[str, Any], budget: int) -> str:
    """One line for "At a glance": GAD against random search, at the budget, with errors found next to SDR."""
    lo, hi = m["sdr_ci95"]["gad"]
    paper = [s for s in m["sdr"] if s != "low_confidence"]  # low_confidence is not one of the paper's searches
    best = max(paper, key=lambda s: m["sdr"][s])
    exp = m.get("errors_expected", {})
    few = exp.get("gad", 1.0) < 1.0
    return (f"{name}: with {budget} labels GAD finds {m['errors']['gad']:.1f} high-confidence errors where the "
            f"confidences expect {exp.get('gad', float('nan')):.2f} (SDR {m['sdr']['gad']:.2f} [{lo:.2f}, {hi:.2f}]) "
            f"against random search's {m['errors'].get('random', float('nan')):.1f} of "
            f"{exp.get('random', float('nan')):.2f} expected (SDR {m['sdr'].get('random', float('nan')):.2f}); best "
            f"of the paper's searches here: {search_label(best)} (SDR {m['sdr'][best]:.2f})."
            + (" Caveat: fewer than one error is expected among GAD's queries, so one error more or less moves SDR "
               "a lot; read the error counts." if few else ""))
