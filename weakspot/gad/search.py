"""Searches for high-confidence errors behind one protocol: ``select(pool, budget, oracle) -> ordered indices``.

Caveats first: the baselines are re-implementations from the descriptions in seeds/001 (Sec. II-A) and what their
papers say, not the original code (which the GAD paper used); each class's docstring states its simplifications.
Every search is registered in :data:`SEARCHES`, the one list of valid names (the ``gad.searches`` check asks it);
a class's ``label`` names it in figures.
All searches only ever see the pool's features, the black box's confidences and -- for the adaptive ones -- the
oracle's answers for points already queried; ``gad`` also sees the adversarial distances. Features are standardised
within the pool for every distance-based step (a table's categorical column arrives as one indicator per category,
:meth:`weakspot.gad.datasets.Split.one_hot`). Ties are broken by index (stable sorts), so a search is
deterministic for its ``random_state``. k-means and the logistic meta-model are scikit-learn's (:func:`kmeans`,
:func:`fit_logistic`).

Example
-------
>>> import numpy as np
>>> pool = Pool(features=np.random.default_rng(0).normal(size=(30, 2)), confidence=np.linspace(0.66, 0.99, 30))
>>> order = SEARCHES.get("low_confidence")().select(pool, 5, oracle=lambda i: False)
>>> order.tolist()
[0, 1, 2, 3, 4]
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, List, Optional, Protocol

import numpy as np

from weakspot.errors import ConfigError, DataError
from weakspot.gad.loess import gad_scores
from weakspot.registry import Registry

Oracle = Callable[[int], bool]  # index into the pool -> True when the black box's prediction there is wrong

SEARCHES = Registry("search")


@dataclass
class Pool:
    """An unlabeled evaluation pool: features, the black box's confidences and (for GAD) adversarial distances."""

    features: np.ndarray  # (n, d)
    confidence: np.ndarray  # (n,) confidence of the prediction (of the class of interest)
    distance: Optional[np.ndarray] = None  # (n,) MAE to the adversarial partner (Eq. 3)
    flipped: Optional[np.ndarray] = None  # (n,) bool: the attack flipped the black box (else distance is censored)

    def __post_init__(self) -> None:
        self.features = np.asarray(self.features, dtype=np.float64)
        self.confidence = np.asarray(self.confidence, dtype=np.float64)
        if self.features.ndim != 2:
            raise DataError(f"Pool.features must be (n, d), got shape {self.features.shape}")
        n = len(self.features)
        if self.confidence.shape != (n,):
            raise DataError(f"Pool.confidence must have shape ({n},), got {self.confidence.shape}")
        if not np.isfinite(self.features).all():
            raise DataError("Pool.features holds NaN/inf")
        if not (np.isfinite(self.confidence).all() and (self.confidence >= 0).all() and (self.confidence <= 1).all()):
            raise DataError("Pool.confidence must lie in [0, 1]")
        if self.distance is not None:
            self.distance = np.asarray(self.distance, dtype=np.float64)
            if self.distance.shape != (n,) or not np.isfinite(self.distance).all():
                raise DataError(f"Pool.distance must be finite with shape ({n},), got {self.distance.shape}")
        if self.flipped is not None:
            self.flipped = np.asarray(self.flipped, dtype=bool)
            if self.flipped.shape != (n,):
                raise DataError(f"Pool.flipped must have shape ({n},), got {self.flipped.shape}")

    def __len__(self) -> int:
        return len(self.features)

    def standardized(self) -> np.ndarray:
        f = self.features
        sd = f.std(axis=0)
        return (f - f.mean(axis=0)) / np.where(sd > 0, sd, 1.0)


def _check(pool: Pool, budget: int) -> None:
    if not isinstance(pool, Pool):
        raise DataError(f"search: pool must be a weakspot.gad.search.Pool, got {type(pool).__name__}")
    if not 1 <= budget <= len(pool):
        raise ConfigError(f"search: budget = {budget}; must be between 1 and the pool size {len(pool)}")


def _sq_dists(z: np.ndarray) -> np.ndarray:
    sq = (z * z).sum(axis=1)
    return np.maximum(sq[:, None] + sq[None, :] - 2.0 * z @ z.T, 0.0)


def _similarity(z: np.ndarray, bandwidth: float) -> np.ndarray:
    """Gaussian similarity exp(-d^2 / 2h^2), h = bandwidth x the median pairwise distance."""
    d2 = _sq_dists(z)
    off = d2[~np.eye(len(z), dtype=bool)]
    med = float(np.sqrt(np.median(off))) if off.size else 1.0
    h = bandwidth * (med if med > 0 else 1.0)
    return np.exp(-d2 / (2.0 * h * h))


def kmeans(z: np.ndarray, k: int, rng: np.random.Generator) -> np.ndarray:
    """Labels of scikit-learn's k-means (k-means++ seeding, one initialisation, Lloyd iterations), seeded by one draw
    of ``rng``; ``k`` is capped at the number of distinct points."""
    from sklearn.cluster import KMeans

    k = max(1, min(int(k), len(np.unique(z, axis=0))))
    seed = int(rng.integers(2**31 - 1))
    return KMeans(n_clusters=k, n_init=1, random_state=seed).fit(z).labels_.astype(np.int64)


def fit_logistic(A: np.ndarray, t: np.ndarray, *, l2: float = 1.0) -> Any:
    """Ridge logistic regression of ``t`` (0/1) on ``A``: scikit-learn's, fitted by Newton-Cholesky.

    It minimises ``sum_i logloss_i + l2 / 2 * ||w||^2`` over the weights ``w`` and an intercept that is not
    penalised; scikit-learn minimises ``C * sum_i logloss_i + 1/2 * ||w||^2`` (its default L2 penalty; only the
    liblinear solver penalises the intercept), the same minimiser for ``C = 1 / l2``. Returns the fitted
    :class:`sklearn.linear_model.LogisticRegression`.
    """
    import sklearn
    from sklearn.linear_model import LogisticRegression

    # refitted after every query of a search (about 50 fits a pool): the inputs are checked by the caller, so skip
    # scikit-learn's own checks (about a seventh of a fit on these small problems)
    with sklearn.config_context(skip_parameter_validation=True, assume_finite=True):
        return LogisticRegression(C=1.0 / l2, solver="newton-cholesky", tol=1e-8, max_iter=100).fit(A, t)


def _logit(p: np.ndarray) -> np.ndarray:
    p = np.clip(p, 1e-6, 1 - 1e-6)
    return np.log(p / (1 - p))


@SEARCHES.register("gad")
class GADSearch:
    """Adversarial Distance search, Algorithm 3 of seeds/001: query the lowest GAD (Eq. 2) first.

    GAD is the residual of a LOESS fit of (log-)MAE to the adversarial partner on confidence, fitted on this pool
    (on its flipped instances when ``Pool.flipped`` is given; instances the attack never flipped are queried last).
    It does not adapt to the oracle's answers (the paper's Algorithm 3 only records them).

    Parameters
    ----------
    log : bool, default True
        LOESS on log-MAE (Table I: Phoneme, Pang04) or on MAE (Table I: Yeast).
    frac : float, default 2/3
        LOESS span (ours; the paper gives none).
    iterations : int, default 0
        Robustifying iterations of ``lowess``.
    """

    label = "GAD"  # name in figures and the report

    def __init__(self, *, log: bool = True, frac: float = 2.0 / 3.0, iterations: int = 0, random_state: int = 0):
        self.log = log
        self.frac = frac
        self.iterations = iterations
        self.random_state = random_state

    def scores(self, pool: Pool) -> np.ndarray:
        if pool.distance is None:
            raise DataError("gad search: the pool has no adversarial distances (Pool.distance); run the attack first")
        return gad_scores(
            pool.confidence,
            pool.distance,
            log=self.log,
            frac=self.frac,
            iterations=self.iterations,
            flipped=pool.flipped,
        )

    def select(self, pool: Pool, budget: int, oracle: Oracle) -> np.ndarray:
        _check(pool, budget)
        return np.argsort(self.scores(pool), kind="stable")[:budget]


@SEARCHES.register("random")
class RandomSearch:
    """Uniform random queries without replacement (Sec. V-C's random search)."""

    label = "Random"  # name in figures and the report

    def __init__(self, *, random_state: int = 0):
        self.random_state = random_state

    def select(self, pool: Pool, budget: int, oracle: Oracle) -> np.ndarray:
        _check(pool, budget)
        return np.random.default_rng(self.random_state).permutation(len(pool))[:budget]


@SEARCHES.register("low_confidence")
class LowConfidenceSearch:
    """Lowest confidence first (Sec. I: "inspect those predictions for which the classifier has low confidence")."""

    label = "Lowest confidence (not in the paper)"  # name in figures and the report: an extra baseline of ours

    def __init__(self, *, random_state: int = 0):
        self.random_state = random_state

    def select(self, pool: Pool, budget: int, oracle: Oracle) -> np.ndarray:
        _check(pool, budget)
        return np.argsort(pool.confidence, kind="stable")[:budget]


@SEARCHES.register("lakkaraju")
class LakkarajuSearch:
    """Lakkaraju et al. 2017 ("Identifying Unknown Unknowns in the Open World"): partitions + a multi-armed bandit.

    Each partition of the pool is an arm; a pull queries a random unqueried point of that arm, and the reward is the
    utility of the query: 1 for an error above the confidence threshold (an "unknown unknown"), 0 otherwise (the
    constant query cost of the original shifts every arm equally and so does not change the choice). Arms are chosen
    by a UCB index (UCB1; with ``discount < 1`` on discounted counts, for arms whose rewards drift as points are
    removed); each arm is pulled once first.

    Simplification: the original partitions by Descriptive Space Partitioning (interpretable patterns, homogeneous
    in confidence); here k-means on the standardised features plus the confidence column.

    Parameters
    ----------
    n_clusters : int, default 8
    exploration : float, default 2.0 (UCB1's constant)
    discount : float, default 1.0 (plain UCB1; the original's discounting factor is not given in seeds/001)
    threshold : float, default 0.65 (tau of Sec. I)
    random_state : int
    """

    label = "Lakkaraju et al."  # name in figures and the report

    def __init__(
        self,
        *,
        n_clusters: int = 8,
        exploration: float = 2.0,
        discount: float = 1.0,
        threshold: float = 0.65,
        random_state: int = 0,
    ):
        self.n_clusters = n_clusters
        self.exploration = exploration
        self.discount = discount
        self.threshold = threshold
        self.random_state = random_state

    def select(self, pool: Pool, budget: int, oracle: Oracle) -> np.ndarray:
        _check(pool, budget)
        rng = np.random.default_rng(self.random_state)
        z = np.hstack(
            [pool.standardized(), _logit(pool.confidence)[:, None] / max(_logit(pool.confidence).std(), 1e-9)]
        )
        labels = kmeans(z, self.n_clusters, rng)
        k = labels.max() + 1
        members = [list(rng.permutation(np.flatnonzero(labels == a))) for a in range(k)]
        n_disc = np.zeros(k)
        r_disc = np.zeros(k)
        first = list(rng.permutation(k))
        out: List[int] = []
        while len(out) < budget:
            alive = np.array([len(m) > 0 for m in members])
            untried = [a for a in first if alive[a] and n_disc[a] == 0]
            if untried:
                arm = int(untried[0])
            else:
                total = max(n_disc[alive].sum(), 1.0)
                with np.errstate(divide="ignore", invalid="ignore"):
                    ucb = r_disc / n_disc + np.sqrt(self.exploration * np.log(total + 1.0) / n_disc)
                arm = int(np.argmax(np.where(alive, ucb, -np.inf)))
            i = int(members[arm].pop())
            out.append(i)
            reward = float(bool(oracle(i)) and pool.confidence[i] > self.threshold)
            n_disc *= self.discount
            r_disc *= self.discount
            n_disc[arm] += 1.0
            r_disc[arm] += reward
        return np.asarray(out, dtype=np.int64)


@SEARCHES.register("bansal_weld")
class BansalWeldSearch:
    """Bansal & Weld 2018 ("A Coverage-Based Utility Model for Identifying Unknown Unknowns"): greedy coverage.

    Utility: the coverage of the pool by the discovered unknown unknowns, ``U(S) = mean_x max_{s in S} sim(x, s)``
    (a facility-location, submodular function). Each step greedily queries the point with the largest *expected*
    marginal coverage, ``phi(q) * sum_x max(0, sim(x, q) - cov(x))``, where ``phi`` is the probability that ``q`` is
    an unknown unknown, estimated per k-means cluster by a Beta posterior whose prior mean is the cluster's mean
    ``1 - confidence`` (``prior_strength`` pseudo-counts) and which is updated with the oracle's answers; coverage
    only grows when the queried point was an error above the threshold.

    Simplification: the original's similarity and cluster-prior details are replaced by a Gaussian kernel on the
    standardised features (width: ``bandwidth`` x the median pairwise distance) and this Beta-Bernoulli model.
    """

    label = "Bansal & Weld"  # name in figures and the report

    def __init__(
        self,
        *,
        n_clusters: int = 8,
        prior_strength: float = 2.0,
        bandwidth: float = 0.5,
        threshold: float = 0.65,
        random_state: int = 0,
    ):
        self.n_clusters = n_clusters
        self.prior_strength = prior_strength
        self.bandwidth = bandwidth
        self.threshold = threshold
        self.random_state = random_state

    def select(self, pool: Pool, budget: int, oracle: Oracle) -> np.ndarray:
        _check(pool, budget)
        rng = np.random.default_rng(self.random_state)
        z = pool.standardized()
        sim = _similarity(z, self.bandwidth)
        labels = kmeans(z, self.n_clusters, rng)
        k = labels.max() + 1
        size = np.bincount(labels, minlength=k).astype(np.float64)
        prior = np.bincount(labels, weights=1.0 - pool.confidence, minlength=k) / size
        alpha = self.prior_strength * prior
        beta = self.prior_strength * (1.0 - prior)
        cov = np.zeros(len(pool))
        queried = np.zeros(len(pool), dtype=bool)
        out = []
        for _ in range(budget):
            phi = (alpha / (alpha + beta))[labels]
            gain = np.maximum(sim - cov[None, :], 0.0).sum(axis=1) / len(pool)
            score = np.where(queried, -np.inf, phi * gain)
            i = int(np.argmax(score))
            queried[i] = True
            out.append(i)
            err = bool(oracle(i))
            alpha[labels[i]] += err
            beta[labels[i]] += not err
            if err and pool.confidence[i] > self.threshold:
                cov = np.maximum(cov, sim[i])
        return np.asarray(out, dtype=np.int64)


@SEARCHES.register("facility_location")
class FacilityLocationSearch:
    """Maurer & Bennette 2019 ("Facility Locations Utility for Uncovering Classifier Overconfidence"): greedy search.

    Utility: SDR-style excess error (errors found relative to ``1 - confidence``) combined with a facility-locations
    diversity award, the coverage of the pool by the queried points ``mean_x max_q sim(x, q)``. Each step greedily
    queries the point with the largest ``pi(q) / (1 - p_q) * Delta_cover(q)``: the meta-model's error probability over
    the error the black box itself expects there, times the marginal coverage. ``pi`` is a logistic-regression
    meta-model of P(error | standardised features, logit confidence), ridge-penalised (:func:`fit_logistic`) on the
    points queried so far. Until both an error and a correct prediction have been seen it cannot be fitted and
    ``pi = 1 - p``, so the search starts as pure facility-location coverage -- the slow start the GAD paper notes
    (Sec. V-C) -- and exploits the meta-model once it has errors to learn from.

    Simplification: the original's exact utility weights and meta-model covariates are not given in seeds/001; the
    above keeps its three parts (facility-location diversity, SDR-style excess error, logistic meta-model).
    """

    label = "Facility locations"  # name in figures and the report

    def __init__(self, *, bandwidth: float = 0.5, l2: float = 1.0, random_state: int = 0):
        self.bandwidth = bandwidth
        self.l2 = l2
        self.random_state = random_state

    def select(self, pool: Pool, budget: int, oracle: Oracle) -> np.ndarray:
        _check(pool, budget)
        z = pool.standardized()
        p = pool.confidence
        expected = np.maximum(1.0 - p, 1e-6)
        sim = _similarity(z, self.bandwidth)
        A = np.hstack([z, _logit(p)[:, None]])
        cov = np.zeros(len(pool))
        queried = np.zeros(len(pool), dtype=bool)
        errs: list = []
        out: list = []
        ratio = np.ones(len(pool))
        for _ in range(budget):
            gain = np.maximum(sim - cov[None, :], 0.0).sum(axis=1) / len(pool)
            score = np.where(queried, -np.inf, ratio * gain)
            i = int(np.argmax(score))
            queried[i] = True
            out.append(i)
            cov = np.maximum(cov, sim[i])
            errs.append(bool(oracle(i)))
            if 0 < sum(errs) < len(errs):
                pi = fit_logistic(A[out], np.asarray(errs, dtype=np.int64), l2=self.l2).predict_proba(A)[:, 1]
                ratio = pi / expected
        return np.asarray(out, dtype=np.int64)


class Search(Protocol):
    """What every registered search provides: ``select(pool, budget, oracle) -> ordered indices``."""

    def select(self, pool: Pool, budget: int, oracle: Oracle) -> np.ndarray: ...


def search_label(name: str) -> str:
    """A registered search's display name (its class's ``label``, else the registry name)."""
    return str(getattr(SEARCHES.get(name), "label", name))


def make_search(name: str, **kwargs) -> Search:
    """Instantiate a registered search, passing only the keyword arguments its ``__init__`` accepts."""
    import inspect

    cls = SEARCHES.get(name)
    accepted = set(inspect.signature(cls.__init__).parameters)
    return cls(**{k: v for k, v in kwargs.items() if k in accepted})
