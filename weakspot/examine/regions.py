"""The examiner's weak regions: from the scenes examined for one class, the box of factor ranges where the model
fails, confirmed by rendering fresh scenes inside it against as many random scenes of the class outside it.

Caveats first:

* A scene *fails* when the model's top class is not the true class. The region is a leaf of a shallow decision tree
  (``regions.max_depth`` conditions at most) fitted to every scene of the class's sessions (every examiner, every
  repeat, the T = 0 random scenes) and holding at least ``regions.min_fraction`` of them: the leaf that fails most
  often, joined by every other weak leaf that fails at least half-way from the class's rate to that leaf's (a union
  of boxes: a two-sided band, ``view_elevation <= -45 deg or view_elevation > 45 deg``, is no one box). BO and RL
  crowd into the weak scenes, so the region is where the search found failures dense, not a sample of the space; the
  confirmation is what says whether it holds.
* The confirmation renders ``regions.n_confirm`` fresh scenes inside the box and as many uniformly random ones
  outside it (the control is disjoint from the region), both on the class's *other* unseen instances (never the
  examined one), with every factor outside the box (the sun included) drawn uniformly at random. Every class's region
  is one family: a region is confirmed after the Benjamini-Hochberg correction over all of them, its adjusted lower
  bound of the lift above 1 (:mod:`weakspot.evidence`). A class the model fails everywhere (or nowhere) has no region
  to propose.
* Draws are seeded by ``seed`` and the region's place, so the same sessions give the same renders.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np

from weakspot.evidence import Evidence, compare, correct
from weakspot.examine.inputs import ExaminedModel, unseen_rows
from weakspot.examine.sessions import Session
from weakspot.scene.space import UNITS
from weakspot.rules import Rule


@dataclass
class Region:
    """A box of factor ranges where one model fails on one class, and its confirmation on fresh renders.

    ``rule``: its first box (failing most often); ``also``: the other boxes of the union, if any.
    ``searched_rows`` / ``searched_failures``: the examined scenes inside the region and how many failed; ``evidence``:
    fresh renders inside against random ones; ``example``: ``(image, params, predicted output)`` of a failed fresh
    render inside the box (None if none failed); ``note``: why a class has no region (then ``rule`` is None).
    """

    model: str
    cls: str
    label: int
    rule: Optional[Rule]
    searched_rows: int
    searched_failures: int
    base_failures: int
    base_rows: int
    instances: Tuple[int, ...] = ()
    evidence: Optional[Evidence] = None
    example: Optional[Tuple[np.ndarray, Dict[str, float], int]] = None
    note: str = ""
    also: Tuple[Rule, ...] = ()

    @property
    def boxes(self) -> Tuple[Rule, ...]:
        """The boxes whose union is the region (none without a region)."""
        return () if self.rule is None else (self.rule, *self.also)

    def describe(self) -> str:
        """The region in words: its boxes joined by "or"."""
        return " or ".join(describe(b) for b in self.boxes) if self.boxes else self.note

    @property
    def confirmed(self) -> bool:
        return self.evidence is not None and self.evidence.confirmed

    def text(self) -> str:
        """``"class bowl fails when view_elevation > 62.1 deg and light_energy <= 1.2e+03 W"``."""
        if self.rule is None:
            return f"class {self.cls}: {self.note}"
        return f"class {self.cls} fails when {self.describe()}"


def describe(rule: Rule) -> str:
    """The box in words, each bound with its factor's unit."""
    parts = []
    for name, (lo, hi) in sorted(rule.ranges.items()):
        unit = UNITS.get(name, "")
        u = f" {unit}" if unit else ""
        if lo is not None and hi is not None:
            parts.append(f"{_num(lo)}{u} < {name} <= {_num(hi)}{u}")
        elif hi is not None:
            parts.append(f"{name} <= {_num(hi)}{u}")
        elif lo is not None:
            parts.append(f"{name} > {_num(lo)}{u}")
    return " and ".join(parts) or "anywhere"


def _num(v: float) -> str:
    return f"{v:.0f}" if abs(v) >= 100 else f"{v:.3g}"


def scenes_of(sessions: Sequence[Session], names: Sequence[str]) -> Tuple[np.ndarray, np.ndarray]:
    """Every scene the ``sessions`` queried, as factor values ``(n, len(names))``, and whether it failed."""
    X, failed = [], []
    for s in sessions:
        for qs, preds in zip(s.params, s.preds):
            X.extend([[float(q[k]) for k in names] for q in qs])
            failed.extend(np.asarray(preds) != s.label)
    return np.asarray(X, np.float64).reshape(-1, len(names)), np.asarray(failed, bool)


def propose(
    sessions: Sequence[Session], names: Sequence[str], max_depth: int, min_fraction: float, seed: int
) -> Tuple[Optional[Tuple[Tuple[Rule, ...], int, int]], int, int, str]:
    """The region of the sessions' scenes that fails most often: ``((boxes, rows, failures) or None, failures,
    scenes, note)``, the boxes the weak leaf that fails most often and every other weak leaf failing at least half-way
    from the scenes' rate to its (leaves are disjoint: ``rows`` and ``failures`` are their sums); None (with the note)
    when every scene or none failed, or no leaf fails more often than the scenes."""
    from sklearn.tree import DecisionTreeClassifier

    from weakspot.rules import numeric_columns, weak_rules

    X, failed = scenes_of(sessions, names)
    n, f = len(failed), int(failed.sum())
    if f == 0:
        return None, f, n, f"none of its {n} examined scenes was misclassified"
    if f == n:
        return None, f, n, f"every one of its {n} examined scenes was misclassified (the class is not learnt)"
    min_rows = max(5, int(np.ceil(min_fraction * n)))
    tree = DecisionTreeClassifier(max_depth=max_depth, min_samples_leaf=min_rows, random_state=seed).fit(X, failed)
    found = weak_rules(tree, numeric_columns(names), f / n, min_rows)
    if not found:
        return None, f, n, f"no box of at least {min_rows} of its {n} examined scenes fails more often than all"
    found = sorted(found, key=lambda r: (-r[2] / r[1], -r[1]))
    half = (f / n + found[0][2] / found[0][1]) / 2
    union = [r for r in found if r[2] / r[1] >= half]
    return (tuple(r for r, _, _ in union), sum(r[1] for r in union), sum(r[2] for r in union)), f, n, ""


def _inside(rule: Rule, scene: dict) -> bool:
    return all((a is None or scene[k] > a) and (b is None or scene[k] <= b) for k, (a, b) in rule.ranges.items())


def inside_any(boxes: Sequence[Rule], scene: dict) -> bool:
    """Whether ``scene`` lies in the union of ``boxes``."""
    return any(_inside(b, scene) for b in boxes)


def _volume(rule: Rule, space: Any) -> float:
    """The share of the space's factor box that ``rule``'s box holds."""
    v = 1.0
    for k, (a, b) in rule.ranges.items():
        lo, hi = space.bounds[k]
        v *= max(0.0, min(hi, b if b is not None else hi) - max(lo, a if a is not None else lo)) / (hi - lo)
    return v


def _draw(
    boxes: Sequence[Rule],
    space: Any,
    instances: Sequence[int],
    cls: str,
    n: int,
    rng: np.random.Generator,
    outside: Sequence[Rule] = (),
) -> List[dict]:
    """``n`` scenes of ``cls`` on ``instances``: uniform over the union of ``boxes`` (a box drawn by its volume, its
    factors uniform within it, clipped to the space's bounds; every other factor, the sun's too, uniform within its
    bounds), or over the whole space when there is none; with ``outside``, uniform over the space less that union (a
    draw inside it is drawn again: the control is disjoint from the region)."""
    weights = np.array([_volume(b, space) for b in boxes]) if boxes else np.zeros(0)
    out = []
    for _ in range(n):
        rule = boxes[0] if len(boxes) == 1 else None
        if len(boxes) > 1:  # one box: no draw of which (the same scenes as a single box always gave)
            rule = boxes[int(rng.choice(len(boxes), p=weights / weights.sum()))] if weights.sum() > 0 else boxes[0]
        for _try in range(1000):  # a box that fills the space: after 1000 draws the last one stands
            scene = {}
            for k in list(space.fixed) + list(space.searched):
                lo, hi = space.bounds[k]
                if rule is not None and k in rule.ranges:
                    a, b = rule.ranges[k]
                    lo, hi = max(lo, a) if a is not None else lo, min(hi, b) if b is not None else hi
                scene[k] = float(lo + rng.random() * (hi - lo))
            if not inside_any(outside, scene):
                break
        out.append({**scene, "class": cls, "instance": int(instances[rng.integers(len(instances))])})
    return out


def other_unseen(meta: Any, cls: str, examined: int) -> List[int]:
    """The unseen instances of ``cls`` other than the examined one: none when it is the only one (its region is then
    not tested: the examined instance is what the search saw)."""
    rows = unseen_rows(meta)
    return sorted({int(i) for i in rows.loc[rows["class"].astype(str) == cls, "instance"]} - {int(examined)})


def find_regions(
    sessions: Sequence[Session],
    space: Any,
    meta: Any,
    renderer: Any,
    models: Mapping[str, ExaminedModel],
    params: Any,
    seed: int,
    render: Any,
) -> List[Region]:
    """One region per (model, class) of ``sessions`` (their T = 0 scenes included), each confirmed on fresh renders.

    Parameters
    ----------
    sessions : list of Session
        The sessions of one experiment and their ``<group>_t0`` sessions.
    params : RegionsParams
        ``max_depth``, ``min_fraction``, ``n_confirm``.
    render : callable
        ``render(renderer, scenes) -> uint8 (n, H, W, 3)`` (the sessions' chunked render call).
    """
    names = list(space.searched)
    keys = list(dict.fromkeys((s.model, s.cls) for s in sessions))
    regions: List[Region] = []
    scenes: List[dict] = []
    for i, (model, cls) in enumerate(keys):
        ss = [s for s in sessions if (s.model, s.cls) == (model, cls)]
        found, f, n, note = propose(ss, names, params.max_depth, params.min_fraction, seed)
        inst = tuple(other_unseen(meta, cls, ss[0].instance))
        if found is not None and not inst:  # nothing to confirm on that the search did not see
            note = "not tested: no unseen instance of the class besides the examined one"
            found = None
        if found is None:
            regions.append(Region(model, cls, ss[0].label, None, 0, 0, f, n, inst, note=note))
            continue
        boxes, rows, fails = found
        rng = np.random.default_rng([seed, i, 7])
        scenes += _draw(boxes, space, inst, cls, params.n_confirm, rng)
        scenes += _draw((), space, inst, cls, params.n_confirm, rng, outside=boxes)
        regions.append(Region(model, cls, ss[0].label, boxes[0], rows, fails, f, n, inst, also=boxes[1:]))
    if not scenes:
        return regions
    images = render(renderer, scenes)
    k = params.n_confirm
    at = 0
    for r in regions:
        if r.rule is None:
            continue
        imgs, qs = images[at : at + 2 * k], scenes[at : at + 2 * k]
        at += 2 * k
        pred = models[r.model].proba(imgs).argmax(1)
        fail = pred != r.label
        r.evidence = compare(int(fail[:k].sum()), k, int(fail[k:].sum()), k)
        bad = np.flatnonzero(fail[:k])
        if len(bad):
            j = int(bad[0])
            r.example = (imgs[j], {q: v for q, v in qs[j].items() if q not in ("class", "instance")}, int(pred[j]))
    tested = [r for r in regions if r.evidence is not None]
    measured = [r.evidence for r in tested if r.evidence is not None]  # every one of tested's (the filter types it)
    for r, e in zip(tested, correct(measured)):  # every region of the stage: one family
        r.evidence = e
    return regions
