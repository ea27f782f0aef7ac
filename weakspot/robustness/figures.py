"""The robustness curve's figure: accuracy under each attack against eps, with the 95% intervals shaded."""

from __future__ import annotations

from typing import Any, Dict

from weakspot.robustness.config import RobustnessParams
from weakspot.robustness.report import NAMES, curve_table
from weakspot.robustness.run import CurveResult


def figures(res: CurveResult, params: RobustnessParams, target: Any) -> Dict[str, Any]:
    import matplotlib.pyplot as plt

    t = curve_table(res)
    fig, ax = plt.subplots(figsize=(6.4, 3.8))
    for a in [c for c in res.correct if c != "clean"]:
        ax.plot(t["eps (data units)"], t[a], marker="o", label=NAMES[a])
        ax.fill_between(t["eps (data units)"], t[f"{a} lo"], t[f"{a} hi"], alpha=0.2)
    ax.axhline(float(t["clean"].iloc[0]), color="grey", linestyle=":", label="clean")
    ax.set(
        xlabel="L-inf eps (data units)",
        ylabel="accuracy",
        ylim=(0, 1.02),
        title=f"{target.name}: accuracy under attack ({res.n} test inputs)",
    )
    ax.legend()
    fig.tight_layout()
    return {"curve": fig}
