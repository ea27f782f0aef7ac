"""Adversarial examiner (paper ``seeds/000``, Shu et al., "Identifying Model Weakness with Adversarial Examiner",
AAAI 2020): examiners (random, BO, RL) search the rendering conditions under which a model fails each object class.

Caveats first: the examination (:mod:`weakspot.examine.run`) renders scenes and queries ``predict_proba`` only; the
paper's experiments that train models of their own (training-set size, planted weakness, factor order, strength
mode) are one shared stage, ``examine_study`` (:func:`weakspot.examine.experiment.run_study`). Importing this package
registers the method (and loads its params model only).
"""

from weakspot.examine.config import ExamineParams
from weakspot.methods import Method, register_method

METHOD = register_method(Method(
    "examine", "Adversarial examiner", "seeds/000 (Shu et al., AAAI 2020)", params=ExamineParams,
    run="weakspot.examine.run:run", modalities=("image",), scene=True, order=20, target_keys=("class_map",),
    skip_keys=("study",)))
