"""The examiner experiments of the paper (Sec. 4), as two pure entry points:

1. :func:`examine_target` examines ONE classifier (the model under audit) per class with every examiner of
   ``params.examiners`` (Table 2, Fig. 1-3, the worst images) and returns the weak spots found as a findings table;
2. :func:`run_study` runs the experiments that need models of their own (Sec. 4.3 training-set size, Sec. 4.4
   artificial weakness, Sec. 4.5 factor order, Sec. 4.6 strength mode): it trains them with
   ``weakspot.models.ARCHS[params.study.arch]`` and ``weakspot.models.train_torch_classifier``, then examines them.

Caveats first:

* A classifier here is anything with ``predict_proba(x) -> (n, k)`` taking float32 images ``(n, 3, H, W)`` in
  [0, 1] (``weakspot.scene.images_to_input`` of the rendered uint8 images), e.g. a ``weakspot.models.TorchClassifier``;
  ``classes[i]`` names its output ``i`` with a scene class.
* An *iteration* is the paper's unit of T (Sec. 4.1): one batch of ``rl.batch_size`` queries for RL (one policy
  gradient step, Eq. 5), one query for BO, ``random_batch`` queries for random search. The probability at a
  checkpoint T is the mean true-class probability of the queries of iterations (T - window, T], averaged over the
  examined classes (Algorithm 1 returns the T-th; ``window`` > 1 smooths it). T = 0 is the standard protocol:
  ``n_random`` uniformly random scenes with the same (fixed) sun.
* All sessions (every class and examiner, and in the study every model) advance in lockstep so that each round asks
  the renderer for all their scenes in one call (split into ``render_chunk``-sized calls).
* The sun angles are drawn at random once per (model, class) and held fixed; the other factors are searched
  (Sec. 4.1). Each class is examined on the unseen instance (a row with ``split != "train"``) the model is most sure
  of (Sec. 4.1: a validation instance).

Reference: M. Shu, C. Liu, W. Qiu, A. Yuille, "Identifying Model Weakness with Adversarial Examiner", AAAI 2020
(``seeds/000``): Table 2, Fig. 2, Fig. 3, Table 3, Sec. 4.4 (Fig. 4), Sec. 4.5 (Fig. 6), Sec. 4.6 (Fig. 5).
"""

from __future__ import annotations

import collections
import json
from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np

from weakspot.errors import ConfigError, DataError, ModelError
from weakspot.examine.config import ExamineParams
from weakspot.examine.examiners import make_examiner
from weakspot.findings import to_png
from weakspot.progress import Progress
from weakspot.result import StageResult
from weakspot.scene.dataset import images_to_input

REQUIRED_COLUMNS = ("class", "label", "instance", "split")
TARGET = "target"  # the session key of the audited model in examine_target
FINDING_COLUMNS = ("weak_spot", "kind", "severity", "severity_meaning", "label", "prediction", "confidence",
                   "factors", "image")


# ----------------------------------------------------------------------------------------------------------------
# inputs
# ----------------------------------------------------------------------------------------------------------------
@dataclass
class _Model:
    """A classifier (``predict_proba`` on [0, 1] images) and the scene class name of each of its outputs."""

    clf: Any
    classes: List[str]

    def proba(self, images: np.ndarray) -> np.ndarray:
        p = np.asarray(self.clf.predict_proba(images_to_input(images)), dtype=np.float64)
        if p.shape != (len(images), len(self.classes)):
            raise ModelError(f"predict_proba returned shape {p.shape} for {len(images)} images; expected "
                             f"({len(images)}, {len(self.classes)}) (one column per name in classes)")
        return p


def _check_meta(images: np.ndarray, meta, factor: Optional[str] = None) -> None:
    missing = [c for c in REQUIRED_COLUMNS if c not in meta.columns]
    if factor is not None and factor not in meta.columns:
        missing.append(factor)
    if missing:
        raise DataError(f"metadata: missing column(s) {missing}; need {list(REQUIRED_COLUMNS)} and the factors")
    images = np.asarray(images) if not hasattr(images, "shape") else images
    if images.ndim != 4 or images.shape[-1] != 3 or images.dtype != np.uint8:
        raise DataError(f"images: expected uint8 (n, H, W, 3), got {images.dtype} {tuple(images.shape)}")
    if len(images) != len(meta):
        raise DataError(f"images ({len(images)}) and metadata ({len(meta)} rows) differ in length")


def _params(params: Any) -> ExamineParams:
    """``params`` as :class:`ExamineParams` (a dict of the ``examine`` section is validated)."""
    if isinstance(params, ExamineParams):
        return params
    from pydantic import ValidationError

    try:
        return ExamineParams.model_validate(params.model_dump() if hasattr(params, "model_dump") else dict(params))
    except ValidationError as exc:
        raise ConfigError(f"examine params are not valid: {exc}") from None


def _check_space(space) -> None:
    for k in list(space.fixed) + list(space.searched):
        if k not in space.bounds:
            raise ConfigError(f"space: factor {k!r} has no bounds")


def _model(clf: Any, classes: Sequence[str]) -> _Model:
    if not callable(getattr(clf, "predict_proba", None)):
        raise ModelError(f"clf: {type(clf).__name__} has no predict_proba")
    classes = [str(c) for c in classes]
    if len(set(classes)) != len(classes):
        raise ConfigError(f"classes: names must be unique, got {classes}")
    n = getattr(clf, "n_classes", None)
    if n is not None and int(n) != len(classes):
        raise ConfigError(f"classes: the classifier has {n} outputs but {len(classes)} class names were given")
    return _Model(clf=clf, classes=classes)


def class_order(meta) -> List[str]:
    """Class names ordered by their integer label."""
    pairs = meta[["label", "class"]].drop_duplicates().sort_values("label")
    if pairs["label"].duplicated().any() or pairs["class"].duplicated().any():
        raise DataError("metadata: 'label' and 'class' are not one-to-one")
    labels = pairs["label"].to_numpy()
    if not np.array_equal(labels, np.arange(len(labels))):
        raise DataError(f"metadata 'label': expected 0..k-1, got {labels.tolist()}")
    return [str(c) for c in pairs["class"]]


def _unseen(meta):
    return meta[meta["split"].astype(str) != "train"]


def select_instances(clf: Any, classes: Sequence[str], images: np.ndarray, meta,
                     examined: Optional[Sequence[str]] = None) -> Dict[str, int]:
    """For each examined class, the unseen instance (``split != "train"``) with the highest mean true-class
    probability (paper Sec. 4.1: "the validation instance the model is most sure of"); ties go to the lower id.

    Parameters
    ----------
    clf : classifier with ``predict_proba`` on [0, 1] images ``(n, 3, H, W)``
    classes : list of str
        Scene class name of each output of ``clf``.
    images, meta :
        The rendered data set and its metadata (``class``, ``instance``, ``split``).
    examined : list of str, optional
        The classes to choose for; default every name in ``classes`` that has an unseen instance.
    """
    m = clf if isinstance(clf, _Model) else _model(clf, classes)
    unseen = _unseen(meta)
    if len(unseen) == 0:
        raise DataError("metadata: no rows with split != 'train' to choose the examined instances from")
    if examined is None:
        examined = [c for c in m.classes if c in set(unseen["class"].astype(str))]
    rows = unseen[unseen["class"].astype(str).isin(list(examined))]
    pos = meta.index.get_indexer(rows.index)
    p_all = m.proba(images[pos]) if len(pos) else np.zeros((0, len(m.classes)))
    cols = np.array([m.classes.index(c) for c in rows["class"].astype(str)], dtype=np.int64)
    p = p_all[np.arange(len(pos)), cols] if len(pos) else np.zeros(0)
    df = rows[["class", "instance"]].assign(p=p, **{"class": rows["class"].astype(str)})
    df = df.groupby(["class", "instance"])["p"].mean().reset_index()
    out = {}
    for c in examined:
        d = df[df["class"] == c]
        if len(d) == 0:
            raise DataError(f"metadata: class {c!r} has no unseen instance (split != 'train') to examine")
        out[c] = int(d.sort_values(["p", "instance"], ascending=[False, True]).iloc[0]["instance"])
    return out


# ----------------------------------------------------------------------------------------------------------------
# examination sessions
# ----------------------------------------------------------------------------------------------------------------
@dataclass
class _Session:
    group: str  # "main", "main_t0", "order", "strength", "m_study", "m_study_t0", "artificial"
    model: str
    examiner_name: str
    cls: str
    label: int  # the true class's output index in the model
    instance: int
    sun: Dict[str, float]
    examiner: Any
    T: int
    batch: int
    tail: int
    it: int = 0
    probs: List[np.ndarray] = field(default_factory=list)  # one array per iteration
    params: List[List[dict]] = field(default_factory=list)
    tail_images: Any = None
    tail_probs: Any = None
    tail_pred: Any = None
    tail_params: Any = None
    worst: Optional[Tuple[float, dict, np.ndarray]] = None  # (p_true, params, image)
    worst_pred: Tuple[int, float] = (-1, float("nan"))  # (predicted output, its probability) at ``worst``

    def __post_init__(self):
        self.tail_images = collections.deque(maxlen=self.tail)
        self.tail_probs = collections.deque(maxlen=self.tail)
        self.tail_pred = collections.deque(maxlen=self.tail)
        self.tail_params = collections.deque(maxlen=self.tail)

    @property
    def active(self) -> bool:
        return self.it < self.T

    def curve(self) -> np.ndarray:
        return np.array([p.mean() for p in self.probs])

    def at(self, t: int, window: int) -> float:
        """Mean probability of the queries of iterations (t - window, t] (1-based)."""
        seg = self.probs[max(0, t - window):t]
        return float(np.concatenate(seg).mean())


def _searched_bounds(space) -> Dict[str, Tuple[float, float]]:
    b = space.bounds
    return {k: tuple(b[k]) for k in space.searched}


def _examiner_options(name: str, params: ExamineParams) -> Tuple[dict, int]:
    if name == "rl":
        return params.rl.model_dump(), params.rl.batch_size
    if name == "bo":
        return params.bo.model_dump(), 1
    return {}, params.random_batch


def _run(sessions: List[_Session], renderer, models: Mapping[str, _Model], chunk: int,
         progress: Optional[Progress]) -> None:
    total = sum(s.T * s.batch for s in sessions)
    done = 0
    while True:
        active = [s for s in sessions if s.active]
        if not active:
            break
        pending, scenes, owner = [], [], []
        for j, s in enumerate(active):
            q = s.examiner.suggest(s.batch)
            pending.append(q)
            scenes.extend({**s.sun, **p, "class": s.cls, "instance": s.instance} for p in q)
            owner.extend([j] * len(q))
        imgs = np.concatenate([np.asarray(renderer.render(scenes[a:a + chunk])) for a in range(0, len(scenes), chunk)])
        if imgs.shape[0] != len(scenes) or imgs.ndim != 4:
            raise DataError(f"renderer returned shape {imgs.shape} for {len(scenes)} scenes; need (n, H, W, 3)")
        owner_a = np.asarray(owner)
        probs = np.empty(len(scenes))
        preds = np.empty(len(scenes), dtype=int)
        confs = np.empty(len(scenes))
        for mname in sorted({s.model for s in active}):
            js = [j for j, s in enumerate(active) if s.model == mname]
            sel = np.flatnonzero(np.isin(owner_a, js))
            lab = np.array([active[j].label for j in owner_a[sel]])
            pp = models[mname].proba(imgs[sel])
            probs[sel] = pp[np.arange(len(sel)), lab]
            preds[sel] = pp.argmax(1)
            confs[sel] = pp.max(1)
        for j, s in enumerate(active):
            sel = np.flatnonzero(owner_a == j)
            p = probs[sel]
            s.examiner.observe(pending[j], p)
            s.probs.append(p)
            s.params.append(pending[j])
            s.it += 1
            for k, i in enumerate(sel):
                s.tail_images.append(imgs[i])
                s.tail_probs.append(p[k])
                s.tail_pred.append(preds[i])
                s.tail_params.append(pending[j][k])
            k = int(np.argmin(p)) if s.examiner.mode == "weakness" else int(np.argmax(p))
            better = s.worst is None or (p[k] < s.worst[0] if s.examiner.mode == "weakness" else p[k] > s.worst[0])
            if better:
                s.worst = (float(p[k]), dict(pending[j][k]), imgs[sel[k]])
                s.worst_pred = (int(preds[sel[k]]), float(confs[sel[k]]))
        done += len(scenes)
        if progress is not None:
            progress("examine", done, total)


def _make_sessions(params: ExamineParams, space, models: Mapping[str, _Model], instances, classes_of, group, model,
                   examiners, T, *, mode="weakness", order=None, sun_key=0, tail=None) -> List[_Session]:
    bounds = _searched_bounds(space)
    fixed = list(space.fixed)
    mi = sorted(models).index(model)
    tail = params.tail if tail is None else tail
    out = []
    for ci, c in enumerate(classes_of):
        label = models[model].classes.index(c)
        rng = np.random.default_rng([params.seed, mi, ci, sun_key])
        sun = {k: float(space.bounds[k][0] + rng.random() * (space.bounds[k][1] - space.bounds[k][0])) for k in fixed}
        for ei, name in enumerate(examiners):
            opts, batch = _examiner_options(name, params)
            if order is not None and name == "rl":
                opts = {**opts, "order": order}
            ex = make_examiner(name, bounds=bounds, seed=int(params.seed * 7919 + mi * 1009 + ci * 101 + ei),
                               mode=mode, **opts)
            out.append(_Session(group=group, model=model, examiner_name=name, cls=c, label=label,
                                instance=instances[model][c], sun=sun, examiner=ex, T=T, batch=batch, tail=tail))
        # the T = 0 protocol: n_random uniform scenes, same sun (Table 2's T = 0, Fig. 3's 50 random)
        ex = make_examiner("random", bounds=bounds, seed=int(params.seed * 7919 + mi * 1009 + ci * 101 + 99))
        out.append(_Session(group=f"{group}_t0", model=model, examiner_name="t0", cls=c, label=label,
                            instance=instances[model][c], sun=sun, examiner=ex, T=1, batch=params.n_random,
                            tail=params.n_random))
    return out


def _group(sessions, group, model=None, examiner=None) -> List[_Session]:
    return [s for s in sessions if s.group == group and (model is None or s.model == model)
            and (examiner is None or s.examiner_name == examiner)]


def _examined_classes(wanted: Optional[Sequence[str]], model: _Model, meta) -> List[str]:
    """``wanted`` (checked) or every class of the model with an unseen instance in the scene data, model order."""
    in_scene = set(_unseen(meta)["class"].astype(str))
    if wanted is None:
        classes = [c for c in model.classes if c in in_scene]
        if not classes:
            raise DataError(f"no class of the model ({model.classes}) has an unseen instance (split != 'train') "
                            f"in the scene data (classes there: {sorted(in_scene)})")
        return classes
    unknown = [c for c in wanted if c not in model.classes]
    if unknown:
        raise ConfigError(f"classes: unknown {unknown}; the model knows {model.classes}")
    absent = [c for c in wanted if c not in in_scene]
    if absent:
        raise DataError(f"classes: {absent} have no unseen instance (split != 'train') in the scene data")
    return list(wanted)


# ----------------------------------------------------------------------------------------------------------------
# entry point 1: the model under audit
# ----------------------------------------------------------------------------------------------------------------
def examine_target(renderer, space, clf: Any, classes: Sequence[str], images: np.ndarray, meta,
                   params: ExamineParams, *, progress: Optional[Progress] = None) -> Tuple[StageResult, Any]:
    """Examine one classifier per class with every examiner of ``params.examiners`` (paper Table 2, Fig. 1-3).

    Parameters
    ----------
    renderer : object with ``render(list of dict) -> uint8 (n, H, W, 3)``
        ``weakspot.scene.BlenderRenderer`` (or ``weakspot.examine.fake.FakeRenderer`` for tests).
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
    result : StageResult
        ``metrics``: ``{examiner: {"T0": p, "T100": p, ...}, ..., "per_class": {class: {examiner: {"T0": p,
        "<last T>": p, "min_found": p}}}}``; tables ``table2``, ``per_class``, ``worst``; figures ``curves``,
        ``per_class``, ``tsne``, ``worst``.
    findings : pandas.DataFrame
        One row per examined class, most severe first, columns :data:`FINDING_COLUMNS`.
    """
    params = _params(params)
    _check_meta(images, meta)
    _check_space(space)
    model = _model(clf, classes)
    examined = _examined_classes(params.classes, model, meta)
    models = {TARGET: model}
    instances = {TARGET: select_instances(model, model.classes, images, meta, examined)}
    sessions = _make_sessions(params, space, models, instances, examined, "main", TARGET, params.examiners, params.T)
    _run(sessions, renderer, models, params.render_chunk, progress)
    return _assemble_target(sessions, params, space, model), _findings(sessions, params, space, model)


def _fmt(v: float) -> str:
    return f"{v:.3g}" if abs(v) < 1000 else f"{v:.0f}"


def _condition_summary(query: Mapping[str, float], space, k: int = 3) -> str:
    """The ``k`` searched factors of ``query`` farthest from the middle of their range, as ``name=value``."""
    dev = []
    for name in space.searched:
        lo, hi = space.bounds[name]
        dev.append((abs((float(query[name]) - lo) / (hi - lo) - 0.5), name))
    top = [n for _, n in sorted(dev, key=lambda t: (-t[0], t[1]))[:k]]
    return ", ".join(f"{n}={_fmt(float(query[n]))}" for n in top)


def _findings(sessions: List[_Session], params: ExamineParams, space, model: _Model):
    """One finding per examined class: the worst query any searching examiner (BO, RL) reached."""
    import pandas as pd

    searching = [e for e in params.examiners if e != "random"] or list(params.examiners)
    order = list(space.fixed) + list(space.searched)
    rows = []
    for c in dict.fromkeys(s.cls for s in _group(sessions, "main")):
        ss = [s for s in _group(sessions, "main") if s.cls == c and s.examiner_name in searching]
        s = min(ss, key=lambda s: (s.worst[0], searching.index(s.examiner_name)))
        p_true, query, image = s.worst
        pred, conf = s.worst_pred
        factors = {k: round(float(v), 4) for k, v in sorted({**s.sun, **query}.items(),
                                                              key=lambda kv: order.index(kv[0])
                                                              if kv[0] in order else len(order))}
        rows.append({
            "weak_spot": f"class {c} under rendering conditions {_condition_summary(query, space)}",
            "kind": "class_condition",
            "severity": float(np.clip(1.0 - p_true, 0.0, 1.0)),
            "severity_meaning": (f"1 - the lowest true-class probability that the {'/'.join(searching)} "
                                 f"examiner(s) reached in T = {params.T} iterations on an unseen {c} instance "
                                 f"({s.instance}) (1: the model rules out the true class)"),
            "label": c,
            "prediction": model.classes[pred],
            "confidence": float(conf),
            "factors": json.dumps(factors),
            "image": to_png(np.asarray(image, dtype=np.uint8)),
        })
    for s in _group(sessions, "main_t0"):  # a class the model never learnt is a weak spot in itself
        t0 = float(s.probs[0].mean())
        if t0 < 0.5:
            rows.append({
                "weak_spot": f"class {s.cls} not learnt: random scenes of an unseen instance get a true-class "
                             f"probability of {t0:.2f} on average",
                "kind": "unlearnt_class", "severity": float(1.0 - t0),
                "severity_meaning": ("1 - T0, the mean true-class probability of random scenes of the examined "
                                     "unseen instance (above 0.5: the model has not learnt the class)"),
                "label": s.cls, "prediction": "", "confidence": float("nan"),
            })
    df = pd.DataFrame(rows, columns=list(FINDING_COLUMNS))
    return df.sort_values("severity", ascending=False, kind="stable").reset_index(drop=True)


def _assemble_target(sessions: List[_Session], params: ExamineParams, space, model: _Model) -> StageResult:
    import pandas as pd

    names = params.names()
    last = names[-1]
    metrics: Dict[str, Any] = {}
    rows, class_rows, worst_rows = [], [], []
    t0 = {s.cls: float(s.probs[0].mean()) for s in _group(sessions, "main_t0")}
    per_class: Dict[str, Dict[str, Any]] = {c: {} for c in t0}
    for e in params.examiners:
        ss = _group(sessions, "main", examiner=e)
        vals = {nm: float(np.mean([t0[s.cls] if cp == 0 else s.at(cp, params.window) for s in ss]))
                for cp, nm in zip(params.checkpoints, names)}
        metrics[e] = vals
        rows.append({"examiner": e, **vals})
        for s in ss:
            row = {"T0": t0[s.cls], last: s.at(params.T, params.window),
                   "min_found": float(np.concatenate(s.probs).min())}
            class_rows.append({"examiner": e, "class": s.cls, "instance": s.instance, **row})
            ls = s.examiner.length_scales() if hasattr(s.examiner, "length_scales") else None
            if ls is not None:  # BO's GP (metrics only): a collapsed length scale means it was random search
                row = {**row, "gp_length_scale_min": float(ls.min())}
            per_class[s.cls][e] = row
            worst_rows.append({"examiner": e, "class": s.cls, "instance": s.instance, "p_true": s.worst[0],
                               "prediction": model.classes[s.worst_pred[0]],
                               **{k: round(v, 3) for k, v in s.worst[1].items()},
                               **{k: round(v, 3) for k, v in s.sun.items()}})
    metrics["per_class"] = per_class
    # equal cost: an RL iteration renders a batch, a BO iteration one scene; compare at equal numbers of renders
    q = {e: params.queries_per_iteration(e) for e in params.examiners}
    metrics["renders"] = {e: {nm: int(cp * q[e]) for cp, nm in zip(params.checkpoints, names)} for e in params.examiners}
    grid = [int(cp * min(q.values())) for cp in params.checkpoints if cp > 0]
    w = max(q.values())  # every value is a mean over the same number of renders
    metrics["at_equal_renders"] = {e: {f"R{r}": _at_renders(_group(sessions, "main", examiner=e), r, w) for r in grid}
                                   for e in params.examiners}
    t0_low = sorted(c for c, v in t0.items() if v < 0.5)
    metrics["classes_t0_below_half"] = t0_low
    tables = {"table2": pd.DataFrame(rows), "per_class": pd.DataFrame(class_rows),
              "worst": pd.DataFrame(worst_rows).sort_values(["examiner", "p_true"]).reset_index(drop=True),
              "equal_renders": pd.DataFrame([{"examiner": e, "renders per iteration": q[e],
                                              **{f"after {r} renders": v for r, v in
                                                 zip(grid, metrics["at_equal_renders"][e].values())}}
                                             for e in params.examiners]),
              "t0_per_class": pd.DataFrame([{"class": c, "T0": v, "learnt": v >= 0.5} for c, v in t0.items()]),
              "settings": _settings_table(params)}
    figures = {"curves": _fig_curves(sessions, params), "curves_renders": _fig_curves(sessions, params, by_renders=True),
               "per_class": _fig_per_class(tables["per_class"], last),
               "tsne": _fig_tsne(sessions, params), "worst": _fig_worst(sessions, params)}
    its = ", ".join(f"{e} {params.T * q[e]}" for e in params.examiners)
    items = [
        {"table": "settings", "caption": "What ran against the paper's settings (Sec. 4.1)."},
        {"table": "t0_per_class", "caption": "T0 per class: the mean true-class probability of random scenes of the "
                                             "examined instance. Below 0.5 the model never learnt the class: a "
                                             "finding in itself, not an examiner result."},
        {"table": "table2", "caption": f"Mean true-class probability under examination after T iterations (the "
                                       f"layout of the paper's Table 2; here T = {params.T} iterations ran, renders "
                                       f"per examiner: {its}). T0 is the standard protocol (random scenes)."},
        {"table": "equal_renders", "caption": f"At equal cost: mean true-class probability of the last {w} renders "
                                              "after the same number of renders for every examiner."},
        {"figure": "curves_renders", "caption": "Mean true-class probability against the number of renders (model "
                                                "queries), class-averaged: the examiners at equal cost."},
        {"figure": "curves", "caption": "Mean true-class probability per iteration, class-averaged (paper Fig. 1's "
                                        "layout; an RL iteration renders a batch, a BO iteration one scene)."},
        {"figure": "per_class", "caption": "Per-class true-class probability at T0 and at the last T (paper Fig. 2)."},
        {"figure": "tsne", "caption": "t-SNE of random scenes (circles) and the last examined scenes (triangles); "
                                      "opaque = misclassified (paper Fig. 3)."},
        {"figure": "worst", "caption": "The worst scenes found, with their true-class probability."},
        {"table": "worst", "caption": "The worst scene found per examiner and class, with its factor values."},
    ]
    differ = [r for r in tables["settings"].to_dict("records") if r["differs"]]
    eq = grid[-1] if grid else 0
    summary = [
        f"Each class is examined on the unseen instance the model is most sure of; sun angles are fixed at "
        f"random, the other {len(space.searched)} factors are searched for T = {params.T} iterations "
        f"(RL: batches of {q.get('rl', params.rl.batch_size)} renders, BO: one render each, random: "
        f"{params.random_batch} each; renders in all: {its}).",
        "Mean true-class probability " + f"{names[0]} -> {last} (iterations): " + ", ".join(
            f"{e}: {metrics[e][names[0]]:.2f} -> {metrics[e][last]:.2f}" for e in params.examiners) + "."
        + (f" At equal cost, after {eq} renders each: " + ", ".join(
            f"{e} {metrics['at_equal_renders'][e][f'R{eq}']:.2f}" for e in params.examiners) + "." if eq else ""),
        (f"T0 below 0.5 on {', '.join(t0_low)}: the model never learnt these classes well on unseen instances; the "
         "examiners' drop on them says little." if t0_low else "Every examined class has T0 of at least 0.5."),
        ("Settings that differ from the paper's: " + "; ".join(f"{r['setting']} {r['ran']} (paper: {r['paper']})"
                                                               for r in differ) + "."
         if differ else "Every setting is the paper's."),
    ]
    t0_mean = float(np.mean(list(t0.values())))
    for e in params.examiners:  # an examiner that found weak scenes but did not stay in them, said as it is
        if e == "random":
            continue
        mins = [per_class[c][e]["min_found"] for c in per_class if e in per_class[c]]
        if metrics[e][last] >= t0_mean / 2 and mins and float(np.median(mins)) < t0_mean / 2:
            summary.append(
                f"{e} ends at {metrics[e][last]:.2f}, not below half of T0 ({t0_mean / 2:.2f}), although it found "
                f"scenes at a median {float(np.median(mins)):.2f} per class: its last queries did not stay in the "
                f"weak regions it found.")
    lss = {c: per_class[c]["bo"]["gp_length_scale_min"] for c in per_class
           if "gp_length_scale_min" in per_class[c].get("bo", {})}
    collapsed = sorted(c for c, v in lss.items() if v < 0.01)
    if collapsed:
        summary.append(
            f"BO's GP collapsed on {', '.join(collapsed)} (fitted length scale below 0.01 of the box, smallest "
            f"{min(lss[c] for c in collapsed):.1e}): its posterior is the prior mean everywhere but at the queried "
            "scenes, so UCB picked among random candidates and BO was random search there. A floor on the length "
            "scale (bo.min_length_scale), one per factor (bo.ard) and the log-odds as the GP's target "
            "(bo.objective: logit) prevent it.")
    worst = tables["worst"].sort_values("p_true").iloc[0]
    headline = [f"Mean true-class probability of random scenes (T0) {t0_mean:.2f}; after T = {params.T} iterations "
                + ", ".join(f"{e} {metrics[e][last]:.2f}" for e in params.examiners)
                + f" (half of T0: {t0_mean / 2:.2f}). Worst: class {worst['class']} down to {worst['p_true']:.2f} "
                f"(random scenes: {t0[worst['class']]:.2f})"
                + (f"; at {eq} renders each: " + ", ".join(f"{e} {metrics['at_equal_renders'][e][f'R{eq}']:.2f}"
                                                          for e in params.examiners) if eq else "")
                + (f". Never learnt (T0 < 0.5): {', '.join(t0_low)}." if t0_low else ".")]
    return StageResult(metrics=metrics, tables=tables, figures=figures,
                       title="Adversarial examiner: worst rendering conditions per class", summary=summary,
                       items=items, headline=headline).check()


# ----------------------------------------------------------------------------------------------------------------
# entry point 2: the study (models of its own)
# ----------------------------------------------------------------------------------------------------------------
def run_study(renderer, space, images: np.ndarray, meta, params: ExamineParams, *, device: Any = "auto",
              progress: Optional[Progress] = None, full_model: Optional[Tuple[Any, Sequence[str], str]] = None
              ) -> StageResult:
    """Train the study's models and run the paper's Sec. 4.3 (Table 3), 4.4 (artificial weakness), 4.5 (factor
    order) and 4.6 (strength) experiments on them.

    The models are ``params.study.arch`` from ``weakspot.models.ARCHS``, trained with
    ``weakspot.models.train_torch_classifier`` (``study.epochs``, ``study.lr`` or the paper's, ``study.batch_size``,
    ``study.augment``) on the training split (``split == "train"``), with the labels of ``meta``:

    * ``<arch>``: all training images (for the factor order check and strength mode, and m >= the views per
      instance);
    * ``<arch>_m<m>``: the first m views of each training instance (``study.m_study.values``; Sec. 4.3);
    * ``<arch>_limited``: a training set *rendered* with ``artificial_weakness.factor`` drawn inside ``train_range``
      (Sec. 4.4: the range is limited "during training"): the same rows (class, instance, view) as the training
      split, every factor drawn afresh from ``space`` with that one factor's range limited, so the set has the
      same size, instances and views (see :func:`render_limited_training_set`).

    Parameters
    ----------
    renderer, space, images, meta, params :
        As :func:`examine_target`.
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
    StageResult
        ``metrics``: ``{"m_study": {examiner: {"m=1": p, ...}}, "artificial_weakness": {examiner:
        {"frac_extreme_elevation": f}}, "order_check": {"max_abs_diff": d}, "strength": {"best_found": p,
        "T0": p}}`` (each when enabled), the tables and figures of those experiments and ``models`` (the trained
        models' sizes and accuracies).
    """
    import pandas as pd

    params = _params(params)
    st = params.study
    aw, ms = st.artificial_weakness, st.m_study
    _check_meta(images, meta, aw.factor if aw.enabled else None)
    _check_space(space)
    if not (aw.enabled or ms.enabled or st.order_check or st.strength):
        raise ConfigError("study: every experiment is disabled (m_study, artificial_weakness, order_check, strength)")
    all_classes = class_order(meta)
    train = meta[meta["split"].astype(str) == "train"]
    if len(train) == 0:
        raise DataError("metadata: no rows with split == 'train' to train the study's models on")
    trained: Dict[str, _Model] = {}
    info_rows: List[dict] = []
    unseen = _unseen(meta)
    unseen_pos = meta.index.get_indexer(unseen.index)

    def add(name: str, model: _Model, role: str, n_train: int) -> None:
        trained[name] = model
        row = {"model": name, "role": role, "n_train": int(n_train)}
        if len(unseen_pos):  # accuracy on random views of the unseen instances (the standard protocol)
            pv = model.proba(images[unseen_pos])
            lab = np.array([model.classes.index(c) for c in unseen["class"].astype(str)])
            row["unseen_accuracy"] = float((pv.argmax(1) == lab).mean())
            row["unseen_true_class_proba"] = float(pv[np.arange(len(lab)), lab].mean())
        info_rows.append(row)

    def fit(name: str, imgs: np.ndarray, labels: np.ndarray, seed: int, role: str) -> None:
        clf = train_study_model(imgs, labels, len(all_classes), params, seed=seed, device=device, name=name,
                                progress=progress)
        add(name, _Model(clf=clf, classes=all_classes), role, len(labels))

    def fit_rows(name: str, rows, seed: int, role: str) -> None:
        pos = meta.index.get_indexer(rows.index)
        fit(name, images[pos], meta["label"].to_numpy()[pos], seed, role)

    arch = st.arch
    view = train["view"] if "view" in train.columns else train.groupby(["class", "instance"]).cumcount()
    m_max = int(view.max()) + 1
    need_full = st.order_check or st.strength or (ms.enabled and any(m >= m_max for m in ms.values))
    if need_full and full_model is not None:
        clf, names, source = full_model
        add(arch, _Model(clf=clf, classes=list(names)), f"full: the audited model of target {source!r} "
            "(not retrained)", len(train))
    elif need_full:
        fit_rows(arch, train, params.seed, "full")
    if ms.enabled:
        for m in ms.values:
            name = f"{arch}_m{m}"
            if m >= m_max:  # every view: the full model
                trained[name] = trained[arch]
                info_rows.append({**next(r for r in info_rows if r["model"] == arch), "model": name,
                                  "role": "m_study"})
                continue
            fit_rows(name, train[view.to_numpy() < m], params.seed + 100 + m, "m_study")
    if aw.enabled:
        lim_images, lim_meta = render_limited_training_set(renderer, space, train, aw.factor, aw.train_range,
                                                           seed=params.seed, chunk=params.render_chunk,
                                                           progress=progress)
        fit(f"{arch}_limited", lim_images, lim_meta["label"].to_numpy(), params.seed + 200, "artificial")

    base = trained[next(iter(trained))]
    classes = _examined_classes(params.classes, base, meta)
    try:  # the order check's and strength mode's classes
        own = _examined_classes(st.classes, base, meta) if st.classes else classes
    except (ConfigError, DataError) as e:
        raise type(e)(f"study.{e}") from None
    wanted = (set(own) | set((ms.classes or classes) if ms.enabled else [])
              | set((aw.classes or classes) if aw.enabled else []))
    _examined_classes(sorted(wanted), base, meta)  # checks the experiments' own class lists
    instances = {n: select_instances(trained[n], all_classes, images, meta, sorted(wanted)) for n in trained}

    sessions: List[_Session] = []
    if st.order_check or st.strength:
        sessions += _make_sessions(params, space, trained, instances, own, "main", arch,
                                   ["rl"] if st.order_check else [], st.T)
    if st.order_check:
        from weakspot.scene.space import RL_ORDER_VIEW_FIRST

        # Sec. 4.5 / Fig. 6(b): viewpoint factors first; the same examiner seeds as the default-order sessions
        order = [k for k in RL_ORDER_VIEW_FIRST if k in space.searched]
        sessions += [s for s in _make_sessions(params, space, trained, instances, own, "order", arch, ["rl"],
                                               st.T, order=order) if s.examiner_name != "t0"]
    if st.strength:
        sessions += [s for s in _make_sessions(params, space, trained, instances, own, "strength", arch,
                                               [st.strength_examiner], st.T, mode="strength")
                     if s.examiner_name != "t0"]
    if ms.enabled:
        for m in ms.values:
            sessions += _make_sessions(params, space, trained, instances, ms.classes or classes, "m_study",
                                       f"{arch}_m{m}", ms.examiners, ms.T)
    if aw.enabled:  # with its T = 0 sessions: the random set of the Fig. 4 t-SNE
        sessions += _make_sessions(params, space, trained, instances, aw.classes or classes, "artificial",
                                   f"{arch}_limited", aw.examiners, aw.T, tail=aw.tail)
    _run(sessions, renderer, trained, params.render_chunk, progress)
    return _assemble_study(sessions, params, space, pd.DataFrame(info_rows))


def render_limited_training_set(renderer, space, train, factor: str, train_range: Sequence[float], *, seed: int = 0,
                                chunk: int = 512, progress: Optional[Progress] = None):
    """Render the training set of the artificial-weakness model (paper Sec. 4.4): one image per row of ``train``
    (same class, instance and view), every factor drawn uniformly from ``space`` with ``factor`` limited to
    ``train_range``; returns ``(images, table)`` with the drawn factors in the table.

    The draws are seeded per (class, instance, view) by ``seed``, so the set is the same on every run and does not
    depend on the row order. A range that does not lie inside the factor's bounds is a ConfigError.
    """
    import zlib

    import pandas as pd

    from weakspot.scene.space import FACTORS, SceneSpace

    lo, hi = (float(v) for v in train_range)
    full_lo, full_hi = space.bounds[factor]
    if not (full_lo <= lo < hi <= full_hi):
        raise ConfigError(f"artificial_weakness.train_range: [{lo:g}, {hi:g}] must lie inside {factor}'s bounds "
                          f"[{full_lo:g}, {full_hi:g}]")
    limited = SceneSpace({**space.bounds, factor: (lo, hi)})
    rows = train[["class", "label", "instance"]].copy()
    rows["class"] = rows["class"].astype(str)
    view = train["view"].to_numpy() if "view" in train.columns else train.groupby(["class", "instance"]).cumcount()
    rows["view"] = np.asarray(view, dtype=np.int64)
    drawn = []
    for c, i, v in zip(rows["class"], rows["instance"], rows["view"]):
        rng = np.random.default_rng([int(seed), zlib.crc32(f"limited/{factor}/{c}".encode()), int(i), int(v)])
        drawn.append(limited.sample(rng, 1)[0])
    scenes = [{**d, "class": c, "instance": int(i)} for d, c, i in zip(drawn, rows["class"], rows["instance"])]
    out = []
    for a in range(0, len(scenes), chunk):
        out.append(np.asarray(renderer.render(scenes[a:a + chunk])))
        if progress is not None:
            progress(f"render the training set with {factor} in [{lo:g}, {hi:g}]", min(a + chunk, len(scenes)),
                     len(scenes))
    images = np.concatenate(out) if out else np.empty((0, 0, 0, 3), np.uint8)
    table = pd.concat([rows.reset_index(drop=True),
                       pd.DataFrame([[d[f] for f in FACTORS] for d in drawn], columns=list(FACTORS))], axis=1)
    return images, table


def train_study_model(images: np.ndarray, labels: np.ndarray, n_classes: int, params: ExamineParams, *, seed: int,
                      device: Any = "auto", name: Optional[str] = None, progress: Optional[Progress] = None):
    """Build ``params.study.arch`` (weights seeded by ``seed``) and train it on rendered uint8 images with
    ``train_torch_classifier``; returns a ``weakspot.models.TorchClassifier`` in eval mode."""
    import torch

    from weakspot.device import resolve_device
    from weakspot.models import ARCHS, TorchClassifier, train_torch_classifier

    params = _params(params)
    st = params.study
    name = name or st.arch
    x = images_to_input(images)
    labels = np.asarray(labels)
    if labels.shape != (len(x),) or (len(labels) and (labels.min() < 0 or labels.max() >= n_classes)):
        raise DataError(f"labels: expected {len(x)} class codes in [0, {n_classes}), got shape {labels.shape}")
    dev = resolve_device(device) if isinstance(device, str) else device
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(int(seed))
        module = ARCHS.get(st.arch)(tuple(x.shape[1:]), int(n_classes))

    cb = None
    if progress is not None:
        def cb(what: str, done: int, total: int) -> None:
            progress(f"train {name}: {what}", done, total)

    train_torch_classifier(module, x, labels.astype(np.int64), epochs=st.epochs, lr=st.learning_rate(),
                           batch_size=st.batch_size, seed=int(seed), device=dev, augment=st.augment,
                           lr_schedule=st.lr_schedule, progress=cb)
    return TorchClassifier(module, n_classes=int(n_classes), device=dev)


def _assemble_study(sessions: List[_Session], params: ExamineParams, space, models_table) -> StageResult:
    import pandas as pd

    st = params.study
    aw, ms = st.artificial_weakness, st.m_study
    metrics: Dict[str, Any] = {}
    tables: Dict[str, Any] = {"models": models_table}
    figures: Dict[str, Any] = {}
    items: List[Dict[str, str]] = [{"table": "models", "caption": f"The study's {st.arch} models: training images "
                                    "and accuracy on random views of the unseen instances."}]
    sched = "" if st.lr_schedule == "constant" else f", {st.lr_schedule}-annealed (the paper's is constant)"
    summary = [f"The study trains its own {st.arch} models ({st.epochs} epochs (paper: 40), Adam, lr "
               f"{st.learning_rate():g}{sched}) and examines them"
               + (f"; its full model is the audited model of target {st.full_model!r}, not retrained"
                  if st.full_model else "") + "."]
    if not ms.enabled:
        summary.append("Table 3 (training-set size m) is not run in this profile: it trains three more models "
                       "(profiles/paper.yaml runs it).")
    own = sorted({s.cls for s in sessions if s.group in ("order", "strength")})
    if own:
        summary.append(f"The factor order check and strength mode examine {', '.join(own)} for T = {st.T} "
                       f"iterations (paper: every class, T = 500).")
    if ms.enabled:
        mrows = []
        metrics["m_study"] = {}
        for e in ms.examiners:
            row = {"examiner": e}
            for m in ms.values:
                ss = _group(sessions, "m_study", f"{st.arch}_m{m}", e)
                row[f"m={m}"] = float(np.mean([s.at(s.T, params.window) for s in ss]))
            metrics["m_study"][e] = {k: v for k, v in row.items() if k != "examiner"}
            mrows.append(row)
        row = {"examiner": "T0 (random)"}
        for m in ms.values:
            row[f"m={m}"] = float(np.mean([s.probs[0].mean() for s in _group(sessions, "m_study_t0",
                                                                             f"{st.arch}_m{m}")]))
        metrics["m_study"]["T0"] = {k: v for k, v in row.items() if k != "examiner"}
        mrows.append(row)
        tables["table3"] = pd.DataFrame(mrows)
        items.append({"table": "table3", "caption": f"{st.arch} trained with m images per instance, examined for "
                                                    f"T = {ms.T} (paper Table 3)."})
    if aw.enabled:
        lo, hi = aw.train_range
        full_lo, full_hi = space.bounds[aw.factor]
        chance = 1.0 - (hi - lo) / (full_hi - full_lo)  # a uniform draw over the full range lands outside
        metrics["artificial_weakness"] = {"chance": chance}
        arows = []
        for e in aw.examiners:
            ss = _group(sessions, "artificial", examiner=e)
            vals = np.concatenate([[p[aw.factor] for p in s.tail_params] for s in ss])
            frac = float(np.mean((vals < lo) | (vals > hi)))
            metrics["artificial_weakness"][e] = {"frac_outside_train_range": frac}
            arows.append({"examiner": e, "last_queries": f"{aw.tail} per class x {len(ss)} classes",
                          "renders_per_class": aw.T * params.queries_per_iteration(e),
                          "frac_outside_train_range": frac,
                          "p_true_last": float(np.mean([s.at(s.T, params.window) for s in ss]))})
        t0s = _group(sessions, "artificial_t0")
        arows.append({"examiner": "chance (uniform scenes)", "last_queries": "a uniform draw", "renders_per_class": 0,
                      "frac_outside_train_range": chance,
                      "p_true_last": float(np.mean([s.probs[0].mean() for s in t0s])) if t0s else float("nan")})
        tables["artificial_weakness"] = pd.DataFrame(arows)
        figures["artificial_weakness"] = _fig_artificial(sessions, aw)
        cls = _aw_tsne_class(sessions, aw)
        if cls is not None:
            figures["artificial_tsne"] = _fig_artificial_tsne(sessions, aw, cls, params.seed)
        items += [{"table": "artificial_weakness", "caption": f"Model trained on a set rendered with {aw.factor} "
                   f"limited to [{lo:g}, {hi:g}] (paper Sec. 4.4; same size, instances and views as the full set), "
                   f"examined for T = {aw.T} iterations: share of each examiner's last {aw.tail} queries outside "
                   f"that range, next to chance ({chance:.2f}: a uniform scene; p_true_last there is T0)."},
                  {"figure": "artificial_weakness", "caption": f"{aw.factor} of the last {aw.tail} queries."}]
        if cls is not None:
            items.append({"figure": "artificial_tsne", "caption": f"t-SNE of {cls} images (paper Fig. 4): "
                          f"{params.n_random} uniform scenes (circles) and each examiner's last {aw.tail} (triangles); "
                          f"orange: {aw.factor} outside the training range; opaque: misclassified."})
        shares = ", ".join(f"{r['examiner']} {r['frac_outside_train_range']:.2f}" for r in arows[:-1])
        summary.append(f"Planted weakness (Sec. 4.4, training views rendered with {aw.factor} in [{lo:g}, {hi:g}]): "
                       f"share of the last {aw.tail} queries outside that range: {shares}; chance {chance:.2f}.")
    if st.order_check:
        tables["factor_order"], figures["factor_order"] = _order_check(sessions, params, space)
        fo = tables["factor_order"]
        metrics["order_check"] = {"max_abs_diff": float(fo.loc[fo["factor"] != "p_true_last", "abs_diff"].max())}
        items += [{"table": "factor_order", "caption": "RL examiners with two factor orders (paper Sec. 4.5): "
                   "mean of each factor (scaled to [0, 1]) over the last queries, and the final probability."},
                  {"figure": "factor_order", "caption": "t-SNE of the last queries of both orders (paper Fig. 6)."}]
    if st.strength:
        ss = _group(sessions, "strength")
        t0 = {s.cls: float(s.probs[0].mean()) for s in _group(sessions, "main_t0")}
        tables["strength"] = pd.DataFrame([{"class": s.cls, "T0": t0[s.cls], "last": s.at(s.T, params.window),
                                            "best_found": s.worst[0]} for s in ss])
        metrics["strength"] = {"T0": float(tables["strength"]["T0"].mean()),
                               "best_found": float(tables["strength"]["best_found"].mean())}
        figures["strength"] = _fig_strength(ss, params)
        items += [{"table": "strength", "caption": "Strength mode (paper Sec. 4.6): the examiner maximises the "
                                                   "true-class probability."},
                  {"figure": "strength", "caption": "Strength mode curves and the best scenes (paper Fig. 5)."}]
    return StageResult(metrics=metrics, tables=tables, figures=figures,
                       title="Adversarial examiner study: " + ", ".join(
                           n for n, on in (("training-set size", ms.enabled), ("planted weakness", aw.enabled),
                                           ("factor order", st.order_check), ("strength mode", st.strength)) if on),
                       summary=summary, items=items).check()



# ----------------------------------------------------------------------------------------------------------------
# figures
# ----------------------------------------------------------------------------------------------------------------
def _plt():
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    return plt


def _fig_curves(sessions, params, by_renders: bool = False):
    """Class-averaged true-class probability per iteration, or against renders (each examiner at its own cost)."""
    plt = _plt()
    fig, ax = plt.subplots(figsize=(5, 3.5))
    t0 = np.mean([s.probs[0].mean() for s in _group(sessions, "main_t0")])
    for e in params.examiners:
        c = np.mean([s.curve() for s in _group(sessions, "main", examiner=e)], axis=0)
        q = params.queries_per_iteration(e) if by_renders else 1
        ax.plot(q * np.arange(1, len(c) + 1), c, label=f"{e} ({q} per iteration)" if by_renders else e)
    ax.axhline(t0, color="grey", ls="--", label="T0 (random)")
    if by_renders:
        ax.set_xscale("log")
    ax.set(xlabel="renders (model queries)" if by_renders else "iteration", ylabel="true-class probability",
           ylim=(0, 1))
    ax.legend(fontsize=7)
    fig.tight_layout()
    return fig


def _at_renders(sessions, r: int, w: int) -> float:
    """Mean over sessions of the true-class probability of renders (r - w, r] (1-based, in query order)."""
    vals = []
    for s in sessions:
        flat = np.concatenate(s.probs) if s.probs else np.zeros(0)
        seg = flat[max(0, r - w):r]
        if len(seg):
            vals.append(float(seg.mean()))
    return float(np.mean(vals)) if vals else float("nan")


def _settings_table(params):
    """What ran against the paper's settings (seeds/000 Sec. 4.1), one row per setting the paper gives."""
    import pandas as pd

    from weakspot.examine.config import PAPER_SETTINGS

    rows = []
    for key, (paper, where) in PAPER_SETTINGS.items():
        obj = params
        for part in key.split("."):
            obj = getattr(obj, part)
        rows.append({"setting": key, "ran": str(obj), "paper": f"{paper} ({where})", "differs": obj != paper})
    rows.append({"setting": "checkpoints", "ran": str(list(params.checkpoints)), "paper": "[0, 100, 300, 500] (Table 2)",
                 "differs": list(params.checkpoints) != [0, 100, 300, 500]})
    return pd.DataFrame(rows, columns=["setting", "ran", "paper", "differs"])


def _fig_per_class(df, last):
    plt = _plt()
    groups = list(df.groupby("examiner", sort=False))
    fig, axes = plt.subplots(1, len(groups), figsize=(max(4, 3.5 * len(groups)), 3.5), squeeze=False)
    for ax, (e, d) in zip(axes[0], groups):
        x = np.arange(len(d))
        ax.bar(x - 0.2, d["T0"], 0.4, label="T0")
        ax.bar(x + 0.2, d[last], 0.4, label=last)
        ax.set_xticks(x, d["class"], rotation=60, fontsize=7)
        ax.set(title=e, ylim=(0, 1))
        ax.legend(fontsize=7)
    fig.tight_layout()
    return fig


def _tsne(X: np.ndarray, seed: int) -> np.ndarray:
    from sklearn.manifold import TSNE

    X = X.reshape(len(X), -1).astype(np.float32) / 255.0
    perplexity = float(max(2, min(30, (len(X) - 1) // 3)))
    return TSNE(n_components=2, perplexity=perplexity, init="pca", random_state=seed).fit_transform(X)


def _scatter(ax, Y, is_ex, wrong):
    for ex, marker, lab in ((False, "o", "random"), (True, "^", "examined")):
        for bad in (False, True):
            k = (is_ex == ex) & (wrong == bad)
            if k.any():
                ax.scatter(Y[k, 0], Y[k, 1], marker=marker, alpha=0.9 if bad else 0.2, s=18,
                           color="C3" if ex else "C0", label=f"{lab}{' (wrong)' if bad else ''}")


def _fig_tsne(sessions, params):
    plt = _plt()
    examined = [s.cls for s in sessions if s.group == "main"]
    cls = params.tsne_class if params.tsne_class in examined else examined[0]
    pairs = [e for e in params.examiners if e != "random"] or list(params.examiners)
    fig, axes = plt.subplots(1, len(pairs), figsize=(4 * len(pairs), 4), squeeze=False)
    for ax, e in zip(axes[0], pairs):
        r = [s for s in _group(sessions, "main_t0") if s.cls == cls]
        x = [s for s in _group(sessions, "main", examiner=e) if s.cls == cls]
        if not r or not x:
            ax.set_axis_off()
            continue
        r, x = r[0], x[0]
        imgs = np.stack(list(r.tail_images)[: params.tail] + list(x.tail_images))
        wrong = np.array([p != r.label for p in list(r.tail_pred)[: params.tail]] + [p != x.label for p in x.tail_pred])
        is_ex = np.r_[np.zeros(min(params.tail, len(r.tail_images)), bool), np.ones(len(x.tail_images), bool)]
        _scatter(ax, _tsne(imgs, params.seed), is_ex, wrong)
        ax.set(title=f"{cls}: {e}", xticks=[], yticks=[])
        ax.legend(fontsize=6)
    fig.tight_layout()
    return fig


def _fig_worst(sessions, params):
    plt = _plt()
    pairs = list(params.examiners)
    k = params.n_worst
    fig, axes = plt.subplots(len(pairs), k, figsize=(1.8 * k, 2.0 * len(pairs)), squeeze=False)
    for row, e in zip(axes, pairs):
        ss = sorted(_group(sessions, "main", examiner=e), key=lambda s: s.worst[0])[:k]
        for ax, s in zip(row, ss):
            ax.imshow(s.worst[2])
            p = s.worst[1]
            ax.set_title(f"{s.cls} p={s.worst[0]:.2f}\nelev={p.get('view_elevation', float('nan')):.0f} "
                         f"dist={p.get('view_distance', float('nan')):.1f}", fontsize=6)
        for ax in row:
            ax.set_xticks([])
            ax.set_yticks([])
        row[0].set_ylabel(e, fontsize=7)
    fig.tight_layout()
    return fig


def _fig_artificial(sessions, aw):
    plt = _plt()
    fig, ax = plt.subplots(figsize=(5, 3.2))
    lo, hi = aw.train_range
    bins = np.linspace(-90, 90, 19) if aw.factor.endswith("elevation") else 18
    for e in aw.examiners:
        vals = np.concatenate([[p[aw.factor] for p in s.tail_params] for s in _group(sessions, "artificial",
                                                                                         examiner=e)])
        ax.hist(vals, bins=bins, histtype="step", lw=2, label=e, density=True)
    ax.axvspan(lo, hi, color="grey", alpha=0.2, label="training range")
    ax.set(xlabel=aw.factor, ylabel="density of late queries")
    ax.legend(fontsize=7)
    fig.tight_layout()
    return fig


def _aw_tsne_class(sessions, aw) -> Optional[str]:
    have = [s.cls for s in _group(sessions, "artificial")]
    if not have:
        return None
    return aw.tsne_class if aw.tsne_class in have else have[0]


def _fig_artificial_tsne(sessions, aw, cls: str, seed: int):
    """Paper Fig. 4: uniform scenes against each examiner's last queries of one class on the limited model."""
    plt = _plt()
    lo, hi = aw.train_range
    exs = [e for e in aw.examiners if e != "random"] or list(aw.examiners)
    fig, axes = plt.subplots(1, len(exs), figsize=(4 * len(exs), 4), squeeze=False)
    r = [s for s in _group(sessions, "artificial_t0") if s.cls == cls]
    for ax, e in zip(axes[0], exs):
        x = [s for s in _group(sessions, "artificial", examiner=e) if s.cls == cls]
        if not r or not x:
            ax.set_axis_off()
            continue
        r0, x0 = r[0], x[0]
        imgs = np.stack(list(r0.tail_images) + list(x0.tail_images))
        factor = np.array([p[aw.factor] for p in list(r0.tail_params) + list(x0.tail_params)])
        outside = (factor < lo) | (factor > hi)
        wrong = np.array([p != r0.label for p in list(r0.tail_pred)] + [p != x0.label for p in x0.tail_pred])
        is_ex = np.r_[np.zeros(len(r0.tail_images), bool), np.ones(len(x0.tail_images), bool)]
        Y = _tsne(imgs, seed)
        for ex, marker, lab in ((False, "o", "uniform"), (True, "^", e)):
            for out, color in ((False, "C0"), (True, "C1")):
                for bad in (False, True):
                    k = (is_ex == ex) & (outside == out) & (wrong == bad)
                    if k.any():
                        ax.scatter(Y[k, 0], Y[k, 1], marker=marker, s=20, color=color, alpha=0.9 if bad else 0.25,
                                   label=f"{lab}, {'outside' if out else 'inside'}{', wrong' if bad else ''}")
        ax.set(title=f"{cls}: uniform vs {e} (last {len(x0.tail_images)})", xticks=[], yticks=[])
        ax.legend(fontsize=6)
    fig.tight_layout()
    return fig


def _order_check(sessions, params, space):
    import pandas as pd

    plt = _plt()
    a = _group(sessions, "main", examiner="rl")
    b = _group(sessions, "order")
    searched = list(space.searched)
    lo = np.array([space.bounds[k][0] for k in searched])
    hi = np.array([space.bounds[k][1] for k in searched])

    def tail_mean(ss):
        if not ss:
            return np.full(len(searched), np.nan)
        X = np.array([[p[k] for k in searched] for s in ss for p in s.tail_params])
        return ((X - lo) / (hi - lo)).mean(0)

    ma, mb = tail_mean(a), tail_mean(b)
    df = pd.DataFrame({"factor": searched + ["p_true_last"],
                       "default_order": list(ma) + [float(np.mean([s.at(s.T, params.window) for s in a])) if a
                                                    else np.nan],
                       "view_first_order": list(mb) + [float(np.mean([s.at(s.T, params.window) for s in b]))]})
    df["abs_diff"] = (df["default_order"] - df["view_first_order"]).abs()
    fig, ax = plt.subplots(figsize=(4.5, 4))
    cls = params.tsne_class if params.tsne_class in [s.cls for s in b] else b[0].cls
    sa = [s for s in a if s.cls == cls]
    sb = [s for s in b if s.cls == cls]
    if sa and sb:
        imgs = np.stack(list(sa[0].tail_images) + list(sb[0].tail_images))
        Y = _tsne(imgs, params.seed)
        n = len(sa[0].tail_images)
        ax.scatter(Y[:n, 0], Y[:n, 1], marker="o", s=18, alpha=0.6, label="default order")
        ax.scatter(Y[n:, 0], Y[n:, 1], marker="^", s=18, alpha=0.6, label="viewpoint first")
        ax.legend(fontsize=7)
    ax.set(title=f"{cls}: last queries of two RL orders", xticks=[], yticks=[])
    fig.tight_layout()
    return df, fig


def _fig_strength(ss, params):
    plt = _plt()
    k = min(len(ss), params.n_worst)
    fig, axes = plt.subplots(1, 1 + k, figsize=(4 + 1.8 * k, 3), squeeze=False,
                             gridspec_kw={"width_ratios": [3] + [1] * k})
    ax = axes[0][0]
    for s in ss:
        ax.plot(np.arange(1, len(s.probs) + 1), s.curve(), lw=1, label=s.cls)
    ax.set(xlabel="iteration", ylabel="true-class probability", ylim=(0, 1.02), title="strength mode")
    ax.legend(fontsize=6)
    for ax, s in zip(axes[0][1:], sorted(ss, key=lambda s: -s.worst[0])[:k]):
        ax.imshow(s.worst[2])
        ax.set_title(f"{s.cls} p={s.worst[0]:.2f}", fontsize=7)
        ax.set_xticks([])
        ax.set_yticks([])
    fig.tight_layout()
    return fig
