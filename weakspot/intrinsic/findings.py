"""The weak spots intrinsic robustness (seeds/002) finds in the audited model, in :mod:`weakspot.findings`' shape:
the strongest attack's error rate, the least stable classes, and the inputs whose eps-ball holds the most different
prediction.

Caveats first: only the audited model's weak spots are findings (the defended models are references). A class is a
candidate when its psi on half the attacked inputs is below that half's overall psi (at most three), and is
confirmed on the other half (:func:`class_evidence`): its severity is that lift. An input's severity is its largest
KL divergence in the ball, not a failure rate, so it ranks inputs, not methods (inputs and the threat model are not
checked against a control). Input numbers count in the shuffled pool
order of :func:`weakspot.intrinsic.run.measure`.
"""

from __future__ import annotations

import json
from typing import Any, List, Tuple

import numpy as np

from weakspot.intrinsic.config import IntrinsicParams
from weakspot.intrinsic.evaluate import ModelEval
from weakspot.intrinsic.tables import attack_names

SEVERITY_THREAT = "share of the attacked inputs misclassified under the strongest attack that ran (1 = every one)"
SEVERITY_CLASS = (
    "lift: the share of the class's correctly classified held-out inputs with a misclassified neighbour "
    "in the eps-ball over that of the other classes' (the class chosen by its psi on the other half)"
)
CONFIRM_CLASS = (
    " (inputs of class {c} the model gets right in the half of the attacked inputs that did not choose "
    "the class, against the other classes' inputs it gets right there; an input fails when a neighbour "
    "in its eps-ball is misclassified)"
)


def class_evidence(e: ModelEval, y: np.ndarray, n_classes: int, seed: int, top: int = 3) -> List[Tuple[int, Any]]:
    """The least stable classes, chosen on half the attacked inputs and confirmed on the other half.

    The inputs are split in two halves drawn from ``seed``; a class is a candidate when its psi on the first half
    (``1 / mean KL`` of its inputs) is below the first half's overall psi (at most ``top``, least stable first); its
    evidence (:func:`weakspot.evidence.on_masks`) counts, on the second half, its correctly classified inputs whose
    worst neighbour in the eps-ball is misclassified against the other classes' correctly classified inputs there
    (a clean error is not the attack's): ``[(class, Evidence)]``."""
    from weakspot.evidence import on_masks

    y = np.asarray(y)
    n = len(y)
    order = np.random.default_rng(seed).permutation(n)
    a, b = np.zeros(n, bool), np.zeros(n, bool)
    a[order[: n // 2]], b[order[n // 2 :]] = True, True
    kl = np.asarray(e.kl, np.float64)

    def psi_of(inputs: np.ndarray) -> float:  # 1 / mean KL of the inputs; NaN for none (or a mean of 0)
        m = kl[inputs].mean() if inputs.any() else 0.0
        return 1.0 / m if m > 0 else float("nan")

    overall = psi_of(a)
    psi_a = np.array([psi_of(a & (y == c)) for c in range(n_classes)])
    chosen = [int(c) for c in np.argsort(psi_a, kind="stable") if np.isfinite(psi_a[c]) and psi_a[c] < overall][:top]
    clean = np.asarray(e.pred) == y  # fragile under attack: inputs the model gets right that the attack turns wrong
    fails = np.asarray(e.pred_worst) != y
    return [(c, on_masks(fails[b], (y[b] == c) & clean[b], control=clean[b])) for c in chosen]


SEVERITY_INPUT = (
    "largest KL divergence between the prediction at the input and at a neighbour in the eps-ball (normalised logits)"
)


def worst_inputs(e: ModelEval, k: int) -> np.ndarray:
    """The ``k`` inputs with the largest KL divergence in their eps-ball (ties: the first input first)."""
    return np.argsort(-e.kl, kind="stable")[:k]


def findings(
    e: ModelEval, X: np.ndarray, y: np.ndarray, classes: List[str], params: IntrinsicParams, eps: float
) -> Any:
    """Findings of the audited model: the strongest attack's error rate (one row), the least stable classes, and the
    inputs with the largest KL divergence (their worst neighbour as the example image), an input before each class
    (the target's card shows the first few)."""
    import pandas as pd

    from weakspot.findings import to_png

    p = params
    att = [k for k in e.acc if k != "clean"]
    worst = min(att, key=lambda k: e.acc[k])
    names = attack_names(p)
    rows = [
        {
            "weak_spot": f"{names[worst]} at L-inf eps {eps:.4g} leaves {e.acc[worst]:.0%} of inputs correct "
            f"(clean {e.acc['clean']:.0%})",
            "kind": "threat_model",
            "severity": 1.0 - e.acc[worst],
            "severity_meaning": SEVERITY_THREAT,
            "label": "",
            "prediction": "",
            "confidence": float("nan"),
            "example": json.dumps({k: round(v, 4) for k, v in e.acc.items()}),
        }
    ]
    overall = e.psi
    class_rows = []
    for c, ev in class_evidence(e, y, len(classes), int(p.seed)):
        class_rows.append(
            {
                "weak_spot": f"class {classes[c]}: psi {e.psi_class[c]:.1f} (all inputs: {overall:.1f})",
                "kind": "class",
                "severity": float(np.nan_to_num(ev.lift, nan=0.0)),
                "severity_meaning": SEVERITY_CLASS,
                "label": classes[c],
                "prediction": "",
                "confidence": float("nan"),
                "example": json.dumps(
                    {"psi_class": round(float(e.psi_class[c]), 4), "psi_all": round(float(overall), 4)}
                ),
                **ev.columns(),
                "confirmation": ev.sentence() + CONFIRM_CLASS.format(c=classes[c]),
            }
        )
    input_rows = []
    for i in worst_inputs(e, int(p.max_findings)):
        moved = (
            f"moves the prediction from {classes[e.pred[i]]} to {classes[e.pred_worst[i]]}"
            if e.pred[i] != e.pred_worst[i]
            else f"keeps class {classes[e.pred[i]]} but moves its probabilities by KL {float(e.kl[i]):.3g}"
        )
        input_rows.append(
            {
                "weak_spot": f"input {int(i)}: a neighbour within eps {eps:.4g} {moved}",
                "kind": "input",
                "severity": float(e.kl[i]),
                "severity_meaning": SEVERITY_INPUT,
                "label": classes[y[i]],
                "prediction": classes[e.pred_worst[i]],
                "confidence": float(e.conf_worst[i]),
                "example": json.dumps(
                    {"input": int(i), "clean_prediction": classes[e.pred[i]], "kl": round(float(e.kl[i]), 5)}
                ),
                "image": to_png(e.x_worst[i], scale=4 if X.shape[-1] <= 16 else 2),
            }
        )
    for j in range(max(len(class_rows), len(input_rows))):
        rows += input_rows[j : j + 1] + class_rows[j : j + 1]
    return pd.DataFrame(rows)
