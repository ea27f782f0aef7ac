"""The examiner's report on a target: metrics (Table 2's layout, per class, at equal renders), tables, prose and the
findings (one weak spot per examined class, and each class the model never learnt).

Caveats first:

* The checkpoints are keyed by the iterations that ran (``T<n>``), never by the paper's T when fewer ran; the
  ``settings`` table and the prose say what differs from the paper's settings (Sec. 4.1).
* Examiners differ in what an iteration costs (RL renders a batch, BO one scene), so the metrics also compare them at
  equal numbers of renders (``at_equal_renders``: each value a mean over the same number of renders).
* A class whose T0 (the mean true-class probability of random scenes) is below 0.5 was never learnt: it is a finding
  of its own (``unlearnt_class``), and the examiners' drop on it says little.
* A finding's severity is 1 - the lowest true-class probability a searching examiner (BO, RL) reached.

Reference: M. Shu, C. Liu, W. Qiu, A. Yuille, "Identifying Model Weakness with Adversarial Examiner", AAAI 2020
(``seeds/000``): Table 2, Sec. 4.1-4.2.
"""

from __future__ import annotations

import json
from typing import Any, Dict, List, Mapping, Sequence, Tuple

import numpy as np

from weakspot.examine.config import PAPER_SETTINGS, ExamineParams
from weakspot.examine.inputs import as_params
from weakspot.examine.regions import Region
from weakspot.examine.run import ExamineResult
from weakspot.examine.sessions import Session, group
from weakspot.findings import to_png
from weakspot.methods import MethodReport
from weakspot.result import StageResult

FINDING_COLUMNS = (
    "weak_spot",
    "kind",
    "severity",
    "severity_meaning",
    "label",
    "prediction",
    "confidence",
    "factors",
    "image",
)


def report(result: ExamineResult, params: ExamineParams, target: Any = None) -> MethodReport:
    """The report section (without figures: :func:`weakspot.examine.figures.figures`) and the findings."""
    params = as_params(params)
    return MethodReport(section=target_section(result, params), findings=findings(result, params))


# ------------------------------------------------------------------------------------------ metrics and tables


def t0_by_class(sessions: Sequence[Session], t0_group: str = "main_t0") -> Dict[str, float]:
    """T0 per class: the mean true-class probability of the T = 0 protocol's random scenes (over the repeats)."""
    by: Dict[str, List[float]] = {}
    for s in group(sessions, t0_group):
        by.setdefault(s.cls, []).append(float(s.probs[0].mean()))
    return {c: float(np.mean(v)) for c, v in by.items()}


def mean_ci(values: Sequence[float]) -> Tuple[float, float, float]:
    """The mean of ``values`` (one per repeat) and its 95% t-interval (NaN ends for fewer than two)."""
    v = np.asarray(values, np.float64)
    m = float(v.mean()) if len(v) else float("nan")
    if len(v) < 2:
        return m, float("nan"), float("nan")
    from scipy.stats import t

    h = float(t.ppf(0.975, len(v) - 1) * v.std(ddof=1) / np.sqrt(len(v)))
    return m, m - h, m + h


def at_renders(sessions: Sequence[Session], r: int, w: int) -> float:
    """Mean over sessions of the true-class probability of renders (r - w, r] (1-based, in query order)."""
    vals = []
    for s in sessions:
        flat = np.concatenate(s.probs) if s.probs else np.zeros(0)
        seg = flat[max(0, r - w) : r]
        if len(seg):
            vals.append(float(seg.mean()))
    return float(np.mean(vals)) if vals else float("nan")


def equal_cost(params: ExamineParams) -> Tuple[Dict[str, int], List[int], int]:
    """Renders per iteration of each examiner, the render counts they are compared at (the cheapest examiner's at
    each checkpoint) and the window of renders each comparison averages (the costliest iteration's)."""
    q = {e: params.queries_per_iteration(e) for e in params.examiners}
    grid = [int(cp * min(q.values())) for cp in params.checkpoints if cp > 0]
    return q, grid, max(q.values())


def _per_class(sessions: Sequence[Session], params: ExamineParams, t0: Mapping[str, float]) -> Dict[str, Any]:
    """``{class: {examiner: {"T0", "<last T>", "<last T>_lo", "<last T>_hi", "min_found"[, "gp_length_scale_min"]}}}``:
    means over the repeats, the interval a 95% t-interval over them."""
    last = params.names()[-1]
    per_class: Dict[str, Dict[str, Any]] = {c: {} for c in t0}
    for e in params.examiners:
        ss = group(sessions, "main", examiner=e)
        for c in dict.fromkeys(s.cls for s in ss):
            mine = [s for s in ss if s.cls == c]
            m, lo, hi = mean_ci([s.at(params.T, params.window) for s in mine])
            row = {
                "T0": t0[c],
                last: m,
                f"{last}_lo": lo,
                f"{last}_hi": hi,
                "min_found": float(min(np.concatenate(s.probs).min() for s in mine)),
            }
            scales = [float(s.length_scales.min()) for s in mine if s.length_scales is not None]
            if scales:  # BO's GP (metrics only): a collapsed length scale means random search
                row = {**row, "gp_length_scale_min": min(scales)}
            per_class[c][e] = row
    return per_class


def repeat_means(sessions: Sequence[Session], params: ExamineParams, e: str) -> List[float]:
    """Per repeat, the class-averaged true-class probability at the last checkpoint of examiner ``e``."""
    reps = sorted({s.rep for s in group(sessions, "main", examiner=e)})
    return [
        float(np.mean([s.at(params.T, params.window) for s in group(sessions, "main", examiner=e, rep=r)]))
        for r in reps
    ]


def target_metrics(result: ExamineResult, params: ExamineParams) -> Dict[str, Any]:
    """``{examiner: {"T0": p, "T100": p, ...}, "per_class": ..., "renders": ..., "at_equal_renders": ...,
    "classes_t0_below_half": [...]}``."""
    sessions = result.sessions
    t0 = t0_by_class(sessions)
    metrics: Dict[str, Any] = {}
    for e in params.examiners:
        ss = group(sessions, "main", examiner=e)
        metrics[e] = {
            nm: float(np.mean([t0[s.cls] if cp == 0 else s.at(cp, params.window) for s in ss]))
            for cp, nm in zip(params.checkpoints, params.names())
        }
    metrics["per_class"] = _per_class(sessions, params, t0)
    last = params.names()[-1]
    metrics["repeats"] = {
        e: dict(
            zip(("mean", "lo", "hi"), mean_ci(repeat_means(sessions, params, e))),
            per_repeat=repeat_means(sessions, params, e),
            checkpoint=last,
        )
        for e in params.examiners
    }
    metrics["regions"] = {
        "proposed": sum(r.rule is not None for r in result.regions),
        "confirmed": sum(r.confirmed for r in result.regions),
    }
    # equal cost: an RL iteration renders a batch, a BO iteration one scene; compare at equal numbers of renders
    q, grid, w = equal_cost(params)
    metrics["renders"] = {
        e: {nm: int(cp * q[e]) for cp, nm in zip(params.checkpoints, params.names())} for e in params.examiners
    }
    metrics["at_equal_renders"] = {
        e: {f"R{r}": at_renders(group(sessions, "main", examiner=e), r, w) for r in grid} for e in params.examiners
    }
    metrics["classes_t0_below_half"] = sorted(c for c, v in t0.items() if v < 0.5)
    return metrics


def settings_table(params: ExamineParams, space: Any = None):
    """What ran against the paper's settings (seeds/000 Sec. 4.1), one row per setting the paper gives, and one per
    factor of ``space`` whose range differs from Table 1's."""
    import pandas as pd

    from weakspot.scene.space import PAPER_BOUNDS, UNITS

    rows = []
    for key, (paper, where) in PAPER_SETTINGS.items():
        obj = params
        for part in key.split("."):
            obj = getattr(obj, part)
        rows.append({"setting": key, "ran": str(obj), "paper": f"{paper} ({where})", "differs": obj != paper})
    rows.append(
        {
            "setting": "checkpoints",
            "ran": str(list(params.checkpoints)),
            "paper": "[0, 100, 300, 500] (Table 2)",
            "differs": list(params.checkpoints) != [0, 100, 300, 500],
        }
    )
    for k, paper in PAPER_BOUNDS.items():
        ran = tuple(float(v) for v in space.bounds[k]) if space is not None and k in space.bounds else None
        if ran is not None and ran != tuple(paper):
            rows.append(
                {
                    "setting": f"range of {k}",
                    "ran": f"[{ran[0]:g}, {ran[1]:g}] {UNITS.get(k, '')}",
                    "paper": f"[{paper[0]:g}, {paper[1]:g}] (Table 1; weakspot/scene/space.py says why it "
                    "differs in this scene)",
                    "differs": True,
                }
            )
    return pd.DataFrame(rows, columns=["setting", "ran", "paper", "differs"])


def per_class_table(result: ExamineResult, params: ExamineParams, metrics: Mapping[str, Any]):
    """One row per examiner and class: the examined instance, T0, the last checkpoint (mean over the repeats, with
    its 95% interval) and the lowest found."""
    import pandas as pd

    rows = []
    for e in params.examiners:
        ss = group(result.sessions, "main", examiner=e)
        for c in dict.fromkeys(s.cls for s in ss):
            row = {k: v for k, v in metrics["per_class"][c][e].items() if k != "gp_length_scale_min"}
            inst = next(s.instance for s in ss if s.cls == c)
            rows.append({"examiner": e, "class": c, "instance": inst, **row})
    return pd.DataFrame(rows)


def regions_table(result: ExamineResult):
    """One row per (class) region: the box in words, the examined scenes inside it, the fresh renders inside it
    against random ones, the lift with its interval, and whether it is confirmed."""
    import pandas as pd

    rows = []
    for r in result.regions:
        ev = r.evidence
        rows.append(
            {
                "class": r.cls,
                "region": r.describe(),
                "examined scenes inside (failed)": f"{r.searched_rows} ({r.searched_failures})",
                "fresh inside failed": f"{ev.failures} of {ev.n_confirm}" if ev else "",
                "random failed": f"{ev.control_failures} of {ev.n_control}" if ev else "",
                "lift": ev.lift if ev else float("nan"),
                "95% interval": f"{ev.lift_lo:.2f}-{ev.lift_hi:.2f}" if ev else "",
                "confirmed": r.confirmed,
            }
        )
    return pd.DataFrame(
        rows,
        columns=[
            "class",
            "region",
            "examined scenes inside (failed)",
            "fresh inside failed",
            "random failed",
            "lift",
            "95% interval",
            "confirmed",
        ],
    )


def _worst_table(result: ExamineResult, params: ExamineParams):
    import pandas as pd

    rows = []
    for e in params.examiners:
        for s in group(result.sessions, "main", examiner=e):
            rows.append(
                {
                    "examiner": e,
                    "class": s.cls,
                    "repeat": s.rep,
                    "instance": s.instance,
                    "p_true": s.worst_found[0],
                    "prediction": result.classes[s.worst_pred[0]],
                    **{k: round(v, 3) for k, v in s.worst_found[1].items()},
                    **{k: round(v, 3) for k, v in s.sun.items()},
                }
            )
    return pd.DataFrame(rows).sort_values(["examiner", "p_true"]).reset_index(drop=True)


def target_tables(result: ExamineResult, params: ExamineParams, metrics: Mapping[str, Any]) -> Dict[str, Any]:
    """``table2``, ``per_class``, ``worst``, ``equal_renders``, ``t0_per_class`` and ``settings``."""
    import pandas as pd

    q, grid, _ = equal_cost(params)
    t0 = t0_by_class(result.sessions)
    last = params.names()[-1]
    return {
        "table2": pd.DataFrame(
            [
                {
                    "examiner": e,
                    **metrics[e],
                    f"{last} 95% interval ({params.repeats} repeats)": f"{metrics['repeats'][e]['lo']:.2f}-{metrics['repeats'][e]['hi']:.2f}",
                }
                for e in params.examiners
            ]
        ),
        "regions": regions_table(result),
        "per_class": per_class_table(result, params, metrics),
        "worst": _worst_table(result, params),
        "equal_renders": pd.DataFrame(
            [
                {
                    "examiner": e,
                    "renders per iteration": q[e],
                    **{f"after {r} renders": v for r, v in zip(grid, metrics["at_equal_renders"][e].values())},
                }
                for e in params.examiners
            ]
        ),
        "t0_per_class": pd.DataFrame([{"class": c, "T0": v, "learnt": v >= 0.5} for c, v in t0.items()]),
        "settings": settings_table(params, result.space),
        "curve": curve_table(result, params),
    }


def curve_table(result: ExamineResult, params: ExamineParams) -> Any:
    """Fig. 1's curves as a table (a DVC plot): per iteration, each examiner's class-averaged true-class probability
    (mean over repeats), and T0 (random renders) as a flat line."""
    import pandas as pd

    t0 = float(np.mean([s.probs[0].mean() for s in group(result.sessions, "main_t0")]))
    cols: Dict[str, Any] = {}
    for e in params.examiners:
        ss = group(result.sessions, "main", examiner=e)
        reps = sorted({s.rep for s in ss})
        cols[e] = np.array([np.mean([s.curve() for s in ss if s.rep == r], axis=0) for r in reps]).mean(axis=0)
    n = min(len(c) for c in cols.values())
    return pd.DataFrame(
        {"iteration": np.arange(1, n + 1), **{e: np.round(c[:n], 4) for e, c in cols.items()}, "T0": round(t0, 4)}
    )


# ------------------------------------------------------------------------------------------ prose


def _items(params: ExamineParams) -> List[Dict[str, str]]:
    q, _, w = equal_cost(params)
    its = ", ".join(f"{e} {params.T * q[e]}" for e in params.examiners)
    win = (
        f"each checkpoint value is the mean over the queries of the last {params.window} iterations up to it "
        f"(the paper's Algorithm 1 returns the T-th alone)"
        if params.window > 1
        else "each checkpoint value is the T-th iteration's (Algorithm 1)"
    )
    reps = (
        f"mean over {params.repeats} repeats (each its own seeds and sun), with the 95% t-interval over the repeats"
        if params.repeats > 1
        else "one examination per class"
    )
    return [
        {
            "table": "regions",
            "caption": "Weak regions: per class, the box of factor ranges where the examined scenes "
            "failed most often (a shallow tree on every examined scene of the class), "
            f"confirmed by {params.regions.n_confirm} fresh renders inside it on the "
            "class's other unseen instances against as many random scenes of the class "
            "(a failure: the top class is not the true one).",
        },
        {
            "figure": "regions",
            "caption": "Each region's lift (failure rate of fresh renders inside / of random "
            "scenes) with its 95% interval; above 1 = the region holds.",
        },
        {"table": "settings", "caption": "What ran against the paper's settings (Sec. 4.1)."},
        {
            "table": "t0_per_class",
            "caption": "T0 per class: the mean true-class probability of random scenes of the "
            "examined instance. Below 0.5 the model never learnt the class: a "
            "finding in itself, not an examiner result.",
        },
        {
            "table": "table2",
            "caption": f"Mean true-class probability under examination after T iterations (the "
            f"layout of the paper's Table 2; here T = {params.T} iterations ran, renders "
            f"per examiner: {its}); {win}; {reps}. T0 is the standard protocol (random "
            "scenes).",
        },
        {
            "table": "equal_renders",
            "caption": f"At equal cost: mean true-class probability of the last {w} renders "
            "after the same number of renders for every examiner.",
        },
        {
            "figure": "curves_renders",
            "caption": "Mean true-class probability against the number of renders (model "
            "queries), class-averaged: the examiners at equal cost.",
        },
        {
            "figure": "curves",
            "caption": "Mean true-class probability per iteration, class-averaged (paper Fig. 1's "
            f"layout; an RL iteration renders a batch, a BO iteration one scene); {reps} "
            "as the band.",
        },
        {
            "figure": "per_class",
            "caption": f"Per-class true-class probability at T0 and at the last T (paper Fig. 2); "
            f"{reps} as the error bar.",
        },
        {
            "figure": "tsne",
            "caption": "t-SNE of random scenes (circles) and the last examined scenes (triangles) of "
            "the first repeat; opaque = misclassified (paper Fig. 3).",
        },
        {
            "figure": "worst",
            "caption": "The worst scenes found, with their true-class probability. Random search "
            "reaches scenes as low: the regions above, not these, are the findings.",
        },
        {"table": "worst", "caption": "The worst scene found per examiner, class and repeat, with its factor values."},
    ]


def _summary(
    params: ExamineParams, space: Any, metrics: Mapping[str, Any], t0: Mapping[str, float], settings: Any
) -> List[str]:
    names = params.names()
    last = names[-1]
    q, grid, _ = equal_cost(params)
    its = ", ".join(f"{e} {params.T * q[e]}" for e in params.examiners)
    t0_low = metrics["classes_t0_below_half"]
    differ = [r for r in settings.to_dict("records") if r["differs"]]
    eq = grid[-1] if grid else 0
    summary = [
        f"Each class is examined on the unseen instance the model is most sure of; sun angles are fixed at "
        f"random, the other {len(space.searched)} factors are searched for T = {params.T} iterations "
        f"(RL: batches of {q.get('rl', params.rl.batch_size)} renders, BO: one render each, random: "
        f"{params.random_batch} each; renders in all: {its}).",
        "Mean true-class probability "
        + f"{names[0]} -> {last} (iterations): "
        + ", ".join(f"{e}: {metrics[e][names[0]]:.2f} -> {metrics[e][last]:.2f}" for e in params.examiners)
        + "."
        + (
            f" At equal cost, after {eq} renders each: "
            + ", ".join(f"{e} {metrics['at_equal_renders'][e][f'R{eq}']:.2f}" for e in params.examiners)
            + "."
            if eq
            else ""
        ),
        (
            f"T0 below 0.5 on {', '.join(t0_low)}: the model never learnt these classes well on unseen instances; the "
            "examiners' drop on them says little."
            if t0_low
            else "Every examined class has T0 of at least 0.5."
        ),
        (
            "Settings that differ from the paper's: "
            + "; ".join(f"{r['setting']} {r['ran']} (paper: {r['paper']})" for r in differ)
            + "."
            if differ
            else "Every setting is the paper's."
        ),
    ]
    return summary + _examiner_remarks(params, metrics, t0)


def _examiner_remarks(params: ExamineParams, metrics: Mapping[str, Any], t0: Mapping[str, float]) -> List[str]:
    """An examiner that found weak scenes but did not stay in them, and a BO whose GP collapsed, said as it is."""
    last = params.names()[-1]
    per_class = metrics["per_class"]
    t0_mean = float(np.mean(list(t0.values())))
    out = []
    for e in params.examiners:
        if e == "random":
            continue
        mins = [per_class[c][e]["min_found"] for c in per_class if e in per_class[c]]
        if metrics[e][last] >= t0_mean / 2 and mins and float(np.median(mins)) < t0_mean / 2:
            out.append(
                f"{e} ends at {metrics[e][last]:.2f}, not below half of T0 ({t0_mean / 2:.2f}), although it found "
                f"scenes at a median {float(np.median(mins)):.2f} per class: its last queries did not stay in the "
                f"weak regions it found."
            )
    lss = {
        c: per_class[c]["bo"]["gp_length_scale_min"]
        for c in per_class
        if "gp_length_scale_min" in per_class[c].get("bo", {})
    }
    collapsed = sorted(c for c, v in lss.items() if v < 0.01)
    if collapsed:
        out.append(
            f"BO's GP collapsed on {', '.join(collapsed)} (fitted length scale below 0.01 of the box, smallest "
            f"{min(lss[c] for c in collapsed):.1e}): its posterior is the prior mean everywhere but at the queried "
            "scenes, so UCB picked among random candidates and BO was random search there. A floor on the length "
            "scale (bo.min_length_scale), one per factor (bo.ard) and the log-odds as the GP's target "
            "(bo.objective: logit) prevent it."
        )
    return out


def regions_sentence(regions: Sequence[Region]) -> str:
    """The confirmed regions in words with their evidence, or that none held (and how many were tried)."""
    tried = [(r, r.evidence) for r in regions if r.evidence is not None]
    ok = sorted(((r, e) for r, e in tried if r.confirmed), key=lambda pair: -pair[1].lift_lo_adjusted)
    if not tried:
        return "No weak region proposed (no class had both failing and passing examined scenes)."
    if not ok:
        return (
            f"Found no weak region: none of the {len(tried)} proposed regions failed more often on fresh "
            "renders than random scenes of the class outside it, after the correction for every region (best: "
            + max(tried, key=lambda pair: pair[1].lift)[0].text()
            + f", lift {max(e.lift for _, e in tried):.2f})."
        )
    return (
        f"Weak regions confirmed on fresh renders, {len(ok)} of {len(tried)} classes: "
        + "; ".join(
            f"{r.text()} ({e.failures} of {e.n_confirm} fresh scenes vs {e.control_failures} "
            f"of {e.n_control} random outside it, lift {e.lift:.2f}, at least "
            f"{e.lift_lo_adjusted:.2f} after the correction for {e.family} regions)"
            for r, e in ok[:3]
        )
        + "."
    )


def _headline(
    params: ExamineParams, metrics: Mapping[str, Any], t0: Mapping[str, float], regions: Sequence[Region]
) -> List[str]:
    t0_low = metrics["classes_t0_below_half"]
    t0_mean = float(np.mean(list(t0.values())))
    rep = metrics["repeats"]
    ci = params.repeats > 1
    return ([regions_sentence(regions)] if params.regions.enabled else []) + [
        f"Mean true-class probability of random scenes (T0) {t0_mean:.2f}; after T = {params.T} iterations "
        + ", ".join(
            f"{e} {rep[e]['mean']:.2f}" + (f" (95% {rep[e]['lo']:.2f}-{rep[e]['hi']:.2f})" if ci else "")
            for e in params.examiners
        )
        + (f" over {params.repeats} repeats" if ci else "")
        + f"; each a mean of the last {params.window} "
        f"iterations' queries." + (f" Never learnt (T0 < 0.5): {', '.join(t0_low)}." if t0_low else "")
    ]


def target_section(result: ExamineResult, params: ExamineParams) -> StageResult:
    """Metrics, tables and prose of the examination (its figures come from :mod:`weakspot.examine.figures`)."""
    metrics = target_metrics(result, params)
    tables = target_tables(result, params, metrics)
    t0 = t0_by_class(result.sessions)
    return StageResult(
        metrics=metrics,
        tables=tables,
        title="Adversarial examiner: worst rendering conditions per class",
        summary=_summary(params, result.space, metrics, t0, tables["settings"]),
        items=_items(params),
        headline=_headline(params, metrics, t0, result.regions),
        sample=_sample(result, params),
    )


def _sample(result: ExamineResult, params: ExamineParams) -> str:
    """What the examination ran on, in words: classes, instances, iterations, repeats, renders."""
    renders = sum(int(np.size(p)) for s in result.sessions for p in s.probs)
    classes = sorted({s.cls for s in result.sessions})
    out = (
        f"{len(classes)} classes, each on its unseen instance the model is surest of; T = {params.T} iterations, "
        f"{params.repeats} repeat(s) each for {', '.join(params.examiners)}: {renders} renders"
    )
    if result.regions:
        out += (
            f"; each class's region confirmed on {params.regions.n_confirm} fresh renders on its other unseen "
            "instances against as many random ones"
        )
    return out


# ------------------------------------------------------------------------------------------ findings


SEVERITY_REGION = (
    "lift: the share of fresh renders inside the region (on the class's other unseen instances) the "
    "model misclassifies over that of as many random scenes of the class"
)


def _region_finding(r: Region, classes: Sequence[str], params: ExamineParams) -> Dict[str, Any]:
    """The finding of one class's region, with its confirmation on fresh renders."""
    ev = r.evidence
    assert ev is not None  # findings are made of the tested regions only
    image, factors, pred = r.example if r.example is not None else (None, {}, -1)
    reps = f"{params.repeats} repeat(s) of " if params.repeats > 1 else ""
    return {
        "weak_spot": r.text(),
        "kind": "factor_region",
        "severity": float(np.nan_to_num(ev.lift, nan=0.0)),
        "severity_meaning": SEVERITY_REGION,
        "label": r.cls,
        "prediction": classes[pred] if pred >= 0 else "",
        "confidence": float("nan"),
        "factors": json.dumps({k: round(float(v), 4) for k, v in factors.items()}) if factors else "",
        "image": to_png(np.asarray(image, dtype=np.uint8)) if image is not None else None,
        **ev.columns(),
        "confirmation": ev.sentence("renders")
        + (
            f" (the region from {r.searched_rows} of the {r.base_rows} scenes {reps}the examiners queried on class "
            f"{r.cls}, {r.searched_failures} of them misclassified; fresh renders on unseen instances "
            f"{', '.join(map(str, r.instances))}, every factor outside the region drawn at random)"
        ),
    }


def findings(result: ExamineResult, params: ExamineParams):
    """One finding per proposed region (a box of factor ranges where the model fails on a class, confirmed on fresh
    renders: its severity is the lift) and one per class the model never learnt (T0 < 0.5, not checked against a
    control), highest lift first, columns :data:`FINDING_COLUMNS` and the evidence columns."""
    import pandas as pd

    from weakspot.findings import UNCHECKED

    rows = [_region_finding(r, result.classes, params) for r in result.regions if r.evidence is not None]
    t0 = t0_by_class(result.sessions)
    for c, v in t0.items():  # a class the model never learnt is a weak spot in itself
        if v < 0.5:
            rows.append(
                {
                    "weak_spot": f"class {c} not learnt: random scenes of an unseen instance get a true-class "
                    f"probability of {v:.2f} on average",
                    "kind": "unlearnt_class",
                    "severity": float(1.0 - v),
                    "severity_meaning": (
                        "1 - T0, the mean true-class probability of random scenes of the examined "
                        "unseen instance (above 0.5: the model has not learnt the class)"
                    ),
                    "label": c,
                    "prediction": "",
                    "confidence": float("nan"),
                    **UNCHECKED,
                }
            )
    df = pd.DataFrame(rows, columns=list(FINDING_COLUMNS) + list(UNCHECKED))
    df["confirmed"] = df["confirmed"].astype(bool)
    return df.sort_values(["confirmed", "severity"], ascending=False, kind="stable").reset_index(drop=True)
