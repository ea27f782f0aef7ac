"""The report's tables for intrinsic robustness (seeds/002): Tables 1-3 as one, the paper's own numbers, Table 4, psi
per class, what ran against the paper's settings, and the seconds each measurement took.

Caveats first: the tables are for reading, so their numbers are rounded (the metrics keep them whole) and accuracies
are percent strings; the seconds table is a timing, never a metric.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

from weakspot.intrinsic.claims import grade, grade_applies
from weakspot.intrinsic.config import DEFENCE_TITLES, PAPER_SETTINGS, IntrinsicParams
from weakspot.intrinsic.reparam import factor_key

#: Tables 1-3 of seeds/002: psi and accuracy under PGD-30 and CW-30 of the paper's models.
PAPER_TABLE = [
    {"paper table": "1 (MNIST LeNet)", "model": "no defence", "psi": 93.8, "PGD-30": "2.82%", "CW-30": "1.01%"},
    {"paper table": "1 (MNIST LeNet)", "model": "AdvTrain", "psi": 264.7, "PGD-30": "51.8%", "CW-30": "46.2%"},
    {"paper table": "1 (MNIST LeNet)", "model": "MinMax", "psi": 958.4, "PGD-30": "92.3%", "CW-30": "90.3%"},
    {"paper table": "3 (MNIST)", "model": "Distillation", "psi": 70.5, "PGD-30": "97.1%", "CW-30": "0.0%"},
    {"paper table": "2 (CIFAR-10 ResNet18)", "model": "no defence", "psi": 67.9, "PGD-30": "0.0%", "CW-30": "0.0%"},
    {"paper table": "2 (CIFAR-10 ResNet18)", "model": "GradReg", "psi": 77.8, "PGD-30": "18.7%", "CW-30": "17.5%"},
    {"paper table": "2 (CIFAR-10 ResNet18)", "model": "MinMax", "psi": 162.7, "PGD-30": "44.3%", "CW-30": "43.1%"},
    {"paper table": "3 (CIFAR-10)", "model": "Distillation", "psi": 60.5, "PGD-30": "72.3%", "CW-30": "0.0%"},
]


def attack_names(params: IntrinsicParams, autoattack: Optional[str] = "AutoAttack") -> Dict[str, Optional[str]]:
    """How each attack key is named in the report: FGSM, PGD-<steps>, CW-<steps> and ``autoattack``."""
    return {
        "fgsm": "FGSM",
        "pgd30": f"PGD-{params.pgd_steps}",
        "cw30": f"CW-{params.cw_steps}",
        "autoattack": autoattack,
    }


def autoattack_name(params: IntrinsicParams, ran: bool) -> Optional[str]:
    """What the reduced AutoAttack was, in a column's words (None when it did not run)."""
    p = params.autoattack
    return f"AutoAttack ({' + '.join(a.upper() for a in p.attacks)}, {p.iters} it.)" if ran else None


def _percent(v: Optional[float]) -> str:
    return "" if v is None else f"{v:.1%}"


def defences_table(result: Any, params: IntrinsicParams) -> Any:
    """Tables 1-3 as one: psi and accuracy under each attack, one row per model, with what ran."""
    import pandas as pd

    p = params
    evals = result.evals
    aa_on = any("autoattack" in e.acc for e in evals.values())
    aa_name = autoattack_name(p, aa_on)
    grey = grade_applies(result.X.shape, result.eps, result.clip)
    rows = []
    for name, e in evals.items():
        info = result.defence_info.get(name, {})
        r = {
            "model": name,
            "what ran": info.get("label", "the model under audit") if name != "none" else "the model under audit",
            "psi": round(e.psi, 2),
            "psi (softmax)": round(e.psi_softmax, 3),
            "clean": _percent(e.acc["clean"]),
            "FGSM": _percent(e.acc["fgsm"]),
            f"PGD-{p.pgd_steps}": _percent(e.acc["pgd30"]),
            f"CW-{p.cw_steps}": _percent(e.acc["cw30"]),
        }
        if aa_name is not None:  # AutoAttack ran
            r[aa_name] = _percent(e.acc.get("autoattack"))
        if grey:
            r["grade (Sec. 5.6)"] = grade(e.psi)
        rows.append(r)
    return pd.DataFrame(rows)


def reparam_table(reparam: Dict[str, Dict[str, float]], params: IntrinsicParams) -> Any:
    """Table 4: one row per model and measure, one column per rescaling of the last layer."""
    import pandas as pd

    rows = []
    for name, r in reparam.items():
        for metric, pre in (("psi (normalised)", ""), ("psi (softmax)", "softmax_"), ("eps-sharpness", "sharpness_")):
            row: Dict[str, Any] = {"model": name, "metric": metric}
            for f in [1.0] + list(params.reparam.factors):
                row[f"last layer x{f:g}"] = round(r[f"{pre}{factor_key(f)}"], 4)
            rows.append(row)
    return pd.DataFrame(rows)


def per_class_table(result: Any) -> Any:
    """psi per true class and model, with the number of inputs of each class."""
    import pandas as pd

    classes = result.classes
    return pd.DataFrame(
        {
            "class": classes,
            **{f"psi {n}": np.round(e.psi_class, 2) for n, e in result.evals.items()},
            "inputs": np.bincount(result.y, minlength=len(classes)),
        }
    )


def seconds_table(result: Any) -> Any:
    """Seconds each measurement of each model took."""
    import pandas as pd

    return pd.DataFrame(
        [{"model": n, **{k: round(v, 2) for k, v in e.seconds.items()}} for n, e in result.evals.items()]
    )


#: Madry et al. 2018's PGD steps in min-max training: 40 on MNIST (grey-scale), 7 on CIFAR-10 (colour).
MADRY_STEPS_PAPER = {"grey": 40, "colour": 7}


def source_settings(grey: bool) -> Dict[str, Tuple[Dict[str, Any], str]]:
    """Each defence's settings in its own paper (the constants of :mod:`weakspot.adversarial.defences`), as
    ``{defence: ({setting: value}, in words)}``; min-max's steps follow the data (MNIST's for grey-scale)."""
    from weakspot.adversarial import defences as D

    steps = MADRY_STEPS_PAPER["grey" if grey else "colour"]
    return {
        "fgsm_at": (
            {"lam": D.KURAKIN_LAMBDA, "fraction": D.KURAKIN_FRACTION},
            f"Kurakin et al. 2016: lambda {D.KURAKIN_LAMBDA:g}, {D.KURAKIN_FRACTION:.0%} of each batch adversarial",
        ),
        "minmax": ({"steps": steps}, f"Madry et al. 2018: PGD-{steps} ({'MNIST' if grey else 'CIFAR-10'})"),
        "gradreg": (
            {"lam": D.ROSS_LAMBDA_PAPER},
            f"Ross & Doshi-Velez 2018: lambda {D.ROSS_LAMBDA_PAPER:g} (MNIST, in their code's normalisation "
            "of the penalty)",
        ),
        "distillation": (
            {"temperature": D.PAPERNOT_TEMPERATURE, "warm_start": False},
            f"Papernot et al. 2016: T {D.PAPERNOT_TEMPERATURE:g}, from a fresh network",
        ),
    }


def _defence_rows(defence_info: Dict[str, Any], grey: bool) -> List[Dict[str, Any]]:
    """One row per defended model: what ran against its own paper's settings; ``differs`` where a setting that ran
    (read from the training's record, never typed here) is not the paper's."""
    src = source_settings(grey)
    rows = []
    for d, info in defence_info.items():
        want, words = src.get(d, ({}, DEFENCE_TITLES.get(d, d)))
        ran = info.get("settings", {})
        off = [k for k, v in want.items() if k in ran and ran[k] != v]
        rows.append({"setting": f"defence {d}", "ran": info.get("label", ""), "paper": words, "differs": bool(off)})
    return rows


def pool_words(n_pool: int, n_test: int, batch_sizes: Sequence[int]) -> Tuple[str, List[int]]:
    """Fig. 6's pool in words (its test and validation counts; never a training input) and the batch sizes left out
    because they are not smaller than the pool."""
    from_test = min(int(n_pool), int(n_test))
    skipped = [int(b) for b in batch_sizes if b >= n_pool]
    parts = [f"{from_test} test"] + ([f"{n_pool - from_test} validation"] if n_pool > from_test else [])
    return (f"{n_pool} inputs ({' + '.join(parts)}, no training input)", skipped)


def settings_table(
    params: IntrinsicParams,
    n_psi: int,
    n_attack: int,
    eps: float,
    defence_info: Dict[str, Any],
    init: str,
    defended: bool,
    *,
    grey: bool = True,
    n_pool: int = 0,
    n_test: int = 0,
    depth: Optional[str] = None,
) -> Any:
    """What ran against the paper's settings (:data:`~weakspot.intrinsic.config.PAPER_SETTINGS`), one row per
    setting, with ``differs`` where ours is not the paper's; each defended model against its own paper's settings
    (:func:`source_settings`); Fig. 6's pool (``n_pool`` inputs, the first ``n_test`` of the pool from the test split).
    ``grey``: grey-scale data (MNIST's settings apply), else CIFAR-10's. ``depth``: the depth that ran, in words
    (:func:`weakspot.intrinsic.report.depth_words`), a row that differs from the paper's at depth audit."""
    import pandas as pd

    p = params
    aa = (
        f"{' + '.join(a.upper() for a in p.autoattack.attacks)}, {p.autoattack.iters} iterations (IBM ART)"
        if p.autoattack.enabled
        else "off"
    )
    mm = defence_info.get("minmax", {}).get("settings", {}).get("steps")
    ran = {
        "pgd_steps": p.pgd_steps,
        "cw_steps": p.cw_steps,
        "n_inputs": f"{n_psi} for psi, {n_attack} attacked",
        "autoattack": aa,
        "defence_init": (
            (f"fine-tuned from the audited model for {p.defence_epochs} epoch(s)" if init == "target" else "scratch")
            if defended
            else "no defended models"
        ),
    }
    if depth is not None and not depth.startswith("study"):
        del ran["defence_init"]  # the defended copies are the study's
    rows = [
        {"setting": k, "ran": str(ran[k]), "paper": f"{v} ({w})", "differs": str(ran[k]) != str(v)}
        for k, (v, w) in PAPER_SETTINGS.items()
        if k in ran
    ]
    if depth is not None:
        rows.insert(
            0,
            {
                "setting": "depth",
                "ran": depth,
                "paper": "the audited model and the models it is compared with (Tables 1-4, Fig. 6)",
                "differs": not depth.startswith("study"),
            },
        )
    if mm is not None:
        want = MADRY_STEPS_PAPER["grey" if grey else "colour"]
        rows.append(
            {
                "setting": "minmax steps",
                "ran": str(mm),
                "paper": f"{want} ({PAPER_SETTINGS['minmax steps'][1]})",
                "differs": int(mm) != want,
            }
        )
    rows.append(
        {
            "setting": "eps (L-inf)",
            "ran": f"{eps:.4g}",
            "paper": "0.3 MNIST, 8/255 = 0.0314 CIFAR-10 (Sec. 5.1)",
            "differs": not any(abs(eps - e) < 1e-3 for e in (0.3, 8 / 255)),
        }
    )
    rows.append(
        {
            "setting": "KL ascent",
            "ran": f"{p.psi.steps} signed-gradient steps, {p.psi.restarts} random "
            f"start(s), step {'2.5 eps / steps' if p.psi.step_size is None else p.psi.step_size}",
            "paper": "gradient ascent on the KL (Sec. 4.1; no numbers)",
            "differs": False,
        }
    )
    if n_pool:
        words, skipped = pool_words(n_pool, n_test, p.stability.batch_sizes)
        sizes = ", ".join(str(b) for b in p.stability.batch_sizes if b not in skipped)
        rows.append(
            {
                "setting": "Fig. 6 pool",
                "ran": f"{words}; batches of {sizes}"
                + (f" ({', '.join(map(str, skipped))} left out: not smaller than the pool)" if skipped else ""),
                "paper": "the test set; batches of 100 to 1000 (Sec. 5.5)",
                "differs": True,
            }
        )
    rows += _defence_rows(defence_info, grey)
    return pd.DataFrame(rows, columns=["setting", "ran", "paper", "differs"])
