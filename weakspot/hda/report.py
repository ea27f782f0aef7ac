"""HDA's report of one target: an :class:`~weakspot.hda.result.HdaResult` as metrics, the paper's tables, its claims
checked, prose, findings, the repaired model and the lineage.

Caveats first:

* Metrics are rounded by :func:`weakspot.fmt.rounded` (a NaN becomes null) and hold no timings, so a rerun of
  the same code and params gives byte-identical metrics; timings are in the ``seconds`` table and the lineage.
* FID is on the features of a network this pipeline trains (:mod:`weakspot.hda.fid`), comparable across methods of
  one target only, and it falls with the number of AEs compared (the AE counts sit next to it).
* The findings checked against a random control come first (:mod:`weakspot.hda.evidence`): HDA's seed selection
  against random seeds, and the classes its seeds found fragile, confirmed on the random seeds; their severity is
  the lift. Then one finding per selected seed with at least one AE among HDA's test cases (an example, not
  checked); its severity is the share of AEs among the seed's test cases plus their mean SSIM to the seed, over 2
  (``SEVERITY``).
* The repaired model is the HDA-fine-tuned copy of RQ4 (Table 9); on a black-box model, or with fine-tuning off,
  the repaired entry says why there is none.
* A generator skipped on a white-box model (coverage-guided fuzzing where no layer can be hooked: TorchScript) has no
  rows in Tables 6 and 9; ``metrics["skipped"]``, the settings table and the prose say why.
* At ``hda.depth: audit`` the parts of the paper that did not run are left out, never shown as zeros or NaN: no FID
  (metrics, columns, claims), no Tables 3, 4, 7, 8 and 9, no Figs. 3 and 4, no repaired model (its entry says how to
  get one). The metrics both depths have are the same keys with the same values (the same seeds and GA); ``depth``
  names the one that ran, as do the settings table and the prose.
"""

from __future__ import annotations

import io
import json
from typing import Any, Dict, List, Optional, Tuple

import numpy as np

from weakspot.evidence import COLUMNS
from weakspot.hda.claims import as_metrics, check, fid_text, table as claims_table
from weakspot.hda.config import PAPER_SETTINGS, HdaParams, coverage_iterations
from weakspot.hda.generate import CaseEval
from weakspot.hda.result import HdaResult
from weakspot.methods import AuditTarget, MethodReport
from weakspot.fmt import rounded, stored
from weakspot.result import StageResult

METHOD_TITLES = {
    "hda": "HDA (two-step GA)",
    "pgd": "PGD",
    "coverage": "coverage-guided fuzzing",
    "foda": "FODA (VAE decoding)",
    "fgsm": "FGSM",
    "autoattack": "AutoAttack (ART)",
    "ooda": "OODA (PGD, valid AEs only)",
}
SEVERITY = "adversarial test cases among the seed's, plus their mean SSIM to the seed (naturalness), over 2"
TITLE = "Hierarchical distribution-aware testing: natural AEs near dense, fragile seeds"


def report(result: HdaResult, params: HdaParams, target: AuditTarget) -> MethodReport:
    """The report section (without figures: :func:`weakspot.hda.figures.figures`), findings, repaired model and
    lineage of ``result``."""
    p = params
    m, claims = _metrics_and_claims(result, p)
    tables = _tables(result, m, p, claims)
    section = StageResult(
        metrics=m,
        tables=tables,
        title=f"{TITLE} ({target.name})",
        summary=_summary(result, p, tables),
        items=_items(result, p, tables),
        headline=[_headline(result, m, p) + "."],
        key_metrics=["hda_ae_prop"]
        + (["hda_fid"] if "hda_fid" in m else [])
        + (["pgd_ae_prop", "pgd_fid"] if "pgd_ae_prop" in m else []),
        sample=(
            f"{m['n_seeds']} seeds selected among {len(result.seeds.X)} correctly classified "
            f"test and validation inputs (never a training input), against "
            f"{len(result.seeds.random)} random ones of them (seed {p.seed}); its VAE and KDE "
            f"fitted on the train split (hda.train_sample: at most {p.train_sample} inputs, "
            "a seeded sample)"
        ),
    )
    lineage: Dict[str, Any] = {"adversarial_model": result.adversarial_info} if result.adversarial_info else {}
    repaired = repaired_model(result, p)
    if repaired["state_dict"] is not None:
        lineage["seconds"] = result.seconds
    return MethodReport(section=section, findings=findings(result, p), repaired=repaired, lineage=lineage)


# ---------------------------------------------------------------------------------------------------------- metrics
def finetune_metrics(result: HdaResult) -> Dict[str, Any]:
    """Table 9's numbers, rounded: each method's accuracies after fine-tuning and its test cases, ``none`` (the
    audited model) and the ``validation`` set's sizes; empty when RQ4 did not run."""
    ft = result.finetuning
    if ft is None:
        return {}
    met: Dict[str, Any] = {}
    for mname, r in ft.after.items():
        met[mname] = {kk: rounded(vv) for kk, vv in r.items()}
        met[mname]["test_cases"] = ft.test_cases[mname]
    met["none"] = {kk: rounded(vv) for kk, vv in ft.before.items()}
    met["validation"] = dict(ft.validation)
    n_aes = _n_aes(ft)
    for mname in [*ft.after, "none"]:  # the 95% intervals of the held-out accuracies, on the AEs they rest on
        r = ft.before if mname == "none" else ft.after[mname]
        met[mname]["intervals"] = {kk: wilson(r[kk], n) for kk, n in n_aes.items() if r.get(kk) is not None}
    if ft.reattack:
        met["reattack"] = {
            att: {
                when: {"rate": rounded(v["rate"]), "n": v["n"], "interval": wilson(v["rate"], v["n"])}
                for when, v in row.items()
            }
            for att, row in ft.reattack.items()
        }
    return met


def skipped_methods(result: HdaResult) -> Dict[str, str]:
    """Generator -> why it did not run on this white-box model (RQ2's and RQ4's together; empty: all ran)."""
    out = dict(result.generators.skipped)
    if result.finetuning is not None:
        out.update({k: v for k, v in result.finetuning.skipped.items() if k not in out})
    return out


def _skip_text(result: HdaResult) -> str:
    """``"coverage-guided fuzzing: not run: <why>"`` for each skipped generator, joined by "; " ("" when none)."""
    return "; ".join(f"{METHOD_TITLES.get(k, k)}: not run: {v}" for k, v in skipped_methods(result).items())


def _n_aes(ft: Any) -> Dict[str, int]:
    """How many held-out AEs each of Table 9's robustness accuracies rests on."""
    return {"global_robustness": ft.validation.get("hda_aes", 0), "pgd_robustness": ft.validation.get("pgd_aes", 0)}


def _pct_ci(rate: Optional[float], n: int) -> str:
    """``"39.4% (33.1%-46.1%)"``: a proportion with its 95% Wilson interval ("" without a count)."""
    w = wilson(rate, n)
    return "" if w is None else f"{rate:.1%} ({w[0]:.1%}-{w[1]:.1%})"


def wilson(rate: Optional[float], n: int) -> Optional[List[float]]:
    """The 95% Wilson interval of a proportion ``rate`` of ``n`` (None without a count)."""
    if rate is None or not n:
        return None
    from statsmodels.stats.proportion import proportion_confint

    lo, hi = proportion_confint(int(round(rate * n)), int(n), alpha=0.05, method="wilson")
    return [round(float(lo), 4), round(float(hi), 4)]


def metrics(result: HdaResult, p: HdaParams) -> Dict[str, Any]:
    """The metrics file: every generator's numbers on HDA's seeds (and under ``random_seeds``), RQ1's correlations,
    densities and FIDs, Table 8's and Table 9's numbers, the headline numbers and the paper's claims."""
    return _metrics_and_claims(result, p)[0]


def _metrics_and_claims(result: HdaResult, p: HdaParams) -> Tuple[Dict[str, Any], List[Any]]:
    """``metrics`` and the claims it was computed with (the claims table shows the same ones)."""
    s, dist, study = result.seeds, result.distribution, result.study
    m: Dict[str, Any] = {
        "radius": rounded(result.radius, 6),
        "n_seeds": int(len(s.selected)),
        "indicator": s.indicator,
        "depth": result.depth,
    }
    for (mname, sname), e in result.generators.evals.items():
        f = e.fid_est
        fid = {  # no FID at depth audit (no reference network)
            "fid": rounded(e.fid, 6),
            "fid_interval": None if f is None or not np.isfinite(f.lo) else [rounded(f.lo, 6), rounded(f.hi, 6)],
        }
        entry = {
            "ae_prop": rounded(e.ae_prop),
            "pred_loss": rounded(e.pred_loss),
            **(fid if study else {}),
            "ssim": rounded(e.ssim),
            **({"fid_aes": _ae_count(e)} if study else {}),
            "valid_ae_share": rounded(e.valid_ae_share),
            "log_density": rounded(e.log_density),
            "queries_per_seed": rounded(e.queries_per_seed, 1),
            "test_cases": int(e.n_cases),
        }
        if sname == "selected":
            m[mname] = entry
        else:
            m.setdefault("random_seeds", {})[mname] = entry
    if result.generators.coverage_rate is not None:
        m["neuron_coverage"] = rounded(result.generators.coverage_rate)
    skipped = skipped_methods(result)
    if skipped:
        m["skipped"] = skipped
    if study:
        m["fid_reference"] = dict(result.distribution.reference or {})
    val = result.distribution.validity
    if val is not None:  # Table 7's threshold: what "valid" meant
        m["validity"] = {
            "quantile": val.quantile,
            "n_reference": val.n_reference,
            "samples": val.samples,
            "threshold": rounded(val.threshold),
        }
    if study:  # Table 4
        m["indicator_pearson"] = {kk: rounded(vv) for kk, vv in s.pearson.items()}
        m["robustness_floor_share"] = rounded(s.floor_share)
    m["seeds"] = {kk: {a: rounded(b) for a, b in vv.items()} for kk, vv in s.table5.items()}
    if study:  # Fig. 3, Table 3 and Table 8
        m["fid_kde_samples"] = {kk: rounded(vv) for kk, vv in dist.fid.items()}
        m["latent"] = {
            r["compression"]: {"vs": r["VS"], "sse": r["reconstruction SSE"]} for r in dist.table3.to_dict("records")
        }
        t8 = result.adversarial.evals if result.adversarial is not None else {}
        m["adversarial_model"] = {
            ml: {a: {"ae_prop": rounded(e.ae_prop), "fid": rounded(e.fid)} for a, e in row.items()}
            for ml, row in t8.items()
        }
    ft_metrics = finetune_metrics(result)
    if ft_metrics:
        m["finetune"] = ft_metrics
    # headline numbers for cards and history
    m["hda_ae_prop"] = m["hda"]["ae_prop"]
    if study:
        m["hda_fid"] = m["hda"]["fid"]
    if "pgd" in m:
        m["pgd_ae_prop"] = m["pgd"]["ae_prop"]
        m["pgd_fid"] = m["pgd"]["fid"]
    claims = check(result, m, ft_metrics, p)
    m.update({kk: vv for kk, vv in as_metrics(claims).items() if vv or study})  # no RQ1 claims at depth audit
    return m, claims


# ----------------------------------------------------------------------------------------------------------- tables
def _case_row(e: CaseEval, fid: bool = True) -> Dict[str, Any]:
    """Table 6's row of ``e`` (without the FID column when no FID was measured: depth audit)."""
    row = {
        "method": METHOD_TITLES.get(e.method, e.method),
        "seeds": e.seeds,
        "test cases": e.n_cases,
        "AE prop.": round(e.ae_prop, 3),
        "pred. loss (AEs)": rounded(e.pred_loss, 3),
        "log density of AEs": rounded(e.log_density, 3),
        "AEs": _ae_count(e),
        "FID (95%, AEs)": fid_text(e, "").strip(),
        "valid AEs": _share(e.valid_ae_share),
        "SSIM to seed": rounded(e.ssim, 3),
        "L-inf to seed": rounded(e.linf, 4),
        "queries / seed": round(e.queries_per_seed, 1),
        "seconds / seed": round(e.seconds_per_seed, 4),
    }
    if not fid:
        del row["FID (95%, AEs)"]
    return row


def _ft_cols(r: Dict[str, Any], n: Dict[str, int]) -> Dict[str, Any]:
    f = lambda v: "" if v is None else f"{v:.1%}"  # noqa: E731
    return {
        "train acc.": f(r["train_acc"]),
        "test acc.": f(r["test_acc"]),
        "accuracy on HDA AEs of held-out seeds (95%)": _pct_ci(r["global_robustness"], n["global_robustness"]),
        "accuracy on PGD AEs of held-out seeds (95%)": _pct_ci(r["pgd_robustness"], n["pgd_robustness"]),
    }


def _table8_rows(result: HdaResult) -> List[Dict[str, Any]]:
    adv = result.adversarial
    if adv is None:
        return []
    return [
        {
            "model": ml,
            "method": METHOD_TITLES[att],
            "log density of seeds": round(adv.seed_log_density[ml], 3),
            "AE prop.": round(e.ae_prop, 3),
            "AEs": _ae_count(e),
            "FID (95%, AEs)": fid_text(e, "").strip(),
            "SSIM to seed": rounded(e.ssim, 3),
        }
        for ml, row in adv.evals.items()
        for att, e in row.items()
    ]


def _share(v: float) -> str:
    return "" if not np.isfinite(v) else f"{v:.0%}"


def _ae_count(e: CaseEval) -> int:
    assert e.ae_mask is not None  # evaluate_cases sets every array
    return int(e.ae_mask.sum())


def _table7_rows(result: HdaResult) -> List[Dict[str, Any]]:
    """Table 7: OODA and FODA on random seeds (as Dola et al. run them) against HDA on its own seeds."""
    rows = []
    for mn, sname in (("ooda", "random"), ("foda", "random"), ("hda", "selected")):
        e = result.generators.evals.get((mn, sname))
        if e is None or e.valid is None:
            continue
        n_valid = int((e.ae_mask & e.valid).sum())
        rows.append(
            {
                "method": METHOD_TITLES[mn],
                "seeds": sname,
                "test cases": e.n_cases,
                "log density of AEs": rounded(e.log_density, 3),
                "valid AEs per test case": round(n_valid / max(e.n_cases, 1), 3),
                "% valid AEs": _share(e.valid_ae_share),
                "L-inf to seed": rounded(e.linf, 4),
                "FID (95%, AEs)": fid_text(e, "").strip(),
            }
        )
    return rows


def _reattack_rows(result: HdaResult) -> List[Dict[str, Any]]:
    ft = result.finetuning
    if ft is None or not ft.reattack:
        return []
    what = {
        "hda_search": "a fresh HDA search around the held-out seeds: share of its test cases that are AEs",
        "pgd_accuracy": "PGD accuracy on test inputs (share still correct)",
        "autoattack_accuracy": "AutoAttack (APGD-CE + APGD-DLR, IBM ART) accuracy on test inputs",
    }
    rows = []
    for att, row in ft.reattack.items():
        cells = {
            f"{model} model (95%)": (
                _pct_ci(row[when]["rate"], row[when]["n"]) + f" of {row[when]['n']}"
                if row[when]["rate"] is not None
                else ""
            )
            for when, model in (("before", "audited"), ("after", "repaired"))
        }
        rows.append({"attack": what[att], **cells})
    return rows


def _table9_rows(result: HdaResult) -> List[Dict[str, Any]]:
    ft = result.finetuning
    if ft is None:
        return []
    n = _n_aes(ft)
    return [{"fine-tuned with": "nothing (the audited model)", "test cases": 0, **_ft_cols(ft.before, n)}] + [
        {"fine-tuned with": METHOD_TITLES[mn], "test cases": ft.test_cases[mn], **_ft_cols(r, n)}
        for mn, r in ft.after.items()
    ]


#: What each ``hda.depth`` runs, for the settings table and the prose.
DEPTHS = {
    "audit": "the weak spots and their evidence (the VAE+KDE density, the fragility indicator, the seed selection, "
    "HDA's GA around the selected and the random seeds)",
    "study": "the weak spots and their evidence, and the paper's comparisons (Tables 3-4 and Fig. 3 with the FID "
    "reference network, the FODA, PGD, OODA and coverage baselines, Table 8's adversarially trained model, Table 9's "
    "fine-tuning and the repaired model)",
}
#: ``hda.depth: study`` on one target, in params.yaml's own words.
STUDY_ON_ONE = "hda: {per_target: {<target>: {depth: study}}}"


def depth_line(depth: str) -> str:
    """The report's sentence naming the depth that ran, what it ran and how to get the other one."""
    if depth == "study":
        return (
            f"Depth: study — {DEPTHS['study']}; `hda.depth: audit` runs the weak spots and their evidence alone, "
            "with the same seeds, test cases and weak spots."
        )
    return (
        f"Depth: audit — {DEPTHS['audit']}; `hda.depth: study` (or `weakspot audit --profile study`; on one target: "
        f"`{STUDY_ON_ONE}`) adds the paper's comparisons: Tables 3-4, Fig. 3, the FODA, PGD, OODA and coverage "
        "baselines, Table 8, the fine-tuning (Table 9) and the repaired model."
    )


#: The paper's settings of the parts that run at depth audit too (the others are the study's).
AUDIT_SETTINGS = ("n_seeds", "ga.generations")


def _settings(p: HdaParams, result: HdaResult) -> Any:
    import pandas as pd

    radius, n_cand, dist, study = result.radius, len(result.seeds.X), result.distribution, result.study
    h = result.generators.evals[("hda", "selected")]
    cov = coverage_iterations(p) * p.coverage.mutants + 1
    val = dist.validity

    ran = {
        "n_seeds": p.n_seeds,
        "robustness.n_balls": p.robustness.n_balls,
        "fid_samples": p.fid_samples,
        "ga.generations": p.ga.generations,
        "finetune.epochs": p.finetune.epochs,
        "finetune.seeds": p.finetune.seeds,
        "finetune.train": f"{p.finetune.train} random training inputs",
    }
    rows = [
        {
            "setting": "depth",
            "ran": f"{result.depth}: {DEPTHS[result.depth]}",
            "paper": "the whole study",
            "where": "Sec. 4",
            "differs": not study,
        }
    ]
    rows += [
        {"setting": k, "ran": ran[k], "paper": v[0], "where": v[1], "differs": str(ran[k]) != str(v[0])}
        for k, v in PAPER_SETTINGS.items()
        if study or k in AUDIT_SETTINGS
    ]
    rows += [
        {
            "setting": "radius",
            "ran": round(radius, 4),
            "paper": "0.1 (MNIST), 0.03 (CIFAR-10)",
            "where": "Table 1",
            "differs": False,
        },
        {
            "setting": "GA population x generations",
            "ran": f"{p.ga.population} x {p.ga.generations}",
            "paper": "not given",
            "where": "Algorithm 1",
            "differs": False,
        },
        {
            "setting": "candidate seeds",
            "ran": f"{n_cand} correctly classified",
            "paper": "the test set",
            "where": "Sec. 3.3",
            "differs": False,
        },
    ]
    if study:
        rows += [
            {
                "setting": "FID features",
                "ran": dist.featurizer,
                "paper": "Inception-v3 (no weights here)",
                "where": "Table 2",
                "differs": True,
            },
            {
                "setting": "FID of AEs",
                "ran": f"against their own seeds, 95% bootstrap interval ({p.fid.bootstrap} "
                f"resamples), no claim from fewer than {p.fid.min_aes} AEs",
                "paper": "against the test seeds, no interval",
                "where": "Table 6",
                "differs": True,
            },
        ]
    if ("coverage", "selected") in result.generators.evals:
        rows.append(
            {
                "setting": "coverage-guided fuzzing's queries per seed",
                "ran": f"{cov} (HDA's GA: {h.queries_per_seed:.0f})",
                "paper": "not given",
                "where": "Table 6",
                "differs": p.coverage.iterations is not None,
            }
        )
    for mname, why in skipped_methods(result).items():
        rows.append(
            {
                "setting": METHOD_TITLES.get(mname, mname),
                "ran": f"not run: {why}",
                "paper": "run",
                "where": "Tables 6, 9",
                "differs": True,
            }
        )
    if val is not None:
        rows.append(
            {
                "setting": "validity threshold (OODA, % valid AEs)" if study else "validity threshold (% valid AEs)",
                "ran": f"the {val.quantile:g} quantile "
                f"of {val.n_reference} validation inputs' VAE reconstruction probability ({val.samples} codes "
                "each)",
                "paper": "a user-defined threshold (Dola et al.)",
                "where": "Table 7",
                "differs": True,
            }
        )
    return pd.DataFrame(rows)


def _tables(result: HdaResult, m: Dict[str, Any], p: HdaParams, claims: List[Any]) -> Dict[str, Any]:
    """Tables 3-9 as the paper numbers them (at depth audit Tables 5 and 6 only, without what did not run), the
    claims, the settings against the paper's and the timings."""
    import pandas as pd

    s, study = result.seeds, result.study
    t5 = pd.DataFrame(
        [
            {
                "seeds": n,
                "mean relative log density": round(v["log_density"], 3),
                **(
                    {"mean log10 P(misclassified in the ball)": round(v["log10_local_robustness"], 3)}
                    if "log10_local_robustness" in v
                    else {}
                ),
                f"mean log10 {s.indicator} indicator": round(v["indicator"], 3),
            }
            for n, v in s.table5.items()
        ]
    )
    tables = {"table6": pd.DataFrame([_case_row(e, study) for e in result.generators.evals.values()])}
    if study:
        tables.update(_rq1_tables(result, p))
    tables.update(
        {
            "table5": t5,
            "claims": claims_table(claims),
            "settings": _settings(p, result),
            "seconds": pd.DataFrame([{"step": kk, "seconds": vv} for kk, vv in result.seconds.items()]),
        }
    )
    t7, t8, t9 = (pd.DataFrame(f(result)) for f in (_table7_rows, _table8_rows, _table9_rows))
    if len(t7) and study:  # at depth audit HDA's own row alone: no OODA nor FODA to set it against
        tables["table7"] = t7
    if len(t8):
        tables["table8"] = t8
    if len(t9):
        tables["table9"] = t9
    ra = pd.DataFrame(_reattack_rows(result))
    if len(ra):
        tables["reattack"] = ra
    return tables


def _rq1_tables(result: HdaResult, p: HdaParams) -> Dict[str, Any]:
    """Table 3, Fig. 3's FIDs and Table 4 (depth study)."""
    import pandas as pd

    fid3, pear, table3 = result.distribution.fid, result.seeds.pearson, result.distribution.table3
    t3_fid = pd.DataFrame(
        [
            {"samples": f"{p.fid_samples} decoded from the KDE", "FID to the training data": rounded(fid3["kde"], 3)},
            {
                "samples": f"{p.fid_samples} decoded from a uniform latent box",
                "FID to the training data": rounded(fid3["uniform"], 3),
            },
        ]
    )
    t4 = pd.DataFrame(
        [
            {
                "indicator": "gradient (white-box): L1 norm of the input gradient",
                "Pearson r": rounded(pear["gradient"], 3),
                "expected sign": "+",
                "paper |r| (MNIST / CIFAR-10)": "0.672 / 0.832",
            },
            {
                "indicator": "separation (black-box): distance to the nearest other-label output",
                "Pearson r": rounded(pear["separation"], 3),
                "expected sign": "-",
                "paper |r| (MNIST / CIFAR-10)": "0.379 / 0.646",
            },
        ]
    )
    return {"table3": table3.copy(), "fig3_fid": t3_fid, "table4": t4}


# ------------------------------------------------------------------------------------------------------------ prose
def _summary(result: HdaResult, p: HdaParams, tables: Dict[str, Any]) -> List[str]:
    s, evals, radius, study = result.seeds, result.generators.evals, result.radius, result.study
    table5, floor_share = s.table5, s.floor_share
    h, pg = evals[("hda", "selected")], evals.get(("pgd", "selected"))
    hr = evals.get(("hda", "random"))
    fl = (
        ""
        if not study or floor_share == 0
        else (
            f" ({floor_share:.0%} of the balls are below the estimator's floor "
            f"log P = {p.robustness.log_p_min:g} and sit there)"
        )
    )
    robust = (
        f", and their estimated log10 probability of misclassification in the ball "
        f"{table5['selected']['log10_local_robustness']:.2f} against {table5['random']['log10_local_robustness']:.2f}"
        if "log10_local_robustness" in table5["selected"]
        else ""
    )
    differs = "; ".join(  # the depth has a line of its own
        f"{r['setting']} {r['ran']} (paper: {r['paper']})"
        for r in tables["settings"].to_dict("records")
        if r["differs"] and r["setting"] != "depth"
    )
    if study:
        caveats = (
            f"Caveats: FID is on {result.distribution.featurizer} (no Inception weights here; never the audited "
            "model, whose own features an AE is made to move), each method's AEs against their own seeds, comparable "
            "across methods of this target only; it is biased upward with few AEs, hence its count and 95% bootstrap "
            f"interval, and no FID claim rests on fewer than {p.fid.min_aes} AEs. The local robustness "
            f"is Webb et al.'s adaptive multilevel splitting with {p.robustness.particles} particles and "
            f"{p.robustness.mh_steps} Metropolis-Hastings steps per level; their estimates of tiny probabilities are "
            "noisy. Global robustness after fine-tuning is measured on AEs found by HDA's own GA, as in the paper, "
            "which favours HDA's fine-tuning; the accuracy on PGD's AEs is given beside it. "
        )
    else:
        caveats = (
            "Caveats: an AE's naturalness is its SSIM to the seed and whether the VAE's reconstruction probability "
            "accepts it (valid AEs); no FID, no local-robustness estimate and no baseline ran at this depth. "
        )
    return [
        "Hierarchical distribution-aware testing (Huang et al., seeds/004) looks for adversarial examples (AEs) where "
        "they matter and where a person would not notice them: it picks test seeds where the data are dense (a KDE "
        "over a VAE's codes of the training data) and the model is fragile (a local-robustness indicator), then a "
        "black-box two-step genetic algorithm searches each seed's L-inf ball of radius "
        f"{radius:.4g} for AEs, first for any AE, then for AEs that stay perceptually close to the seed "
        f"({p.ga.metric.upper()}, lambda {p.ga.lam:g}).",
        depth_line(result.depth),
        f"On {len(s.selected)} selected seeds, {h.n_cases} test cases: HDA's AE proportion {h.ae_prop:.0%}"
        + (f", FID {fid_text(h, '').strip()}" if study else "")
        + f", SSIM to the seed {stored(h.ssim):.3f}"
        + (
            f"; around the random seeds (the control, the same test cases per seed) {hr.ae_prop:.0%} of {hr.n_cases}"
            if hr is not None
            else ""
        )
        + (
            f"; PGD-{p.pgd_steps}'s {pg.ae_prop:.0%}, FID {fid_text(pg, '').strip()}, SSIM {stored(pg.ssim):.3f}"
            if pg is not None
            else ""
        )
        + (
            f"; coverage-guided fuzzing's {evals[('coverage', 'selected')].ae_prop:.0%} (neuron coverage "
            f"{result.generators.coverage_rate:.0%})"
            if ("coverage", "selected") in evals
            else ""
        )
        + (f" ({_skip_text(result)})" if skipped_methods(result) else "")
        + f". Seed selection used the {s.indicator} indicator; the selected seeds' mean relative log density is "
        f"{table5['selected']['log_density']:.2f} against random seeds' {table5['random']['log_density']:.2f}"
        f"{robust}{fl}.",
        "The paper's claims, checked: "
        + "; ".join(f"{r['claim']}: {r['holds']}" for r in tables["claims"].to_dict("records"))
        + ".",
        caveats + "Settings that differ from the paper's: " + differs + ".",
    ]


def _table6_caption(result: HdaResult) -> str:
    s = result.seeds
    return (
        f"Table 6: every generator on the same seeds ({len(s.selected)} selected by "
        f"HDA, {len(s.random)} random), the same number of test cases per seed; AE prop. is the share of test cases "
        "that are AEs, pred. loss p(best other class) - p(true class) over the AEs (Definition 3; > 0 is an AE), FID "
        "of the AEs against their own seeds on the reference CNN's features (95% bootstrap interval, AEs it rests "
        "on), valid AEs the share the VAE's reconstruction probability accepts (Table 7's criterion)"
        if result.study
        else f"Table 6, HDA's rows: its two-step GA around its {len(s.selected)} selected seeds and around "
        f"{len(s.random)} random seeds (the control), the same number of test cases per seed; AE prop. is the share "
        "of test cases that are AEs, pred. loss p(best other class) - p(true class) over the AEs (Definition 3; > 0 "
        "is an AE), valid AEs the share the VAE's reconstruction probability accepts (Table 7's criterion)"
    )


def _items(result: HdaResult, p: HdaParams, tables: Dict[str, Any]) -> List[Dict[str, str]]:
    s, study = result.seeds, result.study
    adv_label = result.adversarial.label if result.adversarial is not None else ""
    table6 = _table6_caption(result)
    rq1 = [
        {
            "table": "table4",
            "caption": f"Table 4: Pearson correlation between log10 of the estimated probability of "
            f"misclassification in {len(s.balls)} random balls and the log of each indicator.",
        },
        {"figure": "indicators", "caption": "Fig. 4: the estimated local robustness against each indicator."},
        {
            "table": "table3",
            "caption": "Table 3: VAE encoder against PCA (K-means completeness, homogeneity, "
            "V-measure against the labels; reconstruction error of held-out test inputs).",
        },
        {"table": "fig3_fid", "caption": "Fig. 3: FID of decoded samples from the KDE and from a uniform latent box."},
        {
            "figure": "samples",
            "caption": "Fig. 3: decoded samples from the KDE (top) and from a uniform latent box (bottom).",
        },
    ]
    return [
        {
            "figure": "aes",
            "caption": "The most natural AEs HDA found (highest SSIM to their seed), grouped by class: "
            "each seed (top: true class, the model's prediction, the seed's relative log density) and its AE (bottom: "
            "the prediction and its confidence, SSIM to the seed).",
        },
        {
            "table": "claims",
            "caption": "The paper's claims, checked on this target: each with the criterion it is "
            "tested by and the numbers it read.",
        },
        {
            "table": "table6",
            "caption": table6
            + (
                "; coverage-guided fuzzing at the queries per seed shown."
                if ("coverage", "selected") in result.generators.evals
                else "."
            )
            + (f" {_skip_text(result)[:1].upper()}{_skip_text(result)[1:]}." if skipped_methods(result) else ""),
        },
        *(
            [
                {
                    "table": "table7",
                    "caption": "Table 7: OODA (PGD's AEs that pass the VAE's reconstruction-probability "
                    "threshold) and FODA on random seeds, as Dola et al. run them, against HDA on its own seeds.",
                }
            ]
            if "table7" in tables
            else []
        ),
        {
            "figure": "landscape",
            "caption": "The global distribution: the training codes' first two principal "
            "components coloured by log KDE density, HDA's seeds (red) and random seeds (white).",
        },
        {
            "table": "table5",
            "caption": "Table 5: HDA's seeds against random seeds (relative log density: 0 = the "
            "median training input"
            + ("; higher log10 P = less robust)." if study else "; no local robustness estimated at depth audit)."),
        },
        *(rq1 if study else []),
        {
            "figure": "ga_curve",
            "caption": "Fig. 5: the two-step GA on the selected seeds: AE proportion, the share "
            "of seeds in the second step, and the best individual's prediction loss and perceptual term.",
        },
        *(
            [
                {
                    "table": "table8",
                    "caption": f"Table 8: AEs of FGSM, PGD-{p.pgd_steps}, AutoAttack (APGD-CE + APGD-DLR, "
                    f"{p.autoattack_iters} iterations, IBM ART) and HDA on the audited model and on "
                    f"{adv_label or 'the adversarially trained model'}; each model's own seeds.",
                }
            ]
            if "table8" in tables
            else []
        ),
        *(
            [
                {
                    "table": "table9",
                    "caption": "Table 9: adversarial fine-tuning with each method's test cases, made around "
                    "seeds from one half of the validation pool; accuracies on the AEs made around the other half "
                    "(held-out seeds, disjoint by construction), which the audited model gets wrong by construction (its "
                    "0%). The HDA fine-tuned model is saved as the repaired model.",
                }
            ]
            if "table9" in tables
            else []
        ),
        *(
            [
                {
                    "table": "reattack",
                    "caption": "The repaired model attacked again, next to the audited one: a fresh HDA "
                    "search (the same GA and random seed) around the held-out seeds, and PGD and AutoAttack on test inputs "
                    "neither was fine-tuned on.",
                }
            ]
            if "reattack" in tables
            else []
        ),
        {"table": "settings", "caption": "What ran against the paper's settings."},
        {"table": "seconds", "caption": "Time per step of this stage (seconds, this machine)."},
    ]


def _headline(result: HdaResult, m: Dict[str, Any], p: HdaParams) -> str:
    evals = result.generators.evals
    h, pg = evals[("hda", "selected")], evals.get(("pgd", "selected"))
    head = (
        f"HDA: {h.ae_prop:.0%} of {h.n_cases} test cases around {len(result.seeds.selected)} dense, fragile seeds "
        f"are AEs at L-inf {result.radius:.3g} (SSIM {stored(h.ssim):.3f} to the seed)"
    )
    if pg is not None:
        head += f"; PGD-{p.pgd_steps}: {pg.ae_prop:.0%} (SSIM {stored(pg.ssim):.3f})"
    if "finetune" in m and "hda" in m["finetune"]:
        f = m["finetune"]
        head += (
            f"; HDA fine-tuning: accuracy on AEs around held-out seeds {f['hda']['global_robustness'] or 0:.0%} "
            f"(0% before, by construction), test accuracy {f['none']['test_acc']:.1%} -> "
            f"{f['hda']['test_acc']:.1%}"
        )
        ra = f.get("reattack", {})
        if "hda_search" in ra and ra["hda_search"]["before"]["rate"] is not None:
            b, a = ra["hda_search"]["before"], ra["hda_search"]["after"]
            head += f"; a fresh HDA search finds AEs in {b['rate']:.0%} -> {a['rate'] or 0:.0%} of its test cases"
        for att, name in (("pgd_accuracy", f"PGD-{p.pgd_steps}"), ("autoattack_accuracy", "AutoAttack")):
            if att in ra and ra[att]["before"]["rate"] is not None:
                b, a = ra[att]["before"], ra[att]["after"]
                head += f", {name} accuracy {b['rate']:.0%} -> {a['rate'] or 0:.0%}"
    return head


# ---------------------------------------------------------------------------------------------- findings and repair
def findings(result: HdaResult, p: HdaParams) -> Any:
    """Per selected seed with at least one AE among HDA's test cases: the most natural AE (highest SSIM) as the image,
    the prediction before and after, the density; ranked by the share of AEs and their naturalness."""
    import pandas as pd

    from weakspot.findings import REQUIRED, to_png

    s, classes, radius = result.seeds, result.classes, result.radius
    e, res = result.generators.evals[("hda", "selected")], result.generators.results[("hda", "selected")]
    sel, names, ld, P_seed = s.selected, s.names, s.log_density, s.selected_proba
    X, y = s.X[sel], s.y[sel]
    ss = e.ssim_cases
    rows = []
    for i in range(len(X)):
        mine = np.where(res.seed_index == i)[0]
        assert e.ae_mask is not None  # evaluate_cases sets every array
        ae = mine[e.ae_mask[mine]]
        if not len(ae):
            continue
        assert ss is not None and e.pred is not None and e.conf is not None and e.J is not None  # as ae_mask
        best = ae[np.argmax(ss[ae])]
        share = len(ae) / len(mine)
        pred = int(e.pred[best])
        rows.append(
            {
                "weak_spot": f"{names[sel[i]]} (true {classes[y[i]]}): {len(ae)} of {len(mine)} test cases "
                f"within L-inf {radius:.3g} are read as {classes[pred]} (SSIM {ss[best]:.3f})",
                "kind": "input",
                "severity": float(share + float(ss[ae].mean())) / 2.0,
                "severity_meaning": SEVERITY,
                "label": classes[y[i]],
                "prediction": classes[pred],
                "confidence": float(e.conf[best]),
                "example": json.dumps(
                    {
                        "seed": names[sel[i]],
                        "prediction_before": classes[int(P_seed[i].argmax())],
                        "confidence_before": round(float(P_seed[i].max()), 4),
                        "log_density": round(float(ld[sel[i]]), 4),
                        "pred_loss": round(float(e.J[best]), 4),
                        "ssim": round(float(ss[best]), 4),
                    }
                ),
                "image": to_png(res.X_cases[best], scale=4 if X.shape[-1] <= 16 else 2),
            }
        )
    df = pd.DataFrame(rows, columns=list(REQUIRED) + ["example", "image"])  # no AE anywhere: no findings, same shape
    if len(df):
        df = df.sort_values("severity", ascending=False, kind="stable").head(int(p.max_findings)).reset_index(drop=True)
    from weakspot.findings import UNCHECKED

    for col, v in {**UNCHECKED, "confirmation": NOT_CHECKED_INPUT}.items():
        df[col] = v
    checked = pd.DataFrame(
        controlled_rows(result, p), columns=list(REQUIRED) + ["example", "confirmation"] + list(COLUMNS)
    )
    out = pd.concat([checked, df], ignore_index=True) if len(df) else checked
    return out.reset_index(drop=True)


NOT_CHECKED_INPUT = (
    "not checked: one seed's AEs are the search's own output (an example); the seed set and the "
    "classes above are checked against random seeds"
)
SEVERITY_SEEDS = (
    "lift: the share of HDA's selected seeds around which its GA found an AE over that of as many random "
    "seeds, the same GA and test cases per seed"
)
SEVERITY_CLASS = (
    "lift: the share of the class's random seeds around which HDA's GA found an AE over that of random "
    "seeds of any class (the class chosen on HDA's selected seeds)"
)


def controlled_rows(result: HdaResult, p: HdaParams) -> List[Dict[str, Any]]:
    """The findings checked against random seeds (:mod:`weakspot.hda.evidence`): HDA's seed selection as a whole,
    then the classes its seeds found fragile, confirmed on the random seeds."""
    from weakspot.hda.evidence import class_evidence, seed_set_evidence

    classes, radius = result.classes, result.radius
    ev = seed_set_evidence(result)
    rows = [
        {
            "weak_spot": f"HDA's dense, fragile seeds (selected by density and the {result.seeds.indicator} "
            f"indicator): AEs within L-inf {radius:.3g} around them",
            "kind": "seed_set",
            "severity": float(np.nan_to_num(ev.lift, nan=0.0)),
            "severity_meaning": SEVERITY_SEEDS,
            "label": "",
            "prediction": "",
            "confidence": float("nan"),
            "example": "",
            "confirmation": ev.sentence("seeds") + " (HDA's selected seeds against random ones; a seed fails when "
            "the GA finds an AE around it)",
            **ev.columns(),
        }
    ]
    for c, e in class_evidence(result, int(p.seed)):
        rows.append(
            {
                "weak_spot": f"class {classes[c]}: AEs within L-inf {radius:.3g} around its inputs",
                "kind": "class",
                "severity": float(np.nan_to_num(e.lift, nan=0.0)),
                "severity_meaning": SEVERITY_CLASS,
                "label": classes[c],
                "prediction": "",
                "confidence": float("nan"),
                "example": "",
                "confirmation": e.sentence("seeds") + f" (random seeds of class {classes[c]} against as many "
                "random seeds; the class chosen on HDA's selected seeds)",
                **e.columns(),
            }
        )
    return rows


def repaired_model(result: HdaResult, p: HdaParams) -> Dict[str, Any]:
    """``MethodReport.repaired``: the HDA-fine-tuned model's ``torch.save``d state_dict and its spec (accuracies
    before and after, the fine-tuning settings), or ``state_dict: None`` and why there is none (depth audit, a
    black box, fine-tuning disabled)."""
    ft = result.finetuning
    if not result.study:
        return {
            "state_dict": None,
            "spec": {
                "repaired_by": None,
                "depth": result.depth,
                "why": f"no repair at hda.depth: {result.depth} (the weak spots and their evidence only); the "
                "fine-tuning (Table 9) that gives the repaired model runs at hda.depth: study (weakspot audit "
                f"--profile study; on one target: {STUDY_ON_ONE} in params.yaml)",
            },
        }
    if ft is None or ft.repaired is None:
        return {
            "state_dict": None,
            "spec": {
                "repaired_by": None,
                "why": "fine-tuning needs a torch model that answers logits (white-box), or hda.finetune is disabled",
            },
        }
    import torch

    buf = io.BytesIO()
    torch.save(ft.repaired, buf)
    met = finetune_metrics(result)
    return {
        "state_dict": buf.getvalue(),
        "spec": {
            "repaired_by": "hda: adversarial fine-tuning on HDA's test cases (seeds/004 RQ4)",
            "caveat": "global_robustness is the accuracy on AEs made around held-out validation seeds "
            "(disjoint from the fine-tuning seeds); the audited model's is 0 by construction "
            "(only AEs it gets wrong are kept). reattack: the repaired model attacked again.",
            "before": {kk: rounded(vv) for kk, vv in ft.before.items()},
            "after": met["hda"],
            "reattack": met.get("reattack", {}),
            "settings": {
                "seeds": ft.seeds["hda"],
                "test_cases": ft.test_cases["hda"],
                "train_inputs": ft.train_inputs,
                "epochs": int(p.finetune.epochs),
                "lr": float(p.finetune.lr),
                "schedule": "slow start, fast decay (Jeddi et al. 2021)",
                "validation_pool": ft.validation["pool"],
                "held_out_seeds": ft.validation.get("held_seeds"),
                "validation_aes_hda": ft.validation["hda_aes"],
                "validation_aes_pgd": ft.validation["pgd_aes"],
            },
        },
    }
