"""Synthetic measurements for the intrinsic report tests: a ModelEval whose numbers are chosen, not measured."""

import numpy as np

from weakspot.intrinsic.evaluate import ModelEval
from weakspot.intrinsic.psi import psi, psi_per_class


def model_eval(name, kl, acc, y=None, n_classes=3, n_attacked=200):
    """A ModelEval with per-input KLs ``kl`` and accuracies ``acc`` (clean, fgsm, pgd30, cw30); the worst neighbour
    of input i is predicted as class (y_i + 1) when its KL is above 1, else as y_i."""
    kl = np.asarray(kl, np.float64)
    y = np.arange(len(kl)) % n_classes if y is None else np.asarray(y)
    pred_worst = np.where(kl > 1, (y + 1) % n_classes, y)
    return ModelEval(
        name=name,
        label=name,
        kl=kl,
        kl_softmax=kl / 2,
        x_worst=np.zeros((len(kl), 1, 4, 4), np.float32),
        psi=psi(kl),
        psi_softmax=psi(kl / 2),
        psi_class=psi_per_class(kl, y, n_classes),
        acc=dict(acc),
        n_attacked=n_attacked,
        pred=y.copy(),
        pred_worst=pred_worst,
        conf_worst=np.full(len(kl), 0.7),
    )


def accs(clean, fgsm, pgd, cw):
    return {"clean": clean, "fgsm": fgsm, "pgd30": pgd, "cw30": cw}
