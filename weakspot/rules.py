"""Regions as rules: the paths of a fitted decision tree, written in the features' names and applied to new rows (shared by
the weak segments and the examiner's weak regions).

Caveats first: a numeric condition is ``lo < x <= hi`` (scikit-learn's split convention), a class condition a set of
allowed classes, a categorical column's condition a set of allowed categories (the tree splits on one indicator
column per category, never on a category's code as if it were a number). A missing value (NaN) satisfies no
condition on a value: ``x <= 3`` and ``city not in {FR}`` hold only where ``x`` and ``city`` are observed; missingness
is a condition of its own (``x is missing``, from the tree's indicator column of it, ``kind="missing"``). Sibling leaves that both fail more often than the rows overall are merged into their parent (a
deeper split of one weak region says nothing new and halves its rows).

>>> import numpy as np
>>> r = Rule(ranges={"Iy": (None, 0.71)}, allowed=frozenset({1}))
>>> r.text(["nasal", "oral"])
'class = oral and Iy <= 0.71'
>>> r.mask(np.array([[0.5], [0.9], [0.1]]), ["Iy"], np.array([1, 1, 0])).tolist()
[True, False, False]
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Dict, FrozenSet, List, Optional, Sequence, Tuple

import numpy as np

from weakspot.fmt import fmt


@dataclass(frozen=True)
class Column:
    """One column of a tree's input: a numeric feature (``kind="num"``, ``name``), the indicator of class ``code`` of
    ``n`` (``kind="class"``), of category ``code`` of the ``n`` of the categorical feature ``name`` (``kind="cat"``)
    or of feature ``name``'s value being missing (``kind="missing"``)."""

    kind: str
    name: str = ""
    code: int = 0
    n: int = 0


def numeric_columns(names: Sequence[str], n_classes: int = 0) -> List[Column]:
    """The input of a tree on numeric features ``names``, then one indicator per class."""
    return [Column("num", n) for n in names] + [Column("class", code=c, n=n_classes) for c in range(n_classes)]


def _set_text(label: str, allowed: FrozenSet[int], names: List[str]) -> str:
    inside = [names[i] for i in sorted(allowed)]
    outside = [c for i, c in enumerate(names) if i not in allowed]
    if len(inside) == 1:
        return f"{label} = {inside[0]}"
    if len(inside) <= len(outside):
        return f"{label} in {{{', '.join(inside)}}}"
    return f"{label} not in {{{', '.join(outside)}}}"


@dataclass(frozen=True)
class Rule:
    """A conjunction: each named feature within ``(lo, hi]`` (``None`` = unbounded; observed), the class among
    ``allowed`` (``None`` = any class), each categorical feature in ``cats`` among its allowed codes (observed), each
    feature in ``missing`` missing (``True``) or observed (``False``)."""

    ranges: Dict[str, Tuple[Optional[float], Optional[float]]] = field(default_factory=dict)
    allowed: Optional[FrozenSet[int]] = None
    cats: Dict[str, FrozenSet[int]] = field(default_factory=dict)
    missing: Dict[str, bool] = field(default_factory=dict)

    def mask(self, values: np.ndarray, names: List[str], y: np.ndarray) -> np.ndarray:
        """Which rows of ``values`` (columns ``names``) with classes ``y`` the rule holds for (a missing value, NaN,
        satisfies no range and no category)."""
        m = np.ones(len(values), bool)
        for name, (lo, hi) in self.ranges.items():
            x = values[:, names.index(name)]
            m &= ~np.isnan(x)
            if lo is not None:
                m &= x > lo
            if hi is not None:
                m &= x <= hi
        for name, codes in self.cats.items():
            m &= np.isin(values[:, names.index(name)], sorted(codes))
        for name, gone in self.missing.items():
            m &= np.isnan(values[:, names.index(name)]) == gone
        if self.allowed is not None:
            m &= np.isin(y, sorted(self.allowed))
        return m

    def text(self, classes: List[str], categories: Optional[Dict[str, List[str]]] = None) -> str:
        """The rule as a person reads it: ``"class = oral and Iy <= 0.71"``, ``"country = FR and age > 60"``."""
        parts = []
        if self.allowed is not None and len(self.allowed) < len(classes):
            parts.append(_set_text("class", self.allowed, classes))
        for name, codes in sorted(self.cats.items()):
            texts = (categories or {}).get(name) or [str(i) for i in range(max(codes) + 1)]
            if len(codes) < len(texts):
                parts.append(_set_text(name, codes, texts))
        for name, (lo, hi) in sorted(self.ranges.items()):
            if lo is not None and hi is not None:
                parts.append(f"{fmt(lo)} < {name} <= {fmt(hi)}")
            elif hi is not None:
                parts.append(f"{name} <= {fmt(hi)}")
            elif lo is not None:
                parts.append(f"{name} > {fmt(lo)}")
        for name, gone in sorted(self.missing.items()):
            if gone:
                parts.append(f"{name} is missing")
            elif name not in self.ranges and name not in self.cats:  # a condition on its value says it is observed
                parts.append(f"{name} is observed")
        return " and ".join(parts) or "every row"

    def narrowed(self, col: Column, threshold: float, right: bool) -> "Rule":
        """This rule and one split of the tree's input column ``col`` (an indicator's right side is "this one")."""
        if col.kind == "missing":
            return Rule(dict(self.ranges), self.allowed, dict(self.cats), {**self.missing, col.name: bool(right)})
        if col.kind != "num":
            now = self.allowed if col.kind == "class" else self.cats.get(col.name)
            allowed = set(range(col.n)) if now is None else set(now)
            kept = frozenset(allowed & {col.code} if right else allowed - {col.code})
            if col.kind == "class":
                return Rule(dict(self.ranges), kept, dict(self.cats), dict(self.missing))
            return Rule(dict(self.ranges), self.allowed, {**self.cats, col.name: kept}, dict(self.missing))
        lo, hi = self.ranges.get(col.name, (None, None))
        if right:
            lo = threshold if lo is None else max(lo, threshold)
        else:
            hi = threshold if hi is None else min(hi, threshold)
        return Rule({**self.ranges, col.name: (lo, hi)}, self.allowed, dict(self.cats), dict(self.missing))


def weak_rules(tree, columns: List[Column], base_rate: float, min_rows: int) -> List[Tuple[Rule, int, int]]:
    """The regions of a fitted error tree (a ``DecisionTreeClassifier`` on ``failed``, classes ``[False, True]``,
    whose input columns are ``columns``) that fail more often than ``base_rate`` on at least ``min_rows`` of its rows:
    ``[(rule, rows, failures)]``, sibling weak leaves merged into their parent."""
    t = tree.tree_
    rows = t.n_node_samples
    # scikit-learn >= 1.4 stores class fractions in ``value``; times the rows, the failures
    fails = np.rint(t.value[:, 0, -1] * rows).astype(int) if tree.classes_[-1] else np.zeros(len(rows), int)

    def weak(node: int) -> bool:
        return rows[node] >= min_rows and fails[node] / rows[node] > base_rate

    def walk(node: int, rule: Rule) -> Tuple[List[Tuple[Rule, int, int]], bool]:
        """The node's weak regions, and whether they are the whole node (a weak leaf, or two whole children)."""
        here = (rule, int(rows[node]), int(fails[node]))
        left, right = t.children_left[node], t.children_right[node]
        if left < 0:
            return ([here], True) if weak(node) else ([], False)
        col, thr = int(t.feature[node]), float(t.threshold[node])
        a, whole_a = walk(left, rule.narrowed(columns[col], thr, False))
        b, whole_b = walk(right, rule.narrowed(columns[col], thr, True))
        if node != 0 and whole_a and whole_b:  # the split divides one weak region: the node says it in fewer words
            return [here], True
        return a + b, False

    return walk(0, Rule())[0]


def hull(a: Rule, b: Rule) -> Rule:
    """The smallest rule that holds both ``a`` and ``b``: each range both bound widened to cover both, each category
    set both restrict joined, a condition only one of them has dropped."""

    def lo(x: Optional[float], y: Optional[float]) -> Optional[float]:
        return None if x is None or y is None else min(x, y)

    def hi(x: Optional[float], y: Optional[float]) -> Optional[float]:
        return None if x is None or y is None else max(x, y)

    both = [k for k in a.ranges if k in b.ranges]
    ranges = {k: (lo(a.ranges[k][0], b.ranges[k][0]), hi(a.ranges[k][1], b.ranges[k][1])) for k in both}
    return Rule(
        ranges={k: v for k, v in ranges.items() if v != (None, None)},
        allowed=None if a.allowed is None or b.allowed is None else a.allowed | b.allowed,
        cats={k: a.cats[k] | b.cats[k] for k in a.cats if k in b.cats},
        missing={k: v for k, v in a.missing.items() if b.missing.get(k) == v},
    )


#: two regions merge when their hull fails at least this share of the stronger one's rate
MERGE_SHARE = 0.9


def merge_adjacent(
    found: List[Tuple[Rule, int, int]], count: Callable[[Rule], Tuple[int, int]]
) -> List[Tuple[Rule, int, int]]:
    """``found`` (``[(rule, rows, failures)]``) with every two regions whose :func:`hull` fails nearly as often as the
    stronger of them (at least :data:`MERGE_SHARE` of its rate; ``count(rule) -> (rows, failures)`` on the rows that
    proposed them) replaced by that hull, until no two are: one region a tree cut in two (``f0 > 104`` and ``37.3 <
    f0 <= 104 and f8 > 17.4`` where ``f0 > 37.3`` fails throughout) is named once. A strong region never absorbs a weak
    neighbour (the hull's rate would fall), and two regions far apart never merge (their hull holds the rows between).

    >>> x = Rule({"f0": (104.0, None)}); y = Rule({"f0": (37.3, 104.0), "f8": (17.4, None)})
    >>> merge_adjacent([(x, 50, 45), (y, 30, 27)], lambda r: (100, 90))[0][0].ranges
    {'f0': (37.3, None)}
    """
    out = list(found)
    merged = True
    while merged and len(out) > 1:
        merged = False
        for i in range(len(out)):
            for j in range(i + 1, len(out)):
                (a, na, fa), (b, nb, fb) = out[i], out[j]
                h = hull(a, b)
                if h == Rule() or h in (a, b):
                    continue
                n, f = count(h)
                if n and f / n >= MERGE_SHARE * max(fa / na, fb / nb):
                    out = [r for k, r in enumerate(out) if k not in (i, j)] + [(h, n, f)]
                    merged = True
                    break
            if merged:
                break
    return out
