"""Generalized Adversarial Distance (seeds/001, Bennette et al.): black-box search for high-confidence errors.

Caveats first: the library is pure (no Prefect, no DVC, no file layout beyond the ``root`` a caller passes to
:func:`load_keel`); the baselines are re-implementations (see :mod:`weakspot.gad.search`); the attack's step size and
cap are ours (the paper gives none).
"""

from weakspot.gad.attack import AttackResult, gad_attack
from weakspot.gad.blackbox import BlackBox, fit_estimator, fit_svm_grid
from weakspot.gad.config import GadParams
from weakspot.gad.datasets import BiasRule, Split, biased_split, load_keel, make_preset_split
from weakspot.gad.distance import mae
from weakspot.gad.extract import Extraction, extract_pseudo_model, latin_hypercube
from weakspot.gad.loess import gad_scores, loess_fit
from weakspot.gad.sdr import mean_ci95, sdr, sdr_curve
from weakspot.gad.search import SEARCHES, Pool, make_search

__all__ = [
    "AttackResult", "BiasRule", "BlackBox", "Extraction", "GadParams", "Pool", "SEARCHES", "Split", "biased_split",
    "extract_pseudo_model", "fit_estimator", "fit_svm_grid", "gad_attack", "gad_scores", "latin_hypercube",
    "load_keel", "loess_fit", "mae", "make_preset_split", "make_search", "mean_ci95", "run_gad", "sdr", "sdr_curve",
]


def __getattr__(name: str):
    if name == "run_gad":  # lazy: pulls in matplotlib
        from weakspot.gad.experiment import run_gad

        return run_gad
    raise AttributeError(name)
