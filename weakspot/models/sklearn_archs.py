"""Built-in scikit-learn architectures: ``fit(X_train, y_train, *, seed, **options) -> (fitted estimator, info)``.

Caveats first: these return a *plain* fitted scikit-learn estimator (wrap it in
:class:`~weakspot.models.SklearnClassifier` to get checked probabilities); ``info`` is a JSON-able dict of what was
chosen (for Table I of seeds/001). The SVM grid is the GAD paper's black box (Sec. V-A, Table I "Kernel"); the grid
values are ours (the paper gives none).

Add one with the decorator::

    from weakspot.models import register_sklearn_arch

    @register_sklearn_arch("forest")
    def fit_forest(X, y, *, seed, n_estimators=200):
        from sklearn.ensemble import RandomForestClassifier
        est = RandomForestClassifier(n_estimators=n_estimators, random_state=seed).fit(X, y)
        return est, {"arch": "forest", "n_estimators": n_estimators}

Example
-------
>>> import numpy as np
>>> X = np.random.default_rng(0).normal(size=(60, 2)); y = (X[:, 0] > 0).astype(int)
>>> est, info = SKLEARN_ARCHS.get("svm_grid")(X, y, seed=0, kernels=["linear"], C=[1.0])
>>> info["kernel"], est.predict_proba(X).shape
('linear', (60, 2))
"""

from __future__ import annotations

import inspect
import warnings
from typing import Any, Callable, Dict, Mapping, Sequence, Tuple, Union

import numpy as np

from weakspot.errors import ConfigError, ModelError
from weakspot.registry import Registry

SKLEARN_ARCHS = Registry("scikit-learn architecture")
"""name -> ``fit(X_train, y_train, *, seed, **options) -> (fitted_estimator, info_dict)``."""


def register_sklearn_arch(name: str) -> Callable:
    """Decorator that adds a scikit-learn architecture, usable as ``SKLEARN_ARCHS.get(name)``."""
    return SKLEARN_ARCHS.register(name)


SVM_KERNELS = ("linear", "rbf")


def fit_svm_grid(
    X: np.ndarray,
    y: np.ndarray,
    *,
    seed: int = 0,
    kernels: Sequence[str] = ("linear", "rbf"),
    C: Sequence[float] = (0.1, 1.0, 10.0),
    gamma: Sequence[Union[float, str]] = ("scale",),
    cv: int = 3,
) -> Tuple[Any, Dict[str, Any]]:
    """SVM chosen by grid search over linear and RBF kernels (seeds/001 Sec. V-A, Table I), with ``probability=True``.

    Features are standardised inside the pipeline (``StandardScaler`` then ``SVC``). The grid is searched on accuracy
    (stratified ``cv``-fold, shuffled with ``seed``) without Platt scaling (which only rescales the scores) and the
    winner is refitted on all of ``(X, y)`` with ``probability=True`` and ``random_state=seed``.

    Parameters
    ----------
    X, y : training features (n, d) and labels (n,)
    seed : int
        Seeds the folds and Platt scaling's internal cross-validation.
    kernels : subset of {"linear", "rbf"}, default both (Sec. V-A)
    C : positive floats, default (0.1, 1, 10) (ours)
    gamma : floats or "scale" (RBF only), default ("scale",) (ours: libsvm's 1/(d var) on standardised features)
    cv : int in 2..10, default 3 (ours)

    Returns
    -------
    estimator : sklearn.pipeline.Pipeline, fitted, with ``predict_proba`` and ``classes_``
    info : dict with ``arch`` ("svm_grid"), ``kernel``, ``C``, ``gamma`` (None for linear), ``cv_accuracy``.
    """
    from sklearn.model_selection import GridSearchCV, StratifiedKFold
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler
    from sklearn.svm import SVC

    kernels = list(kernels)
    bad = [k for k in kernels if k not in SVM_KERNELS]
    if bad or not kernels:
        raise ConfigError(f"svm_grid kernels {kernels}: allowed: {', '.join(SVM_KERNELS)} (at least one)")
    C = [float(c) for c in C]
    if not C or any(c <= 0 for c in C):
        raise ConfigError(f"svm_grid C {C}: give one or more values > 0")
    gamma = list(gamma)
    if not gamma:
        raise ConfigError("svm_grid gamma: give one or more values (a float > 0 or 'scale')")
    if isinstance(cv, bool) or not isinstance(cv, (int, np.integer)) or not 2 <= cv <= 10:
        raise ConfigError(f"svm_grid cv = {cv!r}: an integer in 2..10")
    grid = []
    if "linear" in kernels:
        grid.append({"svc__kernel": ["linear"], "svc__C": C})
    if "rbf" in kernels:
        grid.append({"svc__kernel": ["rbf"], "svc__C": C, "svc__gamma": gamma})
    base = make_pipeline(StandardScaler(), SVC(max_iter=200_000))
    folds = StratifiedKFold(n_splits=int(cv), shuffle=True, random_state=seed)
    search = GridSearchCV(base, grid, cv=folds, scoring="accuracy", n_jobs=1, refit=False).fit(X, y)
    best = search.best_params_
    with warnings.catch_warnings():  # scikit-learn >= 1.9 deprecates probability=True (Platt scaling), still exact
        warnings.simplefilter("ignore", FutureWarning)
        model = make_pipeline(
            StandardScaler(),
            SVC(
                kernel=best["svc__kernel"],
                C=best["svc__C"],
                gamma=best.get("svc__gamma", "scale"),
                probability=True,
                random_state=seed,
                max_iter=200_000,
            ),
        ).fit(X, y)
    info = {
        "arch": "svm_grid",
        "kernel": best["svc__kernel"],
        "C": float(best["svc__C"]),
        "gamma": best.get("svc__gamma") if best["svc__kernel"] == "rbf" else None,
        "cv_accuracy": float(search.best_score_),
    }
    return model, info


register_sklearn_arch("svm_grid")(fit_svm_grid)


def fit_sklearn_factory(factory: str, X: np.ndarray, y: np.ndarray, *, seed: int = 0) -> Tuple[Any, Dict[str, Any]]:
    """Build an estimator from ``"pkg.module:factory"`` (via :func:`weakspot.models.spec.resolve_factory`), fit it.

    The factory is called with ``random_state=seed`` when its signature accepts it, else with no arguments; the
    estimator must offer ``fit`` and ``predict_proba``.

    Returns
    -------
    estimator : the fitted estimator
    info : dict with ``arch`` (the factory string) and ``kernel`` (the estimator's class name, for Table I).
    """
    from weakspot.models.spec import resolve_factory

    fn = resolve_factory(factory)
    try:
        params: Mapping[str, inspect.Parameter] = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        params = {}
    takes_seed = "random_state" in params or any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())
    est = fn(random_state=seed) if takes_seed else fn()
    if not hasattr(est, "fit") or not hasattr(est, "predict_proba"):
        raise ModelError(f"factory {factory!r} built {type(est).__name__}, which lacks fit() or predict_proba()")
    est.fit(X, y)
    return est, {"arch": factory, "kernel": type(est).__name__, "C": None, "gamma": None, "cv_accuracy": None}
