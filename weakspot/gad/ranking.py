"""Which search ranks the to-label list: the one that found the most errors per label on this target's labelled runs.

Caveats first: the to-label list orders rows no one has labelled yet, so only a ranking that needs no label can order
it: GAD's score (where the pseudo-model passed its R^2 gate), the lowest confidence first, or a random order. The
adaptive searches (Lakkaraju's bandit, Bansal & Weld's and facility locations' meta-models) choose each query from
the labels of the ones before, so they cannot rank a list in advance; their errors per label are reported beside the
choice. The choice is made on the protocol's labelled pools (errors found in the first ``budget`` queries, the mean
over pools and split seeds: the same numbers as the report's SDR table); a tie goes to the simpler ranking (lowest
confidence, then random, then GAD).

>>> r = Ranking(chosen="low_confidence", budget=50, errors={"gad": 11.6, "low_confidence": 16.3, "random": 14.6,
...             "lakkaraju": 16.6})
>>> r.sentence()
"ranked by lowest confidence: 16.3 errors per 50 labels, against random order's 14.6 and GAD's 11.6 (adaptive searches, which need each label before choosing the next row and so cannot rank a list in advance: Lakkaraju 16.6)"
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict

import numpy as np

#: rankings that need no label, in the order a tie is settled
LABEL_FREE = ("low_confidence", "random", "gad")
NAMES = {
    "gad": "GAD",
    "low_confidence": "lowest confidence",
    "random": "random order",
    "lakkaraju": "Lakkaraju",
    "bansal_weld": "Bansal & Weld",
    "facility_location": "facility locations",
}


@dataclass(frozen=True)
class Ranking:
    """The chosen ranking and the errors per ``budget`` labels each search found (mean over pools and seeds)."""

    chosen: str
    budget: int
    errors: Dict[str, float]

    def sentence(self) -> str:
        """``"ranked by lowest confidence: 16.3 errors per 50 labels, against GAD's 11.6 and ..."``."""
        others = [s for s in LABEL_FREE if s in self.errors and s != self.chosen]
        adaptive = [s for s in self.errors if s not in LABEL_FREE]
        out = (
            f"ranked by {NAMES.get(self.chosen, self.chosen)}: {self.errors[self.chosen]:.1f} errors per "
            f"{self.budget} labels"
        )
        if others:
            out += ", against " + " and ".join(f"{NAMES.get(s, s)}'s {self.errors[s]:.1f}" for s in others)
        if adaptive:
            out += (
                " (adaptive searches, which need each label before choosing the next row and so cannot rank a "
                "list in advance: " + ", ".join(f"{NAMES.get(s, s)} {self.errors[s]:.1f}" for s in adaptive) + ")"
            )
        return out


def choose(errors: Dict[str, float], budget: int, gad_reliable: bool) -> Ranking:
    """The label-free ranking with the most errors per label (``errors``: search -> mean errors in ``budget``
    queries); GAD only where it is reliable."""
    usable = [s for s in LABEL_FREE if s in errors and np.isfinite(errors[s]) and (s != "gad" or gad_reliable)]
    if not usable:
        usable = ["low_confidence"]
    best = max(usable, key=lambda s: (errors.get(s, float("-inf")), -LABEL_FREE.index(s)))
    return Ranking(chosen=best, budget=int(budget), errors={k: float(v) for k, v in errors.items()})


def order_by(name: str, confidence: np.ndarray, gad_score: np.ndarray, rows: np.ndarray, seed: int) -> np.ndarray:
    """Positions of the eligible rows in ranking ``name``'s order (ties by row): ``gad`` highest score first,
    ``low_confidence`` lowest confidence first, ``random`` a permutation drawn from ``seed``."""
    rows = np.asarray(rows, np.int64)
    if name == "gad":
        return np.lexsort((rows, -np.asarray(gad_score, np.float64)))
    if name == "low_confidence":
        return np.lexsort((rows, np.asarray(confidence, np.float64)))
    if name == "random":
        return np.random.default_rng(seed).permutation(len(rows))
    raise ValueError(f"no label-free ranking {name!r}; one of {', '.join(LABEL_FREE)}")
