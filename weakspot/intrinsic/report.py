"""Intrinsic robustness's report (seeds/002): the measurements of :func:`weakspot.intrinsic.run.run` as metrics,
tables, the paper's claims checked, prose and findings. The figures are :mod:`weakspot.intrinsic.figures`'.

Caveats first: nothing is measured here; every number comes from the :class:`~weakspot.intrinsic.run.IntrinsicResult`.
What did not run is left out, never shown empty: at depth audit (``IntrinsicResult.depth``) the defended models, the
paper's claims and numbers, Table 4 and Fig. 6 (their tables, figures, metrics and prose); the metrics both depths
hold are the same numbers under the same keys.
The metrics keep the attack keys ``pgd30`` and ``cw30`` whatever the steps that ran (the prose and tables name the
steps). The defended models' training (what ran, its settings and time) goes to the lineage, never to the metrics.
"""

from __future__ import annotations

from typing import Any, Dict, List

import numpy as np

from weakspot.intrinsic.claims import claims, grade, grade_applies
from weakspot.intrinsic.config import IntrinsicParams
from weakspot.intrinsic.findings import findings
from weakspot.intrinsic.run import IntrinsicResult
from weakspot.intrinsic.tables import (
    PAPER_TABLE,
    attack_names,
    autoattack_name,
    defences_table,
    per_class_table,
    pool_words,
    reparam_table,
    seconds_table,
    settings_table,
)
from weakspot.methods import MethodReport
from weakspot.result import StageResult

TITLE = "Intrinsic robustness: psi, reference attacks, defences, decision surfaces"
#: The section's title at each depth (the audit has no defended model).
TITLES = {"audit": "Intrinsic robustness: psi, reference attacks, decision surfaces", "study": TITLE}


def report(result: IntrinsicResult, params: IntrinsicParams, target: Any) -> MethodReport:
    """The report section (titled with ``target.name``), the findings and the defended models' lineage."""
    import pandas as pd

    p = params
    study = result.depth == "study"
    claim_t, claim_m = claims(result.evals, result.reparam, p.reparam.factors, seed=p.seed)
    settings_t = settings_table(
        p,
        len(result.X),
        result.n_attack,
        result.eps,
        result.defence_info,
        result.init,
        len(result.evals) > 1,
        grey=result.X.ndim == 4 and result.X.shape[1] == 1,
        n_pool=result.n_pool,
        n_test=result.n_test,
        depth=depth_words(result, p),
    )
    tables = {"seconds": seconds_table(result), "defences": defences_table(result, p)}
    if study:  # the paper's comparisons
        tables.update(
            paper=pd.DataFrame(PAPER_TABLE), reparam=reparam_table(result.reparam, p), stability=result.stability
        )
    tables["per_class"] = per_class_table(result)
    if study:
        tables["claims"] = claim_t
    tables["settings"] = settings_t
    m = metrics(result, claim_m)
    section = StageResult(
        metrics=m,
        tables=tables,
        title=f"{TITLES[result.depth]} ({target.name})",
        summary=summary(result, p, m, claim_t, settings_t),
        items=items(result, p),
        headline=[headline(result, p, m)],
        key_metrics=["psi", "psi_softmax", "pgd30_acc", "cw30_acc"],
        sample=sample(result, p),
    )
    found = findings(result.evals["none"], result.X, result.y, result.classes, p, result.eps)
    # what ran, its settings and training time (timings stay out of the metrics)
    return MethodReport(section=section, findings=found, lineage={"defences": result.defence_info})


def sample(result: IntrinsicResult, p: IntrinsicParams) -> str:
    """What psi and the attacks ran on, in words (never a training input)."""
    n = len(result.X)
    from_test = min(n, int(result.n_test))
    rest = f" and {n - from_test} validation inputs" if n > from_test else ""
    text = (
        f"{from_test} of the {result.n_test} test inputs{rest} for psi (drawn with seed {p.seed}), the first "
        f"{result.n_attack} of them attacked"
    )
    if result.depth != "study":
        return text
    stab = result.stability
    pool = int(stab["batch_size"].max()) if stab is not None and len(stab) else 0
    words, _ = pool_words(result.n_pool, result.n_test, p.stability.batch_sizes)
    return f"{text} per model; Fig. 6 draws batches of up to {pool} from a pool of {words}" + (
        "; the defended copies trained on the train split" if len(result.evals) > 1 else ""
    )


def depth_words(result: IntrinsicResult, params: IntrinsicParams) -> str:
    """The depth that ran, in words: what it measured and what the other depth adds (or added)."""
    named = ", ".join(params.defences) or "none: intrinsic.defences is empty"
    parts = f"the defended copies ({named}), Table 4 and Fig. 6"
    own = "the model's own psi, attacks and class evidence"
    if result.depth == "study":
        return f"study — {own}, and the paper's comparisons: {parts}"
    return f"audit — {own}; `intrinsic.depth: study` adds {parts}"


def metrics(result: IntrinsicResult, claim_metrics: Dict[str, Any]) -> Dict[str, Any]:
    """The metrics file: each model's psi and accuracies, the audited model's headline numbers, Table 4, Fig. 6, the
    claims (those three at depth study only), the surfaces' boundary distances and the PGD-vs-ART check."""
    evals = result.evals
    study = result.depth == "study"
    grey = grade_applies(result.X.shape, result.eps, result.clip)
    n_psi, n_test, n_pool = int(len(result.X)), int(result.n_test), int(result.n_pool)
    # where the inputs came from: the test split first, then val; never train
    inputs = {"psi_test": min(n_psi, n_test), "psi_val": n_psi - min(n_psi, n_test)}
    if study:
        inputs.update(fig6_pool_test=min(n_pool, n_test), fig6_pool_val=n_pool - min(n_pool, n_test), fig6_pool_train=0)
    m: Dict[str, Any] = {
        "eps": float(result.eps),
        "n_inputs": n_psi,
        "n_attack": int(result.n_attack),
        "depth": result.depth,
        "inputs": inputs,
    }
    for name, e in evals.items():
        row: Dict[str, Any] = {
            "psi": e.psi,
            "psi_softmax": e.psi_softmax,
            "clean_acc": e.acc["clean"],
            "fgsm_acc": e.acc["fgsm"],
            "pgd30_acc": e.acc["pgd30"],
            "cw30_acc": e.acc["cw30"],
        }
        if "autoattack" in e.acc:
            row["autoattack_acc"] = e.acc["autoattack"]
        if grey:
            row["grade"] = grade(e.psi)
        m[name] = row
    n0 = evals["none"]
    m["psi"] = n0.psi
    m["psi_softmax"] = n0.psi_softmax
    m["cw30_acc"] = n0.acc["cw30"]
    m["pgd30_acc"] = n0.acc["pgd30"]
    m["least_stable_classes"] = [int(c) for c in np.argsort(n0.psi_class)[:3] if np.isfinite(n0.psi_class[c])]
    if study:
        m["reparam"] = result.reparam
        stab = result.stability.to_dict("records") if result.stability is not None else []
        m["stability"] = {f"b{int(r['batch_size'])}": float(r["relative_std"]) for r in stab}
        m["claims"] = claim_metrics
    m["surface_boundary_distance"] = {
        str(i): {lab: {s.direction: s.boundary_distance() for s in ss} for lab, ss in per.items()}
        for i, per in result.surfaces.items()
    }
    m["pgd_vs_art"] = result.art_check
    return m


def _names(result: IntrinsicResult, params: IntrinsicParams) -> Dict[str, Any]:
    aa_on = any("autoattack" in e.acc for e in result.evals.values())
    return attack_names(params, autoattack_name(params, aa_on))


def summary(
    result: IntrinsicResult, params: IntrinsicParams, m: Dict[str, Any], claim_t: Any, settings_t: Any
) -> List[str]:
    """The section's opening paragraphs: what psi is and what ran, the audited model, the PGD check against ART, the
    defended models and the paper's claims, the caveats."""
    p, evals, eps = params, result.evals, result.eps
    n_psi, n_test, n_attack = len(result.X), result.n_test, result.n_attack
    grey = grade_applies(result.X.shape, eps, result.clip)
    n0 = evals["none"]
    least = [result.classes[c] for c in m["least_stable_classes"]]
    att_names = _names(result, p)
    defended = [n for n in evals if n != "none"]
    best = max(evals, key=lambda n: evals[n].psi)
    art = result.art_check
    return [
        "The intrinsic robustness score psi (Yu et al., seeds/002) asks how far a model's prediction can move inside "
        f"the L-inf ball of radius eps = {eps:.4g} around an input, whatever attack one would try: for each input, "
        "gradient ascent finds the neighbour whose prediction has the largest KL divergence from the input's, and psi "
        "is the inverse of that divergence averaged over the inputs (higher = more stable). The predictions are the "
        "paper's scale-invariant normalisation of the logits (divided by their largest absolute value, shifted to "
        "(0, 2), summed to one; Eq. 5), so rescaling a layer does not change psi; plain softmax psi is given for "
        f"comparison. psi ran on {n_psi} inputs ({min(n_psi, n_test)} from the test split"
        + (f", {n_psi - n_test} from the validation split" if n_psi > n_test else "")
        + f"; never a training input), the attacks on the first {n_attack}. Depth: {depth_words(result, p)}.",
        f"The audited model: psi {n0.psi:.1f} (softmax {n0.psi_softmax:.3g}); accuracy clean {n0.acc['clean']:.1%}, "
        + ", ".join(f"{att_names[k]} {n0.acc[k]:.1%}" for k in n0.acc if k != "clean")
        + (f"; grade {grade(n0.psi)} (Sec. 5.6, MNIST-calibrated; see the caveats)" if grey else "")
        + f". Its least stable classes (lowest per-class psi): {', '.join(least)}.",
        f"Our PGD-{p.pgd_steps} checked against IBM ART's on the audited model, both without a random start, same "
        f"eps, steps and step size: accuracy {art['ours']:.1%} (ours) and {art['art']:.1%} (ART), the attacked "
        f"inputs differing by at most {art['max_abs_diff']:.2g}.",
        *(
            [
                f"Defended models ({', '.join(defended)}), each from the audited model's architecture and seed: the largest "
                f"psi is {best}'s ({evals[best].psi:.1f}, at clean accuracy {evals[best].acc['clean']:.1%}; the audited "
                f"model's {n0.acc['clean']:.1%}). The paper's claims, checked (the claims table gives each one's pass rule "
                "and numbers): " + "; ".join(f"{r['claim']}: {r['holds']}" for r in claim_t.to_dict("records")) + "."
            ]
            if defended
            else []
        ),
        "Caveats: psi and every accuracy come from gradient-based searches, so they bound the model's worst case from "
        "one side only (a stronger search can only lower the accuracy and raise the KL). Eq. 5 gives the most "
        "negative logit probability exactly 0 whenever its magnitude is the largest (on nearly every clean input "
        f"here), which makes the KL unbounded; probabilities are floored at {p.psi.floor:g} inside its logs, so psi "
        "is on a different scale from the paper's tables (compare models, not numbers across papers). "
        + (
            "Gradient inhibition (Liu et al. 2018, Table 3) is not among the defences: seeds/002 describes it only as relying "
            "on vanishing input gradients, and its own paper is not at hand to implement it from. "
            if result.depth == "study"
            else ""
        )
        + (
            "The grade is Sec. 5.6's three levels for MNIST at its eps, with bounds placed between Table 1's LeNet "
            "models because the paper's ranges are not legible in our copy; our inputs are smaller than MNIST's. "
            if grey
            else ""
        )
        + "Settings that differ from the paper's (the settings table gives both values): "
        + ", ".join(r["setting"] for r in settings_t.to_dict("records") if r["differs"])
        + ".",
    ]


def items(result: IntrinsicResult, params: IntrinsicParams) -> List[Dict[str, str]]:
    """The section's figures and tables, in reading order, with their captions (at depth audit without the paper's
    comparisons: the models against the attacks, the claims, the paper's numbers, Table 4 and Fig. 6)."""
    p = params
    study = result.depth == "study"
    defences = (
        {
            "table": "defences",
            "caption": f"Tables 1-3 as one: psi and accuracy (on {result.n_attack} inputs) under "
            f"each attack at eps = {result.eps:.4g}, for the audited model and each defended model; 'what ran' says how "
            "it was trained.",
        }
        if study
        else {
            "table": "defences",
            "caption": f"The audited model's psi and accuracy (on {result.n_attack} inputs) under each attack at "
            f"eps = {result.eps:.4g} (Tables 1-3's columns).",
        }
    )
    comparisons = [
        {
            "figure": "psi_vs_attacks",
            "caption": "psi (log scale) against accuracy under each attack, one point per "
            "model: if psi measures what the attacks measure, the points of each attack rise from left to right.",
        },
        {
            "table": "claims",
            "caption": "The paper's claims, checked on these models: each row's pass rule "
            "(criterion, with its thresholds), the measured numbers, and the verdict.",
        },
        {
            "table": "paper",
            "caption": "The paper's numbers, for reference (MNIST LeNet eps 0.3; CIFAR-10 ResNet18 eps 8/255).",
        },
    ]
    study_end = [
        {
            "table": "reparam",
            "caption": "Table 4: the last layer's weights and bias scaled. Normalised psi cannot "
            "move: Eq. 5 divides the logits by their largest absolute value, so the invariance holds by construction "
            "(its row in the claims table checks the code, it is not a finding); softmax psi and the input-space "
            "eps-sharpness of Keskar et al. do move." + _clean_of(result, p.reparam.defences),
        },
        {
            "figure": "stability",
            "caption": f"Fig. 6: the spread of the audited model's psi over {p.stability.draws} "
            "random batches of each size, drawn from a pool of "
            f"{pool_words(result.n_pool, result.n_test, p.stability.batch_sizes)[0]}.",
        },
        {"table": "stability", "caption": "Fig. 6 as numbers: relative standard deviation of psi across batches."},
    ]
    return [
        defences,
        *(comparisons if study else []),
        {
            "figure": "worst_inputs",
            "caption": "The inputs with the largest KL divergence in the eps-ball (top) and "
            "the neighbour the ascent found (bottom), with the audited model's predictions.",
        },
        {"figure": "per_class", "caption": "psi per true class: the classes whose neighbourhood is least stable."},
        {
            "table": "per_class",
            "caption": "psi per class and model (each model's clean accuracy: Tables 1-3 above)."
            if study
            else "psi per class of the audited model (its clean accuracy: the table above).",
        },
        *[
            {
                "figure": f"surface_{j}",
                "caption": "Decision surfaces (Sec. 3, Figs. 2-4): g = z_true - max of the other "
                "logits over a plane through the input (the cross), x-axis a random sign direction, y-axis random, FGSM, "
                "least-likely FGSM and C&W directions; red is wrong, the black line is the boundary g = 0, the dashed "
                "square the eps-ball. "
                + (
                    "Top: the audited model; bottom: the min-max model (when it ran)."
                    if study
                    else "The audited model."
                ),
            }
            for j in range(len(result.surfaces))
        ],
        *(study_end if study else []),
        {"table": "settings", "caption": "What ran against the paper's settings."},
    ]


def _clean_of(result: IntrinsicResult, names: Any) -> str:
    """Clean accuracy of the defended models among ``names`` that ran, as a sentence (a defence's psi is never read
    without it)."""
    shown = [n for n in names if n in result.evals and n != "none"]
    return (
        (" Clean accuracy: " + ", ".join(f"{n} {result.evals[n].acc['clean']:.1%}" for n in ["none", *shown]) + ".")
        if shown
        else ""
    )


def headline(result: IntrinsicResult, params: IntrinsicParams, m: Dict[str, Any]) -> str:
    """One sentence for the report's "At a glance" box: the audited model's psi, its strongest attack, its least
    stable classes, and the min-max model's psi with its clean and CW accuracy when it ran."""
    p, evals = params, result.evals
    n0 = evals["none"]
    least = [result.classes[c] for c in m["least_stable_classes"]]
    strongest = min((k for k in n0.acc if k != "clean"), key=lambda k: n0.acc[k])
    head = (
        f"Intrinsic robustness: psi {n0.psi:.1f}; {_names(result, p)[strongest]} at eps {result.eps:.4g} leaves "
        f"{n0.acc[strongest]:.0%} of inputs correct (clean {n0.acc['clean']:.0%}); least stable classes "
        f"{', '.join(least)}"
    )
    if "minmax" in evals:
        mm = evals["minmax"]
        head += (
            f"; min-max training: psi {mm.psi:.1f} at clean accuracy {mm.acc['clean']:.0%} (the audited model's "
            f"{n0.acc['clean']:.0%}), CW-{p.cw_steps} {mm.acc['cw30']:.0%}"
        )  # a defence's psi never without it
    return head + "."
