"""The examiner's figures on a target: the class-averaged curves (per iteration and per render), T0 against the last
checkpoint per class, the t-SNE of random against examined scenes, and the worst scenes found.

Caveats first: figures are drawn from the :class:`~weakspot.examine.run.ExamineResult` alone, on matplotlib's Agg
back end, and returned unsaved (the stage writes them); the t-SNE embeds raw pixels, seeded by ``params.seed``.

Reference: M. Shu, C. Liu, W. Qiu, A. Yuille, "Identifying Model Weakness with Adversarial Examiner", AAAI 2020
(``seeds/000``): Fig. 1 (curves), Fig. 2 (per class), Fig. 3 (t-SNE).
"""

from __future__ import annotations

from typing import Any, Dict

import numpy as np

from weakspot.examine.config import ExamineParams
from weakspot.examine.inputs import as_params
from weakspot.examine.report import per_class_table, target_metrics
from weakspot.examine.run import ExamineResult
from weakspot.examine.sessions import group
from weakspot.examine.tsne import random_and_examined, tsne
from weakspot.plotting import pyplot


def figures(result: ExamineResult, params: ExamineParams, target: Any = None) -> Dict[str, Any]:
    """``curves``, ``curves_renders``, ``per_class``, ``tsne`` and ``worst``."""
    params = as_params(params)
    sessions = result.sessions
    per_class = per_class_table(result, params, target_metrics(result, params))
    return {
        "regions": regions_figure(result.regions),
        "curves": _fig_curves(sessions, params),
        "curves_renders": _fig_curves(sessions, params, by_renders=True),
        "per_class": _fig_per_class(per_class, params.names()[-1]),
        "tsne": _fig_tsne(sessions, params),
        "worst": _fig_worst(sessions, params),
    }


def _fig_curves(sessions, params, by_renders: bool = False):
    """Class-averaged true-class probability per iteration, or against renders (each examiner at its own cost)."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(5, 3.5))
    t0 = np.mean([s.probs[0].mean() for s in group(sessions, "main_t0")])
    for e in params.examiners:
        ss = group(sessions, "main", examiner=e)
        reps = sorted({s.rep for s in ss})
        per_rep = np.array([np.mean([s.curve() for s in ss if s.rep == r], axis=0) for r in reps])
        c = per_rep.mean(axis=0)
        q = params.queries_per_iteration(e) if by_renders else 1
        x = q * np.arange(1, len(c) + 1)
        (line,) = ax.plot(x, c, label=f"{e} ({q} per iteration)" if by_renders else e)
        if len(reps) > 1:  # the repeats' spread: the 95% t-interval of their mean
            from scipy.stats import t

            h = t.ppf(0.975, len(reps) - 1) * per_rep.std(axis=0, ddof=1) / np.sqrt(len(reps))
            ax.fill_between(x, c - h, c + h, color=line.get_color(), alpha=0.2, lw=0)
    ax.axhline(t0, color="grey", ls="--", label="T0 (random)")
    if by_renders:
        ax.set_xscale("log")
    ax.set(
        xlabel="renders (model queries)" if by_renders else "iteration", ylabel="true-class probability", ylim=(0, 1)
    )
    ax.legend(fontsize=7)
    fig.tight_layout()
    return fig


def _fig_per_class(df, last):
    """Paper Fig. 2: T0 against the last checkpoint per class, one panel per examiner."""
    plt = pyplot()
    groups = list(df.groupby("examiner", sort=False))
    fig, axes = plt.subplots(1, len(groups), figsize=(max(4, 3.5 * len(groups)), 3.5), squeeze=False)
    for ax, (e, d) in zip(axes[0], groups):
        x = np.arange(len(d))
        ax.bar(x - 0.2, d["T0"], 0.4, label="T0")
        lo, hi = d.get(f"{last}_lo"), d.get(f"{last}_hi")
        err = np.vstack([d[last] - lo, hi - d[last]]) if lo is not None and np.isfinite(lo).all() else None
        ax.bar(x + 0.2, d[last], 0.4, label=last, yerr=err, capsize=2)
        ax.set_xticks(x, d["class"], rotation=60, fontsize=7)
        ax.set(title=e, ylim=(0, 1))
        ax.legend(fontsize=7)
    fig.tight_layout()
    return fig


def regions_figure(regions):
    """Each proposed region's lift with its 95% interval (log scale; the line at 1 = no more failures than random)."""
    plt = pyplot()
    tried = [r for r in regions if r.evidence is not None]
    fig, ax = plt.subplots(figsize=(6, 0.5 + 0.45 * max(1, len(tried))))
    if not tried:
        ax.text(0.5, 0.5, "no region proposed", ha="center", va="center")
        ax.set_axis_off()
        return fig
    for i, r in enumerate(tried):
        ev = r.evidence
        hi = ev.lift_hi if np.isfinite(ev.lift_hi) else ev.lift * 4
        lo = max(ev.lift_lo, 1e-2) if np.isfinite(ev.lift_lo) else ev.lift
        ax.plot([lo, hi], [i, i], color="C3" if r.confirmed else "grey")
        ax.plot([max(ev.lift, 1e-2)], [i], "o", color="C3" if r.confirmed else "grey")
    ax.axvline(1.0, color="black", lw=0.8, ls="--")
    ax.set_yticks(range(len(tried)), [r.text()[:70] for r in tried], fontsize=7)
    ax.set_xscale("log")
    ax.set(xlabel="lift (fresh renders inside / random scenes), 95% interval")
    ax.invert_yaxis()
    fig.tight_layout()
    return fig


def _scatter(ax, Y, is_ex, wrong):
    """Random (circles) and examined (triangles) scenes; opaque where misclassified."""
    for ex, marker, lab in ((False, "o", "random"), (True, "^", "examined")):
        for bad in (False, True):
            k = (is_ex == ex) & (wrong == bad)
            if k.any():
                ax.scatter(
                    Y[k, 0],
                    Y[k, 1],
                    marker=marker,
                    alpha=0.9 if bad else 0.2,
                    s=18,
                    color="C3" if ex else "C0",
                    label=f"{lab}{' (wrong)' if bad else ''}",
                )


def _fig_tsne(sessions, params):
    """Paper Fig. 3: t-SNE of random scenes and each searching examiner's last queries of ``tsne_class``."""
    plt = pyplot()
    examined = [s.cls for s in sessions if s.group == "main"]
    cls = params.tsne_class if params.tsne_class in examined else examined[0]
    pairs = [e for e in params.examiners if e != "random"] or list(params.examiners)
    fig, axes = plt.subplots(1, len(pairs), figsize=(4 * len(pairs), 4), squeeze=False)
    for ax, e in zip(axes[0], pairs):
        r = [s for s in group(sessions, "main_t0") if s.cls == cls]
        x = [s for s in group(sessions, "main", examiner=e) if s.cls == cls]
        if not r or not x:
            ax.set_axis_off()
            continue
        imgs, is_ex, wrong = random_and_examined(r[0], x[0], params.tail)
        _scatter(ax, tsne(imgs, params.seed), is_ex, wrong)
        ax.set(title=f"{cls}: {e}", xticks=[], yticks=[])
        ax.legend(fontsize=6)
    fig.tight_layout()
    return fig


def _fig_worst(sessions, params):
    """The ``n_worst`` worst scenes each examiner found (lowest true-class probability), with their viewpoint."""
    plt = pyplot()
    pairs = list(params.examiners)
    k = params.n_worst
    fig, axes = plt.subplots(len(pairs), k, figsize=(1.8 * k, 2.0 * len(pairs)), squeeze=False)
    for row, e in zip(axes, pairs):
        ss = sorted(group(sessions, "main", examiner=e), key=lambda s: s.worst[0])[:k]
        for ax, s in zip(row, ss):
            ax.imshow(s.worst[2])
            p = s.worst[1]
            ax.set_title(
                f"{s.cls} p={s.worst[0]:.2f}\nelev={p.get('view_elevation', float('nan')):.0f} "
                f"dist={p.get('view_distance', float('nan')):.1f}",
                fontsize=6,
            )
        for ax in row:
            ax.set_xticks([])
            ax.set_yticks([])
        row[0].set_ylabel(e, fontsize=7)
    fig.tight_layout()
    return fig
