"""Adversarial examiner (paper ``seeds/000``): examiners (random, BO, RL), target models and the experiments.

Pure library code: no Prefect, no DVC, no file layout.
"""

from weakspot.examine.config import ExamineParams  # noqa: F401
from weakspot.examine.examiners import (  # noqa: F401
    EXAMINERS,
    BayesianOptimizationExaminer,
    Examiner,
    RandomExaminer,
    RLExaminer,
    make_examiner,
    run_examination,
)
from weakspot.examine.experiment import TargetModel, run_examinations, select_instances, train_targets  # noqa: F401
from weakspot.examine.models import ARCHITECTURES, build_model, predict_proba, train_model  # noqa: F401
