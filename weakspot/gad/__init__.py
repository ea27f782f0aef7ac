"""Generalized Adversarial Distance (seeds/001, Bennette et al.): black-box search for high-confidence errors.

Caveats first: GAD audits a model it is given (:func:`~weakspot.gad.experiment.run_target`: a target's trained
classifier, used only through ``predict_proba``, and its splits); it trains no model of its own but the pseudo-model
of Algorithm 1. The paper's SVM is the built-in scikit-learn architecture ``svm_grid``
(:data:`weakspot.models.SKLEARN_ARCHS`), its biased splits :data:`weakspot.data.BIAS_PRESETS`. The library is pure
(no Prefect, no DVC, no file layout); the baselines are re-implementations (see :mod:`weakspot.gad.search`); the
attack's step size and cap are ours (the paper gives none); half the extraction design is jittered evaluation rows
(ours, see :mod:`weakspot.gad.extract`). The protocol is repeated over split seeds (:mod:`weakspot.gad.seeds`), and
GAD's SDR is withheld where the pseudo-model fails the R^2 gate (``gad.min_pseudo_r2``).
"""

from weakspot.gad.attack import AttackResult, gad_attack
from weakspot.gad.config import GadParams
from weakspot.gad.datasets import Split, biased_split, make_preset_split
from weakspot.gad.distance import mae
from weakspot.gad.extract import Extraction, extract_pseudo_model, latin_hypercube
from weakspot.gad.loess import gad_scores, loess_fit
from weakspot.gad.sdr import mean_ci95, sdr, sdr_curve
from weakspot.gad.search import SEARCHES, Pool, make_search

__all__ = [
    "AttackResult", "DatasetOutcome", "Extraction", "GadParams", "Pool", "SEARCHES", "Split", "biased_split",
    "extract_pseudo_model", "findings_of", "gad_attack", "gad_scores", "latin_hypercube", "loess_fit", "mae",
    "make_preset_split", "make_search", "mean_ci95", "reseeded_target", "result_of", "run_target", "sdr", "sdr_curve",
]


def __getattr__(name: str):
    if name in ("DatasetOutcome", "findings_of", "result_of", "run_target"):  # lazy: pulls in matplotlib and torch
        from weakspot.gad import experiment

        return getattr(experiment, name)
    if name == "reseeded_target":
        from weakspot.gad.seeds import reseeded_target

        return reseeded_target
    raise AttributeError(name)
