"""Weak segments: an error tree on half of the evaluation rows proposes regions, the other half confirms them.

Caveats first: a row fails when the model's top class is not its label. A segment is written in what is known
before the label and the model's answer: the features (:mod:`weakspot.segments.features` says why neither class may
stand beside them); the true class alone is no candidate (it is known only with the label: each class's recall is
the train stage's table, :mod:`weakspot.recall`).
A table's missing values stay missing: the tree also sees each column's missingness, a column's missing rows are a
candidate of their own ("income is missing") where they fail more often on the search half, and a condition on a
value ("income <= 3", "city = FR") holds only where the value is observed (each rule is counted on the search half
by itself, whichever side of a split the tree sent the missing rows to).
The halves are drawn from ``params.seed`` (stratified on failure when both halves can hold failures); each candidate
is measured on the held-out half against the rest of that half (:func:`weakspot.evidence.on_masks`: no seed, no row
on both sides), and every candidate tested is one family: confirmed after the Benjamini-Hochberg correction over
all of them (:func:`weakspot.evidence.correct`). Each segment also carries the failures its rows' confidences
predict, so the report can tell a region where the model is overconfident from one where it knows it is unsure.

Example
-------
>>> import numpy as np
>>> from types import SimpleNamespace
>>> from weakspot.data.dataset import Dataset
>>> from weakspot.segments.config import SegmentsParams
>>> rng = np.random.default_rng(0)
>>> X = rng.uniform(-1, 1, (2000, 2)).astype(np.float32)
>>> y = (X[:, 0] > 0).astype(np.int64)
>>> class Model:  # right everywhere except where x1 > 0.5 (it predicts class 0 there)
...     def predict_proba(self, X):
...         p = ((X[:, 0] > 0) & (X[:, 1] <= 0.5)).astype(float)
...         return np.column_stack([1 - p, p])
>>> t = SimpleNamespace(test=Dataset(X=X, y=y, classes=["a", "b"], feature_names=["x0", "x1"]), model=Model())
>>> res = run(t, SegmentsParams(), None)
>>> res.segments[0].text, res.segments[0].evidence.confirmed
('x0 > -0.00696 and x1 > 0.513', True)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, List

import numpy as np

from weakspot.errors import DataError
from weakspot.evidence import Evidence, correct, on_masks
from weakspot.segments.config import SegmentsParams
from weakspot.segments.features import Features, features_of
from weakspot.rules import Rule, merge_adjacent, weak_rules


@dataclass(frozen=True)
class Segment:
    """One candidate region: its rule, what the tree saw of it (search half) and its held-out evidence."""

    rule: Rule
    text: str
    search_rows: int
    search_failures: int
    evidence: Evidence
    examples: np.ndarray  # indices into the evaluation rows: failing held-out rows inside, at most 3
    kind: str = "segment"  # the features alone
    expected_failures: float = float("nan")  # held-out rows inside: the failures the model's confidences predict

    @property
    def overconfident(self) -> bool:
        """More failures inside than the model's own confidences predict (sum of 1 - confidence)."""
        return bool(self.evidence.failures > self.expected_failures)


@dataclass
class SegmentsResult:
    """Every candidate segment (confirmed first, then by the adjusted lower bound of the lift) and the rows they were
    found and judged on."""

    segments: List[Segment]
    features: Features
    failed: np.ndarray  # per evaluation row
    predicted: np.ndarray
    confidence: np.ndarray
    search: np.ndarray  # indices of the search half
    confirm: np.ndarray  # indices of the held-out half
    min_rows: int
    image: bool
    note: str = ""  # why nothing was searched (too few evaluation rows), else empty

    @property
    def confirmed(self) -> List[Segment]:
        return [s for s in self.segments if s.evidence.confirmed]


def split_halves(failed: np.ndarray, fraction: float, seed: int) -> "tuple[np.ndarray, np.ndarray]":
    """Search and confirmation indices (``fraction`` held out), stratified on failure where both halves can hold
    at least one failure and one success."""
    from sklearn.model_selection import train_test_split

    idx = np.arange(len(failed))
    strat = failed if min(failed.sum(), (~failed).sum()) >= 2 else None
    search, confirm = train_test_split(idx, test_size=fraction, random_state=seed, stratify=strat)
    return np.sort(search), np.sort(confirm)


def _recounted(
    rules: List[Rule], feats: Features, search: np.ndarray, failed: np.ndarray, base: float, min_rows: int
) -> List[Any]:
    """``[(rule, rows, failures)]`` of the ``rules`` that hold for at least ``min_rows`` rows of the search half and
    fail there more often than ``base``, counted by each rule itself."""
    out = []
    values, y, fail = feats.values[search], feats.y[search], failed[search]
    for rule in rules:
        inside = rule.mask(values, feats.names, y)
        rows, fails = int(inside.sum()), int(fail[inside].sum())
        if rows >= min_rows and fails / rows > base:
            out.append((rule, rows, fails))
    return out


def run(target: Any, params: SegmentsParams, runtime: Any) -> SegmentsResult:
    """The weak segments of ``target``'s evaluation rows (``target.test``) under ``target.model``."""
    from sklearn.tree import DecisionTreeClassifier

    ds = target.test
    p = np.asarray(target.model.predict_proba(ds.X), np.float64)
    if p.ndim != 2 or p.shape[0] != len(ds) or not np.isfinite(p).all():
        raise DataError(
            f"segments: the model's probabilities have shape {p.shape} (or are not finite) for {len(ds)} rows"
        )
    predicted, confidence = p.argmax(axis=1), p.max(axis=1)
    failed = predicted != np.asarray(ds.y)
    feats = features_of(ds)
    image = np.asarray(ds.X).ndim == 4
    if len(ds) < 4 * params.min_rows:  # nothing to search: the result says why (the audit goes on)
        empty = np.zeros(0, np.int64)
        return SegmentsResult(
            segments=[],
            features=feats,
            failed=failed,
            predicted=predicted,
            confidence=confidence,
            search=empty,
            confirm=empty,
            min_rows=params.min_rows,
            image=image,
            note=f"{len(ds)} evaluation rows: at least {4 * params.min_rows} (4 x "
            "segments.min_rows) are needed to search one half and confirm on the other",
        )
    search, confirm = split_halves(failed, params.confirm_fraction, params.seed)
    min_rows = max(params.min_rows, int(np.ceil(params.min_fraction * len(search))))
    base = float(failed[search].mean())
    found: List[Any] = []  # (rule, text, kind, rows, failures on the search half)
    if failed[search].any():
        tree = DecisionTreeClassifier(
            max_depth=params.max_depth, min_samples_leaf=min_rows, random_state=params.seed
        ).fit(feats.matrix()[search], failed[search])
        rules = weak_rules(tree, feats.columns(), base, min_rows)
        if feats.missing:  # the tree's leaves hold missing rows its rules (observed values only) leave out
            rules = _recounted([r for r, _, _ in rules], feats, search, failed, base, min_rows)
        values_s, y_s, failed_s = feats.values[search], feats.y[search], failed[search]

        def count(rule: Rule) -> "tuple[int, int]":
            inside = rule.mask(values_s, feats.names, y_s)
            return int(inside.sum()), int(failed_s[inside].sum())

        rules = merge_adjacent(rules, count)  # one region the tree cut in two is named once
        rules = sorted(rules, key=lambda r: (-r[2] / r[1], -r[1]))[: params.max_segments]
        found += [(r, r.text(feats.classes, feats.categories), "segment", n, f) for r, n, f in rules]
        seen = [r for r, *_ in found]
        missing = [Rule(missing={name: True}) for name in feats.missing]  # a column's missing rows alone
        for rule, rows, fails in _recounted(missing, feats, search, failed, base, min_rows):
            if rule not in seen:
                found.append((rule, rule.text(feats.classes, feats.categories), "segment", rows, fails))
    values, fail_c = feats.values[confirm], failed[confirm]
    masks, evidence = [], []
    for rule, _, kind, _, _ in found:
        inside = rule.mask(values, feats.names, feats.y[confirm])
        masks.append(inside)
        evidence.append(on_masks(fail_c, inside))
    segments: List[Segment] = []
    for (rule, text, kind, rows, fails), inside, ev in zip(found, masks, correct(evidence)):
        segments.append(
            Segment(
                rule,
                text,
                rows,
                fails,
                ev,
                confirm[inside & fail_c][:3],
                kind,
                float((1.0 - confidence[confirm][inside]).sum()),
            )
        )
    segments.sort(
        key=lambda s: (
            not s.evidence.confirmed,
            -np.nan_to_num(s.evidence.lift_lo_adjusted, nan=-1.0),
            -np.nan_to_num(s.evidence.lift_lo, nan=-1.0),
        )
    )
    return SegmentsResult(
        segments=segments,
        features=feats,
        failed=failed,
        predicted=predicted,
        confidence=confidence,
        search=search,
        confirm=confirm,
        min_rows=min_rows,
        image=image,
    )
