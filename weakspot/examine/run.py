"""The examiner's entry point on a target: every examiner of ``examine.examiners`` on every examined class of the
model under audit (paper Table 2, Fig. 1-3), rendering with exactly the scene settings that rendered the target's
data. Returns what the examination saw (:class:`ExamineResult`); :mod:`weakspot.examine.report` and
:mod:`weakspot.examine.figures` turn it into metrics, prose, findings and figures.

Caveats first: the examination renders scenes and queries ``predict_proba`` only (a black box); its sessions are
:mod:`weakspot.examine.sessions`, what it is given is checked in :mod:`weakspot.examine.inputs`. Nothing here draws,
writes a file or words a finding.

Reference: M. Shu, C. Liu, W. Qiu, A. Yuille, "Identifying Model Weakness with Adversarial Examiner", AAAI 2020
(``seeds/000``): Sec. 4.1-4.2, Table 2, Fig. 1-3.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence

import numpy as np

from weakspot.errors import DataError
from weakspot.examine.config import ExamineParams
from weakspot.examine.inputs import (
    as_params,
    check_meta,
    check_space,
    examined_classes,
    examined_model,
    select_instances,
)
from weakspot.examine.regions import Region, find_regions
from weakspot.examine.sessions import Session, make_sessions, render_scenes, run_sessions
from weakspot.methods import AuditTarget
from weakspot.progress import Progress
from weakspot.scene.config import SceneParams
from weakspot.scene.renderer import renderer_for

TARGET = "target"  # the session key of the audited model


@dataclass
class ExamineResult:
    """What an examination of one model saw.

    Parameters
    ----------
    sessions : list of Session
        Group ``main`` (every examiner on every examined class, in params order) and ``main_t0`` (each class's
        T = 0 protocol), with their queries, probabilities, last images and worst scene.
    classes : list of str
        The scene class name of each output of the model.
    space : SceneSpace
        The factor space the examiners searched.
    regions : list of Region
        Per examined class, the box of factor ranges where the model failed and its confirmation on fresh renders
        (:mod:`weakspot.examine.regions`); empty when ``regions.enabled`` is false.
    """

    sessions: List[Session]
    classes: List[str]
    space: Any
    regions: List[Region] = field(default_factory=list)


def examine_target(
    renderer,
    space,
    clf: Any,
    classes: Sequence[str],
    images: np.ndarray,
    meta,
    params: ExamineParams,
    *,
    progress: Optional[Progress] = None,
) -> ExamineResult:
    """Examine one classifier per class with every examiner of ``params.examiners`` (paper Table 2, Fig. 1-3).

    Parameters
    ----------
    renderer : object with ``render(list of dict) -> uint8 (n, H, W, 3)``
        ``weakspot.scene.renderer.BlenderRenderer`` (or ``weakspot.examine.fake.FakeRenderer`` for tests).
    space : SceneSpace
        ``.bounds``, ``.searched`` (the searched factors) and ``.fixed`` (the sun angles, drawn once per class).
    clf : classifier
        ``predict_proba(x: float32 (n, 3, H, W) in [0, 1]) -> (n, k)``, e.g. ``weakspot.models.TorchClassifier``;
        its ``n_classes``, when it has one, must equal ``len(classes)``.
    classes : list of str
        ``classes[i]`` is the scene class name of output ``i``; classes not in the scene data are ignored.
    images : uint8 array (n, H, W, 3)
        The rendered data set; its unseen rows (``split != "train"``) choose the examined instance per class.
    meta : pandas.DataFrame
        One row per image: ``class``, ``label``, ``instance``, ``split``, ``view`` and the factors.
    params : ExamineParams
        ``params.classes`` (default: every class of ``classes`` in the scene), the examiners and their budget.
    progress : :data:`weakspot.progress.Progress`, optional
        ``progress("examine", queries_done, queries_total)`` after each round.

    Returns
    -------
    ExamineResult
        The sessions, for :func:`weakspot.examine.report.report` and :func:`weakspot.examine.figures.figures`.
    """
    params = as_params(params)
    check_meta(images, meta)
    check_space(space)
    model = examined_model(clf, classes)
    examined = examined_classes(params.classes, model, meta, images)
    models = {TARGET: model}
    instances = {TARGET: select_instances(model, model.classes, images, meta, examined)}
    sessions = make_sessions(
        params, space, models, instances, examined, "main", TARGET, params.examiners, params.T, repeats=params.repeats
    )
    run_sessions(sessions, renderer, models, params.render_chunk, progress)
    regions = (
        find_regions(
            sessions,
            space,
            meta,
            renderer,
            models,
            params.regions,
            params.seed,
            lambda r, scenes: render_scenes(r, scenes, params.render_chunk),
        )
        if params.regions.enabled
        else []
    )
    return ExamineResult(sessions=sessions, classes=list(model.classes), space=space, regions=regions)


def run(target: AuditTarget, params: ExamineParams, runtime: Any) -> ExamineResult:
    """The method's entry point: examine ``target.model`` on the rendered scene data set it was given."""
    if target.scene is None:
        raise DataError(f"{target.name}: the examiner needs the rendered scene data set (run the render stage)")
    sp = SceneParams.model_validate(target.scene.settings)
    class_map = getattr(target.params, "class_map", None) or {}
    classes = [class_map.get(c, c) for c in target.classes]
    with renderer_for(sp, device=runtime.device) as renderer:
        result = examine_target(
            renderer,
            sp.space(),
            target.model,
            classes,
            target.scene.images,
            target.scene.table,
            params,
            progress=runtime.progress,
        )
    return in_users_names(result, {s: str(u) for u, s in zip(target.classes, classes)})


def in_users_names(result: ExamineResult, names: Dict[str, str]) -> ExamineResult:
    """``result`` with every class named as the user's model names it (``names``: scene class -> the model's own,
    from its ``class_map``): its sessions, regions and outputs. The examination ran in the scene's classes (what
    Blender renders); what the report, the findings and the figures say is in the user's."""
    if all(k == v for k, v in names.items()):
        return result
    for s in result.sessions:
        s.cls = names.get(s.cls, s.cls)
    for r in result.regions:
        r.cls = names.get(r.cls, r.cls)
    result.classes = [names.get(c, c) for c in result.classes]
    return result
