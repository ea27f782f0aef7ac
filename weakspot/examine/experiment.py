"""The examiner experiments of the paper (Sec. 4), as two pure stages a pipeline can call separately:

1. :func:`train_targets` trains the target models (and the Sec. 4.3 / 4.4 variants) from rendered images and their
   metadata (the dataset stage's output);
2. :func:`run_examinations` examines them with the registered examiners through a renderer and returns a
   :class:`weakspot.result.StageResult` whose ``metrics`` have the shape of ``metrics/examine.json``.

Caveats first:

* An *iteration* is the paper's unit of T (Sec. 4.1): one batch of ``rl.batch_size`` queries for RL (one policy
  gradient step, Eq. 5), one query for BO, ``random_batch`` queries for random search. The probability at a
  checkpoint T is the mean true-class probability of the queries of iterations (T - window, T], averaged over the
  examined classes (Algorithm 1 returns the T-th; ``window`` > 1 smooths it). T = 0 is the standard protocol:
  ``n_random`` uniformly random scenes with the same (fixed) sun.
* All sessions (every model, class and examiner, plus the Sec. 4.3-4.6 runs) advance in lockstep so that each round
  asks the renderer for all their scenes in one call (split into ``render_chunk``-sized calls).
* The sun angles are drawn at random once per (model, class) and held fixed; the other 9 factors are searched
  (Sec. 4.1). Each class is examined on the validation instance the model is most sure of (Sec. 4.1).

Reference: M. Shu, C. Liu, W. Qiu, A. Yuille, "Identifying Model Weakness with Adversarial Examiner", AAAI 2020
(``seeds/000``): Table 2, Fig. 2, Fig. 3, Table 3, Sec. 4.4 (Fig. 4), Sec. 4.5 (Fig. 6), Sec. 4.6 (Fig. 5).
"""

from __future__ import annotations

import collections
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np

from weakspot.errors import ConfigError, DataError
from weakspot.examine.config import ExamineParams
from weakspot.examine.examiners import make_examiner
from weakspot.examine.models import load_model, model_state, predict_proba, train_model
from weakspot.result import StageResult

Progress = Optional[Callable[[str, int, int], None]]


# ----------------------------------------------------------------------------------------------------------------
# target models
# ----------------------------------------------------------------------------------------------------------------
@dataclass
class TargetModel:
    """A trained classifier with what is needed to rebuild it: ``arch``, ``classes`` (label order), ``resolution``."""

    name: str
    arch: str
    classes: List[str]
    resolution: int
    model: Any
    info: Dict[str, Any] = field(default_factory=dict)

    def state(self) -> Dict[str, Any]:
        """The ``state_dict`` on CPU, for ``weakspot.io.save_torch``."""
        return model_state(self.model)

    @classmethod
    def from_state(cls, name: str, arch: str, classes: Sequence[str], resolution: int, state: Mapping,
                   device: str = "auto", info: Optional[dict] = None) -> "TargetModel":
        m = load_model(arch, dict(state), len(classes), resolution, device)
        return cls(name=name, arch=arch, classes=list(classes), resolution=int(resolution), model=m, info=info or {})

    def true_class_proba(self, images: np.ndarray, labels: np.ndarray) -> np.ndarray:
        p = predict_proba(self.model, images)
        return p[np.arange(len(labels)), np.asarray(labels)]


REQUIRED_COLUMNS = ("class", "label", "instance", "split")


def _check_meta(images: np.ndarray, meta, factor: Optional[str] = None) -> None:
    missing = [c for c in REQUIRED_COLUMNS if c not in meta.columns]
    if factor is not None and factor not in meta.columns:
        missing.append(factor)
    if missing:
        raise DataError(f"metadata: missing column(s) {missing}; need {list(REQUIRED_COLUMNS)} and the factors")
    if len(images) != len(meta):
        raise DataError(f"images ({len(images)}) and metadata ({len(meta)} rows) differ in length")
    if not set(meta["split"]).issubset({"train", "validation", "val", "test"}):
        raise DataError(f"metadata 'split': unexpected values {sorted(set(meta['split']))}; use train/validation")


def class_order(meta) -> List[str]:
    """Class names ordered by their integer label."""
    pairs = meta[["label", "class"]].drop_duplicates().sort_values("label")
    if pairs["label"].duplicated().any() or pairs["class"].duplicated().any():
        raise DataError("metadata: 'label' and 'class' are not one-to-one")
    labels = pairs["label"].to_numpy()
    if not np.array_equal(labels, np.arange(len(labels))):
        raise DataError(f"metadata 'label': expected 0..k-1, got {labels.tolist()}")
    return pairs["class"].tolist()


def train_targets(images: np.ndarray, meta, params: ExamineParams, *, device: str = "auto",
                  progress: Progress = None) -> Dict[str, TargetModel]:
    """Train the target models of Sec. 4.1 (``params.models``), the Sec. 4.3 training-size variants
    (``<arch>_m<m>``) and the Sec. 4.4 artificial-weakness model (``<arch>_limited``) on the training split.

    Parameters
    ----------
    images : uint8 array (n, H, W, 3)
        The rendered data set (all splits).
    meta : pandas.DataFrame
        One row per image: ``class``, ``label``, ``instance``, ``split`` and the factor values.
    params : ExamineParams
    device : {"auto", "cpu", "cuda"}
        Where the models train (the top-level ``device`` setting).
    progress : callable(stage, done, total), optional

    Returns
    -------
    dict of name -> TargetModel
    """
    _check_meta(images, meta, params.artificial_weakness.factor if params.artificial_weakness.enabled else None)
    classes = class_order(meta)
    train = meta[meta["split"] == "train"]
    if len(train) == 0:
        raise DataError("metadata: no rows with split == 'train'")
    res = int(images.shape[1])
    out: Dict[str, TargetModel] = {}
    val = meta[meta["split"].isin(["validation", "val"])]
    val_pos = meta.index.get_indexer(val.index)
    val_labels = val["label"].to_numpy()

    def fit(name: str, arch: str, rows, seed: int, info: dict) -> None:
        idx = rows.index.to_numpy() if hasattr(rows, "index") else rows
        pos = meta.index.get_indexer(idx)

        def cb(ep, n_ep, loss):
            if progress is not None:
                progress(f"train {name}", ep, n_ep)

        m = train_model(arch, images[pos], meta["label"].to_numpy()[pos], num_classes=len(classes),
                        epochs=params.epochs, lr=params.lr, batch_size=params.batch_size, seed=seed,
                        device=device, progress=cb)
        t = TargetModel(name=name, arch=arch, classes=classes, resolution=res, model=m,
                        info={**info, "n_train": int(len(pos))})
        if len(val_pos):  # accuracy on random views of the validation instances (the standard protocol)
            pv = predict_proba(m, images[val_pos])
            t.info["val_accuracy"] = float((pv.argmax(1) == val_labels).mean())
            t.info["val_true_class_proba"] = float(pv[np.arange(len(val_pos)), val_labels].mean())
        out[name] = t

    for i, arch in enumerate(params.models):
        fit(arch, arch, train, params.seed + i, {"role": "main"})
    if params.m_study.enabled:
        # the view index within an instance (the dataset's ``view`` column, else the row order)
        view = train["view"] if "view" in train.columns else train.groupby(["class", "instance"]).cumcount()
        m_max = int(view.max()) + 1
        for m in params.m_study.values:
            name = f"{params.m_study.arch}_m{m}"
            if m >= m_max and params.m_study.arch in out:
                out[name] = TargetModel(name=name, arch=params.m_study.arch, classes=classes, resolution=res,
                                        model=out[params.m_study.arch].model,
                                        info={"role": "m_study", "m": m, "n_train": int(len(train))})
                continue
            fit(name, params.m_study.arch, train[view.to_numpy() < m], params.seed + 100 + m,
                {"role": "m_study", "m": m})
    if params.artificial_weakness.enabled:
        aw = params.artificial_weakness
        lo, hi = aw.train_range
        rows = train[(train[aw.factor] >= lo) & (train[aw.factor] <= hi)]
        if len(rows) == 0:
            raise DataError(f"artificial_weakness: no training image has {aw.factor} in [{lo}, {hi}]")
        fit(f"{aw.arch}_limited", aw.arch, rows, params.seed + 200, {"role": "artificial", "range": [lo, hi]})
    return out


# ----------------------------------------------------------------------------------------------------------------
# examination sessions
# ----------------------------------------------------------------------------------------------------------------
@dataclass
class _Session:
    group: str  # "main", "t0", "order", "strength", "m_study", "artificial"
    model: str
    examiner_name: str
    cls: str
    label: int
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
    worst: Optional[Tuple[float, dict, np.ndarray]] = None

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


def select_instances(target: TargetModel, images: np.ndarray, meta, classes: Sequence[str]) -> Dict[str, int]:
    """For each class, the validation instance with the highest mean true-class probability (paper Sec. 4.1)."""
    val = meta[meta["split"].isin(["validation", "val"])]
    if len(val) == 0:
        raise DataError("metadata: no rows with split == 'validation' to choose the examined instances from")
    pos = meta.index.get_indexer(val.index)
    p = target.true_class_proba(images[pos], val["label"].to_numpy())
    df = val[["class", "instance"]].assign(p=p).groupby(["class", "instance"])["p"].mean().reset_index()
    out = {}
    for c in classes:
        d = df[df["class"] == c]
        if len(d) == 0:
            raise DataError(f"metadata: class {c!r} has no validation instance to examine")
        out[c] = int(d.sort_values(["p", "instance"], ascending=[False, True]).iloc[0]["instance"])
    return out


def _searched_bounds(space) -> Dict[str, Tuple[float, float]]:
    b = space.bounds
    return {k: tuple(b[k]) for k in space.searched}


def _examiner_options(name: str, params: ExamineParams) -> Tuple[dict, int]:
    if name == "rl":
        o = params.rl.model_dump()
        return o, params.rl.batch_size
    if name == "bo":
        return params.bo.model_dump(), 1
    return {}, params.random_batch


def _run(sessions: List[_Session], renderer, targets: Mapping[str, TargetModel], chunk: int,
         progress: Progress) -> None:
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
        for mname in sorted({s.model for s in active}):
            js = [j for j, s in enumerate(active) if s.model == mname]
            sel = np.flatnonzero(np.isin(owner_a, js))
            lab = np.array([active[j].label for j in owner_a[sel]])
            pp = predict_proba(targets[mname].model, imgs[sel])
            probs[sel] = pp[np.arange(len(sel)), lab]
            preds[sel] = pp.argmax(1)
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
        done += len(scenes)
        if progress is not None:
            progress("examine", done, total)


def _make_sessions(params: ExamineParams, space, targets, instances, classes_of, group, model, examiners, T, *,
                   mode="weakness", order=None, sun_key=0) -> List[_Session]:
    bounds = _searched_bounds(space)
    fixed = list(space.fixed)
    mi = sorted(targets).index(model)
    out = []
    for ci, c in enumerate(classes_of):
        label = targets[model].classes.index(c)
        rng = np.random.default_rng([params.seed, mi, ci, sun_key])
        sun = {k: float(space.bounds[k][0] + rng.random() * (space.bounds[k][1] - space.bounds[k][0])) for k in fixed}
        for ei, name in enumerate(examiners):
            opts, batch = _examiner_options(name, params)
            if order is not None and name == "rl":
                opts = {**opts, "order": order}
            ex = make_examiner(name, bounds=bounds, seed=int(params.seed * 7919 + mi * 1009 + ci * 101 + ei),
                               mode=mode, **opts)
            out.append(_Session(group=group, model=model, examiner_name=name, cls=c, label=label,
                                instance=instances[model][c], sun=sun, examiner=ex, T=T, batch=batch,
                                tail=params.tail))
        # the T = 0 protocol: n_random uniform scenes, same sun (Table 2's T = 0, Fig. 3's 50 random)
        ex = make_examiner("random", bounds=bounds, seed=int(params.seed * 7919 + mi * 1009 + ci * 101 + 99))
        out.append(_Session(group=f"{group}_t0", model=model, examiner_name="t0", cls=c, label=label,
                            instance=instances[model][c], sun=sun, examiner=ex, T=1, batch=params.n_random,
                            tail=params.n_random))
    return out


# ----------------------------------------------------------------------------------------------------------------
# the stage
# ----------------------------------------------------------------------------------------------------------------
def run_examinations(renderer, space, targets: Mapping[str, TargetModel], images: np.ndarray, meta,
                     params: ExamineParams, *, progress: Progress = None) -> StageResult:
    """Examine every target model with every examiner (Table 2, Fig. 2, Fig. 3, worst images) and run the Sec. 4.3
    (Table 3), 4.4 (artificial weakness), 4.5 (factor order) and 4.6 (strength) experiments.

    Parameters
    ----------
    renderer : object with ``render(list of dict) -> uint8 (n, H, W, 3)``
        ``weakspot.scene.renderer.BlenderRenderer`` (or ``weakspot.examine.fake.FakeRenderer`` for tests).
    space : SceneSpace
        ``.bounds``, ``.searched`` (9 names) and ``.fixed`` (the sun angles).
    targets : dict of name -> TargetModel
        From :func:`train_targets`.
    images, meta :
        The rendered data set and its metadata; the validation split chooses the examined instance per class.
    params : ExamineParams
    progress : callable(stage, done, total), optional

    Returns
    -------
    StageResult
        ``metrics``: ``{model: {examiner: {"T0": p, "T100": p, ...}}, "artificial_weakness": {examiner:
        {"frac_extreme_elevation": f}}}``; tables, figures and the report section.
    """
    _check_meta(images, meta)
    if not targets:
        raise ConfigError("targets: no trained model given; run train_targets first")
    for m in params.models:
        if m not in targets:
            raise ConfigError(f"targets: model {m!r} (params.models) is missing; have {sorted(targets)}")
    for k in list(space.fixed) + list(space.searched):
        if k not in space.bounds:
            raise ConfigError(f"space: factor {k!r} has no bounds")
    all_classes = targets[params.models[0]].classes
    classes = params.classes or all_classes
    unknown = [c for c in classes if c not in all_classes]
    if unknown:
        raise ConfigError(f"classes: unknown {unknown}; the models know {all_classes}")
    aw, ms = params.artificial_weakness, params.m_study
    names_needed = list(params.models)
    if aw.enabled:
        names_needed.append(f"{aw.arch}_limited")
    if ms.enabled:
        names_needed += [f"{ms.arch}_m{m}" for m in ms.values]
    for n in names_needed:
        if n not in targets:
            raise ConfigError(f"targets: model {n!r} is missing (train_targets makes it); have {sorted(targets)}")
    instances = {n: select_instances(targets[n], images, meta, all_classes) for n in names_needed}

    sessions: List[_Session] = []
    for m in params.models:
        sessions += _make_sessions(params, space, targets, instances, classes, "main", m, params.examiners, params.T)
    first = params.models[0]
    if params.order_check:
        searched = list(space.searched)
        order = searched[-4:] + searched[:-4]  # Sec. 4.5 / Fig. 6(b): viewpoint factors first
        sessions += [s for s in _make_sessions(params, space, targets, instances, classes, "order", first, ["rl"],
                                               params.T, order=order) if s.examiner_name != "t0"]
    if params.strength:
        sessions += [s for s in _make_sessions(params, space, targets, instances, classes, "strength", first,
                                               [params.strength_examiner], params.T, mode="strength")
                     if s.examiner_name != "t0"]
    if ms.enabled:
        for m in ms.values:
            sessions += _make_sessions(params, space, targets, instances, ms.classes or classes, "m_study",
                                       f"{ms.arch}_m{m}", ms.examiners, ms.T)
    if aw.enabled:
        sessions += [s for s in _make_sessions(params, space, targets, instances, aw.classes or classes,
                                               "artificial", f"{aw.arch}_limited", aw.examiners, aw.T)
                     if s.examiner_name != "t0"]
        for s in sessions:
            if s.group == "artificial":
                s.tail_params = collections.deque(maxlen=aw.tail)
    _run(sessions, renderer, targets, params.render_chunk, progress)
    return _assemble(sessions, params, space, targets)


def _group(sessions, group, model=None, examiner=None) -> List[_Session]:
    return [s for s in sessions if s.group == group and (model is None or s.model == model)
            and (examiner is None or s.examiner_name == examiner)]


def _assemble(sessions: List[_Session], params: ExamineParams, space, targets) -> StageResult:
    import pandas as pd

    names = params.names()
    metrics: Dict[str, Any] = {}
    rows, class_rows, worst_rows = [], [], []
    for m in params.models:
        t0 = {s.cls: float(s.probs[0].mean()) for s in _group(sessions, "main_t0", m)}
        metrics[m] = {}
        for e in params.examiners:
            ss = _group(sessions, "main", m, e)
            vals = {}
            for cp, nm in zip(params.checkpoints, names):
                vals[nm] = float(np.mean([t0[s.cls] if cp == 0 else s.at(cp, params.window) for s in ss]))
            metrics[m][e] = vals
            rows.append({"model": m, "examiner": e, **vals})
            for s in ss:
                class_rows.append({"model": m, "examiner": e, "class": s.cls, "instance": s.instance,
                                   "T0": t0[s.cls], names[-1]: s.at(params.T, params.window),
                                   "min_found": float(np.concatenate(s.probs).min())})
                worst_rows.append({"model": m, "examiner": e, "class": s.cls, "instance": s.instance,
                                   "p_true": s.worst[0], **{k: round(v, 3) for k, v in s.worst[1].items()},
                                   **{k: round(v, 3) for k, v in s.sun.items()}})
    tables = {"table2": pd.DataFrame(rows), "per_class": pd.DataFrame(class_rows),
              "worst": pd.DataFrame(worst_rows).sort_values(["model", "examiner", "p_true"]).reset_index(drop=True)}
    figures = {"curves": _fig_curves(sessions, params), "per_class": _fig_per_class(tables["per_class"], names[-1]),
               "tsne": _fig_tsne(sessions, params), "worst": _fig_worst(sessions, params)}
    items = [
        {"table": "table2", "caption": "Mean true-class probability under examination at each checkpoint T "
                                       "(paper Table 2). T0 is the standard protocol (random scenes)."},
        {"figure": "curves", "caption": "Mean true-class probability per iteration, class-averaged (paper Fig. 1)."},
        {"figure": "per_class", "caption": "Per-class true-class probability at T0 and at the last T (paper Fig. 2)."},
        {"figure": "tsne", "caption": "t-SNE of random scenes (circles) and the last examined scenes (triangles); "
                                      "opaque = misclassified (paper Fig. 3)."},
        {"figure": "worst", "caption": "The worst scenes found, with their true-class probability."},
        {"table": "worst", "caption": "The worst scene found per model, examiner and class, with its factor values."},
    ]
    summary = [
        f"Each class is examined on the validation instance its model is most sure of; sun angles are fixed at "
        f"random, the other {len(space.searched)} factors are searched for T = {params.T} iterations "
        f"(RL: batches of {params.rl.batch_size}, BO: one query each).",
    ]
    for m in params.models:
        parts = ", ".join(f"{e}: {metrics[m][e][names[0]]:.2f} -> {metrics[m][e][names[-1]]:.2f}"
                          for e in params.examiners)
        summary.append(f"{m}: mean true-class probability {names[0]} -> {names[-1]}: {parts}.")

    aw = params.artificial_weakness
    if aw.enabled:
        lo, hi = aw.train_range
        metrics["artificial_weakness"] = {}
        arows = []
        for e in aw.examiners:
            ss = _group(sessions, "artificial", examiner=e)
            vals = np.concatenate([[p[aw.factor] for p in s.tail_params] for s in ss])
            frac = float(np.mean((vals < lo) | (vals > hi)))
            metrics["artificial_weakness"][e] = {"frac_extreme_elevation": frac}
            arows.append({"examiner": e, "frac_extreme_elevation": frac,
                          "p_true_last": float(np.mean([s.at(s.T, params.window) for s in ss]))})
        tables["artificial_weakness"] = pd.DataFrame(arows)
        figures["artificial_weakness"] = _fig_artificial(sessions, aw)
        items += [{"table": "artificial_weakness", "caption": f"Model trained with {aw.factor} limited to "
                   f"[{lo:g}, {hi:g}] (paper Sec. 4.4): fraction of the last {aw.tail} queries outside that range."},
                  {"figure": "artificial_weakness", "caption": f"{aw.factor} of the last {aw.tail} queries."}]
        summary.append("Artificial weakness: fraction of late queries outside the training range: " + ", ".join(
            f"{r['examiner']} {r['frac_extreme_elevation']:.2f}" for r in arows) + ".")
    ms = params.m_study
    if ms.enabled:
        mrows = []
        for e in ms.examiners:
            row = {"examiner": e}
            for m in ms.values:
                ss = _group(sessions, "m_study", f"{ms.arch}_m{m}", e)
                row[f"m={m}"] = float(np.mean([s.at(s.T, params.window) for s in ss]))
            mrows.append(row)
        row = {"examiner": "T0 (random)"}
        for m in ms.values:
            row[f"m={m}"] = float(np.mean([s.probs[0].mean() for s in _group(sessions, "m_study_t0",
                                                                             f"{ms.arch}_m{m}")]))
        mrows.append(row)
        tables["table3"] = pd.DataFrame(mrows)
        items.append({"table": "table3", "caption": f"{ms.arch} trained with m images per instance, examined for "
                                                    f"T = {ms.T} (paper Table 3)."})
    if params.order_check:
        tables["factor_order"], figures["factor_order"] = _order_check(sessions, params, space)
        items += [{"table": "factor_order", "caption": "RL examiners with two factor orders (paper Sec. 4.5): "
                   "mean of each factor (scaled to [0, 1]) over the last queries, and the final probability."},
                  {"figure": "factor_order", "caption": "t-SNE of the last queries of both orders (paper Fig. 6)."}]
    if params.strength:
        ss = _group(sessions, "strength")
        t0 = {s.cls: float(s.probs[0].mean()) for s in _group(sessions, "main_t0", params.models[0])}
        tables["strength"] = pd.DataFrame([{"class": s.cls, "T0": t0[s.cls], "last": s.at(s.T, params.window),
                                            "best_found": s.worst[0]} for s in ss])
        figures["strength"] = _fig_strength(ss, params)
        items += [{"table": "strength", "caption": "Strength mode (paper Sec. 4.6): the examiner maximises the "
                                                   "true-class probability."},
                  {"figure": "strength", "caption": "Strength mode curves and the best scenes (paper Fig. 5)."}]
    result = StageResult(metrics=metrics, tables=tables, figures=figures,
                         title="Adversarial examiner: worst rendering conditions per class", summary=summary,
                         items=items)
    return result.check()


# ----------------------------------------------------------------------------------------------------------------
# figures
# ----------------------------------------------------------------------------------------------------------------
def _plt():
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    return plt


def _fig_curves(sessions, params):
    plt = _plt()
    fig, axes = plt.subplots(1, len(params.models), figsize=(5 * len(params.models), 3.5), squeeze=False)
    for ax, m in zip(axes[0], params.models):
        t0 = np.mean([s.probs[0].mean() for s in _group(sessions, "main_t0", m)])
        for e in params.examiners:
            c = np.mean([s.curve() for s in _group(sessions, "main", m, e)], axis=0)
            ax.plot(np.arange(1, len(c) + 1), c, label=e)
        ax.axhline(t0, color="grey", ls="--", label="T0 (random)")
        ax.set(title=m, xlabel="iteration", ylabel="true-class probability", ylim=(0, 1))
        ax.legend(fontsize=7)
    fig.tight_layout()
    return fig


def _fig_per_class(df, last):
    plt = _plt()
    groups = list(df.groupby(["model", "examiner"], sort=False))
    fig, axes = plt.subplots(1, len(groups), figsize=(max(4, 3.5 * len(groups)), 3.5), squeeze=False)
    for ax, ((m, e), d) in zip(axes[0], groups):
        x = np.arange(len(d))
        ax.bar(x - 0.2, d["T0"], 0.4, label="T0")
        ax.bar(x + 0.2, d[last], 0.4, label=last)
        ax.set_xticks(x, d["class"], rotation=60, fontsize=7)
        ax.set(title=f"{e} on {m}", ylim=(0, 1))
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
    cls = params.tsne_class or (params.classes or [s.cls for s in sessions if s.group == "main"])[0]
    pairs = [(m, e) for m in params.models for e in params.examiners if e != "random"] or \
        [(m, e) for m in params.models for e in params.examiners]
    fig, axes = plt.subplots(1, len(pairs), figsize=(4 * len(pairs), 4), squeeze=False)
    for ax, (m, e) in zip(axes[0], pairs):
        r = [s for s in _group(sessions, "main_t0", m) if s.cls == cls]
        x = [s for s in _group(sessions, "main", m, e) if s.cls == cls]
        if not r or not x:
            ax.set_axis_off()
            continue
        r, x = r[0], x[0]
        imgs = np.stack(list(r.tail_images)[: params.tail] + list(x.tail_images))
        wrong = np.array([p != r.label for p in list(r.tail_pred)[: params.tail]] + [p != x.label for p in x.tail_pred])
        is_ex = np.r_[np.zeros(min(params.tail, len(r.tail_images)), bool), np.ones(len(x.tail_images), bool)]
        _scatter(ax, _tsne(imgs, params.seed), is_ex, wrong)
        ax.set(title=f"{cls}: {e} on {m}", xticks=[], yticks=[])
        ax.legend(fontsize=6)
    fig.tight_layout()
    return fig


def _fig_worst(sessions, params):
    plt = _plt()
    pairs = [(m, e) for m in params.models for e in params.examiners]
    k = params.n_worst
    fig, axes = plt.subplots(len(pairs), k, figsize=(1.8 * k, 2.0 * len(pairs)), squeeze=False)
    for row, (m, e) in zip(axes, pairs):
        ss = sorted(_group(sessions, "main", m, e), key=lambda s: s.worst[0])[:k]
        for ax, s in zip(row, ss):
            ax.imshow(s.worst[2])
            p = s.worst[1]
            ax.set_title(f"{s.cls} p={s.worst[0]:.2f}\nelev={p.get('view_elevation', float('nan')):.0f} "
                         f"dist={p.get('view_distance', float('nan')):.1f}", fontsize=6)
        for ax in row:
            ax.set_xticks([])
            ax.set_yticks([])
        row[0].set_ylabel(f"{e} / {m}", fontsize=7)
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


def _order_check(sessions, params, space):
    import pandas as pd

    plt = _plt()
    first = params.models[0]
    a = _group(sessions, "main", first, "rl")
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
    cls = params.tsne_class or b[0].cls
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
