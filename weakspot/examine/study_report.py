"""The examiner study's report (stage ``examine_study``): metrics, tables and prose of each enabled experiment, in
the paper's order: Table 3 (training-set size m), the planted weakness (Sec. 4.4), the factor order (Sec. 4.5) and
strength mode (Sec. 4.6).

Caveats first: the planted weakness is judged against chance, the share of a uniform draw over the factor's full
range that lands outside the training range; the factor order check compares the mean of each factor (scaled to
[0, 1]) over the last queries of the two RL orders, so a small ``max_abs_diff`` means the order does not matter.
The prose says where the run differs from the paper (epochs, learning-rate schedule, classes, T).

Reference: M. Shu, C. Liu, W. Qiu, A. Yuille, "Identifying Model Weakness with Adversarial Examiner", AAAI 2020
(``seeds/000``): Sec. 4.3-4.6, Table 3.
"""

from __future__ import annotations

from typing import Any, Dict, Optional

import numpy as np

from weakspot.examine.config import ExamineParams
from weakspot.examine.inputs import as_params
from weakspot.examine.sessions import group
from weakspot.examine.study import StudyResult
from weakspot.result import StageResult


def study_report(result: StudyResult, params: ExamineParams) -> StageResult:
    """The study's section without its figures (:func:`weakspot.examine.study_figures.study_figures` draws them;
    check the section once they are in)."""
    params = as_params(params)
    st = params.study
    aw, ms = st.artificial_weakness, st.m_study
    out = StageResult(
        metrics={},
        tables={"models": result.models},
        title="Adversarial examiner study: "
        + ", ".join(
            n
            for n, on in (
                ("training-set size", ms.enabled),
                ("planted weakness", aw.enabled),
                ("factor order", st.order_check),
                ("strength mode", st.strength),
            )
            if on
        ),
        items=[
            {
                "table": "models",
                "caption": f"The study's {st.arch} models: training images "
                "and accuracy on random views of the unseen instances.",
            }
        ],
    )
    _intro(out, result, params)
    if ms.enabled:
        _m_study(out, result, params)
    if aw.enabled:
        _artificial(out, result, params)
    if st.order_check:
        _factor_order(out, result, params)
    if st.strength:
        _strength(out, result, params)
    return out


def _intro(out: StageResult, result: StudyResult, params: ExamineParams) -> None:
    st = params.study
    sched = "" if st.lr_schedule == "constant" else f", {st.lr_schedule}-annealed (the paper's is constant)"
    out.summary.append(
        f"The study trains its own {st.arch} models ({st.epochs} epochs (paper: 40), Adam, lr "
        f"{st.learning_rate():g}{sched}) and examines them"
        + (f"; its full model is the audited model of target {st.full_model!r}, not retrained" if st.full_model else "")
        + "."
    )
    if not st.m_study.enabled:
        out.summary.append(
            "Table 3 (training-set size m) is not run in this profile: it trains three more models "
            "(profiles/paper.yaml runs it)."
        )
    own = sorted({s.cls for s in result.sessions if s.group in ("order", "strength")})
    if own:
        out.summary.append(
            f"The factor order check and strength mode examine {', '.join(own)} for T = {st.T} "
            f"iterations (paper: every class, T = 500)."
        )


def _m_study(out: StageResult, result: StudyResult, params: ExamineParams) -> None:
    """Table 3: the last checkpoint of each examiner, and T0, per training-set size m."""
    import pandas as pd

    st, ms = params.study, params.study.m_study
    sessions = result.sessions
    mrows = []
    out.metrics["m_study"] = {}
    for e in ms.examiners:
        row: Dict[str, Any] = {"examiner": e}
        for m in ms.values:
            ss = group(sessions, "m_study", f"{st.arch}_m{m}", e)
            row[f"m={m}"] = float(np.mean([s.at(s.T, params.window) for s in ss]))
        out.metrics["m_study"][e] = {k: v for k, v in row.items() if k != "examiner"}
        mrows.append(row)
    row = {"examiner": "T0 (random)"}
    for m in ms.values:
        row[f"m={m}"] = float(np.mean([s.probs[0].mean() for s in group(sessions, "m_study_t0", f"{st.arch}_m{m}")]))
    out.metrics["m_study"]["T0"] = {k: v for k, v in row.items() if k != "examiner"}
    mrows.append(row)
    out.tables["table3"] = pd.DataFrame(mrows)
    out.items.append(
        {
            "table": "table3",
            "caption": f"{st.arch} trained with m images per instance, examined for T = {ms.T} (paper Table 3).",
        }
    )


def artificial_tsne_class(result: StudyResult, params: ExamineParams) -> Optional[str]:
    """The class of the planted weakness's t-SNE (paper Fig. 4): ``tsne_class`` if examined, else the first; None
    when no class was."""
    aw = params.study.artificial_weakness
    have = [s.cls for s in group(result.sessions, "artificial")]
    if not have:
        return None
    return aw.tsne_class if aw.tsne_class in have else have[0]


def _artificial(out: StageResult, result: StudyResult, params: ExamineParams) -> None:
    """Sec. 4.4: the share of each examiner's last queries outside the training range, next to chance."""
    import pandas as pd

    aw = params.study.artificial_weakness
    sessions = result.sessions
    lo, hi = aw.train_range
    full_lo, full_hi = result.space.bounds[aw.factor]
    chance = 1.0 - (hi - lo) / (full_hi - full_lo)  # a uniform draw over the full range lands outside
    out.metrics["artificial_weakness"] = {"chance": chance}
    arows = []
    for e in aw.examiners:
        ss = group(sessions, "artificial", examiner=e)
        vals = np.concatenate([[p[aw.factor] for p in s.tail_params] for s in ss])
        frac = float(np.mean((vals < lo) | (vals > hi)))
        out.metrics["artificial_weakness"][e] = {"frac_outside_train_range": frac}
        arows.append(
            {
                "examiner": e,
                "last_queries": f"{aw.tail} per class x {len(ss)} classes",
                "renders_per_class": aw.T * params.queries_per_iteration(e),
                "frac_outside_train_range": frac,
                "p_true_last": float(np.mean([s.at(s.T, params.window) for s in ss])),
            }
        )
    t0s = group(sessions, "artificial_t0")
    arows.append(
        {
            "examiner": "chance (uniform scenes)",
            "last_queries": "a uniform draw",
            "renders_per_class": 0,
            "frac_outside_train_range": chance,
            "p_true_last": float(np.mean([s.probs[0].mean() for s in t0s])) if t0s else float("nan"),
        }
    )
    out.tables["artificial_weakness"] = pd.DataFrame(arows)
    out.items += [
        {
            "table": "artificial_weakness",
            "caption": f"Model trained on a set rendered with {aw.factor} "
            f"limited to [{lo:g}, {hi:g}] (paper Sec. 4.4; same size, instances and views as the full set), "
            f"examined for T = {aw.T} iterations: share of each examiner's last {aw.tail} queries outside "
            f"that range, next to chance ({chance:.2f}: a uniform scene; p_true_last there is T0).",
        },
        {"figure": "artificial_weakness", "caption": f"{aw.factor} of the last {aw.tail} queries."},
    ]
    cls = artificial_tsne_class(result, params)
    if cls is not None:
        out.items.append(
            {
                "figure": "artificial_tsne",
                "caption": f"t-SNE of {cls} images (paper Fig. 4): "
                f"{params.n_random} uniform scenes (circles) and each examiner's last {aw.tail} (triangles); "
                f"orange: {aw.factor} outside the training range; opaque: misclassified.",
            }
        )
    shares = ", ".join(f"{r['examiner']} {r['frac_outside_train_range']:.2f}" for r in arows[:-1])
    out.summary.append(
        f"Planted weakness (Sec. 4.4, training views rendered with {aw.factor} in [{lo:g}, {hi:g}]): "
        f"share of the last {aw.tail} queries outside that range: {shares}; chance {chance:.2f}."
    )
    if result.regions:
        _planted_regions(out, result, params)


def outside(rule: Any, factor: str, train_range: Any) -> bool:
    """Whether ``rule`` bounds ``factor`` to one side of ``train_range`` (the box lies outside the training range)."""
    if rule is None or factor not in rule.ranges:
        return False
    a, b = rule.ranges[factor]
    return (a is not None and a >= train_range[1] - 1e-9) or (b is not None and b <= train_range[0] + 1e-9)


def _planted_regions(out: StageResult, result: StudyResult, params: ExamineParams) -> None:
    """The planted weakness as weak regions: the limited model's confirmed boxes outside the training range (lift
    above 2), against the full model's on the same classes."""
    import pandas as pd

    aw = params.study.artificial_weakness
    limited = f"{params.study.arch}_limited"
    rows = []
    for r in result.regions:
        ev = r.evidence
        rows.append(
            {
                "model": "limited" if r.model == limited else "full",
                "class": r.cls,
                "region": r.describe(),
                "outside training range": bool(r.boxes) and all(outside(b, aw.factor, aw.train_range) for b in r.boxes),
                "fresh inside failed": f"{ev.failures} of {ev.n_confirm}" if ev else "",
                "random failed": f"{ev.control_failures} of {ev.n_control}" if ev else "",
                "lift": ev.lift if ev else float("nan"),
                "95% interval": f"{ev.lift_lo:.2f}-{ev.lift_hi:.2f}" if ev else "",
                "confirmed": r.confirmed,
            }
        )
    df = out.tables["planted_regions"] = pd.DataFrame(rows)
    lim = df[df["model"] == "limited"]
    hit = lim[lim["confirmed"] & lim["outside training range"] & (lim["lift"] > 2)]
    full = df[df["model"] == "full"]
    out.metrics["artificial_weakness"]["regions"] = {
        "classes": int(len(lim)),
        "confirmed_outside_lift_above_2": int(len(hit)),
        "confirmed_outside": int((lim["confirmed"] & lim["outside training range"]).sum()),
        "best_lift_limited": float(lim["lift"].max()) if len(lim) else float("nan"),
        "full_confirmed_outside": int((full["confirmed"] & full["outside training range"]).sum()),
    }
    out.items.append(
        {
            "table": "planted_regions",
            "caption": (
                f"The planted weakness as weak regions (ours): per class, the box of factor ranges where each model's examined "
                f"scenes failed most often, confirmed by {params.regions.n_confirm} fresh renders inside it on the class's "
                f"other unseen instances against as many random scenes. The limited model never saw {aw.factor} outside "
                f"[{aw.train_range[0]:g}, {aw.train_range[1]:g}]; the full model, examined the same way, is the contrast."
            ),
        }
    )
    best = lim.sort_values("lift", ascending=False).head(1)
    best_s = (
        f"best: {best['class'].iloc[0]} fails when {best['region'].iloc[0]}, {best['fresh inside failed'].iloc[0]}"
        f" fresh scenes vs {best['random failed'].iloc[0]} random, lift {best['lift'].iloc[0]:.2f} (95% "
        f"{best['95% interval'].iloc[0]})"
        if len(best) and np.isfinite(best["lift"].iloc[0])
        else "no region"
    )
    out.summary.append(
        f"Planted weakness as a region (criterion: a confirmed box outside [{aw.train_range[0]:g}, "
        f"{aw.train_range[1]:g}] with lift above 2): {'met' if len(hit) else 'not met'} on {len(hit)} of {len(lim)} "
        f"classes of the limited model ({best_s}); the full model has {int((full['confirmed'] & full['outside training range']).sum())} "
        f"confirmed region(s) outside that range on the same classes."
    )


def factor_order_table(result: StudyResult, params: ExamineParams) -> Any:
    """Sec. 4.5: the mean of each searched factor (scaled to [0, 1]) over the last queries of the default-order and
    the viewpoint-first RL examiners, their final probability, and the absolute difference."""
    import pandas as pd

    space = result.space
    a = group(result.sessions, "main", examiner="rl")
    b = group(result.sessions, "order")
    c = group(result.sessions, "order_control")
    searched = list(space.searched)
    lo = np.array([space.bounds[k][0] for k in searched])
    hi = np.array([space.bounds[k][1] for k in searched])

    def tail_mean(ss):
        if not ss:
            return np.full(len(searched), np.nan)
        X = np.array([[p[k] for k in searched] for s in ss for p in s.tail_params])
        return ((X - lo) / (hi - lo)).mean(0)

    def last(ss):
        return float(np.mean([s.at(s.T, params.window) for s in ss])) if ss else np.nan

    ma, mb, mc = tail_mean(a), tail_mean(b), tail_mean(c)
    df = pd.DataFrame(
        {
            "factor": searched + ["p_true_last"],
            "default_order": list(ma) + [last(a)],
            "view_first_order": list(mb) + [last(b)],
            "default_order_other_seeds": list(mc) + [last(c)],
        }
    )
    df["abs_diff"] = (df["default_order"] - df["view_first_order"]).abs()
    df["abs_diff_seeds"] = (df["default_order"] - df["default_order_other_seeds"]).abs()
    return df


def _factor_order(out: StageResult, result: StudyResult, params: ExamineParams) -> None:
    fo = out.tables["factor_order"] = factor_order_table(result, params)
    f = fo[fo["factor"] != "p_true_last"]
    orders, seeds = float(f["abs_diff"].max()), float(f["abs_diff_seeds"].max())
    out.metrics["order_check"] = {
        "max_abs_diff": orders,
        "max_abs_diff_seeds": seeds,
        "mean_abs_diff": float(f["abs_diff"].mean()),
        "mean_abs_diff_seeds": float(f["abs_diff_seeds"].mean()),
    }
    more = float(f["abs_diff"].mean()) > float(f["abs_diff_seeds"].mean())
    out.summary.append(
        f"Factor order (Sec. 4.5; the paper: the order changes what the examiner finds): the viewpoint-first order "
        f"moves the last queries' factors by {f['abs_diff'].mean():.3f} on average (largest {orders:.3f}), the same "
        f"default order with other examiner seeds by {f['abs_diff_seeds'].mean():.3f} (largest {seeds:.3f}): "
        + (
            "the order changes the examination more than a change of seed does."
            if more
            else "no more than a change of seed does, so this run cannot tell the order's effect from the seed's."
        )
    )
    out.items += [
        {
            "table": "factor_order",
            "caption": "RL examiners with two factor orders (paper Sec. 4.5): "
            "mean of each factor (scaled to [0, 1]) over the last queries, and the final probability; the "
            "control is the default order with other examiner seeds (abs_diff_seeds).",
        },
        {"figure": "factor_order", "caption": "t-SNE of the last queries of both orders (paper Fig. 6)."},
    ]


def _strength(out: StageResult, result: StudyResult, params: ExamineParams) -> None:
    """Sec. 4.6: the examiner maximises the true-class probability; the best found against T0."""
    import pandas as pd

    ss = group(result.sessions, "strength")
    t0 = {s.cls: float(s.probs[0].mean()) for s in group(result.sessions, "main_t0")}
    best_random = {s.cls: float(s.probs[0].max()) for s in group(result.sessions, "main_t0")}
    table = out.tables["strength"] = pd.DataFrame(
        [
            {
                "class": s.cls,
                "T0": t0[s.cls],
                "last": s.at(s.T, params.window),
                "best_found": s.worst_found[0],
                "best_of_random": best_random[s.cls],
            }
            for s in ss
        ]
    )
    out.metrics["strength"] = {
        "T0": float(table["T0"].mean()),
        "last": float(table["last"].mean()),
        "best_found": float(table["best_found"].mean()),
        "best_of_random": float(table["best_of_random"].mean()),
    }
    out.items += [
        {
            "table": "strength",
            "caption": (
                f"Strength mode (paper Sec. 4.6): the examiner maximises the true-class probability. 'last' is the mean of "
                f"the last {params.window} iterations' queries, what the examiner settled on; 'best_found' is its single "
                f"best scene, which {params.n_random} random scenes nearly reach too ('best_of_random')."
            ),
        },
        {"figure": "strength", "caption": "Strength mode curves and the best scenes (paper Fig. 5)."},
    ]
