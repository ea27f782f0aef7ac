"""Adversarial examiner (paper ``seeds/000``, Shu et al., "Identifying Model Weakness with Adversarial Examiner",
AAAI 2020): examiners (random, BO, RL) search the rendering conditions under which a model fails each object class.

Caveats first: the examination (:mod:`weakspot.examine.run`) renders scenes and queries ``predict_proba`` only; the
paper's experiments that train models of their own (training-set size, planted weakness, factor order, strength
mode) are one shared stage, ``examine_study`` (declared in the registration below, a
:class:`weakspot.methods.SharedStage`: :func:`weakspot.examine.study.run`, its report and figures in
:mod:`weakspot.examine.study_report` and :mod:`weakspot.examine.study_figures`), run when ``examine.study.enabled``
(``examine.depth: study`` switches its experiments on; the examinations are the same at both depths).
Importing this package registers the method (and loads its params model only).

The package, one job a module: ``config`` (params), ``examiners`` (random, BO, RL), ``inputs`` (checks, the examined
instances), ``sessions`` (the examination engine), ``run`` (a target's examination), ``report`` and ``figures``
(its section and findings), ``study_models``, ``study``, ``study_report`` and ``study_figures`` (the study stage),
``tsne`` (the figures' embedding), ``fake`` (a Blender-free renderer with a planted weakness, for tests).
"""

from weakspot.examine.config import ExamineParams
from weakspot.methods import Method, SharedStage, StageSpec, register_method

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
        stage=StageSpec(
            order=20,
            target_keys=("class_map",),
            skip_keys=("study", "depth"),  # the study's (depth study switches its experiments on)
            plots=(("curve", "iteration", ("params:examiners", "T0")),),
            headline=(
                "bo.T*",
                "classes_t0_below_half",
                "regions.proposed",
                "regions.confirmed",
                "repeats.*.mean",
                "repeats.bo.checkpoint",
            ),
            shared=(
                # the study trains models of its own on the rendered scenes: it reads every examine key but the
                # examination's budget (a target's stage reads every key but the study)
                SharedStage(
                    "examine_study",
                    key="study",
                    run="weakspot.examine.study:run",
                    report="weakspot.examine.study_report:study_report",
                    figures="weakspot.examine.study_figures:study_figures",
                    skip_keys=("T", "checkpoints"),
                    scene=True,
                    model_key="full_model",
                    target_keys=("class_map",),
                    order=21,
                    headline=(
                        "strength.*",
                        "artificial_weakness.chance",
                        "artificial_weakness.regions.*",
                        "order_check.max_abs_diff",
                    ),
                ),
            ),
        ),
    )
)
