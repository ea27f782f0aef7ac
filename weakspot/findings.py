"""Findings: one table shape for the weak spots every method reports, per (target, method).

Caveats first: a finding is a weak spot only when it is ``confirmed``: measured on inputs its search never saw
against a control disjoint from it (:mod:`weakspot.evidence`), its adjusted lower bound above 1 after the
Benjamini-Hochberg correction over its family. **The family is the target**: every candidate of every method on one
model under audit (:func:`correct_by_target`), the one definition the report, the gates, ``summary.md``, ``weakspot
compare`` and ``weakspot.audit`` decide with, so the same candidates give the same confirmed set through every entry
point, and adding or removing another target changes nothing of this one's. :func:`normalise` corrects over one
method's candidates (what its stage writes, knowing no other method's), so a finding confirmed in its stage's file
may not survive its target's family. A
method that confirms its findings makes ``severity`` the lift; a method that does not yet leaves
its own number in ``severity`` (``severity_meaning`` says what it is) and its findings unchecked (the evidence columns
at their defaults, :data:`UNCHECKED`). Examples travel with the finding: an image as PNG bytes (``image``), a table
row as JSON (``example``), a rendering condition as JSON (``factors``).

Columns (:data:`COLUMNS`):

=================  ==========================================================================================
weak_spot          what the weak spot is: a class, a region of rendering factors, a feature range, one input
kind               ``class_condition``, ``feature_range``, ``input``, ``class`` ...
severity           the method's number (higher = worse)
severity_meaning   one sentence: what ``severity`` measures
label              the true class (name), where known
prediction         the model's prediction (name) on the example
confidence         the model's probability of that prediction
example            JSON of the example row (tabular), or ``""``
factors            JSON of the rendering factors (scenes), or ``""``
image              PNG bytes of the example input, or ``None``
n_confirm          held-out inputs inside the region the finding was measured on (0: not checked)
failures           how many of them the model fails
n_control          inputs drawn at random from the same eligible set, measured the same way
control_failures   how many of them the model fails
lift               failure rate inside / the control's (NaN: not checked)
lift_lo, lift_hi   its one-sided bounds at 5% each, each holding the lift at least 90% of the time (the lower:
                   Fisher's exact test inverted; the upper: Clopper-Pearson's ends of the two rates)
p_value            one-sided: the region fails no more often than the control (Fisher's exact test)
p_adjusted         Benjamini-Hochberg adjusted p over the family
lift_lo_adjusted   the lower bound at the family's adjusted level (above 1 exactly when confirmed)
family             how many candidates were tested together
confirmed          ``lift_lo_adjusted > 1`` on at least :data:`weakspot.evidence.MIN_CONFIRM` inputs inside and
                   :data:`weakspot.evidence.MIN_CONTROL` in the control
confirmation       one sentence: what the held-out inputs and the control were, or that it was not checked
=================  ==========================================================================================
"""

from __future__ import annotations

import io
from typing import Any, Dict, Mapping, Optional, Tuple

import numpy as np

from weakspot.errors import DataError

REQUIRED = ("weak_spot", "kind", "severity", "severity_meaning", "label", "prediction", "confidence")
#: the evidence columns (:mod:`weakspot.evidence`) as a finding no one has checked on held-out inputs carries them
UNCHECKED = {
    "n_confirm": 0,
    "failures": 0,
    "n_control": 0,
    "control_failures": 0,
    "lift": float("nan"),
    "lift_lo": float("nan"),
    "lift_hi": float("nan"),
    "p_value": float("nan"),
    "p_adjusted": float("nan"),
    "lift_lo_adjusted": float("nan"),
    "family": 0,
    "confirmed": False,
    "confirmation": "not checked: the search's own output, never measured on held-out inputs against a random control",
}
OPTIONAL = {"example": "", "factors": "", "image": None, **UNCHECKED}
COLUMNS = ("rank",) + REQUIRED + tuple(OPTIONAL)


def normalise(df: Any, *, where: str = "findings") -> "Any":
    """Check a method's findings and return them in :data:`COLUMNS` order, ranked in the method's order (1 = first).

    Raises
    ------
    DataError
        A required column is missing, or a severity is NaN.
    """
    import pandas as pd

    if df is None:
        df = pd.DataFrame(columns=list(REQUIRED))
    missing = [c for c in REQUIRED if c not in df.columns]
    if missing:
        raise DataError(f"{where}: findings lack column(s) {missing}; required: {', '.join(REQUIRED)}")
    out = df.copy()
    for col, default in OPTIONAL.items():
        if col not in out.columns:
            out[col] = default
    out["severity"] = out["severity"].astype(float)
    if out["severity"].isna().any():
        raise DataError(f"{where}: a finding has a NaN severity")
    out["confidence"] = out["confidence"].astype(float)
    for col in ("n_confirm", "failures", "n_control", "control_failures", "family"):
        out[col] = out[col].fillna(0).astype(np.int64)
    for col in ("lift", "lift_lo", "lift_hi", "p_value", "p_adjusted", "lift_lo_adjusted"):
        out[col] = out[col].astype(float)
    out["confirmed"] = out["confirmed"].fillna(False).astype(bool)
    out = correct({"": out})[""]
    out["confirmation"] = out["confirmation"].fillna(UNCHECKED["confirmation"])  # rows a method left unchecked
    for col in ("weak_spot", "kind", "severity_meaning", "label", "prediction", "example", "factors", "confirmation"):
        out[col] = out[col].fillna("").astype(str)
    out = out.reset_index(drop=True)
    out.insert(0, "rank", np.arange(1, len(out) + 1, dtype=np.int64))
    return out[list(COLUMNS)]


#: kinds of finding known only with the label (the true class alone): ranked after every region a user can flag
#: before the answer (features, rendering factors, the model's own output), never shown as a target's worst
LABEL_ONLY = frozenset({"class"})


def rank_key(kind: Any, lift_lo_adjusted: Any) -> "Tuple[bool, float]":
    """The order of confirmed weak spots: regions before what only the label tells (:data:`LABEL_ONLY`), each by
    the adjusted lower bound of the lift, highest first (a large sample's sure lift before a small sample's lucky
    one)."""
    lo = float(lift_lo_adjusted) if lift_lo_adjusted is not None else float("nan")
    return (str(kind) in LABEL_ONLY, -lo if lo == lo else float("inf"))


def correct(tables: "Mapping[Any, Any]", fdr: Optional[float] = None) -> "Dict[Any, Any]":
    """The findings tables of one family (every candidate of every table with a p-value), each with ``p_adjusted``,
    ``lift_lo_adjusted``, ``family`` and ``confirmed`` decided by :func:`weakspot.evidence.correct` (Benjamini-Hochberg
    at ``fdr``, default :data:`weakspot.evidence.FDR`) from the counts the rows carry; unchecked rows stay unconfirmed.
    The tables keep their rows and order; the input is not changed."""
    from weakspot import evidence as ev

    out = {k: (t.copy() if t is not None else None) for k, t in tables.items()}
    rows, items = [], []
    for k, t in out.items():
        if t is None or not len(t) or not set(ev.COLUMNS[:8]) <= set(t.columns):
            continue  # a table without the evidence columns: nothing to correct
        for col in ("p_adjusted", "lift_lo_adjusted", "family"):  # a table written before the correction existed
            if col not in t.columns:
                t[col] = UNCHECKED[col]
        was = t["confirmed"].astype(bool) if "confirmed" in t.columns else False
        t["confirmed"] = was & t["p_value"].notna()  # unchecked rows stay unconfirmed
        for i, r in enumerate(
            t[
                ["n_confirm", "failures", "n_control", "control_failures", "lift", "lift_lo", "lift_hi", "p_value"]
            ].itertuples(index=False)
        ):
            if r.p_value == r.p_value:
                rows.append((k, i))
                items.append(
                    ev.Evidence(
                        int(r.n_confirm),
                        int(r.failures),
                        int(r.n_control),
                        int(r.control_failures),
                        float(r.lift),
                        float(r.lift_lo),
                        float(r.lift_hi),
                        float(r.p_value),
                    )
                )
    done = ev.correct(items, ev.FDR if fdr is None else fdr)
    for (k, i), e in zip(rows, done):
        t = out[k]
        assert t is not None  # rows holds rows of tables only
        for col, v in (
            ("p_adjusted", e.p_adjusted),
            ("lift_lo_adjusted", e.lift_lo_adjusted),
            ("family", e.family),
            ("confirmed", e.confirmed),
        ):
            t.iloc[i, t.columns.get_loc(col)] = v
    return out


def correct_by_target(tables: "Mapping[Tuple[Any, Any], Any]", fdr: Optional[float] = None) -> "Dict[Any, Any]":
    """The findings tables keyed ``(target, method)``, each target's corrected as one family (:func:`correct` over
    every candidate of every method on that target): the audit's one definition of "confirmed"."""
    out: Dict[Any, Any] = {}
    for target in dict.fromkeys(k[0] for k in tables):
        out.update(correct({k: df for k, df in tables.items() if k[0] == target}, fdr))
    return {k: out[k] for k in tables}


def correct_targets(targets: "list") -> "list":
    """The report's targets (``[{"methods": [{"findings": DataFrame or None, ...}]}]``) with each target's findings
    tables corrected as its family (:func:`correct_by_target`); the cards are changed in place and returned."""
    keyed = {
        (i, j): c["findings"]
        for i, t in enumerate(targets)
        for j, c in enumerate(t.get("methods", []))
        if c.get("findings") is not None
    }
    for (i, j), df in correct_by_target(keyed).items():
        targets[i]["methods"][j]["findings"] = df
    return targets


def to_png(image: Any, *, scale: int = 1) -> bytes:
    """PNG bytes of one image: ``(C, H, W)`` float in [0, 1] (C = 1 or 3), or ``(H, W, 3)`` / ``(H, W)`` uint8."""
    from PIL import Image

    a = np.asarray(image)
    if a.ndim == 3 and a.shape[0] in (1, 3) and a.shape[-1] not in (1, 3):  # (C, H, W) -> (H, W, C)
        a = np.moveaxis(a, 0, -1)
    if a.dtype != np.uint8:
        a = (np.clip(a, 0.0, 1.0) * 255.0 + 0.5).astype(np.uint8)
    if a.ndim == 3 and a.shape[-1] == 1:
        a = a[..., 0]
    img = Image.fromarray(a)
    if scale > 1:
        img = img.resize((img.width * scale, img.height * scale), Image.Resampling.NEAREST)
    buf = io.BytesIO()
    img.save(buf, format="PNG", optimize=False)
    return buf.getvalue()
