"""Training of the built-in models: Adam on shuffled index batches, deterministic for a seed on CPU.

Caveats first: the whole training set is moved to ``device`` once (these data sets are small); batches are slices
of a seeded permutation, not a DataLoader. The module's initial weights are the caller's: seed before building it
(``weakspot.device.seed_everything``) for a fully reproducible model. The global torch RNG is left as it was.
A module with batch norm skips a trailing batch of a single sample (batch norm needs two).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Tuple

import numpy as np

from weakspot.errors import ConfigError, DataError
from weakspot.progress import Progress

AUGMENTATIONS = ("hflip",)
LR_SCHEDULES = ("constant", "cosine")

if TYPE_CHECKING:
    import torch

    from weakspot.models.nets import LossFn


def _has_batch_norm(module: torch.nn.Module) -> bool:
    import torch

    return any(isinstance(m, torch.nn.modules.batchnorm._BatchNorm) for m in module.modules())


def _as_tensors(X: Any, y: Any, name: str, device: torch.device) -> tuple:
    import torch

    X = np.asarray(X, dtype=np.float32)
    y = np.asarray(y)
    if X.ndim < 2 or y.shape != (X.shape[0],):
        raise DataError(f"{name}: X must be (n, ...) and y (n,); got X {X.shape} and y {y.shape}")
    if not np.issubdtype(y.dtype, np.integer):
        raise DataError(f"{name}: y must hold integer class codes, got dtype {y.dtype}")
    if not np.all(np.isfinite(X)):
        raise DataError(f"{name}: X holds NaN or infinite values")
    return torch.as_tensor(X, device=device), torch.as_tensor(y.astype(np.int64), device=device)


def _evaluate(module: torch.nn.Module, X: torch.Tensor, y: torch.Tensor, batch_size: int) -> tuple:
    import torch

    loss_sum, correct = 0.0, 0
    with torch.no_grad():
        for start in range(0, X.shape[0], batch_size):
            out = module(X[start : start + batch_size])
            yb = y[start : start + batch_size]
            loss_sum += float(torch.nn.functional.cross_entropy(out, yb, reduction="sum"))
            correct += int((out.argmax(dim=1) == yb).sum())
    n = max(int(X.shape[0]), 1)
    return loss_sum / n, correct / n


def train_torch_classifier(
    module: torch.nn.Module,
    X_train: np.ndarray,
    y_train: np.ndarray,
    *,
    X_val: Optional[np.ndarray] = None,
    y_val: Optional[np.ndarray] = None,
    epochs: int,
    lr: float,
    batch_size: int,
    seed: int,
    device: Any,
    weight_decay: float = 0.0,
    augment: Optional[str] = None,
    lr_schedule: str = "constant",
    progress: Optional[Progress] = None,
    loss_fn: Optional[LossFn] = None,
) -> Dict[str, Any]:
    """Train ``module`` in place with Adam and cross-entropy (or ``loss_fn``); return the per-epoch history.

    Parameters
    ----------
    module : torch.nn.Module
        Maps ``(n, ...)`` float32 inputs to ``(n, k)`` logits. Left in eval mode on ``device``.
    X_train, y_train : arrays
        Inputs ``(n, ...)`` (converted to float32; images for the built-in image archs are float32
        ``(n, C, H, W)`` in [0, 1], see ``weakspot.scene.images_to_input``) and int labels ``(n,)``.
    X_val, y_val : arrays, optional
        Scored after every epoch (loss and accuracy) when given.
    epochs : int
        Passes over the training set. The pipeline's default for LeNet on 8x8 digits is 30 (tuned here: test
        accuracy about 0.98 in a few seconds on two CPU cores; no paper trains on digits).
    lr : float
        Adam learning rate (default in the pipeline 3e-3, tuned here).
    batch_size : int
        Samples per step (default in the pipeline 64).
    seed : int
        Seeds the batch order (a local generator) and anything random inside the module (dropout) through a
        forked global RNG; the same module weights, data and seed give identical results on CPU.
    device : {"auto", "cpu", "cuda"} or torch.device
    weight_decay : float, default 0.0
        Adam's L2 penalty.
    augment : {None, "hflip"}, default None
        ``"hflip"``: flip each training image left-right with probability 1/2 (batched; the flips are drawn from the
        seeded generator of the batch order). Needs image inputs ``(n, C, H, W)``.
    lr_schedule : {"constant", "cosine"}, default "constant"
        ``"cosine"``: the learning rate follows a half cosine from ``lr`` to 0 over all steps (Loshchilov & Hutter,
        SGDR, without restarts), so the weights settle instead of ending wherever the last Adam step left them
        (the scene CNN's validation accuracy swings by 0.1-0.2 between late epochs at a constant rate).
    progress : callable(what, done, total), optional
        :data:`weakspot.progress.Progress`: ``progress("epoch (loss 0.123)", epoch_done, epochs)`` after every
        epoch (the training loss, and the validation accuracy when there is validation data, in the note).
    loss_fn : callable(module, xb, yb, generator) -> (loss, logits), optional
        Replaces the cross-entropy of a batch (the hook the defences of :mod:`weakspot.adversarial.defences` use):
        called with the module (in train mode), the batch on ``device`` (after ``augment``), its labels and the
        loop's seeded CPU ``torch.Generator`` (draw random starts from it to stay deterministic); returns the scalar
        loss to minimise and the logits whose arg-max counts towards ``train_accuracy`` (``(m, k)`` for a batch of
        ``m``; e.g. the logits of the adversarial examples trained on). It must leave the module in train mode.
        Default None: ``cross_entropy(module(xb), yb)``, bit for bit the same training as without the keyword.

    Returns
    -------
    dict of lists, one entry per epoch (so ``pandas.DataFrame(history)`` is the per-epoch table)
        ``epoch``, ``train_loss``, ``train_accuracy`` (running, during the epoch), ``val_loss`` and
        ``val_accuracy`` (NaN without validation data), ``seconds`` (wall time since the start) and ``steps``
        (optimizer steps so far).

    Examples
    --------
    >>> import numpy as np, torch
    >>> X = np.random.default_rng(0).normal(size=(64, 2)).astype("float32"); y = (X[:, 0] > 0).astype(int)
    >>> hist = train_torch_classifier(torch.nn.Linear(2, 2), X, y, epochs=5, lr=0.1, batch_size=16, seed=0,
    ...                               device="cpu")
    >>> len(hist["train_loss"])
    5
    """
    import torch

    from weakspot.device import resolve_device

    _check_training(epochs, batch_size, lr, weight_decay, seed, lr_schedule, loss_fn, X_val, y_val, augment)
    dev = device if isinstance(device, torch.device) else resolve_device(device)
    module = module.to(dev)
    X, y = _as_tensors(X_train, y_train, "training data", dev)
    Xv = yv = None
    if X_val is not None:
        Xv, yv = _as_tensors(X_val, y_val, "validation data", dev)
    if augment == "hflip" and X.ndim != 4:
        raise ConfigError(f"train_torch_classifier: augment='hflip' needs images (n, C, H, W), got X {tuple(X.shape)}")
    history: Dict[str, List[float]] = {
        "epoch": [],
        "train_loss": [],
        "train_accuracy": [],
        "val_loss": [],
        "val_accuracy": [],
        "seconds": [],
        "steps": [],
    }
    steps = 0
    opt = torch.optim.Adam(module.parameters(), lr=float(lr), weight_decay=float(weight_decay))
    n = int(X.shape[0])
    if n == 0:
        raise DataError("train_torch_classifier: the training set is empty")
    sched = None
    if lr_schedule == "cosine":
        sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=max(1, int(epochs) * -(-n // int(batch_size))))
    loop = _Epoch(
        module,
        X,
        y,
        int(batch_size),
        opt,
        sched,
        torch.Generator().manual_seed(int(seed)),
        augment,
        loss_fn,
        _has_batch_norm(module),
        dev,
    )
    t0 = time.perf_counter()
    devices: List[int] = [dev.index or 0] if dev.type == "cuda" else []
    with torch.random.fork_rng(devices=devices):
        torch.manual_seed(int(seed))
        for epoch in range(1, int(epochs) + 1):
            loss_sum, correct, seen, done = loop.run()
            steps += done
            seen = max(seen, 1)
            row = {
                "epoch": epoch,
                "train_loss": float(loss_sum) / seen,
                "train_accuracy": int(correct) / seen,
                "val_loss": float("nan"),
                "val_accuracy": float("nan"),
            }
            if Xv is not None and yv is not None:  # set together
                row["val_loss"], row["val_accuracy"] = _evaluate(module, Xv, yv, max(int(batch_size), 512))
            row["seconds"] = time.perf_counter() - t0
            row["steps"] = steps
            for key, value in row.items():
                history[key].append(value)
            if progress is not None:
                progress(f"epoch ({_note(row)})", epoch, int(epochs))
    module.eval()
    return history


def _note(row: Dict[str, float]) -> str:
    """An epoch's progress note: the training loss, and the validation accuracy when there is one."""
    note = f"loss {row['train_loss']:.3f}"
    return note if row["val_accuracy"] != row["val_accuracy"] else note + f", val acc {row['val_accuracy']:.3f}"


def _check_training(
    epochs: Any,
    batch_size: Any,
    lr: Any,
    weight_decay: Any,
    seed: Any,
    lr_schedule: Any,
    loss_fn: Any,
    X_val: Any,
    y_val: Any,
    augment: Any,
) -> None:
    """:func:`train_torch_classifier`'s arguments, each checked before any work (a ConfigError names the bad one)."""
    for name, value, ok in (
        ("epochs", epochs, isinstance(epochs, (int, np.integer)) and epochs >= 1),
        ("batch_size", batch_size, isinstance(batch_size, (int, np.integer)) and batch_size >= 1),
        ("lr", lr, isinstance(lr, (int, float)) and np.isfinite(lr) and lr > 0),
        ("weight_decay", weight_decay, isinstance(weight_decay, (int, float)) and weight_decay >= 0),
        ("seed", seed, isinstance(seed, (int, np.integer)) and not isinstance(seed, bool)),
    ):
        if not ok or isinstance(value, bool):
            raise ConfigError(
                f"train_torch_classifier: {name} = {value!r} is not allowed "
                "(epochs, batch_size: integers >= 1; lr > 0; weight_decay >= 0; seed: integer)"
            )
    if lr_schedule not in LR_SCHEDULES:
        raise ConfigError(
            f"train_torch_classifier: lr_schedule = {lr_schedule!r} is not allowed; use "
            f"{', '.join(repr(a) for a in LR_SCHEDULES)}"
        )
    if loss_fn is not None and not callable(loss_fn):
        raise ConfigError(
            f"train_torch_classifier: loss_fn = {loss_fn!r} is not callable; give a function "
            "(module, xb, yb, generator) -> (loss, logits), or None for cross-entropy"
        )
    if (X_val is None) != (y_val is None):
        raise ConfigError("train_torch_classifier: give both X_val and y_val, or neither")
    if augment is not None and augment not in AUGMENTATIONS:
        raise ConfigError(
            f"train_torch_classifier: augment = {augment!r} is not allowed; use None or "
            f"{', '.join(repr(a) for a in AUGMENTATIONS)}"
        )


class _Epoch:
    """One pass over the training set in the seeded batch order: the steps of :func:`train_torch_classifier`."""

    def __init__(
        self,
        module: torch.nn.Module,
        X: torch.Tensor,
        y: torch.Tensor,
        batch_size: int,
        opt: Any,
        sched: Any,
        gen: torch.Generator,
        augment: Optional[str],
        loss_fn: Optional[LossFn],
        skip_single: bool,
        dev: torch.device,
    ):
        self.module, self.X, self.y, self.batch_size = module, X, y, batch_size
        self.opt, self.sched, self.gen, self.augment, self.loss_fn = opt, sched, gen, augment, loss_fn
        self.skip_single, self.dev = skip_single, dev

    def _loss(self, xb: torch.Tensor, yb: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
        import torch

        if self.loss_fn is None:
            out = self.module(xb)
            return torch.nn.functional.cross_entropy(out, yb), out
        loss, out = self.loss_fn(self.module, xb, yb, self.gen)
        if not (
            isinstance(loss, torch.Tensor)
            and loss.ndim == 0
            and isinstance(out, torch.Tensor)
            and out.ndim == 2
            and out.shape[0] == yb.shape[0]
        ):
            raise ConfigError(
                "train_torch_classifier: loss_fn must return (scalar loss tensor, logits (m, k)) for a "
                f"batch of m = {int(yb.shape[0])}; got loss "
                f"{tuple(loss.shape) if isinstance(loss, torch.Tensor) else type(loss).__name__} and "
                f"logits {tuple(out.shape) if isinstance(out, torch.Tensor) else type(out).__name__}"
            )
        return loss, out

    def run(self) -> Tuple[torch.Tensor, torch.Tensor, int, int]:
        """(summed loss, correct predictions, samples seen, optimizer steps) of one epoch; the module ends in eval
        mode."""
        import torch

        module, n, dev = self.module, int(self.X.shape[0]), self.dev
        module.train()
        perm = torch.randperm(n, generator=self.gen).to(dev)
        # running sums stay on the device: no host sync per step (matters on CUDA)
        loss_sum = torch.zeros((), device=dev)
        correct = torch.zeros((), dtype=torch.int64, device=dev)
        seen = steps = 0
        for start in range(0, n, self.batch_size):
            idx = perm[start : start + self.batch_size]
            if self.skip_single and idx.shape[0] < 2 and n >= 2:  # batch norm needs two samples
                continue
            xb, yb = self.X[idx], self.y[idx]
            if self.augment == "hflip":
                flip = (torch.rand(idx.shape[0], generator=self.gen) < 0.5).to(dev)
                xb = torch.where(flip[:, None, None, None], xb.flip(-1), xb)
            loss, out = self._loss(xb, yb)
            self.opt.zero_grad(set_to_none=True)
            loss.backward()
            self.opt.step()
            if self.sched is not None:
                self.sched.step()
            loss_sum += loss.detach() * idx.shape[0]
            correct += (out.detach().argmax(dim=1) == yb).sum()
            seen += int(idx.shape[0])
            steps += 1
        module.eval()
        return loss_sum, correct, seen, steps


def fit_builtin(
    arch: str,
    X_train: np.ndarray,
    y_train: np.ndarray,
    n_classes: int,
    params: Any,
    *,
    seed: int,
    X_val: Optional[np.ndarray] = None,
    y_val: Optional[np.ndarray] = None,
    device: Any = "auto",
    progress: Optional[Progress] = None,
) -> Tuple[Any, Dict[str, Any]]:
    """Train the built-in architecture ``arch`` as the ``train`` stage does: a torch one (``ARCHS``, seeded weights,
    :func:`train_torch_classifier` with ``params``' epochs, lr, schedule ...) or a scikit-learn one
    (``SKLEARN_ARCHS`` with ``params.options``). ``params`` is a ``weakspot.targets.TrainParams``; ``seed`` replaces
    its seed. Returns ``(torch module or estimator, {"history": ...} or {"info": ...})``."""
    from weakspot.device import resolve_device, seed_everything
    from weakspot.models.archs import ARCHS
    from weakspot.models.sklearn_archs import SKLEARN_ARCHS

    gaps = int(np.isnan(X_train).any(axis=1).sum()) if np.ndim(X_train) == 2 else 0  # a table's missing values
    if gaps:
        raise DataError(
            f"{arch}: {gaps} training rows hold missing values (NaN); weakspot's built-in architectures take none. "
            "Give your own model that handles them (e.g. a scikit-learn HistGradientBoosting, XGBoost or LightGBM "
            "classifier, or a Pipeline with an imputer) with its weights, or clean the data"
        )
    if arch in ARCHS:
        seed_everything(int(seed))
        module = ARCHS.get(arch)(tuple(X_train.shape[1:]), int(n_classes))
        history = train_torch_classifier(
            module,
            X_train,
            y_train,
            X_val=X_val,
            y_val=y_val,
            epochs=params.epochs,
            lr=params.lr,
            batch_size=params.batch_size,
            weight_decay=params.weight_decay,
            seed=int(seed),
            augment=params.augment,
            lr_schedule=params.lr_schedule,
            device=resolve_device(device) if isinstance(device, str) else device,
            progress=progress,
        )
        return module, {"history": history}
    est, info = SKLEARN_ARCHS.get(arch)(
        np.asarray(X_train).reshape(len(X_train), -1), y_train, seed=int(seed), **params.options
    )
    return est, {"info": dict(info)}
