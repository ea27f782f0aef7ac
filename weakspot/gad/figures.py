"""GAD's figures on a target: Figs. 1-5 of seeds/001 and each split seed's SDR, from the protocol's runs.

Caveats first: one panel per target; the curves (Figs. 3-4) are the mean over split seeds with the 95% interval
over seeds (over pools where one seed ran); Figs. 1-2 show the audited model (split seed 0) only. Where GAD is
unreliable (the pseudo-model failed the R^2 gate on a seed) its curves and boxes are left out and the panel says so.
Figures are returned open; the caller saves and closes them.
"""

from __future__ import annotations

from typing import Any, Dict, List

import numpy as np

from weakspot.gad.config import GadParams
from weakspot.gad.protocol import DatasetOutcome
from weakspot.gad.sdr import reliability
from weakspot.gad.search import search_label
from weakspot.gad.stats import across_seeds, common_budget, curve_band, group_runs, seed_stats
from weakspot.plotting import pyplot

Groups = Dict[str, List[DatasetOutcome]]


def _grid(n: int):
    fig, axes = pyplot().subplots(1, n, figsize=(4.6 * n, 3.8), squeeze=False)
    return fig, axes[0]


def _shown(runs: List[DatasetOutcome], s: str) -> bool:
    """A search is drawn unless it is GAD and GAD is unreliable on one of the target's runs."""
    return s != "gad" or all(o.gad_reliable for o in runs)


def figures(outcomes: List[DatasetOutcome], params: GadParams, target: Any = None) -> Dict[str, Any]:
    """Figs. 1-5 of the paper, one panel per target (curves: mean over split seeds with the 95% interval over seeds;
    Figs. 1-2: the audited model), and ``sdr_by_seed``: each seed's mean SDR per search with the mean over seeds.

    Returns ``{"sdr_curves" (Fig. 3), "errors_found" (Fig. 4), "sdr_by_seed", "confidence_boxplots" (Fig. 5),
    "reliability" (Fig. 2), "loess_fit" (Fig. 1)}``, matplotlib figures. ``target`` is not used (the runs carry
    their splits).
    """
    groups = group_runs(outcomes)
    colors = {s: f"C{i % 10}" for i, s in enumerate(sorted({s for o in outcomes for s in o.sdr}))}
    return {
        "sdr_curves": _curves(groups, colors, "sdr"),
        "errors_found": _curves(groups, colors, "errors"),
        "sdr_by_seed": _sdr_by_seed(groups, colors),
        "confidence_boxplots": _confidence_boxplots(groups),
        "reliability": _reliability(groups, params),
        "loess_fit": _loess_fit(groups),
    }


def _curves(groups: Groups, colors: Dict[str, str], what: str) -> Any:
    """Fig. 3 (``what="sdr"``: mean SDR after each query) or Fig. 4 (``"errors"``: mean errors found)."""
    fig, axes = _grid(len(groups))
    ylabel = "mean SDR" if what == "sdr" else "mean errors found"
    for ax, (name, runs) in zip(axes, groups.items()):
        budget = common_budget(runs)
        q = np.arange(1, budget + 1)
        top = 0.0
        for s in runs[0].sdr:
            if not _shown(runs, s):
                continue
            curves = [
                o.sdr[s][:, :budget] if what == "sdr" else np.cumsum(o.errors[s][:, :budget], axis=1) for o in runs
            ]
            m, lo, hi = curve_band(curves)
            ax.plot(q, m, color=colors[s], label=search_label(s))
            ax.fill_between(q, lo, hi, color=colors[s], alpha=0.15, linewidth=0)
            top = max(top, float(np.nanmax(m)))
        if what == "sdr":
            ax.axhline(1.0, color="k", lw=0.8, ls="--")
            if top > 5:
                ax.set_yscale("log")
        reps = next(iter(runs[0].errors.values())).shape[0]
        title = f"{name}: {len(runs)} seed(s) x {reps} pools of {runs[0].pool_size}" + (
            "" if all(o.gad_reliable for o in runs) else "\n(GAD unreliable: not shown)"
        )
        band = f"95% t over {len(runs)} seeds" if len(runs) > 1 else "95% CI over pools"
        ax.set(title=title, xlabel="queries", ylabel=f"{ylabel} ({band})")
    axes[0].legend(fontsize=7)
    return fig


def _sdr_by_seed(groups: Groups, colors: Dict[str, str]) -> Any:
    """Each seed's mean SDR at the budget per search (dots), with the mean over seeds and its interval (black)."""
    fig, axes = _grid(len(groups))
    for ax, (name, runs) in zip(axes, groups.items()):
        budget = common_budget(runs)
        names = [s for s in runs[0].sdr if _shown(runs, s)]
        stats = [seed_stats(o, budget) for o in runs]
        acr = across_seeds(runs, budget)
        for j, s in enumerate(names):
            vals = [st[s]["sdr"] for st in stats]
            offs = np.linspace(-0.15, 0.15, len(vals)) if len(vals) > 1 else np.zeros(1)
            ax.scatter(j + offs, vals, s=14, color=colors[s], alpha=0.8)
            a = acr[s]
            ax.errorbar(
                j + 0.3,
                a["sdr"],
                yerr=[[a["sdr"] - a["lo"]], [a["hi"] - a["sdr"]]],
                fmt="o",
                color="k",
                ms=4,
                capsize=3,
            )
        ax.axhline(1.0, color="k", lw=0.8, ls="--")
        ax.set_xticks(range(len(names)), [search_label(s) for s in names], rotation=45, ha="right", fontsize=7)
        ax.set(title=f"{name}: {len(runs)} split seed(s)", ylabel=f"SDR after {budget} queries")
    return fig


def _confidence_boxplots(groups: Groups) -> Any:
    """Fig. 5: the confidences of the queried points per search, over every seed and pool."""
    fig, axes = _grid(len(groups))
    for ax, (name, runs) in zip(axes, groups.items()):
        names = [s for s in runs[0].confidence if _shown(runs, s)]
        ax.boxplot([np.concatenate([o.confidence[s].ravel() for o in runs]) for s in names], showfliers=False)
        ax.set_xticks(range(1, len(names) + 1), [search_label(s) for s in names], rotation=45, ha="right", fontsize=7)
        ax.set(title=f"{name} ({len(runs)} seed(s))", ylabel="confidence of queried points")
    return fig


def _reliability(groups: Groups, params: GadParams) -> Any:
    """Fig. 2: the audited model's reliability diagram for its predictions of the class of interest."""
    fig, axes = _grid(len(groups))
    for ax, runs in zip(axes, groups.values()):
        o = runs[0]
        sel = o.test_predicted_coi
        lo = 1.0 / o.n_classes  # the least possible top-label confidence (0.5 for two classes, as Fig. 2)
        rel = reliability(o.test_confidence[sel], o.test_correct[sel], bins=params.reliability_bins, lo=lo)
        e = rel["edges"]
        w = e[1] - e[0]
        ok = rel["count"] > 0
        acc = np.where(ok, rel["accuracy"], 0.0)
        mid = 0.5 * (e[1:] + e[:-1])
        ax.bar(e[:-1], acc, width=w, align="edge", color="C0", alpha=0.7, edgecolor="k", label="observed accuracy")
        over = ok & (acc < mid)
        ax.bar(
            e[:-1][over],
            (mid - acc)[over],
            bottom=acc[over],
            width=w,
            align="edge",
            color="red",
            alpha=0.5,
            label="overconfidence",
        )
        ax.plot([lo, 1], [lo, 1], "k--", lw=0.8)
        ax.set(
            title=f"{o.name} seed {o.split_seed} ({o.class_name!r} predicted)",
            xlabel="confidence",
            ylabel="accuracy",
            xlim=(lo, 1),
            ylim=(0, 1),
        )
    axes[0].legend(fontsize=7, loc="upper left")
    return fig


def _loess_fit(groups: Groups) -> Any:
    """Fig. 1: the audited model's first pool, (log-)MAE against confidence, its LOESS fit, GAD's queries, errors."""
    fig, axes = _grid(len(groups))
    for ax, runs in zip(axes, groups.values()):
        o = runs[0]
        ex = o.example
        if not ex or not o.gad_reliable:
            ax.text(
                0.5,
                0.5,
                "GAD unreliable here" if not o.gad_reliable else "no pool",
                ha="center",
                transform=ax.transAxes,
            )
            ax.set(title=o.name)
            continue
        c, y, f = ex["confidence"], ex["target"], ex["fitted"]
        chosen = np.zeros(len(c), dtype=bool)
        chosen[ex["chosen"]] = True
        ax.scatter(c[~chosen], y[~chosen], s=8, color="0.6", label="pool")
        ax.scatter(c[chosen], y[chosen], s=14, color="gold", edgecolor="k", linewidth=0.3, label="queried (lowest GAD)")
        err = ex["error"]
        ax.scatter(c[err], y[err], s=30, marker="x", color="red", label="error")
        k = np.argsort(c)
        ax.plot(c[k], f[k], color="C0", lw=2, label="LOESS F(p)")
        ax.set(
            title=f"{o.name} seed {o.split_seed}, pool 1",
            xlabel="confidence",
            ylabel="log MAE" if o.split.log_mae else "MAE",
        )
    if axes[0].get_legend_handles_labels()[0]:
        axes[0].legend(fontsize=7)
    return fig
