"""The protocol of Sec. V-C of seeds/001, end to end, and the report section it feeds.

Caveats first:

* A pool is drawn from the *eligible* test instances -- predicted as the class of interest with confidence above
  0.65 -- as ``min(pool_size, pool_max_fraction x eligible)`` of them, so that on a small test set (Yeast) the
  replicates still differ; the pool size actually used is in Table I.
* The attack and the adversarial distances are computed once for every eligible instance (an instance's partner does
  not depend on the pool); the LOESS curve ``F`` and so GAD are refitted on every pool, as Eq. 2 prescribes.
* The ground truth plays the oracle. Seeds for the split, the SVM, the design, the network and the pools are all
  derived from ``params.seed`` and the data set's name, so a run is reproducible and data sets are independent.
"""

from __future__ import annotations

import time
import zlib
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional

import numpy as np

from weakspot.errors import DataError
from weakspot.gad.attack import gad_attack
from weakspot.gad.blackbox import fit_estimator
from weakspot.gad.config import GadParams
from weakspot.gad.datasets import Split, split_from_params
from weakspot.gad.distance import mae
from weakspot.gad.extract import extract_pseudo_model
from weakspot.gad.sdr import mean_ci95, reliability, sdr_curve
from weakspot.gad.search import Pool, make_search
from weakspot.result import StageResult

Progress = Optional[Callable[[str, int, int], None]]

SEARCH_LABELS = {
    "gad": "GAD",
    "random": "Random",
    "lakkaraju": "Lakkaraju et al.",
    "bansal_weld": "Bansal & Weld",
    "facility_location": "Facility locations",
    "low_confidence": "Lowest confidence",
}


def dataset_seed(seed: int, name: str) -> int:
    """A 32-bit seed for one data set, from the run's seed and the data set's name."""
    return int(np.random.SeedSequence([int(seed) % (2**63), zlib.crc32(name.encode())]).generate_state(1)[0])


@dataclass
class DatasetOutcome:
    """Everything measured on one data set (inputs of the metrics, tables and figures)."""

    name: str
    split: Split
    black_box_info: Dict[str, Any]
    train_accuracy: float
    test_accuracy: float
    pseudo_r2: float
    pseudo_r2_eval: float
    test_confidence: np.ndarray  # (n_test,) confidence of the prediction
    test_predicted_coi: np.ndarray  # (n_test,) bool
    test_correct: np.ndarray  # (n_test,) bool
    eligible: np.ndarray  # indices into the test split
    distance: np.ndarray  # (n_eligible,) MAE to the adversarial partner
    flipped: np.ndarray  # (n_eligible,) bool
    steps: np.ndarray  # (n_eligible,)
    pool_size: int
    errors: Dict[str, np.ndarray] = field(default_factory=dict)  # search -> (R, B) bool
    confidence: Dict[str, np.ndarray] = field(default_factory=dict)  # search -> (R, B)
    sdr: Dict[str, np.ndarray] = field(default_factory=dict)  # search -> (R, B)
    example: Dict[str, np.ndarray] = field(default_factory=dict)  # first replicate's pool for Fig. 1
    seconds: Dict[str, float] = field(default_factory=dict)


def _scale(X: np.ndarray, how: str) -> np.ndarray:
    if how == "raw":
        return np.ones(X.shape[1])
    span = X.max(axis=0) - X.min(axis=0)
    return np.where(span > 0, span, 1.0)


def run_dataset(split: Split, params: GadParams, *, device: str = "auto", progress: Progress = None, seed: int = 0) -> DatasetOutcome:
    """Black box, Algorithm 1, Algorithm 2, GAD and every search over ``params.replicates`` pools for one split."""
    t0 = time.perf_counter()
    seconds: Dict[str, float] = {}
    bb, info = fit_estimator(params.estimator, split.X_train, split.y_train, seed=seed, svm=params.svm)
    coi = 1  # labels are re-coded so that the class of interest is 1 (datasets.py)
    classes = list(getattr(bb.estimator, "classes_", [0, 1]))
    if coi not in classes:
        raise DataError(f"{split.name}: the black box's classes {classes} do not include the class of interest (1)")
    ci = classes.index(coi)
    train_pred = np.asarray(classes)[bb.predict_proba(split.X_train).argmax(axis=1)]
    proba = bb.predict_proba(split.X_test)
    test_pred = np.asarray(classes)[proba.argmax(axis=1)]
    test_conf = proba.max(axis=1)
    correct = test_pred == split.y_test
    seconds["black_box"] = time.perf_counter() - t0

    t = time.perf_counter()
    ext = extract_pseudo_model(
        bb, split.X_test, class_index=ci, n_points=params.design_points, epochs=params.epochs,
        hidden=params.hidden_units, batch_size=params.batch_size, lr=params.lr,
        holdout_fraction=params.holdout_fraction, seed=seed, device=device, progress=progress,
    )
    seconds["extract"] = time.perf_counter() - t

    eligible = np.flatnonzero((test_pred == coi) & (test_conf > params.confidence_threshold))
    n_elig = len(eligible)
    pool_n = min(params.pool_size, int(np.floor(params.pool_max_fraction * n_elig)))
    if pool_n < params.budget:
        raise DataError(
            f"{split.name}: only {n_elig} test predictions of the class of interest have confidence > "
            f"{params.confidence_threshold}, so a pool holds {pool_n} < budget {params.budget}; enlarge n_test, "
            "lower gad.budget or raise gad.pool_max_fraction"
        )
    t = time.perf_counter()
    scale = _scale(split.X_test, params.feature_scale)
    X_el = split.X_test[eligible]
    att = gad_attack(
        bb, ext.model, X_el, class_index=ci, step_size=params.step_size, max_steps=params.max_steps,
        scale=scale, refine_iters=params.refine_iters, device=device, progress=progress,
    )
    dist = mae(X_el, att.x_adv, scale=scale)
    seconds["attack"] = time.perf_counter() - t

    t = time.perf_counter()
    err_el = ~correct[eligible]
    conf_el = test_conf[eligible]
    out = DatasetOutcome(
        name=split.name, split=split, black_box_info=info,
        train_accuracy=float((train_pred == split.y_train).mean()), test_accuracy=float(correct.mean()),
        pseudo_r2=ext.r2_design, pseudo_r2_eval=ext.r2_eval, test_confidence=test_conf,
        test_predicted_coi=test_pred == coi, test_correct=correct, eligible=eligible, distance=dist,
        flipped=att.flipped, steps=att.steps, pool_size=pool_n,
    )
    R, B = params.replicates, params.budget
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


def metrics_of(outcomes: List[DatasetOutcome]) -> Dict[str, Any]:
    """``metrics/gad.json``: per data set, mean SDR at the budget with its 95% interval, mean errors, R^2, accuracies."""
    m: Dict[str, Any] = {}
    for o in outcomes:
        sdr, ci, errs = {}, {}, {}
        for s, curve in o.sdr.items():
            mean, lo, hi = mean_ci95(curve[:, -1])
            sdr[s] = round(float(mean), 4)
            ci[s] = [round(float(lo), 4), round(float(hi), 4)]
            errs[s] = round(float(o.errors[s].sum(axis=1).mean()), 4)
        m[o.name] = {
            "sdr": sdr, "sdr_ci95": ci, "errors": errs, "pseudo_r2": round(float(o.pseudo_r2), 4),
            "train_accuracy": round(o.train_accuracy, 4), "test_accuracy": round(o.test_accuracy, 4),
        }
    return m


def tables_of(outcomes: List[DatasetOutcome], params: GadParams) -> Dict[str, Any]:
    import pandas as pd

    rows = []
    for o in outcomes:
        i = o.black_box_info
        rows.append({
            "dataset": o.name, "kernel": i.get("kernel"), "C": i.get("C"),
            "gamma": None if i.get("gamma") is None else str(i.get("gamma")),
            "train_accuracy": round(o.train_accuracy, 4), "test_accuracy": round(o.test_accuracy, 4),
            "pseudo_r2": round(o.pseudo_r2, 4), "pseudo_r2_eval": round(o.pseudo_r2_eval, 4),
            "N": params.design_points, "loess": "Log MAE" if o.split.log_mae else "MAE",
            "n_train": o.split.info["n_train"], "n_test": o.split.info["n_test"], "n_eligible": len(o.eligible),
            "pool_size": o.pool_size,
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
                    "dataset": o.name, "search": s, "query": q + 1, "sdr_mean": float(m[q]), "sdr_lo": float(lo[q]),
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
    """Figs. 1-5 of the paper for every data set."""
    figs: Dict[str, Any] = {}
    n = len(outcomes)
    colors = {s: f"C{i}" for i, s in enumerate(SEARCH_LABELS)}

    fig, axes = _grid(n)  # Fig. 3
    for ax, o in zip(axes, outcomes):
        q = np.arange(1, params.budget + 1)
        top = 0.0
        for s, curve in o.sdr.items():
            m, lo, hi = mean_ci95(curve)
            ax.plot(q, m, color=colors[s], label=SEARCH_LABELS[s])
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
        q = np.arange(1, params.budget + 1)
        for s, e in o.errors.items():
            m, lo, hi = mean_ci95(np.cumsum(e, axis=1))
            ax.plot(q, m, color=colors[s], label=SEARCH_LABELS[s])
            ax.fill_between(q, lo, hi, color=colors[s], alpha=0.15, linewidth=0)
        ax.set(title=o.name, xlabel="queries", ylabel="mean errors found (95% CI)")
    axes[0].legend(fontsize=7)
    figs["errors_found"] = fig

    fig, axes = _grid(n)  # Fig. 5
    for ax, o in zip(axes, outcomes):
        names = list(o.confidence)
        ax.boxplot([o.confidence[s].ravel() for s in names], showfliers=False)
        ax.set_xticks(range(1, len(names) + 1), [SEARCH_LABELS[s] for s in names], rotation=45, ha="right", fontsize=7)
        ax.set(title=o.name, ylabel="confidence of queried points")
    figs["confidence_boxplots"] = fig

    fig, axes = _grid(n)  # Fig. 2
    for ax, o in zip(axes, outcomes):
        sel = o.test_predicted_coi
        rel = reliability(o.test_confidence[sel], o.test_correct[sel], bins=params.reliability_bins)
        e = rel["edges"]
        w = e[1] - e[0]
        ok = rel["count"] > 0
        acc = np.where(ok, rel["accuracy"], 0.0)
        mid = 0.5 * (e[1:] + e[:-1])
        ax.bar(e[:-1], acc, width=w, align="edge", color="C0", alpha=0.7, edgecolor="k", label="observed accuracy")
        over = ok & (acc < mid)
        ax.bar(e[:-1][over], (mid - acc)[over], bottom=acc[over], width=w, align="edge", color="red", alpha=0.5, label="overconfidence")
        ax.plot([0.5, 1], [0.5, 1], "k--", lw=0.8)
        ax.set(title=f"{o.name} (class of interest)", xlabel="confidence", ylabel="accuracy", xlim=(0.5, 1), ylim=(0, 1))
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


def run_gad(params: "GadParams | dict", *, device: str = "auto", progress: Progress = None) -> StageResult:
    """Run the whole GAD stage on every data set in ``params.datasets``; one :class:`StageResult` for all of them.

    Parameters
    ----------
    params : GadParams or dict
        The ``gad`` section of params.yaml (a dict is validated; a bad key is a ConfigError).
    device : {"auto", "cpu", "cuda"}
        Where the pseudo-model trains and the attack's gradients run.
    progress : callable(message, done, total), optional
        Called as work advances (epochs, flips, replicates).

    Returns
    -------
    StageResult
        ``metrics`` is ``metrics/gad.json``: per data set ``{"sdr", "sdr_ci95", "errors", "pseudo_r2",
        "train_accuracy", "test_accuracy"}``; tables ``table_i`` and ``sdr_curves``; figures ``sdr_curves`` (Fig. 3),
        ``errors_found`` (Fig. 4), ``confidence_boxplots`` (Fig. 5), ``reliability`` (Fig. 2), ``loess_fit`` (Fig. 1).
    """
    if isinstance(params, dict):
        from pydantic import ValidationError

        from weakspot.errors import ConfigError

        try:
            params = GadParams.model_validate(params)
        except ValidationError as err:
            raise ConfigError(f"gad params: {err}") from None
    outcomes = []
    for ds in params.datasets:
        seed = dataset_seed(params.seed, ds.name)
        split = split_from_params(ds, keel_root=params.keel_root, seed=seed)
        outcomes.append(run_dataset(split, params, device=device, progress=progress, seed=seed))
    return result_of(outcomes, params)


def result_of(outcomes: List[DatasetOutcome], params: GadParams) -> StageResult:
    metrics = metrics_of(outcomes)
    summary = [
        "Generalized Adversarial Distance (Bennette et al., seeds/001) looks for predictions a black-box classifier "
        "makes with high confidence yet gets wrong. A pseudo-model is extracted from the black box's confidences on a "
        f"Latin hypercube of {params.design_points:,} points (Algorithm 1); each confident prediction is pushed across "
        "the black box's boundary by signed-gradient steps on it (Algorithm 2); GAD is how much less perturbation an "
        "instance needed than a LOESS fit on confidence expects (Eq. 2), and the search queries the lowest GAD first.",
        f"Protocol (Sec. V-C): {params.replicates} replicates, each a random pool of confident (> "
        f"{params.confidence_threshold}) predictions of the class of interest, {params.budget} queries per search, the "
        "ground truth as oracle. SDR (Eq. 1) is errors found over errors expected from the confidences: 1 means errors "
        "turn up as often as the confidence predicts, above 1 means the search found overconfidence. Caveat: where "
        "the black box's confidences approach 1 the expected count is tiny and one error makes SDR very large, so read "
        "SDR together with the errors found (Fig. 4) and the confidences queried (Fig. 5); Table I gives each data set's "
        "actual and expected error rates among the confident predictions, i.e. how much overconfidence there is to find.",
    ]
    for o in outcomes:
        mm = metrics[o.name]
        best = max(mm["sdr"], key=lambda s: mm["sdr"][s])
        parts = ", ".join(f"{SEARCH_LABELS[s]} {v:.2f} [{mm['sdr_ci95'][s][0]:.2f}, {mm['sdr_ci95'][s][1]:.2f}]" for s, v in mm["sdr"].items())
        summary.append(
            f"{o.name}: black box {o.black_box_info.get('kernel')} (train {o.train_accuracy:.0%}, test "
            f"{o.test_accuracy:.0%}), pseudo R^2 {o.pseudo_r2:.3f}; mean SDR after {params.budget} queries with 95% "
            f"intervals: {parts}. Highest: {SEARCH_LABELS[best]}."
        )
    items = [
        {"table": "table_i", "caption": "Table I: black box (kernel, C, gamma, accuracies), pseudo-model R^2 on held-out design points and on the test data, LOESS target, split and pool sizes, the error rate among confident predictions of the class of interest against the rate their confidences predict, and how many the attack never flipped."},
        {"figure": "sdr_curves", "caption": "Fig. 3: mean SDR after each query over the replicates, with 95% intervals; the dashed line is SDR = 1 (errors at the rate the confidence predicts)."},
        {"figure": "errors_found", "caption": "Fig. 4: mean number of errors found after each query."},
        {"figure": "confidence_boxplots", "caption": "Fig. 5: confidences of the queried points, per search."},
        {"figure": "reliability", "caption": "Fig. 2: reliability of the black box's predictions of the class of interest on the test split; red marks overconfidence."},
        {"figure": "loess_fit", "caption": "Fig. 1: (log-)MAE to the adversarial partner against confidence for the first replicate's pool, the LOESS fit F, the points GAD queries (gold) and the errors (red x)."},
        {"table": "sdr_curves", "caption": "SDR and errors found after each query, per data set and search (long format)."},
    ]
    return StageResult(
        metrics=metrics, tables=tables_of(outcomes, params), figures=figures_of(outcomes, params),
        title="GAD: black-box search for high-confidence errors", summary=summary, items=items,
    ).check()
