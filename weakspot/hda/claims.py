"""The claims of seeds/004 checked on one target: each a test with its criterion, the numbers it read and its verdict.

Caveats first:

* A claim whose part of the paper did not run is left out: a black-box model has no PGD, coverage, OODA, Table 8 or
  fine-tuning, and ``hda.depth: audit`` runs none of the paper's comparisons (only Table 5's density claim is
  checked there). A claim is "not tested" (and left out of the metrics) when its numbers rest on too little: a FID on fewer than
  ``hda.fid.min_aes`` (seed, AE) pairs never decides a claim. A claim against rivals of which some did not run (no
  coverage-guided fuzzing on a TorchScript model) is checked against those that ran, and names them.
* Every verdict compares point estimates; the numbers give each estimate's count and, for FIDs and the held-out
  accuracies, the 95% interval, so a "yes" inside overlapping intervals can be read as such.
* Table 8 is checked as the paper states it: on the adversarially trained model, HDA's AE proportion above FGSM's,
  PGD's and AutoAttack's (AutoAttack only where it ran).

Example
-------
>>> Claim("k", "a claim", "x > y", "x 2, y 1", True).row()["holds"]
'yes'
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, List, Optional

import numpy as np

from weakspot.fmt import stored
from weakspot.hda.config import HdaParams, coverage_iterations
from weakspot.hda.generate import CaseEval

COLUMNS = ("claim", "criterion", "numbers", "holds")
RQ1 = ("vae_clusters_better_than_pca", "kde_samples_lower_fid_than_uniform", "indicators_correlate_as_expected")


@dataclass
class Claim:
    """One claim: its metrics key, wording, pass criterion, measured numbers and verdict (None: not tested)."""

    key: str
    claim: str
    criterion: str
    numbers: str
    holds: Optional[bool]
    why_not: str = ""

    def row(self) -> Dict[str, str]:
        verdict = "yes" if self.holds else "no"
        return {
            "claim": self.claim,
            "criterion": self.criterion,
            "numbers": self.numbers,
            "holds": f"not tested ({self.why_not})" if self.holds is None else verdict,
        }


def _ae(e: CaseEval, name: str) -> str:
    assert e.ae_mask is not None  # evaluate_cases sets every array
    return f"{name} {e.ae_prop:.1%} ({int(e.ae_mask.sum())} of {e.n_cases})"


def fid_text(e: CaseEval, name: str) -> str:
    """``"hda 1.2 (0.9-1.6, 146 AEs)"``: a FID with its interval and pairs, or why there is none. The numbers are
    formatted from the values the metrics file stores (rounded to 6 decimals), never from the raw ones: rounding twice
    could otherwise write a last digit the metrics do not hold."""
    assert e.ae_mask is not None  # evaluate_cases sets every array
    f, n = e.fid_est, int(e.ae_mask.sum())
    aes = f"{n} AE" + ("" if n == 1 else "s")
    if f is None or not np.isfinite(f.value):
        return f"{name} n/a ({aes})"
    ci = f" ({stored(f.lo, 6):.3g}-{stored(f.hi, 6):.3g}, " if np.isfinite(f.lo) else " ("
    return f"{name} {stored(f.value, 6):.3g}{ci}{aes})"


RIVALS = {"pgd": "PGD's", "coverage": "coverage's"}


def _rivals(names: Any) -> str:
    """``"PGD's and coverage's"``: the baselines a claim compares HDA with."""
    return " and ".join(RIVALS[n] for n in names)


def _generators(evals: Dict[Any, CaseEval], p: HdaParams) -> List[Claim]:
    h = evals.get(("hda", "selected"))
    others = {b: evals[(b, "selected")] for b in ("pgd", "coverage") if (b, "selected") in evals}
    if h is None or not others:
        return []
    same = f"on HDA's {h.n_seeds} selected seeds, the same test cases per seed" + (
        f"; coverage at {coverage_iterations(p) * p.coverage.mutants + 1} queries a seed against HDA's "
        f"{h.queries_per_seed:.0f}"
        if "coverage" in others
        else ""
    )
    rivals = _rivals(others)
    out = [
        Claim(
            "hda_higher_ae_prop",
            f"HDA's AEs: a higher AE proportion than {rivals} (Table 6)",
            f"HDA's share of test cases that are AEs above each other's, {same}",
            ", ".join([_ae(h, "hda")] + [_ae(e, b) for b, e in others.items()]),
            all(h.ae_prop > e.ae_prop for e in others.values()),
        )
    ]
    k = int(p.fid.min_aes)
    ok = {b: e for b, e in others.items() if e.fid_est is not None and e.fid_est.enough(k)}
    crit = (
        f"HDA's FID (its AEs against their own seeds, on the reference CNN's features) below that of each "
        f"other generator with at least {k} AEs; a generator with fewer is not compared"
    )
    nums = ", ".join([fid_text(h, "hda")] + [fid_text(e, b) for b, e in others.items()])
    if h.fid_est is None or not h.fid_est.enough(k) or not ok:
        why = (
            f"HDA has fewer than {k} AEs"
            if h.fid_est is None or not h.fid_est.enough(k)
            else f"no other generator has {k} AEs"
        )
        out.append(Claim("hda_lower_fid", f"HDA's AEs: a lower FID than {rivals} (Table 6)", crit, nums, None, why))
    else:
        out.append(
            Claim(
                "hda_lower_fid",
                f"HDA's AEs: a lower FID than {rivals} (Table 6)",
                crit,
                nums,
                all(h.fid < e.fid for e in ok.values()),
            )
        )
    return out


def _ooda(evals: Dict[Any, CaseEval]) -> List[Claim]:
    h, o = evals.get(("hda", "selected")), evals.get(("ooda", "random"))
    if h is None or o is None or h.valid is None:
        return []
    hv = int((h.ae_mask & h.valid).sum())
    pg = evals.get(("pgd", "random"))
    assert o.ae_mask is not None  # evaluate_cases sets every array
    pre = ""
    if pg is not None:
        assert pg.ae_mask is not None  # as o's
        if pg.ae_mask.any():
            pre = f"; PGD's AEs before the filter: {pg.valid_ae_share:.0%} valid"
    return [
        Claim(
            "hda_more_valid_aes_than_ooda",
            "HDA detects more valid AEs than OODA (Table 7)",
            "valid AEs (the VAE's reconstruction probability at or above the threshold) per test case: HDA on "
            "its selected seeds above OODA (PGD's valid AEs) on random seeds",
            f"hda {hv / max(h.n_cases, 1):.1%} ({hv} of {h.n_cases}), ooda {o.ae_prop:.1%} "
            f"({int(o.ae_mask.sum())} of {o.n_cases}){pre}",
            hv / max(h.n_cases, 1) > o.ae_prop,
        )
    ]


def _table8(adv: Any) -> List[Claim]:
    row = (adv.evals if adv is not None else {}).get("adversarial")
    if not row or "hda" not in row:
        return []
    rivals = [a for a in ("fgsm", "pgd", "autoattack") if a in row]
    return [
        Claim(
            "hda_highest_ae_prop_on_adversarial_model",
            "On the adversarially trained model HDA still finds the most AEs (Table 8)",
            "HDA's AE proportion above FGSM's, PGD's and AutoAttack's on the adversarially trained model's own seeds",
            ", ".join(_ae(row[a], a) for a in ["hda", *rivals]),
            all(row["hda"].ae_prop > row[a].ae_prop for a in rivals),
        )
    ]


def _seeds(table5: Dict[str, Dict[str, float]]) -> List[Claim]:
    s, r = table5["selected"], table5["random"]
    out = [
        Claim(
            "seeds_denser",
            "HDA's seeds are denser than random ones (Table 5)",
            "mean relative log density of the selected seeds above the random seeds'",
            f"{s['log_density']:.2f} vs {r['log_density']:.2f}",
            s["log_density"] > r["log_density"],
        )
    ]
    if "log10_local_robustness" not in s:  # depth audit: no local robustness estimated
        return out
    return out + [
        Claim(
            "seeds_less_robust",
            "HDA's seeds are less robust than random ones (Table 5)",
            "mean log10 P(misclassified in the ball) of the selected seeds above the random seeds'",
            f"{s['log10_local_robustness']:.2f} vs {r['log10_local_robustness']:.2f}",
            s["log10_local_robustness"] > r["log10_local_robustness"],
        ),
    ]


def _finetune(ft: Dict[str, Any]) -> List[Claim]:
    rivals = [b for b in ("pgd", "coverage") if b in ft] if ft else []
    if "hda" not in ft or not rivals:
        return []
    names = [mn for mn in ("none", "hda", "pgd", "coverage") if mn in ft]

    def cell(mn: str, key: str) -> str:
        v, ci = ft[mn].get(key), ft[mn].get("intervals", {}).get(key)
        if v is None:
            return f"{mn} n/a"
        return f"{mn} {v:.1%}" + (f" ({ci[0]:.1%}-{ci[1]:.1%})" if ci else "")

    def gain(mn: str) -> float:
        return (ft[mn]["global_robustness"] or 0.0) - (ft["none"]["global_robustness"] or 0.0)

    def drop(mn: str) -> float:
        return (ft["none"]["test_acc"] or 0.0) - (ft[mn]["test_acc"] or 0.0)

    n = ft.get("validation", {}).get("hda_aes", 0)
    return [
        Claim(
            "finetune_most_robustness",
            "HDA fine-tuning gains the most global robustness (Table 9)",
            f"accuracy on HDA's AEs around held-out seeds ({n} AEs) after HDA's fine-tuning at least {_rivals(rivals)}",
            ", ".join(cell(mn, "global_robustness") for mn in names),
            gain("hda") >= max(gain(b) for b in rivals),
        ),
        Claim(
            "finetune_least_accuracy_drop",
            "... for the least test accuracy (Table 9)",
            f"test accuracy lost by HDA's fine-tuning at most {_rivals(rivals)}",
            ", ".join(cell(mn, "test_acc") for mn in names),
            drop("hda") <= min(drop(b) for b in rivals),
        ),
    ]


def _rq1(m: Dict[str, Any], fid3: Dict[str, float], pear: Dict[str, Optional[float]]) -> List[Claim]:
    if "latent" not in m or not fid3 or not pear:  # depth audit: Tables 3-4 and Fig. 3 did not run
        return []
    lat = m["latent"]
    grad_ok = pear["gradient"] is None or pear["gradient"] > 0
    return [
        Claim(
            RQ1[0],
            "RQ1: the VAE encoder clusters the classes better than PCA (Table 3)",
            "K-means V-measure against the labels: VAE codes above PCA's",
            f"V-measure {lat['VAE encoder']['vs']:.3f} vs {lat['PCA']['vs']:.3f}",
            lat["VAE encoder"]["vs"] > lat["PCA"]["vs"],
        ),
        Claim(
            RQ1[1],
            "RQ1: samples of the KDE have a lower FID than uniform latent samples (Fig. 3)",
            "FID to as many training inputs (reference CNN features): decoded KDE samples below decoded "
            "uniform latent samples",
            f"FID {fid3['kde']:.3g} vs {fid3['uniform']:.3g}",
            fid3["kde"] < fid3["uniform"],
        ),
        Claim(
            RQ1[2],
            "RQ1: gradient indicator correlates +, separation - with misclassification (Table 4)",
            "Pearson r of log10 P(misclassified in a random ball) with the log indicator: gradient above 0 "
            "(white box only), separation below 0",
            ", ".join(f"{k} r {v:+.2f}" for k, v in pear.items() if v is not None and np.isfinite(v)),
            grad_ok and (pear["separation"] or 0.0) < 0,
        ),
    ]


def check(result: Any, m: Dict[str, Any], ft: Dict[str, Any], p: HdaParams) -> List[Claim]:
    """Every claim of seeds/004 this target could test, in the report's order (RQ2, RQ3, seeds, RQ4, RQ1)."""
    evals = result.generators.evals
    return (
        _generators(evals, p)
        + _ooda(evals)
        + _table8(result.adversarial)
        + _seeds(result.seeds.table5)
        + _finetune(ft)
        + _rq1(m, result.distribution.fid, result.seeds.pearson)
    )


def as_metrics(claims: List[Claim]) -> Dict[str, Dict[str, bool]]:
    """``{"claims": {key: verdict}, "claims_rq1": {...}}`` over the tested claims (untested ones left out)."""
    out: Dict[str, Dict[str, bool]] = {"claims": {}, "claims_rq1": {}}
    for c in claims:
        if c.holds is not None:
            out["claims_rq1" if c.key in RQ1 else "claims"][c.key] = bool(c.holds)
    return out


def table(claims: List[Claim]) -> Any:
    """The claims table: ``claim``, ``criterion``, ``numbers``, ``holds``."""
    import pandas as pd

    return pd.DataFrame([c.row() for c in claims], columns=list(COLUMNS))
