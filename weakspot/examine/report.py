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
from weakspot.examine.run import ExamineResult
from weakspot.examine.sessions import Session, group
from weakspot.findings import to_png
from weakspot.methods import MethodReport
from weakspot.fmt import fmt
from weakspot.result import StageResult

FINDING_COLUMNS = ("weak_spot", "kind", "severity", "severity_meaning", "label", "prediction", "confidence",
                   "factors", "image")


def report(result: ExamineResult, params: ExamineParams, target: Any = None) -> MethodReport:
    """The report section (without figures: :func:`weakspot.examine.figures.figures`) and the findings."""
    params = as_params(params)
    return MethodReport(section=target_section(result, params), findings=findings(result, params))


# ------------------------------------------------------------------------------------------ metrics and tables


def t0_by_class(sessions: Sequence[Session], t0_group: str = "main_t0") -> Dict[str, float]:
    """T0 per class: the mean true-class probability of the T = 0 protocol's random scenes."""
    return {s.cls: float(s.probs[0].mean()) for s in group(sessions, t0_group)}


def at_renders(sessions: Sequence[Session], r: int, w: int) -> float:
    """Mean over sessions of the true-class probability of renders (r - w, r] (1-based, in query order)."""
    vals = []
    for s in sessions:
        flat = np.concatenate(s.probs) if s.probs else np.zeros(0)
        seg = flat[max(0, r - w):r]
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
    """``{class: {examiner: {"T0", "<last T>", "min_found"[, "gp_length_scale_min"]}}}``."""
    last = params.names()[-1]
    per_class: Dict[str, Dict[str, Any]] = {c: {} for c in t0}
    for e in params.examiners:
        for s in group(sessions, "main", examiner=e):
            row = {"T0": t0[s.cls], last: s.at(params.T, params.window),
                   "min_found": float(np.concatenate(s.probs).min())}
            if s.length_scales is not None:  # BO's GP (metrics only): a collapsed length scale means random search
                row = {**row, "gp_length_scale_min": float(s.length_scales.min())}
            per_class[s.cls][e] = row
    return per_class


def target_metrics(result: ExamineResult, params: ExamineParams) -> Dict[str, Any]:
    """``{examiner: {"T0": p, "T100": p, ...}, "per_class": ..., "renders": ..., "at_equal_renders": ...,
    "classes_t0_below_half": [...]}``."""
    sessions = result.sessions
    t0 = t0_by_class(sessions)
    metrics: Dict[str, Any] = {}
    for e in params.examiners:
        ss = group(sessions, "main", examiner=e)
        metrics[e] = {nm: float(np.mean([t0[s.cls] if cp == 0 else s.at(cp, params.window) for s in ss]))
                      for cp, nm in zip(params.checkpoints, params.names())}
    metrics["per_class"] = _per_class(sessions, params, t0)
    # equal cost: an RL iteration renders a batch, a BO iteration one scene; compare at equal numbers of renders
    q, grid, w = equal_cost(params)
    metrics["renders"] = {e: {nm: int(cp * q[e]) for cp, nm in zip(params.checkpoints, params.names())}
                          for e in params.examiners}
    metrics["at_equal_renders"] = {e: {f"R{r}": at_renders(group(sessions, "main", examiner=e), r, w) for r in grid}
                                   for e in params.examiners}
    metrics["classes_t0_below_half"] = sorted(c for c, v in t0.items() if v < 0.5)
    return metrics


def settings_table(params: ExamineParams):
    """What ran against the paper's settings (seeds/000 Sec. 4.1), one row per setting the paper gives."""
    import pandas as pd

    rows = []
    for key, (paper, where) in PAPER_SETTINGS.items():
        obj = params
        for part in key.split("."):
            obj = getattr(obj, part)
        rows.append({"setting": key, "ran": str(obj), "paper": f"{paper} ({where})", "differs": obj != paper})
    rows.append({"setting": "checkpoints", "ran": str(list(params.checkpoints)),
                 "paper": "[0, 100, 300, 500] (Table 2)",
                 "differs": list(params.checkpoints) != [0, 100, 300, 500]})
    return pd.DataFrame(rows, columns=["setting", "ran", "paper", "differs"])


def per_class_table(result: ExamineResult, params: ExamineParams, metrics: Mapping[str, Any]):
    """One row per examiner and class: the examined instance, T0, the last checkpoint and the lowest found."""
    import pandas as pd

    rows = []
    for e in params.examiners:
        for s in group(result.sessions, "main", examiner=e):
            row = {k: v for k, v in metrics["per_class"][s.cls][e].items() if k != "gp_length_scale_min"}
            rows.append({"examiner": e, "class": s.cls, "instance": s.instance, **row})
    return pd.DataFrame(rows)


def _worst_table(result: ExamineResult, params: ExamineParams):
    import pandas as pd

    rows = []
    for e in params.examiners:
        for s in group(result.sessions, "main", examiner=e):
            rows.append({"examiner": e, "class": s.cls, "instance": s.instance, "p_true": s.worst[0],
                         "prediction": result.classes[s.worst_pred[0]],
                         **{k: round(v, 3) for k, v in s.worst[1].items()},
                         **{k: round(v, 3) for k, v in s.sun.items()}})
    return pd.DataFrame(rows).sort_values(["examiner", "p_true"]).reset_index(drop=True)


def target_tables(result: ExamineResult, params: ExamineParams, metrics: Mapping[str, Any]) -> Dict[str, Any]:
    """``table2``, ``per_class``, ``worst``, ``equal_renders``, ``t0_per_class`` and ``settings``."""
    import pandas as pd

    q, grid, _ = equal_cost(params)
    t0 = t0_by_class(result.sessions)
    return {"table2": pd.DataFrame([{"examiner": e, **metrics[e]} for e in params.examiners]),
            "per_class": per_class_table(result, params, metrics),
            "worst": _worst_table(result, params),
            "equal_renders": pd.DataFrame([{"examiner": e, "renders per iteration": q[e],
                                            **{f"after {r} renders": v for r, v in
                                               zip(grid, metrics["at_equal_renders"][e].values())}}
                                           for e in params.examiners]),
            "t0_per_class": pd.DataFrame([{"class": c, "T0": v, "learnt": v >= 0.5} for c, v in t0.items()]),
            "settings": settings_table(params)}


# ------------------------------------------------------------------------------------------ prose


def _items(params: ExamineParams) -> List[Dict[str, str]]:
    q, _, w = equal_cost(params)
    its = ", ".join(f"{e} {params.T * q[e]}" for e in params.examiners)
    return [
        {"table": "settings", "caption": "What ran against the paper's settings (Sec. 4.1)."},
        {"table": "t0_per_class", "caption": "T0 per class: the mean true-class probability of random scenes of the "
                                             "examined instance. Below 0.5 the model never learnt the class: a "
                                             "finding in itself, not an examiner result."},
        {"table": "table2", "caption": f"Mean true-class probability under examination after T iterations (the "
                                       f"layout of the paper's Table 2; here T = {params.T} iterations ran, renders "
                                       f"per examiner: {its}). T0 is the standard protocol (random scenes)."},
        {"table": "equal_renders", "caption": f"At equal cost: mean true-class probability of the last {w} renders "
                                              "after the same number of renders for every examiner."},
        {"figure": "curves_renders", "caption": "Mean true-class probability against the number of renders (model "
                                                "queries), class-averaged: the examiners at equal cost."},
        {"figure": "curves", "caption": "Mean true-class probability per iteration, class-averaged (paper Fig. 1's "
                                        "layout; an RL iteration renders a batch, a BO iteration one scene)."},
        {"figure": "per_class", "caption": "Per-class true-class probability at T0 and at the last T (paper Fig. 2)."},
        {"figure": "tsne", "caption": "t-SNE of random scenes (circles) and the last examined scenes (triangles); "
                                      "opaque = misclassified (paper Fig. 3)."},
        {"figure": "worst", "caption": "The worst scenes found, with their true-class probability."},
        {"table": "worst", "caption": "The worst scene found per examiner and class, with its factor values."},
    ]


def _summary(params: ExamineParams, space: Any, metrics: Mapping[str, Any], t0: Mapping[str, float],
             settings: Any) -> List[str]:
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
        "Mean true-class probability " + f"{names[0]} -> {last} (iterations): " + ", ".join(
            f"{e}: {metrics[e][names[0]]:.2f} -> {metrics[e][last]:.2f}" for e in params.examiners) + "."
        + (f" At equal cost, after {eq} renders each: " + ", ".join(
            f"{e} {metrics['at_equal_renders'][e][f'R{eq}']:.2f}" for e in params.examiners) + "." if eq else ""),
        (f"T0 below 0.5 on {', '.join(t0_low)}: the model never learnt these classes well on unseen instances; the "
         "examiners' drop on them says little." if t0_low else "Every examined class has T0 of at least 0.5."),
        ("Settings that differ from the paper's: " + "; ".join(f"{r['setting']} {r['ran']} (paper: {r['paper']})"
                                                               for r in differ) + "."
         if differ else "Every setting is the paper's."),
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
                f"weak regions it found.")
    lss = {c: per_class[c]["bo"]["gp_length_scale_min"] for c in per_class
           if "gp_length_scale_min" in per_class[c].get("bo", {})}
    collapsed = sorted(c for c, v in lss.items() if v < 0.01)
    if collapsed:
        out.append(
            f"BO's GP collapsed on {', '.join(collapsed)} (fitted length scale below 0.01 of the box, smallest "
            f"{min(lss[c] for c in collapsed):.1e}): its posterior is the prior mean everywhere but at the queried "
            "scenes, so UCB picked among random candidates and BO was random search there. A floor on the length "
            "scale (bo.min_length_scale), one per factor (bo.ard) and the log-odds as the GP's target "
            "(bo.objective: logit) prevent it.")
    return out


def _headline(params: ExamineParams, metrics: Mapping[str, Any], t0: Mapping[str, float], worst_table: Any
              ) -> List[str]:
    last = params.names()[-1]
    _, grid, _ = equal_cost(params)
    eq = grid[-1] if grid else 0
    t0_low = metrics["classes_t0_below_half"]
    t0_mean = float(np.mean(list(t0.values())))
    worst = worst_table.sort_values("p_true").iloc[0]
    return [f"Mean true-class probability of random scenes (T0) {t0_mean:.2f}; after T = {params.T} iterations "
            + ", ".join(f"{e} {metrics[e][last]:.2f}" for e in params.examiners)
            + f" (half of T0: {t0_mean / 2:.2f}). Worst: class {worst['class']} down to {worst['p_true']:.2f} "
            f"(random scenes: {t0[worst['class']]:.2f})"
            + (f"; at {eq} renders each: " + ", ".join(f"{e} {metrics['at_equal_renders'][e][f'R{eq}']:.2f}"
                                                      for e in params.examiners) if eq else "")
            + (f". Never learnt (T0 < 0.5): {', '.join(t0_low)}." if t0_low else ".")]


def target_section(result: ExamineResult, params: ExamineParams) -> StageResult:
    """Metrics, tables and prose of the examination (its figures come from :mod:`weakspot.examine.figures`)."""
    metrics = target_metrics(result, params)
    tables = target_tables(result, params, metrics)
    t0 = t0_by_class(result.sessions)
    return StageResult(metrics=metrics, tables=tables,
                       title="Adversarial examiner: worst rendering conditions per class",
                       summary=_summary(params, result.space, metrics, t0, tables["settings"]),
                       items=_items(params), headline=_headline(params, metrics, t0, tables["worst"]))


# ------------------------------------------------------------------------------------------ findings


def _value(v: float) -> str:
    """A factor's value in a weak spot's words: 3 significant digits, whole numbers from 1000 on (watts)."""
    return fmt(v) if abs(v) < 1000 else f"{v:.0f}"


def condition_summary(query: Mapping[str, float], space: Any, k: int = 3) -> str:
    """The ``k`` searched factors of ``query`` farthest from the middle of their range, as ``name=value``."""
    dev = []
    for name in space.searched:
        lo, hi = space.bounds[name]
        dev.append((abs((float(query[name]) - lo) / (hi - lo) - 0.5), name))
    top = [n for _, n in sorted(dev, key=lambda t: (-t[0], t[1]))[:k]]
    return ", ".join(f"{n}={_value(float(query[n]))}" for n in top)


def _class_condition(s: Session, params: ExamineParams, space: Any, classes: Sequence[str],
                     searching: Sequence[str]) -> Dict[str, Any]:
    """The finding of one class: the worst scene its session ``s`` reached."""
    order = list(space.fixed) + list(space.searched)
    p_true, query, image = s.worst
    pred, conf = s.worst_pred
    factors = {k: round(float(v), 4) for k, v in sorted({**s.sun, **query}.items(),
                                                          key=lambda kv: order.index(kv[0])
                                                          if kv[0] in order else len(order))}
    return {
        "weak_spot": f"class {s.cls} under rendering conditions {condition_summary(query, space)}",
        "kind": "class_condition",
        "severity": float(np.clip(1.0 - p_true, 0.0, 1.0)),
        "severity_meaning": (f"1 - the lowest true-class probability that the {'/'.join(searching)} "
                             f"examiner(s) reached in T = {params.T} iterations on an unseen {s.cls} instance "
                             f"({s.instance}) (1: the model rules out the true class)"),
        "label": s.cls,
        "prediction": classes[pred],
        "confidence": float(conf),
        "factors": json.dumps(factors),
        "image": to_png(np.asarray(image, dtype=np.uint8)),
    }


def findings(result: ExamineResult, params: ExamineParams):
    """One finding per examined class (the worst query any searching examiner, BO or RL, reached) and one per class
    the model never learnt (T0 < 0.5), most severe first, columns :data:`FINDING_COLUMNS`."""
    import pandas as pd

    sessions = result.sessions
    searching = [e for e in params.examiners if e != "random"] or list(params.examiners)
    rows = []
    for c in dict.fromkeys(s.cls for s in group(sessions, "main")):
        ss = [s for s in group(sessions, "main") if s.cls == c and s.examiner_name in searching]
        s = min(ss, key=lambda s: (s.worst[0], searching.index(s.examiner_name)))
        rows.append(_class_condition(s, params, result.space, result.classes, searching))
    for s in group(sessions, "main_t0"):  # a class the model never learnt is a weak spot in itself
        t0 = float(s.probs[0].mean())
        if t0 < 0.5:
            rows.append({
                "weak_spot": f"class {s.cls} not learnt: random scenes of an unseen instance get a true-class "
                             f"probability of {t0:.2f} on average",
                "kind": "unlearnt_class", "severity": float(1.0 - t0),
                "severity_meaning": ("1 - T0, the mean true-class probability of random scenes of the examined "
                                     "unseen instance (above 0.5: the model has not learnt the class)"),
                "label": s.cls, "prediction": "", "confidence": float("nan"),
            })
    df = pd.DataFrame(rows, columns=list(FINDING_COLUMNS))
    return df.sort_values("severity", ascending=False, kind="stable").reset_index(drop=True)
