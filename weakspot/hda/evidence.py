"""HDA's findings against a random control: its seed selection, and the classes whose seeds it found fragile.

Caveats first:

* A seed *fails* when HDA's GA found at least one adversarial test case around it (within the L-inf radius). The GA
  runs the same way, with the same allocation of test cases, around HDA's selected seeds and around as many random
  seeds (a uniform draw of the candidates, RQ2): the random seeds are the control.
* The seed selection is made by density and the fragility indicator, before any GA ran, so the GA's outcome around
  the selected seeds is a measurement the selection never saw: HDA beats its control when its seeds fail more often
  than random ones (the 95% interval of the ratio above 1).
* A class is proposed from the selected seeds alone (its seeds fail more often than the selected seeds overall, at
  least ``MIN_SEEDS`` of them) and confirmed on the random seeds, which the proposal never saw: the random seeds of
  the class against as many random seeds of any class. With a few dozen random seeds, few classes can be confirmed;
  the interval says so.
* An input's finding (one seed's AEs) is the search's own output: an example, not checked.
"""

from __future__ import annotations

from typing import Any, List, Tuple

import numpy as np

from weakspot.evidence import Evidence, compare, on_masks

#: selected seeds of a class needed to propose it
MIN_SEEDS = 3


def seeds_failed(result: Any, seed_set: str) -> Tuple[np.ndarray, np.ndarray]:
    """Per seed of ``seed_set`` (``selected`` or ``random``): whether HDA's GA found an AE around it, and whether it
    was measured at all (the density allocation gave it at least one test case)."""
    res = result.generators.results[("hda", seed_set)]
    ev = result.generators.evals[("hda", seed_set)]
    n = len(getattr(result.seeds, seed_set))
    idx = np.asarray(res.seed_index, np.int64)
    hit = np.asarray(ev.ae_mask, bool)
    return np.bincount(idx[hit], minlength=n)[:n] > 0, np.bincount(idx, minlength=n)[:n] > 0


def disjoint(result: Any) -> bool:
    """Whether the random seeds share no seed with the selected ones (with too few candidates they stand in for the
    paper's tables: then nothing is confirmed on them)."""
    s = result.seeds
    return not np.isin(np.asarray(s.random), np.asarray(s.selected)).any()


def seed_set_evidence(result: Any) -> Evidence:
    """HDA's selected seeds against the random ones: how many of each (given a test case) the GA found an AE
    around; not tested (no control) when the random seeds are not disjoint from the selected ones."""
    (sel, sel_m), (rnd, rnd_m) = seeds_failed(result, "selected"), seeds_failed(result, "random")
    if not disjoint(result):
        return compare(int(sel[sel_m].sum()), int(sel_m.sum()), 0, 0)
    return compare(int(sel[sel_m].sum()), int(sel_m.sum()), int(rnd[rnd_m].sum()), int(rnd_m.sum()))


def class_evidence(result: Any, seed: int, top: int = 3) -> List[Tuple[int, Evidence]]:
    """The classes whose selected seeds failed most often (above the selected seeds' rate, at least
    :data:`MIN_SEEDS` seeds, at most ``top``), each confirmed on the random seeds: ``[(class, Evidence)]``."""
    s = result.seeds
    (sel_fail, sel_m), (rnd_fail, rnd_m) = seeds_failed(result, "selected"), seeds_failed(result, "random")
    y_sel, y_rnd = np.asarray(s.y)[s.selected][sel_m], np.asarray(s.y)[s.random][rnd_m]
    sel_fail, rnd_fail = sel_fail[sel_m], rnd_fail[rnd_m]
    overall = float(sel_fail.mean()) if len(sel_fail) else 0.0
    rates = []
    for c in np.unique(y_sel):
        mine = y_sel == c
        if mine.sum() >= MIN_SEEDS and sel_fail[mine].mean() > overall:
            rates.append((-float(sel_fail[mine].mean()), -int(mine.sum()), int(c)))
    chosen = [c for _, _, c in sorted(rates)[:top]]
    if not disjoint(result):  # the random seeds are the selection's: no confirmation on what the search saw
        return [(c, compare(0, 0, 0, 0)) for c in chosen]
    return [(c, on_masks(rnd_fail, y_rnd == c)) for c in chosen]
