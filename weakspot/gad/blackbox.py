"""The black box under audit, reachable only through ``predict_proba`` (seeds/001, Sec. III and V-A).

Caveats first: the prediction is always ``argmax`` of ``predict_proba`` (never the estimator's own ``predict``, which
for an SVC with Platt scaling can disagree with its probabilities), and the confidence is that row's maximum
probability. Every answer is checked: the wrong shape, NaNs or rows that are not probabilities raise
:class:`~weakspot.errors.ModelError`.
"""

from __future__ import annotations

import importlib
import warnings
from typing import Any, Dict, Optional, Sequence, Tuple, Union

import numpy as np

from weakspot.errors import ConfigError, ModelError


class BlackBox:
    """A thin wrapper that exposes a fitted classifier only through ``predict_proba``.

    Parameters
    ----------
    estimator : object
        Anything with ``predict_proba(X) -> (n, k)``; a plain callable ``f(X) -> (n, k)`` works too.
    n_classes : int, optional
        Expected number of columns (default: ``len(estimator.classes_)`` when present, else learnt from the first call).

    Examples
    --------
    >>> from sklearn.linear_model import LogisticRegression
    >>> import numpy as np
    >>> X = np.array([[0.0], [1.0], [2.0], [3.0]]); y = np.array([0, 0, 1, 1])
    >>> bb = BlackBox(LogisticRegression().fit(X, y))
    >>> bb.predict_proba(X).shape
    (4, 2)
    """

    def __init__(self, estimator: Any, *, n_classes: Optional[int] = None):
        fn = getattr(estimator, "predict_proba", None)
        if fn is None and callable(estimator):
            fn = estimator
        if fn is None:
            raise ModelError(f"black box {type(estimator).__name__} has no predict_proba(X) and is not callable")
        self.estimator = estimator
        self._fn = fn
        classes = getattr(estimator, "classes_", None)
        self.n_classes = n_classes if n_classes is not None else (len(classes) if classes is not None else None)
        self.n_calls_ = 0
        self.n_rows_ = 0

    def predict_proba(self, X: np.ndarray) -> np.ndarray:
        """Class probabilities, shape ``(n, n_classes)``, validated."""
        X = np.asarray(X, dtype=np.float64)
        if X.ndim != 2:
            raise ModelError(f"black box input must be (n, d), got shape {X.shape}")
        if len(X) == 0:
            return np.zeros((0, self.n_classes or 2))
        p = np.asarray(self._fn(X), dtype=np.float64)
        self.n_calls_ += 1
        self.n_rows_ += len(X)
        if p.ndim != 2 or p.shape[0] != len(X) or p.shape[1] < 2:
            raise ModelError(f"black box predict_proba returned shape {p.shape} for {len(X)} rows; expected ({len(X)}, n_classes>=2)")
        if self.n_classes is None:
            self.n_classes = p.shape[1]
        elif p.shape[1] != self.n_classes:
            raise ModelError(f"black box predict_proba returned {p.shape[1]} columns; expected {self.n_classes}")
        if not np.isfinite(p).all():
            raise ModelError("black box predict_proba returned NaN or inf")
        if (p < -1e-6).any() or (p > 1 + 1e-6).any() or not np.allclose(p.sum(axis=1), 1.0, atol=1e-3):
            raise ModelError("black box predict_proba rows are not probabilities (each must lie in [0, 1] and sum to 1)")
        return p

    def predict(self, X: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
        """``(prediction, confidence)``: argmax of ``predict_proba`` and its probability."""
        p = self.predict_proba(X)
        pred = p.argmax(axis=1)
        return pred, p[np.arange(len(p)), pred]


def fit_svm_grid(
    X: np.ndarray,
    y: np.ndarray,
    *,
    kernels: Sequence[str] = ("linear", "rbf"),
    C: Sequence[float] = (0.1, 1.0, 10.0),
    gamma: Sequence[Union[float, str]] = ("scale",),
    cv: int = 3,
    seed: int = 0,
) -> Tuple[BlackBox, Dict[str, Any]]:
    """SVM chosen by grid search over linear and RBF kernels (Sec. V-A, Table I), with ``probability=True``.

    Features are standardised inside the pipeline. The grid is searched on accuracy without Platt scaling (which
    only rescales the scores) and the winner is refitted with ``probability=True`` and ``random_state=seed``.

    Returns
    -------
    black_box : BlackBox
    info : dict with ``kernel``, ``C``, ``gamma`` (None for linear) and ``cv_accuracy``.
    """
    from sklearn.model_selection import GridSearchCV, StratifiedKFold
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler
    from sklearn.svm import SVC

    bad = [k for k in kernels if k not in ("linear", "rbf")]
    if bad or not kernels:
        raise ConfigError(f"svm kernels {list(kernels)}: allowed: linear, rbf")
    grid = []
    if "linear" in kernels:
        grid.append({"svc__kernel": ["linear"], "svc__C": list(C)})
    if "rbf" in kernels:
        grid.append({"svc__kernel": ["rbf"], "svc__C": list(C), "svc__gamma": list(gamma)})
    base = make_pipeline(StandardScaler(), SVC(max_iter=200_000))
    folds = StratifiedKFold(n_splits=cv, shuffle=True, random_state=seed)
    search = GridSearchCV(base, grid, cv=folds, scoring="accuracy", n_jobs=1, refit=False).fit(X, y)
    best = search.best_params_
    with warnings.catch_warnings():  # scikit-learn >= 1.9 deprecates probability=True (Platt scaling), still exact
        warnings.simplefilter("ignore", FutureWarning)
        model = make_pipeline(
            StandardScaler(),
            SVC(
                kernel=best["svc__kernel"], C=best["svc__C"], gamma=best.get("svc__gamma", "scale"),
                probability=True, random_state=seed, max_iter=200_000,
            ),
        ).fit(X, y)
    info = {
        "kernel": best["svc__kernel"],
        "C": float(best["svc__C"]),
        "gamma": best.get("svc__gamma") if best["svc__kernel"] == "rbf" else None,
        "cv_accuracy": float(search.best_score_),
    }
    return BlackBox(model), info


def fit_estimator(spec: str, X: np.ndarray, y: np.ndarray, *, seed: int = 0, svm: Any = None) -> Tuple[BlackBox, Dict[str, Any]]:
    """Fit the black box named in params: ``svm_grid`` or ``pkg.module:factory`` (a callable returning an estimator).

    The factory is called with no arguments (or ``random_state=seed`` when it accepts it); the estimator is fitted on
    ``(X, y)`` and must offer ``predict_proba``.
    """
    if spec == "svm_grid":
        kw = {} if svm is None else dict(kernels=svm.kernels, C=svm.C, gamma=svm.gamma, cv=svm.cv)
        return fit_svm_grid(X, y, seed=seed, **kw)
    module, _, attr = spec.partition(":")
    if not module or not attr:
        raise ConfigError(f"gad.estimator = {spec!r}: use 'svm_grid' or 'pkg.module:factory'")
    try:
        factory = getattr(importlib.import_module(module), attr)
    except (ImportError, AttributeError) as exc:
        raise ConfigError(f"gad.estimator = {spec!r}: cannot import: {exc}") from None
    try:
        est = factory(random_state=seed)
    except TypeError:
        est = factory()
    if not hasattr(est, "fit") or not hasattr(est, "predict_proba"):
        raise ModelError(f"gad.estimator = {spec!r} built {type(est).__name__}, which lacks fit() or predict_proba()")
    est.fit(X, y)
    return BlackBox(est), {"kernel": type(est).__name__, "C": None, "gamma": None, "cv_accuracy": None}
