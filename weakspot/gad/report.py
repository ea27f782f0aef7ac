"""GAD's report on a target: metrics, Table I and the SDR tables, the prose, the findings and the to-label list.

Caveats first: a target's runs (its split seeds) are pooled (:mod:`weakspot.gad.stats`): metrics, the headline and
the tables report the mean over seeds with a 95% Student-t interval over seeds (and the min-max), next to each seed's
own figures. Where the pseudo-model failed the R^2 gate on any seed, GAD's SDR is withheld (null in the metrics,
``gad_reliable: false``; the headline and findings say why). The findings rank the audited run (split seed 0) only.
No matplotlib here: the figures are :mod:`weakspot.gad.figures`'.
"""

from __future__ import annotations

import io
from typing import Any, Dict, List

import numpy as np

from weakspot.data.missing import describe_missing, missing_shares
from weakspot.gad.config import GadParams
from weakspot.gad.findings import findings_of, unreliable_reason
from weakspot.gad.protocol import DatasetOutcome
from weakspot.gad.ranking import LABEL_FREE, Ranking, choose
from weakspot.gad.search import search_label
from weakspot.gad.stats import (
    across_seeds,
    common_budget,
    curve_band,
    error_aucs,
    group_runs,
    lowest_gad_error_rate,
    nanmean,
    seed_stats,
)
from weakspot.methods import AuditTarget, MethodReport
from weakspot.fmt import rounded
from weakspot.result import StageResult

#: Table I of seeds/001, keyed by the bias preset a target's split comes from (weakspot.data.BIAS_PRESETS)
PAPER_TABLE_I: Dict[str, Dict[str, Any]] = {
    "phoneme": {
        "dataset": "Phoneme",
        "train_accuracy": 0.81,
        "test_accuracy": 0.81,
        "kernel": "Radial",
        "pseudo_r2": 0.99,
        "loess": "Log MAE",
        "note": "",
    },
    "yeast1": {
        "dataset": "Yeast",
        "train_accuracy": 0.92,
        "test_accuracy": 0.74,
        "kernel": "Linear",
        "pseudo_r2": 0.99,
        "loess": "MAE",
        "note": "the paper's Yeast is NUC against MIT only",
    },
    "breast_cancer": {
        "dataset": "Pang04",
        "train_accuracy": None,
        "test_accuracy": None,
        "kernel": None,
        "pseudo_r2": None,
        "loess": "Log MAE",
        "note": "Pang04 (98% / 81%, Radial, R^2 0.86) is not available here; breast_cancer stands in, "
        "so no paper figure compares",
    },
}


def metrics_of(outcomes: List[DatasetOutcome]) -> Dict[str, Any]:
    """``metrics/gad/<target>.json``, keyed by target name; the runs of one target (its split seeds) are pooled.

    Per target: ``sdr`` (mean over seeds of each seed's mean SDR after ``budget`` queries), ``sdr_ci95`` (95%
    Student-t interval over seeds; over the pools where one seed ran: ``interval_over``), ``sdr_range`` (min, max
    over seeds), ``errors`` and ``errors_expected`` (means over seeds), ``seeds``, ``replicates``, ``pool_size``
    (the audited run's), ``gad_reliable`` with ``min_pseudo_r2`` and ``pseudo_r2_lowest`` (the R^2 gate), ``pseudo_r2``
    (the audited model's, Table I), ``gad_error_auc`` and ``confidence_error_auc`` (means over seeds; see
    :func:`error_aucs`), the audited model's ``train_accuracy`` and ``test_accuracy``, and ``per_seed``: the same
    figures for each seed (``sdr_ci95_pools``: the interval over that seed's pools) with its black box and pool.
    Where GAD is unreliable its SDR, interval and counts are null.
    """
    m: Dict[str, Any] = {}
    for name, runs in group_runs(outcomes).items():
        budget = common_budget(runs)
        audited = runs[0]
        reliable = all(o.gad_reliable for o in runs)
        searches = list(audited.sdr)
        per_seed: Dict[str, Any] = {}
        for o in runs:
            st = seed_stats(o, budget)
            hide = {"gad"} if not o.gad_reliable else set()
            auc_gad, auc_conf = error_aucs(o)
            info = o.black_box_info
            per_seed[str(o.split_seed)] = {
                "sdr": {s: None if s in hide else rounded(st[s]["sdr"]) for s in searches},
                "sdr_ci95_pools": {
                    s: None if s in hide else [rounded(st[s]["lo"]), rounded(st[s]["hi"])] for s in searches
                },
                "errors": {s: None if s in hide else rounded(st[s]["errors"]) for s in searches},
                "errors_expected": {s: None if s in hide else rounded(st[s]["expected"]) for s in searches},
                "pseudo_r2": rounded(o.pseudo_r2),
                "pseudo_r2_eval": rounded(o.pseudo_r2_eval),
                "gad_reliable": o.gad_reliable,
                "gad_error_auc": None if hide else rounded(auc_gad),
                "confidence_error_auc": rounded(auc_conf),
                "lowest_gad_error_rate": None if hide else rounded(lowest_gad_error_rate(o)[0]),
                "eligible_error_rate": rounded(lowest_gad_error_rate(o)[1]),
                "train_accuracy": rounded(o.train_accuracy),
                "test_accuracy": rounded(o.test_accuracy),
                "n_eligible": int(len(o.eligible)),
                "pool_size": int(o.pool_size),
                "kernel": info.get("kernel"),
                "C": info.get("C"),
            }
        acr = across_seeds(runs, budget)
        hide = {"gad"} if not reliable else set()
        aucs = [error_aucs(o) for o in runs]
        m[name] = {
            "budget": budget,
            "replicates": int(next(iter(audited.errors.values())).shape[0]),
            "pool_size": int(audited.pool_size),
            "seeds": [int(o.split_seed) for o in runs],
            "n_seeds": len(runs),
            "interval_over": "seeds" if len(runs) > 1 else "pools",
            "sdr": {s: None if s in hide else rounded(acr[s]["sdr"]) for s in searches},
            "sdr_ci95": {s: None if s in hide else [rounded(acr[s]["lo"]), rounded(acr[s]["hi"])] for s in searches},
            "sdr_range": {s: None if s in hide else [rounded(acr[s]["min"]), rounded(acr[s]["max"])] for s in searches},
            "errors": {s: None if s in hide else rounded(acr[s]["errors"]) for s in searches},
            "errors_expected": {s: None if s in hide else rounded(acr[s]["expected"]) for s in searches},
            "gad_reliable": reliable,
            "min_pseudo_r2": rounded(audited.min_pseudo_r2),
            "pseudo_r2": rounded(audited.pseudo_r2),
            "pseudo_r2_lowest": rounded(min(o.pseudo_r2_gate for o in runs)),
            "gad_error_auc": None if hide else rounded(nanmean([a[0] for a in aucs])),
            "confidence_error_auc": rounded(nanmean([a[1] for a in aucs])),
            "train_accuracy": rounded(audited.train_accuracy),
            "test_accuracy": rounded(audited.test_accuracy),
            "per_seed": per_seed,
        }
    return m


def _paper(o: DatasetOutcome) -> Dict[str, Any]:
    """Table I of the paper for the preset this target's split comes from (empty for a data set not in the paper)."""
    return PAPER_TABLE_I.get(str(o.split.info.get("preset", "")), {})


def _design_label(params: GadParams) -> str:
    f = params.design_data_fraction
    return f"LHS {1 - f:.0%} + jittered test rows {f:.0%}" if f > 0 else "LHS"


def _table_i_row(o: DatasetOutcome, params: GadParams) -> Dict[str, Any]:
    """Table I's row for one run: its black box next to the paper's, the pseudo-model, the design, the pool, and
    how the eligible rows' errors compare with their confidences (ground truth)."""
    i, pp = o.black_box_info, _paper(o)
    auc_gad, auc_conf = error_aucs(o)
    return {
        "target": o.name,
        "seed": o.split_seed,
        "class_of_interest": o.class_name,
        "model": i.get("arch", i.get("model")),
        "kernel": i.get("kernel"),
        "C": i.get("C"),
        "gamma": None if i.get("gamma") is None else str(i.get("gamma")),
        "train_accuracy": round(o.train_accuracy, 4),
        "test_accuracy": round(o.test_accuracy, 4),
        "paper_train_accuracy": pp.get("train_accuracy"),
        "paper_test_accuracy": pp.get("test_accuracy"),
        "paper_kernel": pp.get("kernel"),
        "pseudo_r2": round(o.pseudo_r2, 4),
        "pseudo_r2_eval": round(o.pseudo_r2_eval, 4),
        "paper_pseudo_r2": pp.get("pseudo_r2"),
        "gad_reliable": o.gad_reliable,
        "N": params.design_points,
        "design": _design_label(params),
        "loess": "Log MAE" if o.split.log_mae else "MAE",
        "n_train": o.split.info.get("n_train", len(o.split.X_train)),
        "n_test": o.split.info.get("n_test", len(o.split.X_test)),
        "n_eligible": len(o.eligible),
        "pool_size": o.pool_size,
        "budget": o.budget,
        "eligible_error_rate": round(float(1.0 - o.test_correct[o.eligible].mean()), 4),
        "eligible_expected_error_rate": round(float((1.0 - o.test_confidence[o.eligible]).mean()), 4),
        "gad_error_auc": round(auc_gad, 4) if o.gad_reliable else None,
        "lowest_gad_error_rate": round(lowest_gad_error_rate(o)[0], 4) if o.gad_reliable else None,
        "confidence_error_auc": round(auc_conf, 4),
        "never_flipped": int((~o.flipped).sum()),
        "median_steps": float(np.median(o.steps)),
        "paper_note": (f"paper: {pp['dataset']}" + (f"; {pp['note']}" if pp.get("note") else ""))
        if pp
        else "not in the paper",
    }


def tables_of(outcomes: List[DatasetOutcome], params: GadParams) -> Dict[str, Any]:
    """``table_i`` (Table I: one row per target and split seed, with the paper's figures next to ours),
    ``sdr_across_seeds`` (per target and search: mean SDR over seeds, 95% t interval, min-max), ``sdr_by_seed``
    (per target, seed and search: mean SDR over the pools with its interval over pools) and ``sdr_curves`` (long:
    after each query, the mean over seeds with its interval)."""
    import pandas as pd

    groups = group_runs(outcomes)
    rows, by_seed, across, long = [], [], [], []
    for name, runs in groups.items():
        budget = common_budget(runs)
        reliable = all(o.gad_reliable for o in runs)
        for o in runs:
            rows.append(_table_i_row(o, params))
            st = seed_stats(o, budget)
            for s in o.sdr:
                shown = o.gad_reliable or s != "gad"
                by_seed.append(
                    {
                        "target": o.name,
                        "seed": o.split_seed,
                        "search": s,
                        "label": search_label(s),
                        "sdr": round(st[s]["sdr"], 4) if shown else None,
                        "sdr_lo_pools": round(st[s]["lo"], 4) if shown else None,
                        "sdr_hi_pools": round(st[s]["hi"], 4) if shown else None,
                        "errors": round(st[s]["errors"], 4) if shown else None,
                        "errors_expected": round(st[s]["expected"], 4) if shown else None,
                    }
                )
        acr = across_seeds(runs, budget)
        for s in runs[0].sdr:
            shown = reliable or s != "gad"
            a = acr[s]
            across.append(
                {
                    "target": name,
                    "search": s,
                    "label": search_label(s),
                    "n_seeds": len(runs),
                    "replicates": int(next(iter(runs[0].errors.values())).shape[0]),
                    "budget": budget,
                    "sdr_mean": round(a["sdr"], 4) if shown else None,
                    "sdr_lo": round(a["lo"], 4) if shown else None,
                    "sdr_hi": round(a["hi"], 4) if shown else None,
                    "interval_over": "seeds" if len(runs) > 1 else "pools",
                    "sdr_min": round(a["min"], 4) if shown else None,
                    "sdr_max": round(a["max"], 4) if shown else None,
                    "errors_mean": round(a["errors"], 4) if shown else None,
                    "errors_expected_mean": round(a["expected"], 4) if shown else None,
                }
            )
            if not shown:
                continue
            sm, slo, shi = curve_band([o.sdr[s][:, :budget] for o in runs])
            em, elo, ehi = curve_band([np.cumsum(o.errors[s][:, :budget], axis=1) for o in runs])
            for q in range(budget):
                long.append(
                    {
                        "target": name,
                        "search": s,
                        "query": q + 1,
                        "n_seeds": len(runs),
                        "sdr_mean": float(sm[q]),
                        "sdr_lo": float(slo[q]),
                        "sdr_hi": float(shi[q]),
                        "errors_mean": float(em[q]),
                        "errors_lo": float(elo[q]),
                        "errors_hi": float(ehi[q]),
                    }
                )
    curves = pd.DataFrame(long)
    wide = (
        curves.pivot_table(index="query", columns="search", values="sdr_mean", sort=False).reset_index()
        if len(curves) and curves["target"].nunique() == 1
        else pd.DataFrame()
    )
    wide.columns.name = None
    return {
        "table_i": pd.DataFrame(rows),
        "sdr_across_seeds": pd.DataFrame(across),
        "sdr_by_seed": pd.DataFrame(by_seed),
        "sdr_curves": curves,
        "sdr_curve": wide.round(4),
    }


def _fmt_sdr(a: Dict[str, float]) -> str:
    return f"{a['sdr']:.2f} [{a['lo']:.2f}, {a['hi']:.2f}]"


#: the report section's items: each table and figure with its caption (figures drawn by weakspot.gad.figures)
ITEMS: List[Dict[str, str]] = [
    {
        "table": "table_i",
        "caption": "Table I: per target and split seed, the class of interest, the black box (model, kernel, C, gamma, train and test accuracy) next to the paper's (paper_*: Phoneme and Yeast from the paper's Table I; Pang04 is not available here), pseudo-model R^2 on held-out design points and on the test data with the gate's verdict, design, LOESS target, split and pool sizes, the error rate among confident predictions of the class of interest against the rate their confidences predict, how well a low GAD and a low confidence single out those errors (AUC, ground truth), and how many the attack never flipped.",
    },
    {
        "table": "sdr_across_seeds",
        "caption": "Mean SDR after the budget over split seeds, per search: 95% Student-t interval over seeds (over pools where one seed ran), min-max over seeds, errors found and expected.",
    },
    {
        "figure": "sdr_by_seed",
        "caption": "SDR after the budget: each split seed's mean over its pools (dots) and the mean over seeds with its 95% t interval (black); the dashed line is SDR = 1.",
    },
    {
        "figure": "sdr_curves",
        "caption": "Fig. 3: mean SDR after each query, mean over split seeds with its 95% interval over seeds; the dashed line is SDR = 1 (errors at the rate the confidence predicts).",
    },
    {
        "figure": "errors_found",
        "caption": "Fig. 4: mean number of errors found after each query (mean over split seeds, 95% interval over seeds).",
    },
    {
        "figure": "confidence_boxplots",
        "caption": "Fig. 5: confidences of the queried points, per search, all seeds and pools.",
    },
    {
        "figure": "reliability",
        "caption": "Fig. 2: reliability of the audited model's predictions of the class of interest on the test split; red marks overconfidence.",
    },
    {
        "figure": "loess_fit",
        "caption": "Fig. 1: (log-)MAE to the adversarial partner against confidence for the audited model's first pool, the LOESS fit F, the points GAD queries (gold) and the errors (red x).",
    },
    {
        "table": "sdr_by_seed",
        "caption": "Per split seed and search: mean SDR over the pools with its 95% interval over pools, errors found and expected.",
    },
    {
        "table": "sdr_curves",
        "caption": "SDR and errors found after each query, per target and search, mean over split seeds (long format).",
    },
]


def _method_prose(params: GadParams) -> List[str]:
    """What GAD does and the protocol that ran (the section's first two paragraphs)."""
    return [
        "Generalized Adversarial Distance (Bennette et al., seeds/001) looks for predictions a black-box classifier "
        "makes with high confidence yet gets wrong. A pseudo-model is extracted from the black box's confidences on "
        f"{params.design_points:,} design points ({_design_label(params)}; Algorithm 1, the jittered rows ours); "
        "each confident prediction is pushed across the black box's boundary by signed-gradient steps on it "
        "(Algorithm 2); GAD is how much less perturbation an instance needed than a LOESS fit on confidence expects "
        "(Eq. 2), and the search queries the lowest GAD first.",
        f"Protocol (Sec. V-C), repeated over split seeds (gad.seeds {params.seeds}; ours: the paper reports one split): "
        "each seed re-draws the target's split and retrains its model as the target's spec says (the grid search may "
        "pick another kernel or C), seed 0 being the audited model whose rows the findings rank. Per seed, "
        f"{params.replicates} replicates, each a random pool of confident (> {params.confidence_threshold}) "
        f"predictions of the class of interest (up to {params.pool_size} rows; Table I's pool_size), {params.budget} "
        "queries per search (fewer where a pool is smaller: Table I's budget), the ground truth as oracle. Figures are "
        "the mean over seeds of each seed's mean SDR, with a 95% Student-t interval over seeds and the min-max; the "
        "interval over one seed's pools (sdr_by_seed table) is narrower because those pools overlap. SDR (Eq. 1) is "
        "errors found over errors expected from the confidences: 1 means errors turn up as often as the confidence "
        "predicts, above 1 means the search found overconfidence. Caveat: where the confidences approach 1 the "
        "expected count is tiny and one error makes SDR very large, so read SDR together with the errors found "
        "(Fig. 4) and the confidences queried (Fig. 5).",
    ]


def _target_prose(name: str, runs: List[DatasetOutcome], mm: Dict[str, Any]) -> List[str]:
    """One target's paragraph (black boxes, the paper's, mean SDR per search over seeds) and its caveat, if any."""
    o = runs[0]
    acr = across_seeds(runs, mm["budget"])
    reliable = mm["gad_reliable"]
    boxes = "; ".join(
        f"seed {r.split_seed}: {r.black_box_info.get('kernel') or r.black_box_info.get('arch') or r.black_box_info.get('model')}"
        + (f" C={r.black_box_info['C']:g}" if r.black_box_info.get("C") is not None else "")
        + f" (train {r.train_accuracy:.0%}, test {r.test_accuracy:.0%}, pseudo R^2 {r.pseudo_r2:.3f})"
        for r in runs
    )
    pp = _paper(o)
    paper = (
        f" The paper's {pp['dataset']} SVM (Table I): train {pp['train_accuracy']:.0%}, test "
        f"{pp['test_accuracy']:.0%}, {pp['kernel']}."
        if pp.get("train_accuracy") is not None
        else (f" {pp['note']}." if pp else "")
    )
    parts = ", ".join(
        f"{search_label(s)} {_fmt_sdr(acr[s])} (seeds {acr[s]['min']:.2f}-{acr[s]['max']:.2f})"
        for s in o.sdr
        if reliable or s != "gad"
    )
    out = [
        f"{name} (class of interest {o.class_name!r}), {len(runs)} split seed(s), {mm['replicates']} pools of "
        f"{mm['pool_size']} per seed: black boxes {boxes}.{paper} Mean SDR after {mm['budget']} queries over the "
        f"seeds, 95% t interval over seeds in brackets: {parts}."
        + (
            f" Highest: {search_label(max((s for s in o.sdr if reliable or s != 'gad'), key=lambda s: acr[s]['sdr']))}."
            if o.sdr
            else ""
        )
    ]
    gone = missing_shares(o.split.X_test, o.split.feature_names)
    if gone:
        out.append(
            f"Missing values on {name}'s test rows ({describe_missing(gone)}) are kept as the black box takes them: "
            "the design keeps the missingness of the evaluation rows (a hypercube point takes it from the row it "
            "draws its categories from), the attack never moves a missing cell (the adversarial partner keeps it "
            "missing), and a row's adversarial distance averages over its observed columns; the baselines' features "
            "read a missing value as the column's observed mean with an indicator of its missingness."
        )
    if not reliable:
        bad = [r for r in runs if not r.gad_reliable]
        out.append(
            f"Caveat: GAD is unreliable on {name} and its SDR is not reported: "
            + "; ".join(unreliable_reason(r) for r in bad)
            + "."
        )
    elif "gad" in acr and "random" in acr and not acr["gad"]["sdr"] > acr["random"]["sdr"]:
        out.append(_no_gain_caveat(name, runs, mm, acr))
    return out


def _f2(v: Any) -> str:
    """Two decimals, or ``n/a`` for a number that was not measured (``None``)."""
    return "n/a" if v is None else f"{v:.2f}"


def _no_gain_caveat(name: str, runs: List[DatasetOutcome], mm: Dict[str, Any], acr: Dict[str, Dict[str, float]]) -> str:
    """Why GAD does not beat random search on a target: how well a low GAD singles out the errors (ground truth)."""
    o = runs[0]
    top, base = zip(*(lowest_gad_error_rate(r) for r in runs))
    return (
        f"Caveat: on {name} GAD does not beat random search (mean SDR {_f2(acr['gad']['sdr'])} against "
        f"{_f2(acr['random']['sdr'])}). Why (ground truth, audit only): among the eligible rows a low GAD singles "
        f"out the errors with AUC {_f2(mm['gad_error_auc'])} (mean over seeds; per seed "
        + ", ".join(f"{v['gad_error_auc']:.2f}" for v in mm["per_seed"].values() if v["gad_error_auc"] is not None)
        + f"), where 0.5 is chance and GAD's premise -- errors flip with less perturbation than their confidence "
        f"predicts -- needs more; the confidence alone singles them out with AUC {_f2(mm['confidence_error_auc'])}. "
        f"The rows GAD queries first, the lowest-GAD {o.budget / max(o.pool_size, 1):.0%} of the eligible rows, "
        f"are errors at {np.mean(top):.0%} (mean over seeds; per seed "
        + ", ".join(f"{v:.0%}" for v in top)
        + f") against {np.mean(base):.0%} among all eligible rows. On this "
        "black box the confident errors do not sit closer to the boundary than their confidence says"
        + (
            ", and the rows that flip with the least perturbation for their confidence are errors less often "
            "than the rest"
            if np.mean(top) < np.mean(base)
            else ""
        )
        + ", so querying the lowest GAD first does no better than random search."
    )


def section(outcomes: List[DatasetOutcome], params: GadParams) -> StageResult:
    """GAD's report section without its figures: the runs of every target and split seed (grouped by target name)
    become ``metrics`` (:func:`metrics_of`), tables ``table_i``, ``sdr_across_seeds``, ``sdr_by_seed``,
    ``sdr_curves`` (:func:`tables_of`) and the text; the headline reports the mean over seeds. Its items also name
    the figures of :func:`weakspot.gad.figures.figures`, so :meth:`StageResult.check` passes once they are added."""
    metrics = metrics_of(outcomes)
    groups = group_runs(outcomes)
    first = next(iter(groups.values()))
    summary = _method_prose(params)
    for name, runs in groups.items():
        summary.extend(_target_prose(name, runs, metrics[name]))
    title = "GAD: black-box search for high-confidence errors" + (f" ({first[0].name})" if len(groups) == 1 else "")
    return StageResult(
        metrics=metrics,
        tables=tables_of(outcomes, params),
        title=title,
        summary=summary,
        items=list(ITEMS),
        headline=[_headline(name, metrics[name]) for name in groups],
    )


def _headline(name: str, m: Dict[str, Any]) -> str:
    """One line for "At a glance": GAD against random search at the budget, the mean over split seeds with its
    interval over seeds, errors found next to SDR; or why GAD is not reported."""
    budget, k = m["budget"], m["n_seeds"]
    ran = (
        f"over {k} split seeds ({m['replicates']} pools of {m['pool_size']} each)"
        if k > 1
        else f"on one split ({m['replicates']} pools of {m['pool_size']})"
    )
    paper = [
        s for s in m["sdr"] if s != "low_confidence" and m["sdr"][s] is not None
    ]  # low_confidence: not the paper's
    exp = m["errors_expected"]
    rnd = (
        (
            f"random search's {m['errors'].get('random', float('nan')):.1f} of {exp.get('random', float('nan')):.2f} "
            f"expected (SDR {m['sdr'].get('random', float('nan')):.2f})"
        )
        if m["sdr"].get("random") is not None
        else ""
    )
    if not m["gad_reliable"]:
        return (
            f"{name}: GAD is unreliable here and reports no SDR: the pseudo-model did not learn the black box "
            f"(lowest R^2 {m['pseudo_r2_lowest'] if m['pseudo_r2_lowest'] is not None else float('nan'):.3f} < "
            f"gad.min_pseudo_r2 {m['min_pseudo_r2']:g}), so its adversarial distances mean nothing"
            + (f"; with {budget} labels, {ran}, {rnd}." if rnd else ".")
        )
    lo, hi = m["sdr_ci95"]["gad"]
    best = max(paper, key=lambda s: m["sdr"][s])
    few = exp.get("gad", 1.0) < 1.0
    beats = m["sdr"]["gad"] > m["sdr"].get("random", float("inf"))
    interval = "95% t over seeds" if k > 1 else "95% CI over pools"
    return (
        f"{name}: {ran}, with {budget} labels GAD finds {m['errors']['gad']:.1f} high-confidence errors where the "
        f"confidences expect {exp['gad']:.2f} (mean SDR {m['sdr']['gad']:.2f}, {interval} [{lo:.2f}, {hi:.2f}]"
        + (f", seeds {m['sdr_range']['gad'][0]:.2f}-{m['sdr_range']['gad'][1]:.2f}" if k > 1 else "")
        + ")"
        + (f" against {rnd}" if rnd else "")
        + f"; best of the paper's searches here: {search_label(best)} "
        f"(SDR {m['sdr'][best]:.2f})."
        + ("" if beats or not rnd else " GAD does not beat random search on this target (see the caveat).")
        + (
            " Caveat: fewer than one error is expected among GAD's queries, so one error more or less moves SDR "
            "a lot; read the error counts."
            if few
            else ""
        )
    )


def _add_ranking(sec: StageResult, ranking: Ranking, name: str, n_rows: int, unlabelled: Any = None) -> None:
    """The to-label list's ranking in the section: a table of every search's errors per label, a paragraph and a
    headline naming the search that orders the list."""
    import pandas as pd

    sec.tables["to_label_ranking"] = pd.DataFrame(
        [
            {
                "search": search_label(s),
                "errors_per_budget": rounded(v),
                "budget": ranking.budget,
                "label_free": s in LABEL_FREE,
                "ranks_to_label": s == ranking.chosen,
            }
            for s, v in ranking.errors.items()
        ]
    )
    sec.items.append(
        {
            "table": "to_label_ranking",
            "caption": (
                "Which search orders the to-label list: errors found in the first queries of each search (mean over pools "
                "and split seeds); only a label-free search can rank rows no one has labelled, and the one with the most "
                "errors per label does."
            ),
        }
    )
    if unlabelled is not None:
        rows = (
            f"{n_rows} of the {len(unlabelled.prediction)} unlabelled rows (data.unlabelled), those predicted "
            "as the class of interest with confidence above the threshold"
        )
        sec.metrics[name]["n_unlabelled"] = int(len(unlabelled.prediction))
        sec.metrics[name]["n_to_label"] = int(n_rows)
    else:
        rows = f"{n_rows} eligible test rows; give data.unlabelled to rank rows no one has labelled"
    text = (
        f"The to-label list of {name} ({rows}: the to_label.csv next to GAD's findings, column "
        f"ranked_by) is {ranking.sentence()}."
    )
    sec.summary.append(
        text + " The ranking is chosen on the protocol's labelled pools; GAD orders the list only "
        "where it found the most errors per label."
    )
    sec.headline.append(text)


def _sample(o: DatasetOutcome, m: Dict[str, Any]) -> str:
    """What GAD ran on, in words: the test rows, the eligible ones, the pools and seeds, the unlabelled rows."""
    out = (
        f"all {len(o.split.X_test)} test rows, of which {len(o.eligible)} eligible (predicted "
        f"{o.class_name!r} with confidence > {o.confidence_threshold:g}); {m['replicates']} pools of "
        f"{m['pool_size']} drawn from them per split seed, {m['n_seeds']} split seed(s)"
    )
    if o.unlabelled is not None:
        out += (
            f"; the to-label list ranks {len(o.unlabelled.eligible)} eligible of the {len(o.unlabelled.prediction)} "
            "unlabelled rows"
        )
    return out


def _parquet(df: Any) -> bytes:
    buf = io.BytesIO()
    df.to_parquet(buf, engine="pyarrow", index=False)
    return buf.getvalue()


def report(outcomes: List[DatasetOutcome], params: GadParams, target: AuditTarget) -> MethodReport:
    """GAD's report on ``target``: the section (:func:`section`), the findings of the audited run (split seed 0;
    :func:`weakspot.gad.findings.findings_of`) and its to-label list as the extra products ``to_label.parquet`` and
    ``to_label.csv``."""
    audited = next(iter(group_runs(outcomes).values()))[0]
    sec = section(outcomes, params)
    m = sec.metrics[audited.name]
    errors = {s: v for s, v in m["errors"].items() if v is not None}
    ranking = choose(errors, m["budget"], m["gad_reliable"])
    weak_spots, to_label = findings_of(audited, ranking=ranking)
    _add_ranking(sec, ranking, audited.name, len(to_label), audited.unlabelled)
    sec.sample = _sample(audited, m)
    return MethodReport(
        section=sec,
        findings=weak_spots,
        extras={"to_label.parquet": _parquet(to_label), "to_label.csv": to_label.to_csv(index=False).encode()},
    )
