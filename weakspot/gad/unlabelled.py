"""GAD on the unlabelled part: the audited model's confident predictions on production rows, ranked for labelling.

Caveats first: the pseudo-model, the attack and the feature scale are the audited run's (fitted on the evaluation
rows); the LOESS of Eq. 2 is fitted on the unlabelled eligible rows themselves, as Algorithm 3 fits it on the set it
ranks. Nothing here needs a label: which ranking orders the list was chosen on the labelled pools
(:mod:`weakspot.gad.ranking`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

import numpy as np

from weakspot.gad.attack import attack_distances
from weakspot.gad.loess import gad_scores


@dataclass
class UnlabelledRows:
    """The audited model's answers on the unlabelled rows and GAD's score of the eligible ones."""

    prediction: np.ndarray  # (n,) class codes
    confidence: np.ndarray  # (n,)
    eligible: np.ndarray  # indices into the unlabelled rows: the class of interest, confidence above the threshold
    distance: np.ndarray  # (n_eligible,)
    flipped: np.ndarray  # (n_eligible,) bool
    gad: np.ndarray  # (n_eligible,) Eq. 2; +inf where never flipped


def score_unlabelled(
    clf: Any,
    pseudo_model: Any,
    X: np.ndarray,
    *,
    split: Any,
    params: Any,
    class_index: int,
    scale: np.ndarray,
    device: str = "auto",
    progress: Optional[Any] = None,
) -> UnlabelledRows:
    """Predictions, eligibility and GAD scores of the unlabelled rows ``X`` (the audited run's pseudo-model)."""
    X = np.asarray(X, np.float64)
    proba = clf.predict_proba(X)
    pred, conf = proba.argmax(axis=1).astype(np.int64), proba.max(axis=1)
    eligible = np.flatnonzero((pred == class_index) & (conf > params.confidence_threshold))
    if not len(eligible):
        empty = np.zeros(0)
        return UnlabelledRows(pred, conf, eligible, empty, empty.astype(bool), empty)
    att, dist = attack_distances(
        clf,
        pseudo_model,
        X[eligible],
        split=split,
        params=params,
        class_index=class_index,
        scale=scale,
        device=device,
        progress=progress,
    )
    gad = gad_scores(
        conf[eligible],
        dist,
        log=split.log_mae,
        frac=params.loess_frac,
        iterations=params.loess_iterations,
        flipped=att.flipped,
    )
    return UnlabelledRows(pred, conf, eligible, dist, att.flipped, gad)
