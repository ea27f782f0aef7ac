"""The robustness curve's report: metrics (the curve with 95% Wilson intervals, the eps at which PGD halves the clean
accuracy), the curve as a table (``curve.csv``, a DVC plot: x eps, one column per attack), prose and the classes that
fall first, confirmed on held-out inputs against a control disjoint from them.

Caveats first: the intervals are per point (Wilson, 95%); neighbouring points share inputs, so they are not
independent. ``eps_half_pgd`` is interpolated linearly between grid points (None when PGD never halves the accuracy
on the grid). A class is proposed on a random half of the inputs (its PGD error at the focal eps, where that half's
accuracy is nearest half its clean accuracy, above that half's overall error) and confirmed on the other half
against the other classes' inputs of it (:func:`weakspot.evidence.on_masks`), both among the inputs the model gets
right (an input it already gets wrong is not an attack's failure).
"""

from __future__ import annotations

import json
from typing import Any, Dict, List, Optional

import numpy as np

from weakspot.fmt import rounded
from weakspot.methods import AuditTarget, MethodReport
from weakspot.result import StageResult
from weakspot.robustness.config import RobustnessParams
from weakspot.robustness.run import CurveResult, autoattack_attacks

NAMES = {"clean": "clean", "pgd": "PGD", "autoattack": "AutoAttack (ART)"}
SEVERITY_CLASS = (
    "lift: the share of the class's correctly classified held-out inputs PGD turns wrong at the focal eps "
    "over that of the other classes' (the class chosen on the other half)"
)


def _wilson(k: int, n: int) -> List[float]:
    from statsmodels.stats.proportion import proportion_confint

    lo, hi = proportion_confint(int(k), int(n), alpha=0.05, method="wilson")
    return [round(float(lo), 4), round(float(hi), 4)]


def eps_half(eps: List[float], acc: np.ndarray) -> Optional[float]:
    """The smallest eps (linear between grid points) at which ``acc`` falls to half of ``acc[0]``.

    >>> eps_half([0.0, 0.1, 0.2], np.array([0.8, 0.6, 0.2]))
    0.15
    """
    target = acc[0] / 2.0
    for i in range(1, len(eps)):
        if acc[i] <= target:
            a0, a1 = acc[i - 1], acc[i]
            t = 0.0 if a0 == a1 else (a0 - target) / (a0 - a1)
            return round(float(eps[i - 1] + t * (eps[i] - eps[i - 1])), 6)
    return None


def halves(res: CurveResult, seed: int) -> tuple:
    """Two random halves of the inputs (masks): the first chooses, the second confirms."""
    order = np.random.default_rng(int(seed)).permutation(res.n)
    a, b = np.zeros(res.n, bool), np.zeros(res.n, bool)
    a[order[: res.n // 2]], b[order[res.n // 2 :]] = True, True
    return a, b


def focal(res: CurveResult, seed: int) -> int:
    """The grid point the findings are read at: the eps > 0 where PGD's accuracy on the choosing half is nearest half
    its clean accuracy (where classes differ most; at a budget that breaks every input no class stands out)."""
    a, _ = halves(res, seed)
    acc = res.correct["pgd"][:, a].mean(axis=1)
    gap = [abs(acc[i] - acc[0] / 2) if res.eps[i] > 0 else np.inf for i in range(len(res.eps))]
    return int(np.argmin(gap))


def metrics(res: CurveResult, seed: int = 0) -> Dict[str, Any]:
    m: Dict[str, Any] = {
        "n_inputs": res.n,
        "depth": res.depth,
        "eps": [rounded(e, 6) for e in res.eps],
        "clean_accuracy": rounded(float(res.accuracy("clean")[0])),
    }
    for a in res.correct:
        if a == "clean":
            continue
        k = res.correct[a].sum(axis=1)
        m[a] = {
            "accuracy": [rounded(float(v)) for v in res.accuracy(a)],
            "interval": [_wilson(int(x), res.n) for x in k],
        }
        m[f"eps_half_{a}"] = eps_half(res.eps, res.accuracy(a))
    f = focal(res, seed)
    m["focal_eps"] = rounded(res.eps[f], 6)
    m["pgd_accuracy_at_focal_eps"] = m["pgd"]["accuracy"][f]
    return m


def curve_table(res: CurveResult) -> Any:
    """``curve.csv``: eps (fraction of the range) and each attack's accuracy, with the interval bounds."""
    import pandas as pd

    rows = []
    for i, e in enumerate(res.eps):
        row = {"eps": round(e, 6), "eps (data units)": round(res.eps_data[i], 6)}
        for a in res.correct:
            k = int(res.correct[a][i].sum())
            lo, hi = _wilson(k, res.n)
            row.update({a: round(k / res.n, 4), f"{a} lo": lo, f"{a} hi": hi})
        rows.append(row)
    return pd.DataFrame(rows)


def findings(res: CurveResult, p: RobustnessParams) -> Any:
    """The classes PGD turns wrong most at the focal eps, chosen on one half of the inputs, confirmed on the other."""
    import pandas as pd

    from weakspot.evidence import on_masks
    from weakspot.findings import REQUIRED

    f, y = focal(res, p.seed), np.asarray(res.y)
    clean = np.asarray(res.correct["clean"][f], bool)  # fragile under attack: clean errors are not attack failures
    fails = ~res.correct["pgd"][f]
    a, b = halves(res, p.seed)
    a = a & clean  # the class is chosen, like it is confirmed, among the inputs the model gets right
    overall = fails[a].mean() if a.any() else 0.0
    rates = [(float(fails[a & (y == c)].mean()), c) for c in range(len(res.classes)) if (a & (y == c)).sum() >= 3]
    chosen = [c for r, c in sorted(rates, reverse=True) if r > overall][:3]
    rows = []
    for c in chosen:
        ev = on_masks(fails[b], (y[b] == c) & clean[b], control=clean[b])
        rows.append(
            {
                "weak_spot": f"class {res.classes[c]} under PGD at L-inf eps {res.eps_data[f]:.4g}",
                "kind": "class",
                "severity": float(np.nan_to_num(ev.lift, nan=0.0)),
                "severity_meaning": SEVERITY_CLASS,
                "label": res.classes[c],
                "prediction": "",
                "confidence": float("nan"),
                "example": json.dumps({"eps": round(res.eps_data[f], 6)}),
                **ev.columns(),
                "confirmation": ev.sentence() + f" (inputs of class {res.classes[c]} in the half that did not "
                "choose the class and the model gets right, against the other classes' inputs it gets right there)",
            }
        )
    cols = list(REQUIRED) + [
        "example",
        "confirmation",
        "n_confirm",
        "failures",
        "n_control",
        "control_failures",
        "lift",
        "lift_lo",
        "lift_hi",
        "p_value",
        "p_adjusted",
        "lift_lo_adjusted",
        "family",
        "confirmed",
    ]
    return pd.DataFrame(rows, columns=cols)


def report(res: CurveResult, params: RobustnessParams, target: AuditTarget) -> MethodReport:
    m = metrics(res, params.seed)
    f = focal(res, params.seed)
    attacks = [a for a in res.correct if a != "clean"]
    pts = "; ".join(
        f"{NAMES[a]} at eps {res.eps_data[f]:.4g}: {m[a]['accuracy'][f]:.1%} "
        f"({m[a]['interval'][f][0]:.1%}-{m[a]['interval'][f][1]:.1%})"
        for a in attacks
    )
    half = m["eps_half_pgd"]
    head = (
        f"Robustness curve: clean accuracy {m['clean_accuracy']:.1%} on {res.n} test inputs; {pts}; PGD halves "
        "the accuracy "
        + (
            f"at eps {half * (res.clip[1] - res.clip[0]):.3g}"
            if half is not None
            else f"nowhere up to eps {res.eps_data[-1]:.3g}"
        )
    )
    aa = "autoattack" in res.correct
    depth = (
        "study — PGD and AutoAttack at every eps"
        if res.depth == "study"
        else "audit — PGD and, with robustness.autoattack on, AutoAttack at every eps (what `robustness.depth: study` "
        "runs)"
        if aa
        else "audit — PGD at every eps; `robustness.depth: study` adds AutoAttack at every eps"
    )
    summary = [
        f"The audited model attacked on {res.n} held-out test inputs (a seeded sample, seed {params.seed}) at "
        f"{len(res.eps)} budgets eps from 0 to {res.eps_data[-1]:.4g} (L-inf, in the data's units; "
        f"{res.eps[-1]:.3g} of its range): PGD-{params.pgd_steps} with a random start"
        + (
            f" and AutoAttack ({' + '.join(a.upper() for a in autoattack_attacks(len(res.classes)))}, "
            f"{params.autoattack_iters} iterations, IBM ART)"
            if aa
            else " (AutoAttack off: robustness.autoattack)"
        )
        + ". Each point is the share of inputs the attack leaves "
        "correct, with its 95% Wilson interval; an attack's accuracy is an upper bound on the model's robust "
        f"accuracy at that eps. Depth: {depth}.",
        head + ".",
    ]
    section = StageResult(
        metrics=m,
        tables={"curve": curve_table(res)},
        title=f"Robustness curve ({target.name})",
        summary=summary,
        items=[
            {"figure": "curve", "caption": "Accuracy under attack against eps (95% intervals shaded)."},
            {"table": "curve", "caption": "The curve's points (also a DVC plot: `dvc plots show`)."},
        ],
        headline=[head + "."],
        key_metrics=["clean_accuracy", "pgd_accuracy_at_focal_eps", "eps_half_pgd"],
        sample=f"{res.n} held-out test inputs (seed {params.seed}), never a training input",
    )
    return MethodReport(section=section, findings=findings(res, params))
