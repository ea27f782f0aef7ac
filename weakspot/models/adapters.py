"""Adapters that make a torch module, a scikit-learn estimator or any callable a :class:`Classifier`.

Caveats first: every ``predict_proba`` output passes :func:`check_probabilities` (a wrong shape, NaN, negative
values or rows not summing to one raise :class:`~weakspot.errors.ModelError`). Only :class:`TorchClassifier` is
white-box (``logits``, ``input_gradient``); a torch module that outputs probabilities gets ``log p`` as its logits
(equal to the true logits up to a per-row constant, so softmax and every gradient of a softmax loss agree).
scikit-learn estimators see inputs flattened to ``(n, -1)``, or the DataFrame a table model is given.
"""

from __future__ import annotations

from typing import Any, Callable, Literal, Optional

import numpy as np

from weakspot.errors import ConfigError, ModelError
from weakspot.models.protocol import check_probabilities

Outputs = Literal["logits", "probs"]


def _check_batch_size(batch_size: Any) -> int:
    if isinstance(batch_size, bool) or not isinstance(batch_size, (int, np.integer)) or batch_size < 1:
        raise ConfigError(f"batch_size must be a positive integer, got {batch_size!r}")
    return int(batch_size)


def _check_n_classes(n_classes: Any) -> int:
    if isinstance(n_classes, bool) or not isinstance(n_classes, (int, np.integer)) or n_classes < 2:
        raise ConfigError(f"n_classes must be an integer >= 2, got {n_classes!r}")
    return int(n_classes)


class TorchClassifier:
    """White-box adapter for a ``torch.nn.Module`` mapping a batch of inputs to logits (or probabilities).

    Parameters
    ----------
    module : torch.nn.Module
        Maps a float32 batch shaped like the data (``(n, C, H, W)`` or ``(n, d)``) to ``(n, k)``.
    n_classes : int
        ``k``; every output is checked against it.
    device : {"auto", "cpu", "cuda"} or torch.device, default "auto"
        Where the module runs (``auto`` = CUDA when present).
    batch_size : int, default 512
        Inputs per forward pass in ``predict_proba`` and ``input_gradient``.
    outputs : {"logits", "probs"}, default "logits"
        What the module returns; ``logits`` are turned into probabilities with a softmax.

    Notes
    -----
    The module is moved to ``device`` and put in eval mode when the adapter is made (``input_gradient`` too runs
    it in eval mode, so dropout and batch norm behave as at inference).

    Examples
    --------
    >>> import torch, numpy as np
    >>> clf = TorchClassifier(torch.nn.Linear(3, 2), n_classes=2, device="cpu")
    >>> clf.predict_proba(np.zeros((4, 3), np.float32)).shape
    (4, 2)
    """

    def __init__(
        self, module: Any, *, n_classes: int, device: Any = "auto", batch_size: int = 512, outputs: Outputs = "logits"
    ):
        import torch

        from weakspot.device import resolve_device

        if not isinstance(module, torch.nn.Module):
            raise ModelError(f"TorchClassifier needs a torch.nn.Module, got {type(module).__name__}")
        if outputs not in ("logits", "probs"):
            raise ConfigError(f"outputs must be 'logits' or 'probs', got {outputs!r}")
        self.n_classes = _check_n_classes(n_classes)
        self.batch_size = _check_batch_size(batch_size)
        self.outputs = outputs
        self.device = device if isinstance(device, torch.device) else resolve_device(device)
        self.module = module.to(self.device).eval()
        self.name = f"TorchClassifier({type(module).__name__})"

    def _tensor(self, x: Any) -> "Any":
        import torch

        if isinstance(x, torch.Tensor):
            return x.to(self.device, dtype=torch.float32)
        arr = np.asarray(x)
        if not np.issubdtype(arr.dtype, np.number):
            raise ModelError(f"{self.name}: inputs must be numeric, got dtype {arr.dtype}")
        return torch.as_tensor(np.ascontiguousarray(arr, dtype=np.float32), device=self.device)

    def _forward(self, xb: "Any") -> "Any":
        out = self.module(xb)
        if not hasattr(out, "shape") or tuple(out.shape) != (xb.shape[0], self.n_classes):
            got = tuple(out.shape) if hasattr(out, "shape") else type(out).__name__
            raise ModelError(
                f"{self.name}: module returned shape {got}, expected (n, k) = ({xb.shape[0]}, {self.n_classes})"
            )
        return out

    def logits(self, x: Any) -> "Any":
        """Differentiable ``(n, k)`` logits of a batch on ``self.device`` (``log p`` for a probability module)."""
        import torch

        out = self._forward(self._tensor(x))
        if self.outputs == "probs":
            out = torch.log(out.clamp_min(torch.finfo(out.dtype).tiny))
        return out

    def predict_proba(self, x: Any) -> np.ndarray:
        """``(n, k)`` float64 probabilities, computed in batches of ``batch_size`` without gradients."""
        import torch

        n = int(x.shape[0]) if hasattr(x, "shape") else len(x)
        chunks = []
        with torch.no_grad():
            for start in range(0, n, self.batch_size):
                out = self._forward(self._tensor(x[start : start + self.batch_size]))
                if self.outputs == "logits":
                    out = torch.softmax(out.float(), dim=1)
                chunks.append(out.double().cpu())
        p = torch.cat(chunks).numpy() if chunks else np.zeros((0, self.n_classes))
        return check_probabilities(p, n, self.n_classes, self.name)

    def predict(self, x: Any) -> np.ndarray:
        """Most probable class per input, int64."""
        return self.predict_proba(x).argmax(axis=1).astype(np.int64)

    def input_gradient(self, x: Any, target: Any) -> np.ndarray:
        """Gradient of each sample's cross-entropy loss for class ``target`` with respect to its input.

        Parameters
        ----------
        x : array or tensor, shape ``(n, ...)``
        target : int or int array of shape ``(n,)``
            The class whose loss ``-log p_target`` is differentiated (the true label for an attack that moves
            away from it, a wanted label for a targeted one).

        Returns
        -------
        numpy.ndarray
            float32, the same shape as ``x``; row ``i`` is ``d(-log p_{target_i}(x_i)) / d x_i``.
        """
        import torch

        n = int(x.shape[0]) if hasattr(x, "shape") else len(x)
        t = np.broadcast_to(np.asarray(target.detach().cpu() if hasattr(target, "detach") else target), (n,))
        if not np.issubdtype(t.dtype, np.integer) or (n and (t.min() < 0 or t.max() >= self.n_classes)):
            raise ModelError(f"{self.name}: target must hold class indices in 0..{self.n_classes - 1}, got {t[:5]}...")
        grads = []
        was_training = self.module.training
        self.module.eval()
        try:
            for start in range(0, n, self.batch_size):
                xb = self._tensor(x[start : start + self.batch_size]).detach().clone().requires_grad_(True)
                tb = torch.as_tensor(t[start : start + self.batch_size].astype(np.int64), device=self.device)
                loss = torch.nn.functional.cross_entropy(self.logits(xb), tb, reduction="sum")
                (g,) = torch.autograd.grad(loss, xb)
                grads.append(g.detach().float().cpu())
        finally:
            self.module.train(was_training)
        shape = tuple(x.shape)
        return torch.cat(grads).numpy() if grads else np.zeros(shape, np.float32)

    def __repr__(self) -> str:
        return f"{self.name}(n_classes={self.n_classes}, device={self.device}, outputs={self.outputs!r})"


class SklearnClassifier:
    """Black-box adapter for a fitted scikit-learn estimator with ``predict_proba``.

    Parameters
    ----------
    estimator : fitted estimator
        Must have ``predict_proba`` and ``classes_``. Inputs are flattened to ``(n, -1)`` before it sees them.
    n_classes : int, optional
        The data set's number of classes. When the estimator saw only some classes (integer ``classes_`` in
        ``0..n_classes-1``), its columns are placed at those class codes and the missing classes get probability 0.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.linear_model import LogisticRegression
    >>> est = LogisticRegression().fit(np.array([[0.0], [1.0]]), [0, 1])
    >>> SklearnClassifier(est).predict_proba(np.array([[0.2]])).shape
    (1, 2)
    """

    def __init__(self, estimator: Any, *, n_classes: Optional[int] = None):
        name = type(estimator).__name__
        if not callable(getattr(estimator, "predict_proba", None)):
            raise ModelError(
                f"SklearnClassifier needs an estimator with predict_proba; {name} has none "
                "(for SVC set probability=True)"
            )
        classes = getattr(estimator, "classes_", None)
        if classes is None:
            raise ModelError(f"SklearnClassifier: {name} is not fitted (it has no classes_); fit it first")
        classes = np.asarray(classes)
        self.estimator = estimator
        self.name = f"SklearnClassifier({name})"
        self.n_classes = _check_n_classes(len(classes) if n_classes is None else n_classes)
        self._columns: Optional[np.ndarray] = None
        if len(classes) != self.n_classes or (
            np.issubdtype(classes.dtype, np.integer) and not np.array_equal(classes, np.arange(self.n_classes))
        ):
            if not np.issubdtype(classes.dtype, np.integer) or classes.min() < 0 or classes.max() >= self.n_classes:
                raise ModelError(
                    f"{self.name}: classes_ {classes.tolist()} cannot be mapped onto class codes "
                    f"0..{self.n_classes - 1}"
                )
            self._columns = classes.astype(np.int64)

    def predict_proba(self, x: Any) -> np.ndarray:
        """``(n, k)`` checked probabilities; a DataFrame (a table model's rows, :mod:`weakspot.models.table`) is passed
        as it is, anything else flattened to ``(n, -1)``."""
        n = len(x)
        arr = x if hasattr(x, "columns") else np.asarray(x).reshape(n, -1)
        p = np.asarray(self.estimator.predict_proba(arr))
        if self._columns is not None and p.ndim == 2 and p.shape == (n, len(self._columns)):
            full = np.zeros((n, self.n_classes), dtype=np.float64)
            full[:, self._columns] = p
            p = full
        return check_probabilities(p, n, self.n_classes, self.name)

    def predict(self, x: Any) -> np.ndarray:
        return self.predict_proba(x).argmax(axis=1).astype(np.int64)

    def __repr__(self) -> str:
        return f"{self.name}(n_classes={self.n_classes})"


class CallableClassifier:
    """Black-box adapter for any function ``x -> (n, k) probabilities`` (NumPy or torch output).

    Parameters
    ----------
    fn : callable
        Receives the input batch as a NumPy array.
    n_classes : int

    Examples
    --------
    >>> import numpy as np
    >>> clf = CallableClassifier(lambda x: np.full((len(x), 2), 0.5), n_classes=2)
    >>> clf.predict_proba(np.zeros((3, 1))).sum(axis=1).tolist()
    [1.0, 1.0, 1.0]
    """

    def __init__(self, fn: Callable[[np.ndarray], Any], *, n_classes: int):
        if not callable(fn):
            raise ModelError(f"CallableClassifier needs a callable, got {type(fn).__name__}")
        self.fn = fn
        self.n_classes = _check_n_classes(n_classes)
        self.name = f"CallableClassifier({getattr(fn, '__name__', type(fn).__name__)})"

    def predict_proba(self, x: Any) -> np.ndarray:
        """The function's output on ``x`` (an array; a DataFrame for a table model), checked."""
        arr = x if hasattr(x, "columns") else np.asarray(x)
        return check_probabilities(self.fn(arr), len(arr), self.n_classes, self.name)

    def predict(self, x: Any) -> np.ndarray:
        return self.predict_proba(x).argmax(axis=1).astype(np.int64)

    def __repr__(self) -> str:
        return f"{self.name}(n_classes={self.n_classes})"
