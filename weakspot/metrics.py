"""Accuracy and calibration of a classifier's probabilities: ECE, reliability table and reliability diagram.

Caveats first: calibration here is *top-label* (the confidence is the largest probability and "correct" means the
arg-max is the label), binned into ``n_bins`` equal-width bins ``(lo, hi]`` of [0, 1], as in Guo et al. 2017,
"On Calibration of Modern Neural Networks" (Sec. 2, 15 bins in their experiments; this project's default). Bins
without samples contribute nothing to the ECE and appear in the table with ``count`` 0 and NaN averages. The GAD
paper (seeds/001 Sec. V-A, Figure 2) reads such a diagram for overconfidence, drawn here as red gaps.
"""

from __future__ import annotations

from typing import Any, Tuple

import numpy as np

from weakspot.errors import ConfigError, DataError

DEFAULT_BINS = 15  # Guo et al. 2017, Sec. 2 / experiments: M = 15 bins


def _check(p: Any, y: Any) -> Tuple[np.ndarray, np.ndarray]:
    p = np.asarray(p.detach().cpu().numpy() if hasattr(p, "detach") else p, dtype=np.float64)
    y = np.asarray(y)
    if p.ndim != 2 or p.shape[1] < 2:
        raise DataError(f"probabilities must have shape (n, k) with k >= 2, got {p.shape}")
    if y.shape != (p.shape[0],):
        raise DataError(f"labels must have shape ({p.shape[0]},) to match probabilities {p.shape}, got {y.shape}")
    if p.shape[0] == 0:
        raise DataError("no samples: probabilities and labels are empty")
    if not np.issubdtype(y.dtype, np.integer) or y.min() < 0 or y.max() >= p.shape[1]:
        raise DataError(f"labels must be integer class codes in 0..{p.shape[1] - 1}")
    if not np.all(np.isfinite(p)):
        raise DataError("probabilities hold NaN or infinite values")
    return p, y.astype(np.int64)


def _check_bins(n_bins: Any) -> int:
    if isinstance(n_bins, bool) or not isinstance(n_bins, (int, np.integer)) or n_bins < 1:
        raise ConfigError(f"n_bins must be a positive integer, got {n_bins!r}")
    return int(n_bins)


def accuracy(p: Any, y: Any) -> float:
    """Share of samples whose arg-max class equals the label.

    Examples
    --------
    >>> accuracy([[0.9, 0.1], [0.2, 0.8]], [0, 0])
    0.5
    """
    p, y = _check(p, y)
    return float(np.mean(p.argmax(axis=1) == y))


def reliability_bins(
    confidence: Any, correct: Any, n_bins: int = DEFAULT_BINS, *, lo: float = 0.0
) -> Tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Equal-width confidence bins on ``[lo, 1]``: ``(edges, count, summed confidence, summed correctness)``.

    Bin ``b`` holds ``edges[b] < confidence <= edges[b+1]``; a confidence at or below ``lo`` goes to bin 0. The one
    binning of the project: the reliability table and ECE here and the GAD paper's Fig. 2 (``lo = 0.5``, predictions
    of one class of a binary problem, :func:`weakspot.gad.sdr.reliability`) use it.

    Examples
    --------
    >>> edges, count, _, corr = reliability_bins([0.55, 0.95, 0.97], [1, 0, 1], 5, lo=0.5)
    >>> count.tolist(), corr.tolist()
    ([1, 0, 0, 0, 2], [1.0, 0.0, 0.0, 0.0, 1.0])
    """
    n_bins = _check_bins(n_bins)
    conf = np.asarray(confidence, dtype=np.float64)
    correct = np.asarray(correct, dtype=np.float64)
    if conf.ndim != 1 or conf.shape != correct.shape:
        raise DataError(f"confidence and correct must be 1-D of one length, got {conf.shape} and {correct.shape}")
    if not 0.0 <= lo < 1.0:
        raise ConfigError(f"lo must lie in [0, 1), got {lo!r}")
    edges = np.linspace(float(lo), 1.0, n_bins + 1)
    idx = np.clip(np.searchsorted(edges, conf, side="left") - 1, 0, n_bins - 1)
    count = np.bincount(idx, minlength=n_bins).astype(np.int64)
    conf_sum = np.bincount(idx, weights=conf, minlength=n_bins)
    corr_sum = np.bincount(idx, weights=correct, minlength=n_bins)
    return edges, count, conf_sum, corr_sum


def _binned(p: np.ndarray, y: np.ndarray, n_bins: int) -> Tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(edges, count, summed confidence, summed correctness) per bin of [0, 1], for top-label probabilities."""
    return reliability_bins(p.max(axis=1), (p.argmax(axis=1) == y), n_bins)


def expected_calibration_error(p: Any, y: Any, n_bins: int = DEFAULT_BINS) -> float:
    """Expected calibration error: ``sum_b |B_b|/n * |acc(B_b) - conf(B_b)|`` over equal-width confidence bins.

    Parameters
    ----------
    p : array (n, k)
        Predicted probabilities.
    y : array (n,)
        Integer labels.
    n_bins : int, default 15
        Number of equal-width bins on [0, 1] (Guo et al. 2017 use 15).

    Returns
    -------
    float
        In [0, 1]; 0 for a perfectly calibrated predictor.

    Examples
    --------
    >>> import numpy as np
    >>> p = np.tile([0.9, 0.1], (10, 1)); y = np.array([0] * 6 + [1] * 4)  # 90% confident, 60% right
    >>> round(expected_calibration_error(p, y), 6)
    0.3
    """
    p, y = _check(p, y)
    _, count, conf_sum, corr_sum = _binned(p, y, _check_bins(n_bins))
    return float(np.abs(corr_sum - conf_sum).sum() / p.shape[0])


def reliability_table(p: Any, y: Any, n_bins: int = DEFAULT_BINS) -> "Any":
    """Per-bin mean confidence, accuracy and count.

    Returns
    -------
    pandas.DataFrame
        Columns ``bin_lo``, ``bin_hi``, ``confidence``, ``accuracy`` (NaN for empty bins), ``count``; one row per
        bin, in order.
    """
    import pandas as pd

    p, y = _check(p, y)
    edges, count, conf_sum, corr_sum = _binned(p, y, _check_bins(n_bins))
    with np.errstate(invalid="ignore", divide="ignore"):
        conf = np.where(count > 0, conf_sum / np.maximum(count, 1), np.nan)
        acc = np.where(count > 0, corr_sum / np.maximum(count, 1), np.nan)
    return pd.DataFrame(
        {"bin_lo": edges[:-1], "bin_hi": edges[1:], "confidence": conf, "accuracy": acc, "count": count}
    )


def reliability_diagram(p: Any, y: Any, n_bins: int = DEFAULT_BINS, title: str = "Reliability diagram") -> "Any":
    """A reliability diagram: accuracy per confidence bin against the diagonal, with the counts below.

    Bars show each bin's accuracy; red hatched bars mark the gap where the mean confidence exceeds the accuracy
    (overconfidence, as the GAD paper's Figure 2 colours it), blue hatched bars where it falls short; the dashed
    diagonal is perfect calibration. Each bar's foot and the lower panel show how many samples the bin holds. The
    title carries the ECE.

    Returns
    -------
    matplotlib.figure.Figure
        Made without pyplot (Agg-safe, no display needed); save it with ``weakspot.io.save_figure``.
    """
    from matplotlib.figure import Figure

    table = reliability_table(p, y, n_bins)
    ece = expected_calibration_error(p, y, n_bins)
    n = int(table["count"].sum())
    fig = Figure(figsize=(5.0, 5.6))
    ax, ax_n = fig.subplots(2, 1, sharex=True, gridspec_kw={"height_ratios": [3, 1]})
    width = 1.0 / len(table)
    lo = table["bin_lo"].to_numpy()
    acc = table["accuracy"].fillna(0.0).to_numpy()
    conf = table["confidence"].to_numpy()
    filled = table["count"].to_numpy() > 0
    ax.bar(
        lo[filled],
        acc[filled],
        width=width,
        align="edge",
        color="#4c72b0",
        edgecolor="black",
        linewidth=0.5,
        label="accuracy",
    )
    over = filled & (conf > acc)
    under = filled & (conf <= acc)
    ax.bar(
        lo[over],
        (conf - acc)[over],
        bottom=acc[over],
        width=width,
        align="edge",
        color="#d62728",
        alpha=0.45,
        hatch="//",
        edgecolor="#d62728",
        linewidth=0.5,
        label="overconfidence gap",
    )
    ax.bar(
        lo[under],
        (acc - conf)[under],
        bottom=conf[under],
        width=width,
        align="edge",
        color="#8fb3e0",
        alpha=0.45,
        hatch="\\\\",
        edgecolor="#4c72b0",
        linewidth=0.5,
        label="underconfidence gap",
    )
    for x0, c in zip(lo[filled], table["count"].to_numpy()[filled]):  # the count of each bin, at its foot
        ax.text(
            x0 + width / 2,
            0.01,
            str(int(c)),
            ha="center",
            va="bottom",
            fontsize=6,
            color="black",
            rotation=90 if c >= 1000 else 0,
        )
    ax.plot([0, 1], [0, 1], linestyle="--", color="gray", linewidth=1, label="perfect calibration")
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1)
    ax.set_ylabel("accuracy")
    ax.legend(loc="upper left", fontsize=8)
    ax.set_title(f"{title}\nECE = {ece:.4f} ({len(table)} bins, n = {n})", fontsize=10)
    ax_n.bar(lo, table["count"].to_numpy(), width=width, align="edge", color="gray", edgecolor="black", linewidth=0.5)
    ax_n.set_xlabel("confidence (largest predicted probability)")
    ax_n.set_ylabel("count")
    fig.tight_layout()
    return fig
