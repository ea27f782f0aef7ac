"""The classifier protocol every audit talks to, and the check of every probability output.

Caveats first: a model's answer is trusted only after :func:`check_probabilities` passed (shape ``(n, k)``,
finite, non-negative, rows summing to one within 1e-4); the adapters call it on every ``predict_proba``. A wrong
answer raises :class:`~weakspot.errors.ModelError` instead of producing a silent wrong number downstream.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

import numpy as np

from weakspot.errors import ModelError

SUM_TOLERANCE = 1e-4


@runtime_checkable
class Classifier(Protocol):
    """A black-box classifier: ``predict_proba(x) -> (n, k)`` probabilities and ``n_classes``."""

    n_classes: int

    def predict_proba(self, x: np.ndarray) -> np.ndarray:  # pragma: no cover - protocol
        ...


@runtime_checkable
class WhiteBoxClassifier(Classifier, Protocol):
    """A classifier whose logits and input gradients are available (a torch module)."""

    module: Any
    device: Any

    def logits(self, x: Any) -> Any:  # pragma: no cover - protocol
        ...

    def input_gradient(self, x: Any, target: Any) -> np.ndarray:  # pragma: no cover - protocol
        ...


def is_white_box(model: Any) -> bool:
    """True when ``model`` offers ``logits`` and ``input_gradient`` (see :class:`WhiteBoxClassifier`)."""
    return isinstance(model, WhiteBoxClassifier)


def check_probabilities(p: Any, n: int, n_classes: int, source: str) -> np.ndarray:
    """Validate a model's probability output and return it as a float64 array.

    Parameters
    ----------
    p : array-like
        The output of ``predict_proba`` for ``n`` inputs.
    n : int
        Number of inputs that were given.
    n_classes : int
        Number of classes ``k`` the model must score.
    source : str
        Names the model in the error message (e.g. ``"TorchClassifier(LeNet)"``).

    Returns
    -------
    numpy.ndarray
        ``p`` as float64 of shape ``(n, k)``.

    Raises
    ------
    ModelError
        Wrong shape (expected and got), NaN or inf, negative values, or rows whose sum is not 1 within 1e-4.

    Examples
    --------
    >>> check_probabilities([[0.25, 0.75]], 1, 2, "demo").shape
    (1, 2)
    """
    if hasattr(p, "detach"):  # a torch tensor
        p = p.detach().cpu().numpy()
    try:
        arr = np.asarray(p, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ModelError(
            f"{source}: predict_proba returned {type(p).__name__}, not numeric probabilities ({exc})"
        ) from None
    if arr.shape != (n, n_classes):
        raise ModelError(f"{source}: predict_proba returned shape {arr.shape}, expected (n, k) = ({n}, {n_classes})")
    finite = np.isfinite(arr)
    if not finite.all():
        rows = int((~finite).any(axis=1).sum())
        kinds = "NaN" if np.isnan(arr).any() else "inf"
        if np.isnan(arr).any() and np.isinf(arr).any():
            kinds = "NaN and inf"
        first = int(np.argmax((~finite).any(axis=1)))
        raise ModelError(f"{source}: predict_proba returned {kinds} in {rows} of {n} rows (first at row {first})")
    if (arr < 0).any():
        rows = int((arr < 0).any(axis=1).sum())
        raise ModelError(
            f"{source}: predict_proba returned negative values in {rows} of {n} rows (min {arr.min():.4g})"
        )
    if n:
        sums = arr.sum(axis=1)
        off = np.abs(sums - 1.0) > SUM_TOLERANCE
        if off.any():
            worst = int(np.argmax(np.abs(sums - 1.0)))
            raise ModelError(
                f"{source}: predict_proba rows must sum to 1 (tolerance {SUM_TOLERANCE}); {int(off.sum())} of {n} rows "
                f"do not, e.g. row {worst} sums to {sums[worst]:.6g} (are these logits? set outputs='logits')"
            )
    return arr
