"""Adversarial examiner (paper ``seeds/000``): examiners (random, BO, RL) and the experiments.

Pure library code: no Prefect, no DVC, no file layout. The models come from :mod:`weakspot.models` (the audited
model is given to :func:`examine_target`; :func:`run_study` trains its own with ``weakspot.models.ARCHS``).
"""

from weakspot.examine.config import ExamineParams, StudyParams  # noqa: F401
from weakspot.examine.examiners import (  # noqa: F401
    EXAMINERS,
    BayesianOptimizationExaminer,
    Examiner,
    RandomExaminer,
    RLExaminer,
    make_examiner,
    register_examiner,
    run_examination,
)
from weakspot.examine.experiment import (  # noqa: F401
    FINDING_COLUMNS,
    class_order,
    examine_target,
    run_study,
    select_instances,
    train_study_model,
)
