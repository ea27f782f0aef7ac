"""GAD's findings on the audited run: the rows to label, ranked by GAD, and the weak spots they point to.

Caveats first: the ranking (``to_label``) uses no ground truth -- it is what a person acts on; the weak spots'
severities (the error lift of the top-ranked rows) use it to grade the audit. Where the pseudo-model failed the R^2
gate (:attr:`weakspot.gad.protocol.DatasetOutcome.gad_reliable` is False) no GAD ranking is offered: the rows come
lowest confidence first and the one weak spot says why.
"""

from __future__ import annotations

import json
from typing import Any, Dict, List, Optional, Tuple

import numpy as np

from weakspot.errors import ConfigError
from weakspot.gad.protocol import DatasetOutcome
from weakspot.evidence import on_masks
from weakspot.gad.ranking import Ranking, order_by
from weakspot.fmt import fmt

RESERVED_COLUMNS = ("rank", "prediction", "confidence", "adversarial_distance", "gad_score", "row", "ranked_by", "part")
FINDING_COLUMNS = ("weak_spot", "kind", "severity", "severity_meaning", "label", "prediction", "confidence", "example")


def _feature_columns(names: List[str]) -> List[str]:
    """Feature names for the findings tables; one equal to a reserved column gets the prefix ``feature:``."""
    return [f"feature:{n}" if n in RESERVED_COLUMNS else str(n) for n in names]


def _example(split: Any, x: np.ndarray) -> str:
    """A row's feature values as a JSON object (7 significant digits; a category's text)."""
    values = [split.text_of(j, v) for j, v in enumerate(x)]
    return json.dumps(  # a missing value as null
        {
            str(c): v if v is None or isinstance(v, str) else float(f"{v:.7g}")
            for c, v in zip(split.feature_names, values)
        }
    )


def unreliable_reason(o: DatasetOutcome) -> str:
    """Why GAD's numbers are withheld for a run whose pseudo-model failed the R^2 gate (one clause)."""
    return (
        f"the pseudo-model's R^2 is {o.pseudo_r2:.3f} on held-out design points and {o.pseudo_r2_eval:.3f} on the "
        f"test rows (split seed {o.split_seed}; gad.min_pseudo_r2 asks both >= {o.min_pseudo_r2:g}), so it did not "
        "learn the black box and the adversarial distances GAD ranks by mean nothing"
    )


def findings_of(outcome: DatasetOutcome, *, top: int = 20, ranking: Optional[Ranking] = None) -> Tuple["Any", "Any"]:
    """GAD's findings on one target: the rows to label, ranked, and a summary of where they concentrate.

    Parameters
    ----------
    outcome : DatasetOutcome
        From :func:`weakspot.gad.protocol.run_target`.
    top : int, default 20
        How many of the top-ranked rows the summary describes.
    ranking : Ranking, optional
        The search that orders ``to_label`` (:func:`weakspot.gad.ranking.choose`: the label-free one that found the
        most errors per label on the labelled pools); default GAD where reliable, else the lowest confidence.

    Returns
    -------
    weak_spots : pandas.DataFrame
        Columns ``weak_spot, kind, severity, severity_meaning, label, prediction, confidence, example`` (the shared
        findings shape). First one ``kind = "feature_range"`` row: the 1-3 features whose interquartile range over
        the ``top`` GAD-ranked rows is narrowest relative to their range over all eligible rows, named with the top
        rows' 25th-75th percentiles (``"feature range: Iy in [-1.2, 0.1], Aa in [...]"``); its ``severity`` is the
        share of errors among those rows over the share among all eligible rows (ground truth, audit only: a lift,
        1 = no better than chance; 0 when no eligible row is an error); ``label`` the most common true class among
        them, ``prediction`` the class of interest, ``confidence`` their mean confidence, ``example`` the top row.
        Then up to five ``kind = "input"`` rows, the top-ranked rows the attack flipped, with ``severity`` their
        ``gad_score``. ``label`` and ``prediction`` are class names (codes where the split has none); ``example``
        is a JSON object of the row's feature values.
    to_label : pandas.DataFrame
        What a person acts on: every eligible test row (predicted as the class of interest with confidence above
        the threshold), most likely confident error first. Columns ``rank`` (1 = label first), the feature columns
        (original names and units; a name clashing with another column gets the prefix ``feature:``),
        ``prediction`` (class code), ``confidence``, ``adversarial_distance`` (MAE to the adversarial partner, in
        units of each feature's range when ``feature_scale="range"``), ``gad_score``, ``row`` (index into the test
        split, or into the unlabelled part) and ``part`` (``test``, or ``unlabelled`` where the target has an
        unlabelled part: then the list is those rows, the ones no one has labelled). No ground truth. ``gad_score = F(p) - (log-)MAE``, i.e. minus the GAD of Eq. 2 with the LOESS ``F``
        fitted on all eligible rows: how much less perturbation than the confidence leads one to expect flipped the
        prediction. It is sorted descending (the paper queries the lowest GAD first); rows the attack never flipped
        get ``-inf`` and come last. The rows come in the order of ``ranking`` (named in the column ``ranked_by``):
        GAD's score highest first only where GAD found the most errors per label.

    Where GAD is unreliable (:attr:`DatasetOutcome.gad_reliable` is False: the pseudo-model failed the R^2 gate),
    ``weak_spots`` is one ``kind = "method_caveat"`` row saying so and why (severity 0), and ``to_label`` lists the
    same rows lowest confidence first (Sec. I's fallback) with ``gad_score`` NaN: no GAD ranking is offered.
    """
    import pandas as pd

    o = outcome
    if isinstance(top, bool) or not isinstance(top, (int, np.integer)) or top < 1:
        raise ConfigError(f"findings_of: top = {top!r}; must be a positive integer")
    rows = np.asarray(o.eligible, dtype=np.int64)
    score = -np.asarray(o.gad, dtype=np.float64)  # higher = more likely a confident error; -inf: never flipped
    # GAD's own order (descending score, ties by row); where it is unreliable, lowest confidence first (Sec. I)
    own = "gad" if o.gad_reliable else "low_confidence"
    order = order_by(own, o.test_confidence[rows], score, rows, seed=o.split_seed)
    if not o.gad_reliable:
        score = np.full(len(rows), np.nan)
    chosen = ranking.chosen if ranking is not None else own
    if chosen == "gad" and not o.gad_reliable:
        chosen = "low_confidence"
    test = _view(o, "test")
    listed = order if chosen == own else order_by(chosen, o.test_confidence[rows], score, rows, seed=o.split_seed)
    if o.unlabelled is not None:  # the rows no one has labelled: these are what a person labels
        u = _view(o, "unlabelled")
        u_score = -np.asarray(u["gad"], np.float64) if o.gad_reliable else np.full(len(u["eligible"]), np.nan)
        u_order = order_by(chosen, u["confidence"][u["eligible"]], u_score, u["eligible"], seed=o.split_seed)
        to_label = _to_label(o, u, u_order, u_score[u_order])
    else:
        to_label = _to_label(o, test, listed, score[listed])
    to_label["ranked_by"] = chosen
    if not o.gad_reliable:
        spots = [_caveat_spot(o, rows)]
    elif len(order):
        in_gad_order = to_label if chosen == "gad" and o.unlabelled is None else _to_label(o, test, order, score[order])
        spots = [_feature_range_spot(o, rows[order], int(top)), *_input_spots(o, in_gad_order)]
    else:
        spots = []
    from weakspot.findings import UNCHECKED

    spots = [{**UNCHECKED, **sp} for sp in spots]  # only the feature range is checked against a control
    return pd.DataFrame(spots, columns=list(FINDING_COLUMNS) + list(UNCHECKED)), to_label


def _view(o: DatasetOutcome, part: str) -> Dict[str, Any]:
    """The rows a to-label list can be made of: the test split's or the unlabelled part's, with the audited model's
    answers and (for the eligible ones) the adversarial distances and GAD's Eq. 2."""
    if part == "unlabelled":
        u = o.unlabelled
        assert u is not None  # asked for only when the outcome has unlabelled rows
        return {
            "part": part,
            "X": o.split.X_unlabelled,
            "eligible": u.eligible,
            "prediction": u.prediction,
            "confidence": u.confidence,
            "distance": u.distance,
            "gad": u.gad,
        }
    return {
        "part": part,
        "X": o.split.X_test,
        "eligible": o.eligible,
        "prediction": o.test_prediction,
        "confidence": o.test_confidence,
        "distance": o.distance,
        "gad": o.gad,
    }


def _to_label(o: DatasetOutcome, view: Dict[str, Any], order: np.ndarray, score: np.ndarray) -> Any:
    """The eligible rows of ``view`` in rank ``order`` (positions among them), with their ``score``: the to-label
    table."""
    import pandas as pd

    rows = np.asarray(view["eligible"], dtype=np.int64)[order]
    X = np.asarray(view["X"], dtype=np.float64)[rows]
    cats = set(o.split.categorical)  # a category as its text, as the user's table has it
    to_label = pd.DataFrame(
        {
            c: [o.split.text_of(j, v) for v in X[:, j]] if j in cats else X[:, j]
            for j, c in enumerate(_feature_columns(list(o.split.feature_names)))
        }
    )
    to_label.insert(0, "rank", np.arange(1, len(rows) + 1, dtype=np.int64))
    to_label["prediction"] = np.asarray(view["prediction"])[rows].astype(np.int64)
    to_label["confidence"] = np.asarray(view["confidence"])[rows]
    to_label["adversarial_distance"] = np.asarray(view["distance"], dtype=np.float64)[order]
    to_label["gad_score"] = score
    to_label["row"] = rows
    to_label["part"] = view["part"]
    return to_label


def _caveat_spot(o: DatasetOutcome, rows: np.ndarray) -> Dict[str, Any]:
    """The one finding where GAD is unreliable: that it is, and why."""
    return {
        "weak_spot": f"GAD is unreliable on {o.name}: {unreliable_reason(o)}",
        "kind": "method_caveat",
        "severity": 0.0,
        "severity_meaning": (
            "no GAD finding: the pseudo-model does not mimic the black box, so distances to its adversarial "
            "partners say nothing about the black box; the rows to label are listed lowest confidence first"
        ),
        "label": "",
        "prediction": o.class_name,
        "confidence": float(o.test_confidence[rows].mean()) if len(rows) else float("nan"),
        "example": "",
    }


def _feature_range_spot(o: DatasetOutcome, ranked: np.ndarray, top: int) -> Dict[str, Any]:
    """Where the ``top`` GAD-ranked rows (test rows ``ranked``, best first) concentrate: the 1-3 features whose IQR
    over them is narrowest relative to all eligible rows', graded by their error lift (ground truth)."""
    split = o.split
    n = len(ranked)
    X = np.asarray(split.X_test, dtype=np.float64)[ranked]
    truth = np.asarray(split.y_test)[ranked]
    wrong = ~np.asarray(o.test_correct)[ranked]
    k = min(int(top), n)
    gone = np.isnan(X)
    q_top, q_all = _quartiles(X[:k]), _quartiles(X)
    iqr_top, iqr_all = q_top[1] - q_top[0], q_all[1] - q_all[0]
    with np.errstate(invalid="ignore", divide="ignore"):
        ratio = np.where(iqr_all > 0, iqr_top / iqr_all, np.inf)
    ratio = np.where(np.isnan(ratio), np.inf, ratio)  # a column the top rows never observe: no range
    for j in split.categorical:  # a category: the top rows' commonest, its share of all rows over its share of the top
        codes, counts = np.unique(X[:k, j][~gone[:k, j]], return_counts=True)
        if not len(codes):
            continue
        mode = codes[np.argmax(counts)]
        q_top[:, j] = mode
        ratio[j] = float((X[:, j] == mode).mean()) / (counts.max() / k)
    # a column missing in most of the top rows: its missingness, its share of all rows over its share of the top
    missing = [int(j) for j in np.flatnonzero(gone[:k].mean(axis=0) >= 0.5)]
    for j in missing:
        ratio[j] = float(gone[:, j].mean()) / float(gone[:k, j].mean())
    ranked_features = np.argsort(ratio, kind="stable")
    chosen = [j for j in ranked_features[:3] if ratio[j] < 0.5] or [int(ranked_features[0])]
    spot = "feature range: " + ", ".join(
        f"{split.feature_names[j]} is missing"
        if j in missing
        else f"{split.feature_names[j]} = {split.text_of(j, q_top[0, j])}"
        if j in split.categorical
        else f"{split.feature_names[j]} in [{fmt(q_top[0, j], 4)}, {fmt(q_top[1, j], 4)}]"
        for j in chosen
    )
    base = float(wrong.mean())
    share = float(wrong[:k].mean())
    vals, counts = np.unique(truth[:k], return_counts=True)
    conc = ", ".join(
        f"{split.feature_names[j]} "
        + (
            f"missing in {float(gone[:k, j].mean()):.0%} of the top rows and {float(gone[:, j].mean()):.0%} of the "
            "eligible rows"
            if j in missing
            else f"= {split.text_of(j, q_top[0, j])} in {float((X[:k, j] == q_top[0, j]).mean()):.0%} of the top rows "
            f"and {float((X[:, j] == q_top[0, j]).mean()):.0%} of the eligible rows"
            if j in split.categorical
            else f"IQR {ratio[j]:.0%} of the eligible rows'"
        )
        for j in chosen
    )
    # confirmed on the eligible rows the box was not drawn from (all but the top k) against the rest of them
    inside = np.ones(n, bool)
    for j in chosen:  # a range or a category holds only where the value is observed
        inside &= gone[:, j] if j in missing else (X[:, j] >= q_top[0, j]) & (X[:, j] <= q_top[1, j])
    held = np.arange(n) >= k
    ev = on_masks(wrong[held], inside[held])
    return {
        "weak_spot": spot,
        "kind": "feature_range",
        "severity": float(np.nan_to_num(ev.lift, nan=0.0)),
        "severity_meaning": (
            "lift: the share of errors (ground truth, audit only) among the eligible rows inside the box that the "
            f"box was not drawn from, over that of the rest of them; the box is the top-{k} GAD-ranked rows' "
            f"25th-75th percentiles ({conc}), {share:.0%} of which are errors against {base:.0%} of all {n} "
            f"confident (> {o.confidence_threshold:g}) {o.class_name!r} predictions"
        ),
        **ev.columns(),
        "confirmation": ev.sentence("rows") + f" (the eligible rows outside the top {k} the box was drawn from)",
        "label": split.class_name(vals[np.argmax(counts)]),
        "prediction": o.class_name,
        "confidence": float(o.test_confidence[ranked][:k].mean()),
        "example": _example(split, X[0]),
    }


def _quartiles(X: np.ndarray) -> np.ndarray:
    """The 25th and 75th percentiles ``(2, d)`` of each column over its observed values (NaN where it has none)."""
    if not np.isnan(X).any():
        return np.quantile(X, [0.25, 0.75], axis=0)
    out = np.full((2, X.shape[1]), np.nan)
    for j in range(X.shape[1]):
        x = X[:, j][~np.isnan(X[:, j])]
        if len(x):
            out[:, j] = np.quantile(x, [0.25, 0.75])
    return out


def _input_spots(o: DatasetOutcome, to_label: Any) -> List[Dict[str, Any]]:
    """Up to five of the top-ranked rows the attack flipped, each a finding with its GAD score as severity."""
    split = o.split
    units = "log-MAE" if split.log_mae else "MAE"
    n = len(to_label)
    score = to_label["gad_score"].to_numpy()
    rows = to_label["row"].to_numpy()
    X = np.asarray(split.X_test, dtype=np.float64)[rows]
    spots = []
    for i in range(min(5, n)):
        if not np.isfinite(score[i]):
            break
        spots.append(
            {
                "weak_spot": f"test row {int(rows[i])} (GAD rank {i + 1} of {n})",
                "kind": "input",
                "severity": float(score[i]),
                "severity_meaning": (
                    f"GAD score F(p) - {units} to the adversarial partner: how much less perturbation ({units} units) "
                    "than the LOESS on confidence expects flipped this confident prediction (minus Eq. 2 of seeds/001); "
                    "higher = more likely a confident error"
                ),
                "label": split.class_name(np.asarray(split.y_test)[rows[i]]),
                "prediction": split.class_name(to_label["prediction"].iloc[i]),
                "confidence": float(to_label["confidence"].iloc[i]),
                "example": _example(split, X[i]),
            }
        )
    return spots
