"""Regions as rules: the paths of a fitted decision tree, written in the features' names and applied to new rows (shared by
the weak segments and the examiner's weak regions).

Caveats first: a numeric condition is ``lo < x <= hi`` (scikit-learn's split convention), a class condition a set of
allowed classes. Sibling leaves that both fail more often than the rows overall are merged into their parent (a
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
from typing import Dict, FrozenSet, List, Optional, Tuple

import numpy as np

from weakspot.fmt import fmt


@dataclass(frozen=True)
class Rule:
    """A conjunction: each named feature within ``(lo, hi]`` (``None`` = unbounded), the class among ``allowed``
    (``None`` = any class)."""

    ranges: Dict[str, Tuple[Optional[float], Optional[float]]] = field(default_factory=dict)
    allowed: Optional[FrozenSet[int]] = None

    def mask(self, values: np.ndarray, names: List[str], y: np.ndarray) -> np.ndarray:
        """Which rows of ``values`` (columns ``names``) with classes ``y`` the rule holds for."""
        m = np.ones(len(values), bool)
        for name, (lo, hi) in self.ranges.items():
            x = values[:, names.index(name)]
            if lo is not None:
                m &= x > lo
            if hi is not None:
                m &= x <= hi
        if self.allowed is not None:
            m &= np.isin(y, sorted(self.allowed))
        return m

    def text(self, classes: List[str]) -> str:
        """The rule as a person reads it: ``"class = oral and Iy <= 0.71"``."""
        parts = []
        if self.allowed is not None and len(self.allowed) < len(classes):
            inside = [classes[i] for i in sorted(self.allowed)]
            outside = [c for i, c in enumerate(classes) if i not in self.allowed]
            if len(inside) == 1:
                parts.append(f"class = {inside[0]}")
            elif len(inside) <= len(outside):
                parts.append(f"class in {{{', '.join(inside)}}}")
            else:
                parts.append(f"class not in {{{', '.join(outside)}}}")
        for name, (lo, hi) in sorted(self.ranges.items()):
            if lo is not None and hi is not None:
                parts.append(f"{fmt(lo)} < {name} <= {fmt(hi)}")
            elif hi is not None:
                parts.append(f"{name} <= {fmt(hi)}")
            elif lo is not None:
                parts.append(f"{name} > {fmt(lo)}")
        return " and ".join(parts) or "every row"

    def narrowed(self, column: int, threshold: float, right: bool, names: List[str], n_classes: int) -> "Rule":
        """This rule and one split of the tree's input (columns: ``names``, then one indicator per class)."""
        if column >= len(names):  # a class indicator: <= 0.5 is "not this class"
            c = column - len(names)
            allowed = set(range(n_classes)) if self.allowed is None else set(self.allowed)
            allowed = allowed & {c} if right else allowed - {c}
            return Rule(dict(self.ranges), frozenset(allowed))
        name = names[column]
        lo, hi = self.ranges.get(name, (None, None))
        if right:
            lo = threshold if lo is None else max(lo, threshold)
        else:
            hi = threshold if hi is None else min(hi, threshold)
        return Rule({**self.ranges, name: (lo, hi)}, self.allowed)


def weak_rules(tree, names: List[str], n_classes: int, base_rate: float, min_rows: int) -> List[Tuple[Rule, int, int]]:
    """The regions of a fitted error tree (a ``DecisionTreeClassifier`` on ``failed``, classes ``[False, True]``)
    that fail more often than ``base_rate`` on at least ``min_rows`` of its rows: ``[(rule, rows, failures)]``,
    sibling weak leaves merged into their parent."""
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
        a, whole_a = walk(left, rule.narrowed(col, thr, False, names, n_classes))
        b, whole_b = walk(right, rule.narrowed(col, thr, True, names, n_classes))
        if node != 0 and whole_a and whole_b:  # the split divides one weak region: the node says it in fewer words
            return [here], True
        return a + b, False

    return walk(0, Rule())[0]
