"""The examiner study's figures (stage ``examine_study``): the planted weakness's late queries and t-SNE (paper
Fig. 4), the t-SNE of the two RL factor orders (Fig. 6) and strength mode's curves and best scenes (Fig. 5).

Caveats first: figures are drawn from the :class:`~weakspot.examine.study.StudyResult` alone, on matplotlib's Agg
back end, and returned unsaved; only the enabled experiments' figures are drawn, the ones the report's items name.

Reference: M. Shu, C. Liu, W. Qiu, A. Yuille, "Identifying Model Weakness with Adversarial Examiner", AAAI 2020
(``seeds/000``): Fig. 4-6.
"""

from __future__ import annotations

from typing import Any, Dict

import numpy as np

from weakspot.examine.config import ExamineParams
from weakspot.examine.inputs import as_params
from weakspot.examine.sessions import group
from weakspot.examine.study import StudyResult
from weakspot.examine.study_report import artificial_tsne_class
from weakspot.examine.tsne import random_and_examined, tsne
from weakspot.plotting import pyplot


def study_figures(result: StudyResult, params: ExamineParams) -> Dict[str, Any]:
    """``artificial_weakness`` and ``artificial_tsne`` (planted weakness), ``factor_order``, ``strength``: each when
    its experiment ran."""
    params = as_params(params)
    st = params.study
    aw = st.artificial_weakness
    sessions = result.sessions
    figures: Dict[str, Any] = {}
    if aw.enabled:
        figures["artificial_weakness"] = _fig_artificial(sessions, aw)
        cls = artificial_tsne_class(result, params)
        if cls is not None:
            figures["artificial_tsne"] = _fig_artificial_tsne(sessions, aw, cls, params.seed)
    if st.order_check:
        figures["factor_order"] = _fig_factor_order(sessions, params)
    if st.strength:
        figures["strength"] = _fig_strength(group(sessions, "strength"), params)
    return figures


def _fig_artificial(sessions, aw):
    """Sec. 4.4: the planted factor's values over each examiner's last queries, against the training range."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(5, 3.2))
    lo, hi = aw.train_range
    bins = np.linspace(-90, 90, 19) if aw.factor.endswith("elevation") else 18
    for e in aw.examiners:
        vals = np.concatenate(
            [[p[aw.factor] for p in s.tail_params] for s in group(sessions, "artificial", examiner=e)]
        )
        ax.hist(vals, bins=bins, histtype="step", lw=2, label=e, density=True)
    ax.axvspan(lo, hi, color="grey", alpha=0.2, label="training range")
    ax.set(xlabel=aw.factor, ylabel="density of late queries")
    ax.legend(fontsize=7)
    fig.tight_layout()
    return fig


def _fig_artificial_tsne(sessions, aw, cls: str, seed: int):
    """Paper Fig. 4: uniform scenes against each examiner's last queries of one class on the limited model."""
    plt = pyplot()
    lo, hi = aw.train_range
    exs = [e for e in aw.examiners if e != "random"] or list(aw.examiners)
    fig, axes = plt.subplots(1, len(exs), figsize=(4 * len(exs), 4), squeeze=False)
    r = [s for s in group(sessions, "artificial_t0") if s.cls == cls]
    for ax, e in zip(axes[0], exs):
        x = [s for s in group(sessions, "artificial", examiner=e) if s.cls == cls]
        if not r or not x:
            ax.set_axis_off()
            continue
        r0, x0 = r[0], x[0]
        imgs, is_ex, wrong = random_and_examined(r0, x0)
        factor = np.array([p[aw.factor] for p in list(r0.tail_params) + list(x0.tail_params)])
        outside = (factor < lo) | (factor > hi)
        Y = tsne(imgs, seed)
        for ex, marker, lab in ((False, "o", "uniform"), (True, "^", e)):
            for out, color in ((False, "C0"), (True, "C1")):
                for bad in (False, True):
                    k = (is_ex == ex) & (outside == out) & (wrong == bad)
                    if k.any():
                        ax.scatter(
                            Y[k, 0],
                            Y[k, 1],
                            marker=marker,
                            s=20,
                            color=color,
                            alpha=0.9 if bad else 0.25,
                            label=f"{lab}, {'outside' if out else 'inside'}{', wrong' if bad else ''}",
                        )
        ax.set(title=f"{cls}: uniform vs {e} (last {len(x0.tail_images)})", xticks=[], yticks=[])
        ax.legend(fontsize=6)
    fig.tight_layout()
    return fig


def _fig_factor_order(sessions, params):
    """Paper Fig. 6: t-SNE of the last queries of the default-order and the viewpoint-first RL examiners."""
    plt = pyplot()
    a = group(sessions, "main", examiner="rl")
    b = group(sessions, "order")
    fig, ax = plt.subplots(figsize=(4.5, 4))
    cls = params.tsne_class if params.tsne_class in [s.cls for s in b] else b[0].cls
    sa = [s for s in a if s.cls == cls]
    sb = [s for s in b if s.cls == cls]
    if sa and sb:
        imgs = np.stack(list(sa[0].tail_images) + list(sb[0].tail_images))
        Y = tsne(imgs, params.seed)
        n = len(sa[0].tail_images)
        ax.scatter(Y[:n, 0], Y[:n, 1], marker="o", s=18, alpha=0.6, label="default order")
        ax.scatter(Y[n:, 0], Y[n:, 1], marker="^", s=18, alpha=0.6, label="viewpoint first")
        ax.legend(fontsize=7)
    ax.set(title=f"{cls}: last queries of two RL orders", xticks=[], yticks=[])
    fig.tight_layout()
    return fig


def _fig_strength(ss, params):
    """Paper Fig. 5: strength mode's curve per class and the best scenes found."""
    plt = pyplot()
    k = min(len(ss), params.n_worst)
    fig, axes = plt.subplots(
        1, 1 + k, figsize=(4 + 1.8 * k, 3), squeeze=False, gridspec_kw={"width_ratios": [3] + [1] * k}
    )
    ax = axes[0][0]
    for s in ss:
        ax.plot(np.arange(1, len(s.probs) + 1), s.curve(), lw=1, label=s.cls)
    ax.set(xlabel="iteration", ylabel="true-class probability", ylim=(0, 1.02), title="strength mode")
    ax.legend(fontsize=6)
    for ax, s in zip(axes[0][1:], sorted(ss, key=lambda s: -s.worst[0])[:k]):
        ax.imshow(s.worst[2])
        ax.set_title(f"{s.cls} p={s.worst[0]:.2f}", fontsize=7)
        ax.set_xticks([])
        ax.set_yticks([])
    fig.tight_layout()
    return fig
