"""The examiner study (stage ``examine_study``): the paper's experiments that need models of their own, run on the
rendered scenes. Sec. 4.3 (Table 3, training-set size m), Sec. 4.4 (a planted weakness: a training range limited
in one factor), Sec. 4.5 (the RL examiner's factor order) and Sec. 4.6 (strength mode: the examiner maximises the
true-class probability). Returns what the sessions saw (:class:`StudyResult`); :mod:`weakspot.examine.study_report`
and :mod:`weakspot.examine.study_figures` turn it into metrics, prose and figures.

Caveats first:

* The models are trained here (:mod:`weakspot.examine.study_models`), or the audited scene target's model stands in
  for the full one (``study.full_model``); the study's sessions run on all of them in lockstep, like the examination
  of a target (:mod:`weakspot.examine.sessions`).
* The order check and strength mode examine ``study.classes`` (default ``examine.classes``), the other experiments
  their own class lists (default ``examine.classes``). The lists are checked once the models are trained (against
  the first model's classes); each model examines the unseen instance of a class it is most sure of.

Reference: M. Shu, C. Liu, W. Qiu, A. Yuille, "Identifying Model Weakness with Adversarial Examiner", AAAI 2020
(``seeds/000``): Sec. 4.3-4.6, Table 3, Fig. 4-6.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, List, Mapping, Optional, Sequence, Tuple

import numpy as np

from weakspot.errors import ConfigError, DataError
from weakspot.examine.config import ExamineParams
from weakspot.examine.inputs import (
    ExaminedModel,
    as_params,
    check_meta,
    check_space,
    class_order,
    examined_classes,
    select_instances,
)
from weakspot.examine.regions import find_regions
from weakspot.examine.sessions import Session, make_sessions, render_scenes, run_sessions
from weakspot.examine.study_models import train_study_models
from weakspot.progress import Progress

if TYPE_CHECKING:  # pragma: no cover
    from weakspot.methods import SharedInputs


@dataclass
class StudyResult:
    """What the study's sessions saw.

    Parameters
    ----------
    sessions : list of Session
        Groups ``main`` / ``main_t0`` (the full model: the order check's default-order RL and the T = 0 protocol),
        ``order`` (RL, viewpoint factors first), ``order_control`` (RL, default order, other examiner seeds),
        ``strength``, ``m_study`` / ``m_study_t0`` and ``artificial`` /
        ``artificial_t0`` (each when its experiment is enabled).
    models : pandas.DataFrame
        One row per model: ``model``, ``role``, ``n_train``, ``unseen_accuracy``, ``unseen_true_class_proba``.
    space : SceneSpace
        The factor space the examiners searched.
    regions : list of Region
        The planted weakness as the examiners found it: per class of the ``artificial`` sessions, the limited model's
        box of failing factor ranges, and the full model's on the same classes (the contrast), each confirmed on
        fresh renders (:mod:`weakspot.examine.regions`).
    """

    sessions: List[Session]
    models: Any
    space: Any
    regions: List[Any] = field(default_factory=list)


def _classes(params: ExamineParams, base: ExaminedModel, meta, images) -> Tuple[List[str], List[str], List[str]]:
    """The examined classes, the order check's and strength mode's, and every class any experiment examines."""
    st = params.study
    aw, ms = st.artificial_weakness, st.m_study
    classes = examined_classes(params.classes, base, meta, images)
    try:  # the order check's and strength mode's classes
        own = examined_classes(st.classes, base, meta) if st.classes else classes
    except (ConfigError, DataError) as e:
        raise type(e)(f"study.{e}") from None
    wanted = (
        set(own)
        | set((ms.classes or classes) if ms.enabled else [])
        | set((aw.classes or classes) if aw.enabled else [])
    )
    examined_classes(sorted(wanted), base, meta)  # checks the experiments' own class lists
    return classes, own, sorted(wanted)


def _sessions(
    params: ExamineParams,
    space,
    trained: Mapping[str, ExaminedModel],
    instances: Mapping[str, Mapping[str, int]],
    classes: Sequence[str],
    own: Sequence[str],
) -> List[Session]:
    """The sessions of every enabled experiment."""
    st = params.study
    aw, ms = st.artificial_weakness, st.m_study
    arch = st.arch
    sessions: List[Session] = []
    if st.order_check or st.strength:
        sessions += make_sessions(
            params, space, trained, instances, own, "main", arch, ["rl"] if st.order_check else [], st.T
        )
    if st.order_check:
        from weakspot.scene.space import RL_ORDER_VIEW_FIRST

        # Sec. 4.5 / Fig. 6(b): viewpoint factors first; the same examiner seeds as the default-order sessions
        order = [k for k in RL_ORDER_VIEW_FIRST if k in space.searched]
        sessions += [
            s
            for s in make_sessions(params, space, trained, instances, own, "order", arch, ["rl"], st.T, order=order)
            if s.examiner_name != "t0"
        ]
        # its control: the default order again with other examiner seeds (the same sun), so that a difference
        # between the orders can be read against the difference a change of seed alone makes
        sessions += [
            s
            for s in make_sessions(
                params, space, trained, instances, own, "order_control", arch, ["rl"], st.T, seed_offset=500_009
            )
            if s.examiner_name != "t0"
        ]
    if st.strength:
        sessions += [
            s
            for s in make_sessions(
                params, space, trained, instances, own, "strength", arch, [st.strength_examiner], st.T, mode="strength"
            )
            if s.examiner_name != "t0"
        ]
    if ms.enabled:
        for m in ms.values:
            sessions += make_sessions(
                params, space, trained, instances, ms.classes or classes, "m_study", f"{arch}_m{m}", ms.examiners, ms.T
            )
    if aw.enabled:  # with its T = 0 sessions: the random set of the Fig. 4 t-SNE
        sessions += make_sessions(
            params,
            space,
            trained,
            instances,
            aw.classes or classes,
            "artificial",
            f"{arch}_limited",
            aw.examiners,
            aw.T,
            tail=aw.tail,
        )
    return sessions


def run_study(
    renderer,
    space,
    images: np.ndarray,
    meta,
    params: ExamineParams,
    *,
    device: Any = "auto",
    progress: Optional[Progress] = None,
    full_model: Optional[Tuple[Any, Sequence[str], str]] = None,
) -> StudyResult:
    """Train the study's models and run the paper's Sec. 4.3 (Table 3), 4.4 (artificial weakness), 4.5 (factor
    order) and 4.6 (strength) experiments on them.

    Parameters
    ----------
    renderer, space, images, meta, params :
        As :func:`weakspot.examine.run.examine_target`.
    device : {"auto", "cpu", "cuda"}
        Where the models train and run.
    full_model : (classifier, classes, name), optional
        An already trained model of the full training split (``params.study.full_model`` names the scene target
        whose model the stage passes here) used as ``<arch>`` instead of training one: ``classes[i]`` names its
        output ``i``; ``name`` labels it in the ``models`` table.
    progress : :data:`weakspot.progress.Progress`, optional
        ``progress("train <name>: epoch (loss ...)", epoch, epochs)`` while training, then
        ``progress("examine", done, total)``.

    Returns
    -------
    StudyResult
        The sessions and the ``models`` table (see :func:`weakspot.examine.study_models.train_study_models` for the
        models).
    """
    import pandas as pd

    params = as_params(params)
    st = params.study
    aw = st.artificial_weakness
    check_meta(images, meta, aw.factor if aw.enabled else None)
    check_space(space)
    if not st.enabled:
        raise ConfigError("study: every experiment is disabled (m_study, artificial_weakness, order_check, strength)")
    trained, rows = train_study_models(
        renderer, space, images, meta, params, device=device, progress=progress, full_model=full_model
    )
    classes, own, wanted = _classes(params, trained[next(iter(trained))], meta, images)
    all_classes = class_order(meta)
    instances = {n: select_instances(trained[n], all_classes, images, meta, wanted) for n in trained}
    sessions = _sessions(params, space, trained, instances, classes, own)
    run_sessions(sessions, renderer, trained, params.render_chunk, progress)
    regions = []
    if aw.enabled and params.regions.enabled:  # the limited model's regions, and the full model's on its classes
        planted = [s for s in sessions if s.group in ("artificial", "artificial_t0")]
        planted_classes = {s.cls for s in planted}
        full = [s for s in sessions if s.group in ("main", "main_t0") and s.cls in planted_classes]
        regions = find_regions(
            planted + full,
            space,
            meta,
            renderer,
            trained,
            params.regions,
            params.seed,
            lambda r, scenes: render_scenes(r, scenes, params.render_chunk),
        )
    return StudyResult(sessions=sessions, models=pd.DataFrame(rows), space=space, regions=regions)


def run(inputs: "SharedInputs", params: ExamineParams, runtime: Any) -> StudyResult:
    """The entry point of the shared stage ``examine_study`` (:func:`weakspot.methods.run_shared`): the study on the
    rendered scene data set it was given, with the model of the scene target ``study.full_model`` names (its classes
    through that target's ``class_map``) as the full model when it names one."""
    from weakspot.scene.config import SceneParams
    from weakspot.scene.renderer import renderer_for

    if inputs.scene is None:
        raise DataError("the examiner study needs the rendered scene data set (run the render stage)")
    sp = SceneParams.model_validate(inputs.scene.settings)
    full = None
    t = inputs.target
    if t is not None:  # the audited scene target's model stands in for the study's full model
        class_map = getattr(t.params, "class_map", None) or {}
        full = (t.model, [class_map.get(c, c) for c in t.classes], t.name)
    with renderer_for(sp, device=runtime.device) as renderer:
        return run_study(
            renderer,
            sp.space(),
            inputs.scene.images,
            inputs.scene.table,
            params,
            device=runtime.device,
            progress=runtime.progress,
            full_model=full,
        )
