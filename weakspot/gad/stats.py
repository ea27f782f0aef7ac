"""Statistics of GAD's runs on a target: SDR per split seed and over seeds, and how well GAD singles out errors.

Caveats first: a target's runs are its split seeds (:func:`group_runs`); each seed's SDR is the mean over its pools
with a Student-t interval over pools (:func:`seed_stats`), and across seeds the mean of those means with a t
interval over seeds (:func:`across_seeds`; one seed: its interval over pools). The interval over one black box's
overlapping pools is narrower than the spread from one split to the next. The error AUCs and error rates use the
ground truth: they grade the audit, no search sees them.
"""

from __future__ import annotations

from typing import Dict, List, Tuple

import numpy as np

from weakspot.errors import DataError
from weakspot.gad.protocol import DatasetOutcome
from weakspot.gad.sdr import mean_ci95


def group_runs(outcomes: List[DatasetOutcome]) -> Dict[str, List[DatasetOutcome]]:
    """The runs of each target (in order of first appearance), sorted by split seed; the first is the audited one."""
    groups: Dict[str, List[DatasetOutcome]] = {}
    for o in outcomes:
        groups.setdefault(o.name, []).append(o)
    for name, runs in groups.items():
        runs.sort(key=lambda o: o.split_seed)
        seeds = [o.split_seed for o in runs]
        if len(set(seeds)) != len(seeds):
            raise DataError(f"{name}: more than one run for a split seed ({seeds}); give each run its own split_seed")
        if any(list(o.sdr) != list(runs[0].sdr) for o in runs):
            raise DataError(f"{name}: the runs of different split seeds ran different searches")
    return groups


def common_budget(runs: List[DatasetOutcome]) -> int:
    """Queries per search that every run of a target made (the fewest)."""
    return min(int(o.budget or next(iter(o.sdr.values())).shape[1]) for o in runs)


def nanmean(values: List[float]) -> float:
    """Mean of the finite values; NaN when there is none."""
    v = np.asarray(values, dtype=np.float64)
    return float(np.nanmean(v)) if np.isfinite(v).any() else float("nan")


def seed_stats(o: DatasetOutcome, budget: int) -> Dict[str, Dict[str, float]]:
    """Per search: mean SDR after ``budget`` queries over the pools, its 95% interval over pools, errors found and
    expected (means over the pools)."""
    out = {}
    for s, curve in o.sdr.items():
        mean, lo, hi = mean_ci95(curve[:, budget - 1])
        out[s] = {
            "sdr": float(mean),
            "lo": float(lo),
            "hi": float(hi),
            "errors": float(o.errors[s][:, :budget].sum(axis=1).mean()),
            "expected": float((1.0 - o.confidence[s][:, :budget]).sum(axis=1).mean()),
        }
    return out


def across_seeds(runs: List[DatasetOutcome], budget: int) -> Dict[str, Dict[str, float]]:
    """Per search, over the seeds: mean, 95% Student-t interval (over the pools where one seed ran), min, max of the
    per-seed mean SDR, and the mean errors found and expected."""
    stats = [seed_stats(o, budget) for o in runs]
    out = {}
    for s in runs[0].sdr:
        vals = np.array([st[s]["sdr"] for st in stats])
        if len(runs) > 1:
            mean, lo, hi = (float(v) for v in mean_ci95(vals))
        else:
            mean, lo, hi = stats[0][s]["sdr"], stats[0][s]["lo"], stats[0][s]["hi"]
        out[s] = {
            "sdr": mean,
            "lo": lo,
            "hi": hi,
            "min": float(np.nanmin(vals)) if np.isfinite(vals).any() else np.nan,
            "max": float(np.nanmax(vals)) if np.isfinite(vals).any() else np.nan,
            "errors": float(np.mean([st[s]["errors"] for st in stats])),
            "expected": float(np.mean([st[s]["expected"] for st in stats])),
        }
    return out


def curve_band(per_seed: List[np.ndarray]) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Mean curve and 95% interval: over the seeds' mean curves (t interval over seeds), or over one seed's pools."""
    if len(per_seed) == 1:
        return mean_ci95(per_seed[0])
    with np.errstate(invalid="ignore"):
        means = np.vstack([np.nanmean(c, axis=0) for c in per_seed])
    return mean_ci95(means)


def auc(value: np.ndarray, positive: np.ndarray) -> float:
    """P(a positive row has a higher ``value`` than a negative one), ties counting half: scikit-learn's ROC AUC;
    NaN without both kinds. Infinite values (GAD's never-flipped rows) rank beyond every finite one."""
    from sklearn.metrics import roc_auc_score

    pos = np.asarray(positive, dtype=bool)
    if pos.all() or not pos.any():
        return float("nan")
    v = np.asarray(value, dtype=np.float64)
    fin = v[np.isfinite(v)]
    lo, hi = (float(fin.min()), float(fin.max())) if fin.size else (0.0, 0.0)
    v = np.where(v == -np.inf, lo - 1.0, np.where(v == np.inf, hi + 1.0, v))  # roc_auc_score refuses inf
    return float(roc_auc_score(pos, v))


def error_aucs(o: DatasetOutcome) -> Tuple[float, float]:
    """How well a low GAD, and a low confidence, single out the errors among the eligible rows (ground truth, audit
    only): AUCs, 0.5 = no better than chance. GAD's premise (Sec. IV-A) is that errors flip with less perturbation
    than their confidence predicts, i.e. a GAD AUC above 0.5."""
    err = ~np.asarray(o.test_correct)[o.eligible]
    return auc(-np.asarray(o.gad), err), auc(-np.asarray(o.test_confidence)[o.eligible], err)


def lowest_gad_error_rate(o: DatasetOutcome) -> Tuple[float, float]:
    """Error rate among the eligible rows GAD ranks first -- the lowest-GAD ``budget / pool_size`` share, the share a
    search queries from a pool -- and among all eligible rows (ground truth, audit only)."""
    err = ~np.asarray(o.test_correct)[o.eligible]
    if not len(err):
        return float("nan"), float("nan")
    k = max(1, int(round(len(err) * o.budget / max(o.pool_size, 1))))
    first = np.lexsort((np.arange(len(err)), np.asarray(o.gad)))[:k]
    return float(err[first].mean()), float(err.mean())
