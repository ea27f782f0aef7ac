"""The examination engine: sessions (one examiner on one class of one model) that advance in lockstep, each round
rendering every active session's scenes in one call and scoring them with their model.

Caveats first:

* An *iteration* is the paper's unit of T (Sec. 4.1): one batch of ``rl.batch_size`` queries for RL (one policy
  gradient step, Eq. 5), one query for BO, ``random_batch`` queries for random search. The probability at a
  checkpoint T is the mean true-class probability of the queries of iterations (T - window, T]
  (:meth:`Session.at`; Algorithm 1 returns the T-th, ``window`` > 1 smooths it).
* T = 0 is the standard protocol: ``n_random`` uniformly random scenes with the same (fixed) sun, one session of its
  own per class (group ``<group>_t0``, examiner ``t0``).
* The sun angles are drawn at random once per (model, class) and held fixed; the other factors are searched (Sec.
  4.1). Every draw is seeded by ``params.seed`` and the session's place (model, class, examiner), so the same
  params give the same sessions.
* All sessions (every class and examiner, and in the study every model) advance in lockstep so that each round asks
  the renderer for all their scenes in one call (split into ``render_chunk``-sized calls).

Reference: M. Shu, C. Liu, W. Qiu, A. Yuille, "Identifying Model Weakness with Adversarial Examiner", AAAI 2020
(``seeds/000``), Algorithm 1 and Sec. 4.1.
"""

from __future__ import annotations

import collections
from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np

from weakspot.errors import DataError
from weakspot.examine.config import ExamineParams
from weakspot.examine.examiners import make_examiner
from weakspot.examine.inputs import ExaminedModel
from weakspot.progress import Progress


@dataclass
class Session:
    """One examiner on one class of one model: its state and everything it saw (Algorithm 1's loop, paper Sec. 4.1).

    Parameters
    ----------
    group : str
        The experiment it belongs to: ``main``, ``order``, ``strength``, ``m_study``, ``artificial``, and each one's
        T = 0 protocol, ``<group>_t0``.
    model, examiner_name, cls : str
        The model's key, the examiner's name (``t0`` for the T = 0 protocol) and the examined class.
    label : int
        The true class's output index in the model.
    instance : int
        The examined (unseen) instance of ``cls``.
    sun : dict
        The fixed factors (the sun's angles), drawn once per (model, class).
    examiner : Examiner
        ``suggest(n)``, ``observe(params, p)`` and ``mode`` (``weakness``: drive ``p`` down; ``strength``: up).
    T, batch, tail : int
        Iterations, queries per iteration, and how many of the last queries it keeps (images, probabilities,
        predictions, params).
    rep : int
        Which repeat of the examination (``examine.repeats``): each repeat draws its own sun and examiner seed.

    Attributes
    ----------
    probs, params, preds : list
        One array of true-class probabilities, one list of scene params and one array of predicted outputs per
        iteration.
    worst, worst_pred : tuple
        ``(p_true, params, image)`` of the query nearest the examiner's goal (lowest ``p`` in weakness mode, highest
        in strength mode), and ``(predicted output, its probability)`` there.
    length_scales : numpy.ndarray or None
        The examiner's fitted GP length scales when it finished (BO; None for an examiner without a GP).
    """

    group: str
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
    rep: int = 0
    it: int = 0
    probs: List[np.ndarray] = field(default_factory=list)
    preds: List[np.ndarray] = field(default_factory=list)
    params: List[List[dict]] = field(default_factory=list)
    tail_images: Any = None
    tail_probs: Any = None
    tail_pred: Any = None
    tail_params: Any = None
    worst: Optional[Tuple[float, dict, np.ndarray]] = None
    worst_pred: Tuple[int, float] = (-1, float("nan"))
    length_scales: Optional[np.ndarray] = None

    def __post_init__(self):
        self.tail_images = collections.deque(maxlen=self.tail)
        self.tail_probs = collections.deque(maxlen=self.tail)
        self.tail_pred = collections.deque(maxlen=self.tail)
        self.tail_params = collections.deque(maxlen=self.tail)

    @property
    def active(self) -> bool:
        """Fewer than T iterations done."""
        return self.it < self.T

    @property
    def worst_found(self) -> Tuple[float, dict, np.ndarray]:
        """``worst`` of a session that has recorded an iteration (it is None only before the first)."""
        assert self.worst is not None, "the session has recorded no iteration yet"
        return self.worst

    def curve(self) -> np.ndarray:
        """Mean true-class probability of each iteration."""
        return np.array([p.mean() for p in self.probs])

    def at(self, t: int, window: int) -> float:
        """Mean probability of the queries of iterations (t - window, t] (1-based)."""
        seg = self.probs[max(0, t - window) : t]
        return float(np.concatenate(seg).mean())

    def record(
        self, queries: List[dict], p: np.ndarray, images: np.ndarray, preds: np.ndarray, confs: np.ndarray
    ) -> None:
        """One iteration: tell the examiner the true-class probabilities ``p`` of its ``queries`` (rendered as
        ``images``, predicted ``preds`` with probability ``confs``) and keep what the report needs."""
        self.examiner.observe(queries, p)
        self.probs.append(p)
        self.preds.append(np.asarray(preds))
        self.params.append(queries)
        self.it += 1
        for k in range(len(queries)):
            self.tail_images.append(images[k])
            self.tail_probs.append(p[k])
            self.tail_pred.append(preds[k])
            self.tail_params.append(queries[k])
        weakness = self.examiner.mode == "weakness"
        k = int(np.argmin(p)) if weakness else int(np.argmax(p))
        if self.worst is None or (p[k] < self.worst[0] if weakness else p[k] > self.worst[0]):
            self.worst = (float(p[k]), dict(queries[k]), images[k])
            self.worst_pred = (int(preds[k]), float(confs[k]))
        if not self.active and hasattr(self.examiner, "length_scales"):
            self.length_scales = self.examiner.length_scales()


def searched_bounds(space) -> Dict[str, Tuple[float, float]]:
    """``{factor: (low, high)}`` of the searched factors of ``space``."""
    b = space.bounds
    return {k: tuple(b[k]) for k in space.searched}


def _examiner_options(name: str, params: ExamineParams) -> Tuple[dict, int]:
    """The examiner's options from params and its queries per iteration."""
    if name == "rl":
        return params.rl.model_dump(), params.rl.batch_size
    if name == "bo":
        return params.bo.model_dump(), 1
    return {}, params.random_batch


def render_scenes(renderer, scenes: List[dict], chunk: int) -> np.ndarray:
    """The renderer's images of ``scenes``, asked for ``chunk`` at a time."""
    imgs = np.concatenate([np.asarray(renderer.render(scenes[a : a + chunk])) for a in range(0, len(scenes), chunk)])
    if imgs.shape[0] != len(scenes) or imgs.ndim != 4:
        raise DataError(f"renderer returned shape {imgs.shape} for {len(scenes)} scenes; need (n, H, W, 3)")
    return imgs


def _score(
    active: List[Session], owner: np.ndarray, imgs: np.ndarray, models: Mapping[str, ExaminedModel]
) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    """True-class probability, predicted output and its probability of each image, one model call per model."""
    probs = np.empty(len(imgs))
    preds = np.empty(len(imgs), dtype=int)
    confs = np.empty(len(imgs))
    for mname in sorted({s.model for s in active}):
        js = [j for j, s in enumerate(active) if s.model == mname]
        sel = np.flatnonzero(np.isin(owner, js))
        lab = np.array([active[j].label for j in owner[sel]])
        pp = models[mname].proba(imgs[sel])
        probs[sel] = pp[np.arange(len(sel)), lab]
        preds[sel] = pp.argmax(1)
        confs[sel] = pp.max(1)
    return probs, preds, confs


def run_sessions(
    sessions: List[Session], renderer, models: Mapping[str, ExaminedModel], chunk: int, progress: Optional[Progress]
) -> None:
    """Advance every session to its T, in lockstep: each round renders all active sessions' queries in one call.

    ``models`` maps a session's ``model`` key to its classifier; ``progress("examine", done, total)`` after each
    round (renders done and in all).
    """
    total = sum(s.T * s.batch for s in sessions)
    done = 0
    while True:
        active = [s for s in sessions if s.active]
        if not active:
            break
        pending: List[List[dict]] = []
        scenes: List[Dict[str, Any]] = []
        owner: List[int] = []
        for j, s in enumerate(active):
            q = s.examiner.suggest(s.batch)
            pending.append(q)
            scenes.extend({**s.sun, **p, "class": s.cls, "instance": s.instance} for p in q)
            owner.extend([j] * len(q))
        imgs = render_scenes(renderer, scenes, chunk)
        owner_a = np.asarray(owner)
        probs, preds, confs = _score(active, owner_a, imgs, models)
        for j, s in enumerate(active):
            sel = np.flatnonzero(owner_a == j)
            s.record(pending[j], probs[sel], imgs[sel], preds[sel], confs[sel])
        done += len(scenes)
        if progress is not None:
            progress("examine", done, total)


def make_sessions(
    params: ExamineParams,
    space,
    models: Mapping[str, ExaminedModel],
    instances: Mapping[str, Mapping[str, int]],
    classes_of: Sequence[str],
    group: str,
    model: str,
    examiners: Sequence[str],
    T: int,
    *,
    mode: str = "weakness",
    order: Optional[Sequence[str]] = None,
    sun_key: int = 0,
    tail: Optional[int] = None,
    repeats: int = 1,
    seed_offset: int = 0,
) -> List[Session]:
    """The sessions of one experiment on one model: every examiner on every class of ``classes_of``, and each
    class's T = 0 protocol (group ``<group>_t0``: ``n_random`` uniform scenes with the same sun).

    Parameters
    ----------
    params : ExamineParams
        The examiners' options, ``seed``, ``n_random`` and the default ``tail``.
    space : SceneSpace
        Bounds of the searched factors; the fixed ones (the sun) are drawn once per class.
    models, instances : dict
        Every model of the run by key (a session's seeds depend on its model's place among them) and the examined
        instance per model and class.
    mode : {"weakness", "strength"}
        Drive the true-class probability down (the paper's examination) or up (Sec. 4.6).
    order : list of str, optional
        The RL examiner's factor order (Sec. 4.5); default its own.
    repeats : int
        Independent examinations of every class (ours: the paper reports one): repeat ``r`` > 0 draws its own sun
        and examiner seeds; repeat 0 is the examination a single run gives.
    seed_offset : int
        Added to every examiner's seed (the sun stays): the same examination with other examiner seeds.
    """
    bounds = searched_bounds(space)
    fixed = list(space.fixed)
    mi = sorted(models).index(model)
    tail = params.tail if tail is None else tail
    out = []
    for rep in range(int(repeats)):
        for ci, c in enumerate(classes_of):
            label = models[model].classes.index(c)
            rng = np.random.default_rng([params.seed, mi, ci, sun_key] + ([rep] if rep else []))
            sun = {
                k: float(space.bounds[k][0] + rng.random() * (space.bounds[k][1] - space.bounds[k][0])) for k in fixed
            }
            base = int(params.seed * 7919 + mi * 1009 + ci * 101) + rep * 1_000_003 + int(seed_offset)
            for ei, name in enumerate(examiners):
                opts, batch = _examiner_options(name, params)
                if order is not None and name == "rl":
                    opts = {**opts, "order": order}
                ex = make_examiner(name, bounds=bounds, seed=base + ei, mode=mode, **opts)
                out.append(
                    Session(
                        group=group,
                        model=model,
                        examiner_name=name,
                        cls=c,
                        label=label,
                        instance=instances[model][c],
                        sun=sun,
                        examiner=ex,
                        T=T,
                        batch=batch,
                        tail=tail,
                        rep=rep,
                    )
                )
            # the T = 0 protocol: n_random uniform scenes, same sun (Table 2's T = 0, Fig. 3's 50 random)
            ex = make_examiner("random", bounds=bounds, seed=base + 99)
            out.append(
                Session(
                    group=f"{group}_t0",
                    model=model,
                    examiner_name="t0",
                    cls=c,
                    label=label,
                    instance=instances[model][c],
                    sun=sun,
                    examiner=ex,
                    T=1,
                    batch=params.n_random,
                    tail=params.n_random,
                    rep=rep,
                )
            )
    return out


def group(
    sessions: Sequence[Session],
    name: str,
    model: Optional[str] = None,
    examiner: Optional[str] = None,
    rep: Optional[int] = None,
) -> List[Session]:
    """The sessions of group ``name`` (of ``model``, ``examiner`` and repeat ``rep`` when given), in run order."""
    return [
        s
        for s in sessions
        if s.group == name
        and (model is None or s.model == model)
        and (examiner is None or s.examiner_name == examiner)
        and (rep is None or s.rep == rep)
    ]
