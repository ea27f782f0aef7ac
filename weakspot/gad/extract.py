"""Model extraction, Algorithm 1 of seeds/001 (Sec. IV-B): a pseudo-model of the black box's confidence.

Caveats first:

* The design is the paper's Latin hypercube over the *range of the evaluation data*, column by column (Step 1), for
  ``1 - data_fraction`` of its N points, and evaluation rows moved by Gaussian noise (up to ``jitter`` standard
  deviations per feature, clipped to the same box) for the rest -- ours, after Sec. IV-B's note that evaluation data
  may stand in for the design. With many features a pure hypercube lies almost wholly far from the data, where a
  black box is flat, and the pseudo-model learns nothing the attack walks through (30 features of breast_cancer,
  spanning 0.001 to 4,000, an RBF SVM: R^2 -0.8 on the data; with half the design near the data, 1.0).
  ``data_fraction=0`` is Algorithm 1 as written. A categorical column (``fixed``) is never spread over a range: the
  hypercube's points take it from random evaluation rows and the jittered rows keep their own, so the black box is
  only asked about categories that exist (the network reads the code as a number, standardised like the rest). The pseudo-model is trusted only inside the box.
* Missing values (NaN) are kept as the black box takes them: the box, the mean and the standard deviation are the
  observed values'; a hypercube point takes its missing cells from the evaluation row it draws its categories from, a
  jittered row keeps its own, so the black box is asked about the missingness patterns that exist. The network
  reads a missing cell as the column's mean plus an indicator input per column with missing values (its gradient
  there is zero: the attack never moves a missing cell, :mod:`weakspot.gad.attack`).
* The network standardises its input with the evaluation data's mean and standard deviation, so features in any
  units reach it on one scale; gradients are still taken in the data's own units. Widths, optimiser and batch size
  are ours (the paper gives "5 dense layers", "20 epochs" and N = 50,000 only).
* R^2 is measured on held-out design points (Table I's "Pseudo R^2") and on the evaluation data itself
  (:attr:`Extraction.r2`, the lower of the two, is what a caller should gate on).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Optional, Sequence

import numpy as np

from weakspot.device import single_thread
from weakspot.errors import ConfigError, DataError
from weakspot.progress import Progress

if TYPE_CHECKING:
    import torch


def latin_hypercube(lo: np.ndarray, hi: np.ndarray, n: int, *, seed: int = 0) -> np.ndarray:
    """``n`` Latin-hypercube points in the box ``[lo, hi]`` (``scipy.stats.qmc.LatinHypercube``, seeded).

    Each of the ``n`` equal strata of every dimension holds exactly one point (Algorithm 1, Step 1).
    """
    from scipy.stats import qmc

    lo = np.asarray(lo, dtype=np.float64)
    hi = np.asarray(hi, dtype=np.float64)
    if lo.ndim != 1 or lo.shape != hi.shape:
        raise DataError(f"latin_hypercube: lo and hi must be 1-D of equal length, got {lo.shape} and {hi.shape}")
    if not (np.isfinite(lo).all() and np.isfinite(hi).all()):
        raise DataError("latin_hypercube: bounds must be finite (NaN/inf in the evaluation data?)")
    if n < 1:
        raise ConfigError(f"latin_hypercube: n = {n}; must be >= 1")
    span = np.where(hi > lo, hi - lo, 1.0)  # a constant column gets a unit-wide box so it is still sampled
    unit = qmc.LatinHypercube(d=len(lo), seed=np.random.default_rng(seed)).random(n)
    return lo + unit * span


def _make_network(d: int, hidden: int, mean: np.ndarray, std: np.ndarray, gaps: Sequence[int] = ()):
    import torch
    from torch import nn

    gaps = [int(j) for j in gaps]

    class PseudoModel(nn.Module):
        """Five dense layers (Sec. V-A) mapping raw features, standardised inside, to the logit of the
        class-of-interest confidence; a missing value (NaN) of a column in ``gaps`` is read as the column's mean,
        with that column's missingness as an input of its own."""

        mean: "torch.Tensor"  # buffers (register_buffer below)
        std: "torch.Tensor"

        def __init__(self) -> None:
            super().__init__()
            self.register_buffer("mean", torch.as_tensor(mean, dtype=torch.float32))
            self.register_buffer("std", torch.as_tensor(std, dtype=torch.float32))
            self.gaps = gaps
            self.net = nn.Sequential(
                nn.Linear(d + len(gaps), hidden),
                nn.ReLU(),
                nn.Linear(hidden, hidden),
                nn.ReLU(),
                nn.Linear(hidden, hidden),
                nn.ReLU(),
                nn.Linear(hidden, hidden),
                nn.ReLU(),
                nn.Linear(hidden, 1),
            )

        def logit(self, x: "torch.Tensor") -> "torch.Tensor":
            gone = torch.isnan(x)  # a missing cell reads as the mean (of any column: unlabelled rows too)
            z = (torch.where(gone, self.mean, x) - self.mean) / self.std  # no gradient reaches a missing cell
            if self.gaps:
                z = torch.cat([z, gone[:, self.gaps].to(z.dtype)], dim=1)
            return self.net(z).squeeze(-1)

        def forward(self, x: "torch.Tensor") -> "torch.Tensor":
            return torch.sigmoid(self.logit(x))

    return PseudoModel()


@dataclass
class Extraction:
    """What Algorithm 1 returns: the pseudo-model and how well it mimics the black box."""

    model: "torch.nn.Module"  # with .logit(x) and forward(x) -> confidence
    r2_design: float  # R^2 on held-out design points (Table I)
    r2_eval: float  # R^2 on the evaluation data
    n_design: int
    lo: np.ndarray
    hi: np.ndarray
    final_mse: float

    @property
    def r2(self) -> float:
        """The lower of the two R^2 (NaN counts as failing): how well the pseudo-model mimics the black box."""
        vals = [self.r2_design, self.r2_eval]
        return float("nan") if any(np.isnan(v) for v in vals) else float(min(vals))

    def confidence(self, X: np.ndarray, device: str = "cpu") -> np.ndarray:
        import torch

        dev = next(self.model.parameters()).device
        with torch.no_grad():
            return (
                self.model(torch.as_tensor(np.asarray(X), dtype=torch.float32, device=dev))
                .cpu()
                .numpy()
                .astype(np.float64)
            )


def _observed_stats(X: np.ndarray) -> "tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]":
    """Each column's min, max, mean and standard deviation over its observed (non-NaN) values; 0, 0, 0 and 1 for a
    column with none."""
    seen = ~np.isnan(X)
    n = seen.sum(axis=0)
    some = n > 0
    filled = np.where(seen, X, 0.0)
    mean = filled.sum(axis=0) / np.maximum(n, 1)
    var = (np.where(seen, X - mean, 0.0) ** 2).sum(axis=0) / np.maximum(n, 1)
    lo = np.where(some, np.where(seen, X, np.inf).min(axis=0), 0.0)
    hi = np.where(some, np.where(seen, X, -np.inf).max(axis=0), 0.0)
    return lo, hi, mean, np.where(some, np.sqrt(var), 1.0)


def r2_score(y: np.ndarray, yhat: np.ndarray) -> float:
    """Coefficient of determination 1 - SS_res / SS_tot (NaN when y is constant)."""
    y = np.asarray(y, dtype=np.float64)
    ss_tot = float(((y - y.mean()) ** 2).sum())
    return float("nan") if ss_tot == 0 else 1.0 - float(((y - np.asarray(yhat)) ** 2).sum()) / ss_tot


def extract_pseudo_model(
    black_box,
    X_eval: np.ndarray,
    *,
    class_index: int = 1,
    n_points: int = 50_000,
    epochs: int = 20,
    hidden: int = 64,
    batch_size: int = 256,
    lr: float = 1e-3,
    holdout_fraction: float = 0.1,
    data_fraction: float = 0.5,
    jitter: float = 1.0,
    seed: int = 0,
    device: str = "auto",
    progress: Optional[Progress] = None,
    fixed: Sequence[int] = (),
) -> Extraction:
    """Algorithm 1: a design over the evaluation data's ranges (LHS + jittered rows), labelled by the black box,
    fitted by MSE.

    Parameters
    ----------
    black_box : Classifier (weakspot.models; e.g. SklearnClassifier)
        Queried once on the whole design (``predict_proba``).
    X_eval : ndarray (n, d)
        The representative evaluation data ``D``: its column ranges bound the design, its rows seed the jittered
        part, its mean and standard deviation standardise the network's input.
    class_index : int
        Column of ``predict_proba`` for the class of interest.
    n_points : int
        Design size N (paper: 50,000, Sec. V-A).
    epochs : int
        Training epochs e (paper: 20, Sec. V-A).
    hidden, batch_size, lr : network width, mini-batch size and Adam step (ours: 64, 256, 1e-3).
    holdout_fraction : float
        Share of the design kept out of training to measure R^2.
    data_fraction : float in [0, 1)
        Share of the design that is jittered evaluation rows (ours: 0.5; 0 = the paper's pure hypercube).
    jitter : float
        Each jittered row moves by ``N(0, s^2)`` per feature, in standard deviations, ``s ~ U(0, jitter)`` per row.
    fixed : sequence of int
        Categorical columns: drawn from evaluation rows, never jittered.
    """
    import torch

    from weakspot.device import resolve_device

    X_eval = np.asarray(X_eval, dtype=np.float64)
    if X_eval.ndim != 2 or len(X_eval) < 2:
        raise DataError(f"extract_pseudo_model: X_eval must be (n>=2, d), got shape {X_eval.shape}")
    if np.isinf(X_eval).any():
        raise DataError("extract_pseudo_model: X_eval holds infinite values (a missing value, NaN, is kept)")
    if not 0 <= data_fraction < 1 or jitter < 0:
        raise ConfigError(
            f"extract_pseudo_model: data_fraction = {data_fraction} must lie in [0, 1) and jitter = {jitter} be >= 0"
        )
    dev = resolve_device(device)
    fixed = [int(j) for j in fixed]
    gone = np.isnan(X_eval)
    gaps = [int(j) for j in np.flatnonzero(gone.any(axis=0))]
    lo, hi, mean, std = (
        _observed_stats(X_eval) if len(gaps) else (X_eval.min(0), X_eval.max(0), X_eval.mean(0), X_eval.std(0))
    )
    std = np.where(std > 0, std, 1.0)
    n_data = int(round(data_fraction * n_points))
    design = latin_hypercube(lo, hi, n_points - n_data, seed=seed) if n_points > n_data else np.empty((0, len(lo)))
    if n_data:
        jr = np.random.default_rng([seed, 1])
        rows = X_eval[jr.integers(len(X_eval), size=n_data)]
        near = rows + jr.normal(size=rows.shape) * std * jr.uniform(0.0, jitter, size=(n_data, 1))
        near[:, fixed] = rows[:, fixed]
        design = np.vstack([design, np.clip(near, lo, hi)])
    if (len(fixed) or len(gaps)) and n_points > n_data:
        fr = np.random.default_rng([seed, 2])
        src = X_eval[fr.integers(len(X_eval), size=n_points - n_data)]
        design[: n_points - n_data, fixed] = src[:, fixed]
        design[: n_points - n_data][np.isnan(src)] = np.nan  # that row's missing cells too
    target = black_box.predict_proba(design)
    if not 0 <= class_index < target.shape[1]:
        raise ConfigError(f"class_index {class_index} out of range for {target.shape[1]} classes")
    target = target[:, class_index]
    rng = np.random.default_rng(seed)
    perm = rng.permutation(n_points)
    n_hold = max(1, int(round(holdout_fraction * n_points)))
    hold, train = perm[:n_hold], perm[n_hold:]

    with torch.random.fork_rng(devices=[]), single_thread(dev):
        torch.manual_seed(seed)
        model = _make_network(X_eval.shape[1], hidden, mean, std, gaps).to(dev)
        gen = torch.Generator().manual_seed(seed)
        xt = torch.as_tensor(design[train], dtype=torch.float32, device=dev)
        yt = torch.as_tensor(target[train], dtype=torch.float32, device=dev)
        opt = torch.optim.Adam(model.parameters(), lr=lr)
        loss_fn = torch.nn.MSELoss()  # Algorithm 1, Step 2: MSE between M_O and M_P confidences
        n_train = len(train)
        last = float("nan")
        for epoch in range(epochs):
            order = torch.randperm(n_train, generator=gen).to(dev)
            total = 0.0
            for start in range(0, n_train, batch_size):
                idx = order[start : start + batch_size]
                opt.zero_grad(set_to_none=True)
                loss = loss_fn(model(xt[idx]), yt[idx])
                loss.backward()
                opt.step()
                total += float(loss.detach()) * len(idx)
            last = total / n_train
            if progress is not None:
                progress("extract: epochs", epoch + 1, epochs)
    model.eval()
    ext = Extraction(
        model=model, r2_design=float("nan"), r2_eval=float("nan"), n_design=n_points, lo=lo, hi=hi, final_mse=last
    )
    with single_thread(dev):
        ext.r2_design = r2_score(target[hold], ext.confidence(design[hold]))
        ext.r2_eval = r2_score(black_box.predict_proba(X_eval)[:, class_index], ext.confidence(X_eval))
    return ext
