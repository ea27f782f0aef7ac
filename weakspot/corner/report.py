"""Corner cases' report on a target: a :class:`~weakspot.corner.run.CornerResult` as metrics, tables, prose and
findings.

Caveats first: the metrics are the search's and the comparison's numbers as they are (the pipeline writes them;
timings go to the ``seconds`` table, never the metrics, so reruns are byte-identical). Corner cases are generated
inputs and carry no true class: a finding says where the model is undecided on data-like inputs, not an error.
``margin_before`` / ``margin_after`` are *logit* margins; ``boundary_margin`` is in probability. At depth audit
(``CornerResult.depth``) the paper's comparisons did not run and are left out, never shown empty: the FGSM comparison
(its metrics, table, figure, claim and paragraph) and the rerun at the paper's step; the metrics both depths hold are
the same numbers under the same keys.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from typing import Any, Dict, List, Optional, Tuple

import numpy as np

from weakspot.corner.claims import claims, set_text
from weakspot.corner.prose import depth_text, headline_of, summary_of
from weakspot.corner.config import PAPER_SETTINGS, CornerParams
from weakspot.corner.run import CornerResult
from weakspot.corner.search import CornerSearch
from weakspot.methods import AuditTarget, MethodReport
from weakspot.fmt import fmt, rounded
from weakspot.result import StageResult

SEVERITY_PAIR = (
    "number of corner cases (optimised seeds with top-two probabilities within {bm} and a "
    "latent density above the realism threshold) whose two top classes are this pair"
)
SEVERITY_INPUT = "1 - (p_top1 - p_top2) after the search: 1 = exactly on the decision boundary"
SEVERITY_PAIR_LIFT = (
    "lift: the share of held-out inputs of the two classes the model misclassifies, over that of the "
    "other classes' held-out inputs"
)
CONFIRM_PAIR = (
    " (held-out inputs of class {a} or {b}, which the search never saw, against the other held-out "
    "inputs; an input fails when misclassified)"
)
NO_HELDOUT = "not checked: the target has no held-out inputs to confirm the pair on"
NOT_CHECKED_INPUT = (
    "not checked: one generated corner case is the search's own output (an example); its class pair "
    "is checked on held-out inputs above"
)
#: the cards: no "realistic" one, since realism is said only where the generator's gate holds (the prose says which);
#: the last two are the FGSM comparison's (depth study only)
KEY_METRICS = ["margin_before", "margin_after", "margin_reduction", "n_corner_cases", "tv_corner", "tv_fgsm"]


def report(result: CornerResult, params: CornerParams, target: AuditTarget) -> MethodReport:
    """The section (metrics, tables, prose; the figures are :func:`weakspot.corner.figures.figures`'), the findings
    and the generator's lineage."""
    t0 = time.perf_counter()
    if params.depth != result.depth:  # the words follow what ran
        params = params.model_copy(update={"depth": result.depth})
    classes = [str(c) for c in target.classes]
    m = metrics_of(result, classes)
    tables = tables_of(result, classes, params)
    tables["settings"] = settings_table(
        params, result.latent_dim, result.use_discriminator, result.n_train, m["autoencoder_epochs"], m
    )
    tables["claims"] = claims(m, params)
    if "judge" in m:
        tables["judge"] = judge_table(m)
    differ = [r for r in tables["settings"].to_dict("records") if r["differs"]]
    findings = findings_of(result, classes, params)
    section = StageResult(
        metrics=m,
        tables=tables,
        title=f"Corner cases: generated inputs on the decision boundary ({target.name})",
        summary=summary_of(m, params, result.use_discriminator, differ),
        items=items_of(m, result.latent_dim, params),
        headline=headline_of(m, params),
        key_metrics=[k for k in KEY_METRICS if k in m],
        sample=(
            f"{m['n_seeds']} random latent seeds (seed {params.seed}) decoded by an autoencoder fitted on "
            f"{result.n_train} training images (corner.train_sample: at most {params.train_sample}, a seeded "
            "sample)"
            + (
                f"; the weak class pairs confirmed on all {len(result.heldout['y'])} test inputs"
                if result.heldout is not None
                else ""
            )
        ),
    )
    times = {**result.seconds, "report": time.perf_counter() - t0}
    times["total"] = sum(times.values())
    _seconds_table(section, times)
    info = result.generator_info
    generator = {"pixels": info.get("pixels"), "training_seconds": rounded(info.get("training_seconds"), 2)}
    return MethodReport(section=section, findings=findings, lineage={"generator": generator})


def _seconds_table(section: StageResult, times: Dict[str, float]) -> None:
    import pandas as pd

    # timings go to a table, not the metrics: metrics are byte-identical across reruns
    seconds = [rounded(v, 2) for v in times.values()]
    section.tables["seconds"] = pd.DataFrame({"phase": list(times), "seconds": seconds})
    section.items.append(
        {
            "table": "seconds",
            "caption": "Wall-clock seconds per phase of this run (the generator's "
            "phase is 0 when a cached generator of the same data and params was reused).",
        }
    )


def class_pairs(search: CornerSearch, mask: np.ndarray) -> List[Tuple[int, int, int]]:
    """``(a, b, count)`` of the seeds in ``mask`` by their top two classes after the search (``a < b``), most first."""
    cnt: Counter = Counter()
    for i in np.flatnonzero(mask):
        a, b = sorted((int(search.pred_after[i]), int(search.second_after[i])))
        cnt[(a, b)] += 1
    return sorted(((a, b, c) for (a, b), c in cnt.items()), key=lambda t: (-t[2], t[0], t[1]))


def metrics_of(result: CornerResult, classes: List[str]) -> Dict[str, Any]:
    """The stage's metrics: the required keys first, then details (the FGSM comparison's at depth study only)."""
    search, comparison, flags, g = result.search, result.comparison, result.flags, result.generator
    n = search.n
    pairs = class_pairs(search, flags["corner"])
    mb, ma = float(np.median(search.margin_before)), float(np.median(search.margin_after))
    cmp = comparison
    m = {
        "n_seeds": int(n),
        "margin_before": mb,
        "margin_after": ma,
        "realistic_yield": float(flags["corner"].mean()) if n else 0.0,
        **(
            {"tv_corner": float(np.mean(cmp.tv_latent)), "tv_fgsm": float(np.mean(cmp.tv_fgsm))}
            if cmp is not None
            else {}
        ),
        "top_class_pairs": [[classes[a], classes[b], int(c)] for a, b, c in pairs[:5]],
        "depth": result.depth,
        # details
        "margin_reduction": float(mb / ma) if ma > 0 else float("inf"),
        "prob_margin_before": float(np.median(search.prob_margin_before)),
        "prob_margin_after": float(np.median(search.prob_margin_after)),
        "near_boundary_share": float(flags["near"].mean()),
        "near_boundary_share_before": float(flags["near_before"].mean()),
        "realistic_share": float(flags["realistic"].mean()),
        "realistic_share_before": float(flags["realistic_before"].mean()),
        "n_corner_cases": int(flags["corner"].sum()),
        "class_changed_share": float(np.mean(search.pred_after != search.pred_before)),
        "latent_dim": int(result.latent_dim),
        "discriminator": bool(result.use_discriminator),
        "kde_bandwidth": float(result.density.bandwidth),
        "kde_threshold": float(result.density.threshold),
        "seed_move_median": float(np.median(np.linalg.norm(search.final - search.seeds, axis=1))),
        "autoencoder_mse": float(g.history["loss"][-1]),
        "autoencoder_r2": float(g.history.get("r2", float("nan"))),
        "autoencoder_epochs": int(g.history.get("epochs", len(g.history["loss"]))),
        **(
            {
                "tv_decoded": float(np.mean(cmp.tv)),
                "manifold_decoded": float(np.mean(cmp.manifold)),
                "manifold_corner": float(np.mean(cmp.manifold_latent)),
                "manifold_fgsm": float(np.mean(cmp.manifold_fgsm)),
                "flip_rate_fgsm": float(np.mean(cmp.pred_fgsm != cmp.pred)),
                "flip_rate_latent": float(np.mean(cmp.pred_latent != cmp.pred)),
            }
            if cmp is not None
            else {}
        ),
        "nearest_train_rms_before": float(np.median(result.nearest_train_before)),
        "nearest_train_rms_after": float(np.median(result.nearest_train_after)),
    }
    if result.use_discriminator:
        m["disc_accuracy"] = float(g.history.get("disc_accuracy", float("nan")))
        m["disc_real_share"] = float(flags["disc_ok"].mean())
    m["n_train"] = int(result.n_train)
    m["model_accuracy_on_training_images"] = result.accuracy_on_training_images
    m["model_accuracy_on_reconstructions"] = result.accuracy_on_reconstructions
    if result.paper_lr is not None:
        m["paper_lr"] = _finite(result.paper_lr)
    ctl = result.controls
    if ctl is not None:
        m["judge"] = _finite({**{k: ctl["sets"][k] for k in JUDGED}, **ctl["judge"]})
        m["yield_vs_random"] = _finite(ctl["yield"])
        m["gate"] = _finite(ctl["gate"])
    return m


#: the sets the independent judge is run on, as the metrics name them, with the words the report uses
JUDGED = {
    "corner": "corner cases (after the search)",
    "seeds": "seeds before the search",
    "random": "random codes (uniform in the codes' box)",
    "real": "real held-out images (control half)",
}


def _finite(v: Any) -> Any:
    """``v`` with every non-finite float as None (a metrics file holds no NaN or inf), recursively."""
    if isinstance(v, dict):
        return {k: _finite(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_finite(x) for x in v]
    if isinstance(v, (bool, np.bool_)):
        return bool(v)
    if isinstance(v, (float, np.floating)):
        return float(v) if np.isfinite(v) else None
    return v


def judge_table(m: Dict[str, Any]) -> Any:
    """The independent judge on each set: counts passing each test and all three, the share with its interval."""
    import pandas as pd

    j = m["judge"]
    rows = [
        {
            "set": JUDGED[k],
            "n": j[k]["n"],
            "pair_agrees": j[k]["pair"],
            "near_the_data": j[k]["near"],
            "sharp": j[k]["sharp"],
            "passes": j[k]["passed"],
            "share_95ci": set_text(j[k]),
        }
        for k in JUDGED
    ]
    return pd.DataFrame(rows)


def tables_of(result: CornerResult, classes: List[str], params: CornerParams) -> Dict[str, Any]:
    """The ``yield``, ``class_pairs``, ``fgsm_comparison`` (depth study only) and ``margin_curve`` tables."""
    import pandas as pd

    search, comparison, flags = result.search, result.comparison, result.flags
    n = max(search.n, 1)
    rows: List[Tuple[str, int, Optional[int]]] = [("seeds", search.n, search.n)]
    rows.append(
        (
            f"near the boundary before the search (p1 - p2 < {params.boundary_margin})",
            int(flags["near_before"].sum()),
            int(flags["realistic_before"].sum()),
        )
    )
    rows.append((f"near the boundary after (p1 - p2 < {params.boundary_margin})", int(flags["near"].sum()), None))
    rows.append(("inside the latent density after: log-density >= threshold", int(flags["kde_ok"].sum()), None))
    if result.use_discriminator:
        rows.append(("inside after: discriminator D(G(s)) > 0", int(flags["disc_ok"].sum()), None))
    rows.append(("corner cases (near and inside)", int(flags["corner"].sum()), None))
    yield_t = pd.DataFrame(
        {"what": [r[0] for r in rows], "count": [r[1] for r in rows], "share": [r[1] / n for r in rows]}
    )
    pairs = class_pairs(search, flags["corner"])
    pair_t = pd.DataFrame(
        [{"class_a": classes[a], "class_b": classes[b], "corner_cases": c} for a, b, c in pairs],
        columns=["class_a", "class_b", "corner_cases"],
    )
    out = {"yield": yield_t, "class_pairs": pair_t}
    if comparison is not None:
        out["fgsm_comparison"] = fgsm_table(comparison)
    mp = search.margin_path
    out["margin_curve"] = pd.DataFrame(
        {
            "step": np.arange(len(mp)),
            "margin_median": np.median(mp, axis=1),
            "margin_q25": np.quantile(mp, 0.25, axis=1),
            "margin_q75": np.quantile(mp, 0.75, axis=1),
        }
    )
    return out


def fgsm_table(comparison: Any) -> Any:
    """Sec. 4.5: total variation, distance to the manifold and prediction changes of the decoded seeds, their FGSM
    images and their latent steps."""
    import pandas as pd

    return pd.DataFrame(
        {
            "images": [
                "decoded seeds G(s)",
                f"FGSM, eps = {comparison.eps} (pixels)",
                f"latent step, eps = {comparison.eps} (standardised latent units)",
            ],
            "total_variation": [comparison.tv.mean(), comparison.tv_fgsm.mean(), comparison.tv_latent.mean()],
            "distance_to_manifold": [
                comparison.manifold.mean(),
                comparison.manifold_fgsm.mean(),
                comparison.manifold_latent.mean(),
            ],
            "prediction_changed": [
                0.0,
                np.mean(comparison.pred_fgsm != comparison.pred),
                np.mean(comparison.pred_latent != comparison.pred),
            ],
        }
    )


def settings_table(
    params: CornerParams, latent: int, use_disc: bool, n_train: int, ae_epochs: int, m: Optional[Dict[str, Any]] = None
) -> Any:
    """What ran next to the paper's setting, one row per setting the paper gives (Sec. 4.1-4.5), and, with the
    metrics ``m``, the margin's fall at this audit's step against the paper's step rerun on the first seeds."""
    import pandas as pd

    rows = [
        {
            "setting": "depth",
            "ran": depth_text(params),
            "paper": "the corner cases and the paper's comparisons (FGSM, Sec. 4.5; its step, Sec. 4.3)",
            "differs": not params.comparisons,
        }
    ]
    for key, (paper, where) in PAPER_SETTINGS.items():
        if key == "fgsm_eps" and not params.comparisons:
            continue  # the FGSM comparison is the study's
        ran = getattr(params, key)
        rows.append({"setting": key, "ran": str(ran), "paper": f"{paper} ({where})", "differs": ran != paper})
    rows.append(
        {"setting": "latent_dim", "ran": str(latent), "paper": "2 for MNIST (Sec. 4.1)", "differs": latent != 2}
    )
    rows.append(
        {
            "setting": "discriminator",
            "ran": str(use_disc),
            "paper": "not needed for 2-D MNIST (Sec. 4.1, 4.3)",
            "differs": bool(use_disc),
        }
    )
    rows.append(
        {
            "setting": "autoencoder training",
            "ran": f"{ae_epochs} epochs on {n_train} training images",
            "paper": "MNIST training set (epochs not given)",
            "differs": True,
        }
    )
    rows.append(
        {"setting": "n_seeds", "ran": str(params.n_seeds), "paper": "not given (a handful shown)", "differs": False}
    )
    p = (m or {}).get("paper_lr")
    if p is not None:
        assert m is not None  # p is one of its entries
        rows.append(
            {
                "setting": "margin fall in the search (result)",
                "ran": f"x{fmt(m['margin_reduction'])} at lr {params.lr} ({params.lr_schedule}), {m['n_seeds']} seeds",
                "paper": f"two orders of magnitude (Sec. 4.3); x{fmt(p['margin_reduction'])} here at lr "
                f"{p['lr']} (constant) on the first {p['n_seeds']} seeds",
                "differs": params.lr != p["lr"] or params.lr_schedule != "constant",
            }
        )
    return pd.DataFrame(rows, columns=["setting", "ran", "paper", "differs"])


def findings_of(result: CornerResult, classes: List[str], params: CornerParams) -> Any:
    """Findings: one ``class_pair`` row per confused pair (most corner cases first, at most ``max_pairs``), then the
    ``input`` rows, the corner cases closest to the boundary (at most ``max_findings``). A row says "realistic" only
    when the generator's gate holds (and, for an input, the independent judge passes it); else "blurred generated"
    / "generated"."""
    import pandas as pd

    from weakspot.findings import to_png

    search, flags = result.search, result.flags
    corner = np.flatnonzero(flags["corner"])
    pm = search.prob_margin_after
    rows: List[Dict[str, Any]] = []
    c = result.controls
    gate = bool(c is not None and c["gate"]["holds"])  # nothing is called realistic unless the gate holds
    passed = c["passed"] if c is not None else np.zeros(search.n, bool)
    kind_of = "realistic" if gate else "blurred generated"
    for a, b, n_pair in class_pairs(search, flags["corner"])[: params.max_pairs]:
        members = [i for i in corner if sorted((int(search.pred_after[i]), int(search.second_after[i]))) == [a, b]]
        best = min(members, key=lambda i: (pm[i], i))
        before = Counter(int(search.pred_before[i]) for i in members).most_common(1)[0][0]
        after = Counter(int(search.pred_after[i]) for i in members).most_common(1)[0][0]
        ev = pair_evidence(result, a, b, params)
        rows.append(
            {
                "weak_spot": f"{kind_of} inputs between classes {classes[a]} and {classes[b]}",
                "kind": "class_pair",
                "severity": float(np.nan_to_num(ev.lift, nan=0.0)) if ev is not None else float(n_pair),
                "severity_meaning": (
                    SEVERITY_PAIR_LIFT.format(bm=params.boundary_margin)
                    if ev is not None
                    else SEVERITY_PAIR.format(bm=params.boundary_margin)
                ),
                **(ev.columns() if ev is not None else {}),
                "confirmation": (
                    ev.sentence("inputs") + CONFIRM_PAIR.format(a=classes[a], b=classes[b], bm=params.boundary_margin)
                    if ev is not None
                    else NO_HELDOUT
                ),
                "label": None,
                "prediction": classes[after],  # generated inputs have no true class
                "confidence": float(np.mean(search.confidence_after[members])),
                "example": json.dumps(
                    {
                        "corner cases": int(n_pair),
                        "judge passes": int(np.sum(passed[members])),
                        "most seeds started as": classes[before],
                        "mean p1 - p2": rounded(np.mean(pm[members]), 4),
                    }
                ),
                "image": to_png(search.images_after[best]),
            }
        )
    for i in sorted(corner, key=lambda i: (pm[i], i))[: params.max_findings]:
        a, b = sorted((int(search.pred_after[i]), int(search.second_after[i])))
        rows.append(
            {
                "weak_spot": (
                    f"{'realistic' if gate and passed[i] else 'generated'} input between classes {classes[a]} "
                    f"and {classes[b]}"
                    + ("" if c is None else f" (independent judge: {'passes' if passed[i] else 'fails'})")
                ),
                "kind": "input",
                "severity": float(1.0 - pm[i]),
                "severity_meaning": SEVERITY_INPUT,
                "label": None,
                "prediction": classes[int(search.pred_after[i])],
                "confidence": float(search.confidence_after[i]),
                "example": json.dumps(
                    {
                        "seed started as": classes[int(search.pred_before[i])],
                        "runner-up": classes[int(search.second_after[i])],
                        "p1 - p2": rounded(pm[i], 4),
                    }
                ),
                "image": to_png(search.images_after[i]),
            }
        )
    from weakspot.findings import UNCHECKED

    cols = [
        "weak_spot",
        "kind",
        "severity",
        "severity_meaning",
        "label",
        "prediction",
        "confidence",
        "example",
        "image",
    ]
    rows = [{**UNCHECKED, "confirmation": NOT_CHECKED_INPUT, **r} for r in rows]
    df = pd.DataFrame(rows, columns=cols + list(UNCHECKED))
    df["confirmed"] = df["confirmed"].astype(bool)
    return df


def pair_evidence(result: CornerResult, a: int, b: int, params: CornerParams) -> Any:
    """The class pair on the held-out inputs the search never saw: inputs of class ``a`` or ``b`` against the other
    held-out inputs, an input failing when the model misclassifies it (a natural error: a low margin alone is not a
    failure). None without held-out inputs."""
    from weakspot.evidence import on_masks

    h = result.heldout
    if h is None or not len(h["y"]):
        return None
    return on_masks(h["pred"] != h["y"], np.isin(h["y"], [a, b]))


def items_of(m: Dict[str, Any], latent: int, params: CornerParams) -> List[Dict[str, str]]:
    """The section's tables and figures in reading order, with their captions."""
    return [
        {"table": "settings", "caption": "What ran against the paper's settings (Sec. 4.1-4.5)."},
        {
            "table": "claims",
            "caption": "The paper's claims (and ours), each with its pass rule, the measured numbers "
            "and whether it holds on this target.",
        },
        {
            "figure": "reconstructions",
            "caption": f"The generator ({latent}-D code, {m['autoencoder_epochs']} epochs): "
            f"training images and their reconstructions. The model recognises "
            f"{m['model_accuracy_on_reconstructions']:.0%} of the reconstructions as their class "
            f"({m['model_accuracy_on_training_images']:.0%} of the images); they explain {m['autoencoder_r2']:.0%} of "
            "the images' variance around the mean image.",
        },
        *(
            [
                {
                    "table": "judge",
                    "caption": "Realism judged independently of the generator: a reference classifier's "
                    "top two classes agree with the image's pair under the audited model, the image is no farther from its "
                    "nearest training image and no blurrier than most real held-out images; share passing all three with "
                    "its 95% Wilson interval. Random codes and the seeds before the search are the controls.",
                }
            ]
            if "judge" in m
            else []
        ),
        {
            "table": "yield",
            "caption": "Yield: how many seeds end near the decision boundary, how many stay inside the "
            "generator's latent density, and the corner cases (both).",
        },
        {
            "figure": "optimisation_paths",
            "caption": "Fig. 4-5: decoded images along the optimisation of a few seeds "
            "(corner cases first), with the top two classes and the logit margin.",
        },
        {
            "figure": "latent_plane",
            "caption": "Fig. 6: codes of the training images coloured by class"
            + (
                ", the classifier's decision regions on the decoded plane in the background,"
                if latent == 2
                else " (projected on their first two principal components),"
            )
            + " and the seeds' trajectories (start: circle, end: cross; red: corner case).",
        },
        {
            "figure": "margin_curve",
            "caption": "Median and interquartile logit margin of the seeds over the Adam steps (log scale).",
        },
        {"table": "class_pairs", "caption": "Class pairs the corner cases sit between."},
        *(
            [
                {
                    "figure": "fgsm_vs_latent",
                    "caption": f"Fig. 7: decoded seeds (top), FGSM at eps = {params.fgsm_eps} "
                    "(middle) and one latent step of the same length (bottom), with the model's predictions.",
                },
                {
                    "table": "fgsm_comparison",
                    "caption": "Sec. 4.5: total variation (mean absolute difference of neighbouring "
                    "pixels) and distance to the data manifold (RMS reconstruction error through the autoencoder) of "
                    "decoded seeds, FGSM images and latent-step images, and how often each changed the prediction.",
                },
            ]
            if "tv_fgsm" in m
            else []
        ),
    ]
