"""The ``robustness`` section of params.yaml: the robustness curve (accuracy under attack over eps).

Caveats first: the grid is in fractions of the data's range (0.3 = MNIST's usual 0.3 on [0, 1] images); ``None``
takes a grid around the usual budgets, MNIST's for grey-scale images (up to 0.3) and CIFAR-10's for colour ones (up to
8/255, from a quarter of one grey level: the default scenes CNN keeps 1% at 1/255). The attacks are Madry et al.'s
PGD (L-inf, a random start, step 2.5 eps / steps) and, when ``autoattack`` is on, IBM ART's reduced AutoAttack
(APGD-CE + APGD-DLR; APGD-CE alone on two classes), slow on a CPU and off by default (the paper profile turns it on).
An unknown key is an error.

Two depths (``depth``, ours, issue 49): ``audit`` runs the attacks as configured; ``study`` runs AutoAttack at every eps
whatever ``autoattack`` says (:attr:`RobustnessParams.runs_autoattack`). The findings are PGD's at both depths.
"""

from __future__ import annotations

from typing import List, Literal, Optional

from pydantic import BaseModel, ConfigDict, Field, field_validator

#: The default grids, in fractions of the data range.
GRID_GREY = (0.0, 0.025, 0.05, 0.1, 0.2, 0.3)
GRID_COLOUR = (0.0, 0.25 / 255, 0.5 / 255, 1 / 255, 2 / 255, 4 / 255, 8 / 255)


class RobustnessParams(BaseModel):
    """params.yaml ``robustness`` section."""

    model_config = ConfigDict(extra="forbid", validate_default=True)
    seed: int = 0
    depth: Literal["audit", "study"] = "audit"  # ours (issue 49): "study" turns AutoAttack on at every eps
    n_inputs: int = Field(300, ge=2)  # held-out test inputs, a seeded sample (all when fewer)
    eps: Optional[List[float]] = None  # fractions of the data range; None: GRID_GREY or GRID_COLOUR
    pgd_steps: int = Field(20, ge=1)
    autoattack: bool = False  # also at depth audit (depth study: always on)
    autoattack_iters: int = Field(20, ge=1)
    batch_size: int = Field(256, ge=1)

    @property
    def runs_autoattack(self) -> bool:
        """Whether AutoAttack runs at every eps: ``autoattack``, or depth study."""
        return bool(self.autoattack or self.depth == "study")

    @field_validator("eps")
    @classmethod
    def _grid(cls, v: Optional[List[float]]) -> Optional[List[float]]:
        if v is not None and (len(v) < 2 or any(e < 0 or e > 1 for e in v) or sorted(set(v)) != list(v)):
            raise ValueError(f"{v}: at least two distinct fractions of the data range in [0, 1], increasing")
        return v


def grid(p: RobustnessParams, n_channels: int) -> List[float]:
    """The eps grid in fractions of the data range.

    >>> grid(RobustnessParams(), 1)[-1], round(grid(RobustnessParams(), 3)[-1] * 255)
    (0.3, 8)
    """
    return list(p.eps) if p.eps is not None else list(GRID_GREY if int(n_channels) == 1 else GRID_COLOUR)
