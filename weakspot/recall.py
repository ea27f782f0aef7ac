"""Per-class recall: how often the model gets each class right on held-out rows, against the other classes, with its
interval and the test of "this class fails more often than the others", corrected over the classes.

Caveats first: a class is known only with the label, so a class the model recalls poorly is not a weak spot a user
can flag before the answer (those are regions of the features, the rendering factors or the model's own output: the
methods' findings). It is the first thing to know about a model all the same, so it is a table of its own beside the
weak spots, never ranked with them. Every class is tested (no search chose one), so every held-out row measures it:
the test split, never a row the model trained on. The classes are one family of their own (Benjamini-Hochberg at
:data:`weakspot.evidence.FDR`); the interval of a recall is Clopper-Pearson's at 90% (5% each side, the bounds' level
in :mod:`weakspot.evidence`).

Example
-------
>>> import numpy as np
>>> y = np.repeat([0, 1, 2], 100)
>>> pred = y.copy(); pred[200:240] = 0  # class c: 40 of its 100 rows wrong
>>> t = class_recall(np.eye(3)[pred], y, ["a", "b", "c"])
>>> t[["class", "recall", "others_recall", "recalled_worse"]].to_dict("records")[2]
{'class': 'c', 'recall': 0.6, 'others_recall': 1.0, 'recalled_worse': True}
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from weakspot.errors import DataError

#: the columns of :func:`class_recall`'s table
COLUMNS = (
    "class",
    "n_test",
    "recall",
    "recall_lo",
    "recall_hi",
    "others_recall",
    "lift",
    "lift_lo_adjusted",
    "p_adjusted",
    "recalled_worse",
)


def class_recall(proba: Any, y: Any, classes: Sequence[Any]) -> Any:
    """One row per class (in ``classes``' order) of the held-out rows ``y`` under the model's probabilities ``proba``:
    :data:`COLUMNS`. ``lift`` is the class's failure rate over the other classes' (a zero counted as half a failure),
    ``recalled_worse`` whether that lift's adjusted lower bound is above 1 after the correction over the classes.

    Raises
    ------
    DataError
        ``proba`` is not one row of one probability per class for each label.
    """
    import pandas as pd

    from weakspot import evidence as ev

    p, y = np.asarray(proba, np.float64), np.asarray(y)
    if p.ndim != 2 or p.shape != (len(y), len(classes)):
        raise DataError(f"class recall: probabilities of shape {p.shape} for {len(y)} labels of {len(classes)} classes")
    failed = p.argmax(axis=1) != y
    tests = ev.correct([ev.on_masks(failed, y == k) for k in range(len(classes))])
    rows = []
    for k, (name, e) in enumerate(zip(classes, tests)):
        n = int((y == k).sum())
        hits = n - e.failures
        lo, hi = ev.clopper_pearson(hits, n) if n else (float("nan"), float("nan"))
        rows.append(
            {
                "class": str(name),
                "n_test": n,
                "recall": hits / n if n else float("nan"),
                "recall_lo": lo,
                "recall_hi": hi,
                "others_recall": 1.0 - e.control_rate if e.n_control else float("nan"),
                "lift": e.lift,
                "lift_lo_adjusted": e.lift_lo_adjusted,
                "p_adjusted": e.p_adjusted,
                "recalled_worse": e.confirmed,
            }
        )
    return pd.DataFrame(rows, columns=list(COLUMNS))
