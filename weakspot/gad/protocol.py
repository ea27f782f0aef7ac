"""The protocol of Sec. V-C of seeds/001 on one target (model + splits) and one split seed: :func:`run_target`.

Caveats first:

* GAD audits a model it is given (:func:`run_target`); it only ever calls ``clf.predict_proba`` (black box). Labels
  are the target's class codes; the class of interest is ``class_index``. The ground truth is used only to play the
  oracle of the protocol and to grade findings, never by the searches' scores.
* A pool is drawn from the *eligible* test instances -- predicted as the class of interest with confidence above
  ``confidence_threshold`` (0.65) -- as ``min(pool_size, pool_max_fraction x eligible)`` of them, so that on a small
  test set (Yeast) the replicates still differ; the pool size actually used is in Table I.
* The attack and the adversarial distances are computed once for every eligible instance (an instance's partner does
  not depend on the pool); the LOESS curve ``F`` and so GAD are refitted on every pool, as Eq. 2 prescribes, and
  once on all eligible instances for the findings (:mod:`weakspot.gad.findings`).
* Seeds for the design, the network and the pools come from ``seed`` (:func:`dataset_seed` derives one per target
  from the run's seed and the target's name), so a run is reproducible and targets are independent.
* What varies: one :func:`run_target` is one split and one black box. :func:`weakspot.gad.run.run` repeats it over
  split seeds (``gad.seeds``, :mod:`weakspot.gad.seeds`); :mod:`weakspot.gad.stats` pools the runs of a target.
* GAD's numbers mean something only where the pseudo-model mimics the black box: where its R^2 (the lower of
  held-out design points and the evaluation data) is below ``min_pseudo_r2``, :attr:`DatasetOutcome.gad_reliable`
  is False and the report withholds GAD's SDR.
"""

from __future__ import annotations

import time
import zlib
from dataclasses import dataclass, field
from typing import Any, Dict, Optional, Tuple

import numpy as np

from weakspot.errors import ConfigError, DataError
from weakspot.gad.attack import attack_distances
from weakspot.gad.config import GadParams
from weakspot.gad.datasets import Split
from weakspot.gad.extract import extract_pseudo_model
from weakspot.gad.loess import gad_scores
from weakspot.gad.sdr import sdr_curve
from weakspot.gad.search import Pool, make_search
from weakspot.gad.unlabelled import UnlabelledRows, score_unlabelled
from weakspot.progress import Progress

#: fewest queries per search for which the Sec. V-C protocol still runs (ours)
MIN_BUDGET = 10


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
    unlabelled: Optional[UnlabelledRows] = None  # the unlabelled part's scores, when the target has one

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
    """Each feature's step unit: its range over the observed values (``range``; 1 where constant or never observed)
    or 1 (``raw``)."""
    if how == "raw":
        return np.ones(X.shape[1])
    seen = ~np.isnan(X)
    span = np.where(seen, X, -np.inf).max(axis=0) - np.where(seen, X, np.inf).min(axis=0)
    return np.where(seen.any(axis=0) & (span > 0), span, 1.0)


def _predictions(clf: Any, split: Split, class_index: Any) -> Tuple[int, float, np.ndarray, np.ndarray, np.ndarray]:
    """Check the black box and the split, then its predictions: ``(n_classes, train accuracy, test prediction, test
    confidence, test correct)`` (train accuracy NaN without training rows)."""
    k = int(getattr(clf, "n_classes", 0) or 0)
    if not callable(getattr(clf, "predict_proba", None)) or k < 2:
        raise ConfigError(
            f"{split.name}: the model must offer predict_proba(X) and n_classes >= 2, got {type(clf).__name__}"
        )
    if isinstance(class_index, bool) or not isinstance(class_index, (int, np.integer)) or not 0 <= class_index < k:
        raise ConfigError(f"{split.name}: class_index = {class_index!r}; must be a class code in 0..{k - 1}")
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
    return k, train_acc, test_pred, proba.max(axis=1), test_pred == y_test


def _pool_size(params: GadParams, n_eligible: int, split: Split, class_index: int) -> int:
    """Rows per pool: ``min(pool_size, pool_max_fraction x eligible)``, refused below a usable budget."""
    pool_n = min(params.pool_size, int(np.floor(params.pool_max_fraction * n_eligible)))
    # A small test split (a user's table) cannot fill a pool of `budget` queries: the searches then get as many
    # queries as a pool holds (labelled as such in metrics, Table I and the headline); below MIN_BUDGET, no protocol.
    if pool_n < min(params.budget, MIN_BUDGET):
        raise DataError(
            f"{split.name}: only {n_eligible} test predictions of the class of interest "
            f"({split.class_name(class_index)!r}) have confidence > {params.confidence_threshold}, so a pool holds "
            f"{pool_n} < {min(params.budget, MIN_BUDGET)} queries; enlarge the test split (data.fractions) or raise "
            "gad.pool_max_fraction"
        )
    return pool_n


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
    if len(split.categorical) >= len(split.feature_names):
        raise DataError(f"{split.name}: every feature is categorical; GAD's attack moves numeric features only")
    k, train_acc, test_pred, test_conf, correct = _predictions(clf, split, class_index)
    ci = int(class_index)
    X_test = np.asarray(split.X_test, dtype=np.float64)
    seconds["black_box"] = time.perf_counter() - t0

    t = time.perf_counter()
    ext = extract_pseudo_model(
        clf,
        X_test,
        class_index=ci,
        n_points=params.design_points,
        epochs=params.epochs,
        hidden=params.hidden_units,
        batch_size=params.batch_size,
        lr=params.lr,
        holdout_fraction=params.holdout_fraction,
        data_fraction=params.design_data_fraction,
        jitter=params.design_jitter,
        seed=seed,
        device=device,
        progress=progress,
        fixed=split.categorical,
    )
    seconds["extract"] = time.perf_counter() - t

    eligible = np.flatnonzero((test_pred == ci) & (test_conf > params.confidence_threshold))
    pool_n = _pool_size(params, len(eligible), split, ci)
    t = time.perf_counter()
    scale = _scale(X_test, params.feature_scale)
    X_el = X_test[eligible]
    att, dist = attack_distances(
        clf, ext.model, X_el, split=split, params=params, class_index=ci, scale=scale, device=device, progress=progress
    )
    seconds["attack"] = time.perf_counter() - t

    t = time.perf_counter()
    gad_all = gad_scores(
        test_conf[eligible],
        dist,
        log=split.log_mae,
        frac=params.loess_frac,
        iterations=params.loess_iterations,
        flipped=att.flipped,
    )
    out = DatasetOutcome(
        name=split.name,
        split=split,
        black_box_info=dict(model_info) if model_info else {"model": repr(clf)},
        class_index=ci,
        n_classes=k,
        train_accuracy=train_acc,
        test_accuracy=float(correct.mean()),
        pseudo_r2=ext.r2_design,
        pseudo_r2_eval=ext.r2_eval,
        test_prediction=test_pred,
        test_confidence=test_conf,
        test_predicted_coi=test_pred == ci,
        test_correct=correct,
        eligible=eligible,
        distance=dist,
        flipped=att.flipped,
        steps=att.steps,
        gad=gad_all,
        confidence_threshold=params.confidence_threshold,
        pool_size=pool_n,
        budget=min(params.budget, pool_n),
        split_seed=int(split_seed),
        min_pseudo_r2=params.min_pseudo_r2,
        pools=np.zeros((params.replicates, pool_n), dtype=np.int64),
    )
    _search_pools(out, split.one_hot(X_el), params, seed=seed, progress=progress)
    seconds["searches"] = time.perf_counter() - t
    if split.X_unlabelled is not None and len(split.X_unlabelled):
        t = time.perf_counter()
        out.unlabelled = score_unlabelled(
            clf,
            ext.model,
            split.X_unlabelled,
            split=split,
            params=params,
            class_index=ci,
            scale=scale,
            device=device,
            progress=progress,
        )
        seconds["unlabelled"] = time.perf_counter() - t
    seconds["total"] = time.perf_counter() - t0
    out.seconds = seconds
    return out


def _search_pools(
    out: DatasetOutcome, X_el: np.ndarray, params: GadParams, *, seed: int, progress: Optional[Progress]
) -> None:
    """Sec. V-C's replicates on ``out`` (filled in place): per replicate a random pool of the eligible rows, every
    search's ``budget`` queries on it with the ground truth as oracle, then each search's SDR curve (Eq. 1)."""
    split = out.split
    err_el = ~out.test_correct[out.eligible]
    conf_el = out.test_confidence[out.eligible]
    R, B = params.replicates, out.budget
    for s in params.searches:
        out.errors[s] = np.zeros((R, B), dtype=bool)
        out.confidence[s] = np.zeros((R, B))
    rng = np.random.default_rng(seed)
    sp = params.search
    kwargs = dict(
        log=split.log_mae,
        frac=params.loess_frac,
        iterations=params.loess_iterations,
        threshold=params.confidence_threshold,
        bandwidth=sp.bandwidth,
        l2=sp.facility_l2,
        exploration=sp.lakkaraju_exploration,
        discount=sp.lakkaraju_discount,
        prior_strength=sp.bansal_weld_prior_strength,
    )
    for r in range(R):
        idx = np.sort(rng.choice(len(out.eligible), size=out.pool_size, replace=False))  # the eligible rows only
        out.pools[r] = idx
        pool = Pool(features=X_el[idx], confidence=conf_el[idx], distance=out.distance[idx], flipped=out.flipped[idx])
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
                out.example = _loess_example(search, pool, order, err_pool, log=split.log_mae)
        if progress is not None:
            progress(f"{split.name} seed {out.split_seed}: replicates", r + 1, R)
    for s in params.searches:
        out.sdr[s] = sdr_curve(out.errors[s], out.confidence[s])


def _loess_example(
    search: Any, pool: Pool, order: np.ndarray, err_pool: np.ndarray, *, log: bool
) -> Dict[str, np.ndarray]:
    """Fig. 1's data for one pool: the (log-)MAE target against confidence, the pool's own LOESS fit, the rows GAD
    queried and the errors (flipped rows only: GAD is finite there)."""
    assert pool.distance is not None  # the protocol's pools carry the attack's distances
    target = np.log(np.maximum(pool.distance, 1e-12)) if log else pool.distance
    gad = search.scores(pool)
    fin = np.isfinite(gad)
    return {
        "confidence": pool.confidence[fin],
        "target": target[fin],
        "fitted": (target - gad)[fin],
        "chosen": np.flatnonzero(np.isin(np.flatnonzero(fin), order)),
        "error": err_pool[fin],
    }
