"""The weak spots intrinsic robustness (seeds/002) finds in the audited model, in :mod:`weakspot.findings`' shape:
the strongest attack's error rate, the least stable classes, and the inputs whose eps-ball holds the most different
prediction.

Caveats first: only the audited model's weak spots are findings (the defended models are references). A class is a
weak spot only when its psi is below the model's overall psi (at most three); an input's severity is its largest KL
divergence in the ball, not a failure rate, so it ranks inputs, not methods. Input numbers count in the shuffled pool
order of :func:`weakspot.intrinsic.run.measure`.
"""

from __future__ import annotations

import json
from typing import Any, List

import numpy as np

from weakspot.intrinsic.config import IntrinsicParams
from weakspot.intrinsic.evaluate import ModelEval
from weakspot.intrinsic.tables import attack_names

SEVERITY_THREAT = "share of the attacked inputs misclassified under the strongest attack that ran (1 = every one)"
SEVERITY_CLASS = ("mean over the class's inputs of the largest KL divergence in the eps-ball (normalised logits); "
                  "1/psi of the class")
SEVERITY_INPUT = ("largest KL divergence between the prediction at the input and at a neighbour in the eps-ball "
                  "(normalised logits)")


def worst_inputs(e: ModelEval, k: int) -> np.ndarray:
    """The ``k`` inputs with the largest KL divergence in their eps-ball (ties: the first input first)."""
    return np.argsort(-e.kl, kind="stable")[:k]


def findings(e: ModelEval, X: np.ndarray, y: np.ndarray, classes: List[str], params: IntrinsicParams,
             eps: float) -> Any:
    """Findings of the audited model: the strongest attack's error rate (one row), the least stable classes, and the
    inputs with the largest KL divergence (their worst neighbour as the example image), an input before each class
    (the target's card shows the first few)."""
    import pandas as pd

    from weakspot.findings import to_png

    p = params
    att = [k for k in e.acc if k != "clean"]
    worst = min(att, key=lambda k: e.acc[k])
    names = attack_names(p)
    rows = [{"weak_spot": f"{names[worst]} at L-inf eps {eps:.4g} leaves {e.acc[worst]:.0%} of inputs correct "
                          f"(clean {e.acc['clean']:.0%})",
             "kind": "threat_model", "severity": 1.0 - e.acc[worst], "severity_meaning": SEVERITY_THREAT,
             "label": "", "prediction": "", "confidence": float("nan"),
             "example": json.dumps({k: round(v, 4) for k, v in e.acc.items()})}]
    overall = e.psi
    order = [c for c in np.argsort(e.psi_class) if np.isfinite(e.psi_class[c]) and e.psi_class[c] < overall][:3]
    class_rows = [{"weak_spot": f"class {classes[c]}: psi {e.psi_class[c]:.1f} (all inputs: {overall:.1f})",
                   "kind": "class", "severity": 1.0 / e.psi_class[c], "severity_meaning": SEVERITY_CLASS,
                   "label": classes[c], "prediction": "", "confidence": float("nan")} for c in order]
    input_rows = []
    for i in worst_inputs(e, int(p.max_findings)):
        moved = (f"moves the prediction from {classes[e.pred[i]]} to {classes[e.pred_worst[i]]}"
                 if e.pred[i] != e.pred_worst[i] else
                 f"keeps class {classes[e.pred[i]]} but moves its probabilities by KL {float(e.kl[i]):.3g}")
        input_rows.append({"weak_spot": f"input {int(i)}: a neighbour within eps {eps:.4g} {moved}",
                           "kind": "input", "severity": float(e.kl[i]), "severity_meaning": SEVERITY_INPUT,
                           "label": classes[y[i]], "prediction": classes[e.pred_worst[i]],
                           "confidence": float(e.conf_worst[i]),
                           "example": json.dumps({"input": int(i), "clean_prediction": classes[e.pred[i]],
                                                  "kl": round(float(e.kl[i]), 5)}),
                           "image": to_png(e.x_worst[i], scale=4 if X.shape[-1] <= 16 else 2)})
    for j in range(max(len(class_rows), len(input_rows))):
        rows += input_rows[j:j + 1] + class_rows[j:j + 1]
    return pd.DataFrame(rows)
