"""Adversarial examiner (paper ``seeds/000``, Shu et al., "Identifying Model Weakness with Adversarial Examiner",
AAAI 2020): examiners (random, BO, RL) search the rendering conditions under which a model fails each object class.

Caveats first: the examination (:mod:`weakspot.examine.run`) renders scenes and queries ``predict_proba`` only; the
paper's experiments that train models of their own (training-set size, planted weakness, factor order, strength
mode) are one shared stage, ``examine_study`` (:func:`weakspot.examine.study.run_study`, its report and figures in
:mod:`weakspot.examine.study_report` and :mod:`weakspot.examine.study_figures`). Importing this package registers the
method (and loads its params model only).

The package, one job a module: ``config`` (params), ``examiners`` (random, BO, RL), ``inputs`` (checks, the examined
instances), ``sessions`` (the examination engine), ``run`` (a target's examination), ``report`` and ``figures``
(its section and findings), ``study_models``, ``study``, ``study_report`` and ``study_figures`` (the study stage),
``tsne`` (the figures' embedding), ``fake`` (a Blender-free renderer with a planted weakness, for tests).
"""

from weakspot.examine.config import ExamineParams
from weakspot.methods import Method, register_method

METHOD = register_method(
    Method(
        "examine",
        "Adversarial examiner",
        "seeds/000 (Shu et al., AAAI 2020)",
        params=ExamineParams,
        run="weakspot.examine.run:run",
        report="weakspot.examine.report:report",
        figures="weakspot.examine.figures:figures",
        modalities=("image",),
        scene=True,
        order=20,
        target_keys=("class_map",),
        skip_keys=("study",),
    )
)

#: Tables of its section that are curves, declared in dvc.yaml's plots by ops/pipeline.py: (table, x, y columns;
#: "params:<key>" = the columns its section's key lists).
PLOTS = (("curve", "iteration", ("params:examiners", "T0")),)

#: Its headline metrics in metrics/examine/<t>.json (tasks/headline.py; the rest in plots/examine/<t>/results.json).
HEADLINE = (
    "bo.T*",
    "classes_t0_below_half",
    "regions.proposed",
    "regions.confirmed",
    "repeats.*.mean",
    "repeats.bo.checkpoint",
)
