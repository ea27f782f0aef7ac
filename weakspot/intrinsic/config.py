"""The ``intrinsic`` section of params.yaml: the intrinsic robustness score psi (seeds/002, Yu et al. 2019), its
reference attacks, the defended models it is compared with, and the decision surfaces.

Caveats first: the paper gives the threat model (L-inf eps 0.3 on MNIST, 8/255 on CIFAR-10, Sec. 5.1), the attacks'
iterations (PGD-30, CW-30) and the reparameterisation factors (x100, /100, Table 4); it does not give the KL ascent's
steps, step size or restarts, nor how its defended models were trained: those defaults are ours and say so. The CPU
default scales the paper down in three places, each named by what ran in the report: the number of inputs attacked,
AutoAttack (two APGD attacks of ``autoattack.iters`` iterations through IBM ART, not the full suite), and the
defences, fine-tuned for ``defence_epochs`` epochs from the audited model's weights instead of trained from scratch
(``defence_init: scratch`` in profiles/paper.yaml trains them as the target was trained). An unknown key is an error.

Two depths (``depth``, ours, issue 49): ``audit`` measures the audited model's weak spots with their evidence at the
least cost (its psi, its attacks, the class evidence, the check against IBM ART, its decision surfaces); ``study`` adds
the paper's comparisons: the defended copies of ``defences``, Table 4 (``reparam``) and Fig. 6 (``stability``). The
findings are the same at both depths (the same inputs, the same random streams).
"""

from __future__ import annotations

from typing import Any, Dict, List, Literal, Optional

from pydantic import BaseModel, ConfigDict, Field, field_validator

#: Sec. 5.1: "0.3/1.0, 8.0/255.0, 16.0/255.0 on MNIST, CIFAR10, and ImageNet": grey-scale images take MNIST's, colour
#: images CIFAR-10's, both as a fraction of the data's range.
EPS_GREY = 0.3
EPS_COLOUR = 8.0 / 255.0

DEFENCE_NAMES = ("fgsm_at", "minmax", "gradreg", "distillation")

#: What each model is, in words (the report's labels; "none" is the audited model itself).
DEFENCE_TITLES = {
    "none": "no defence (the audited model)",
    "fgsm_at": "FGSM adversarial training",
    "minmax": "min-max (PGD) training",
    "gradreg": "input-gradient regularisation",
    "distillation": "defensive distillation",
}

#: The paper's settings where it gives them, for the report's "settings that differ" table.
PAPER_SETTINGS = {
    "pgd_steps": (30, "Sec. 5.1: PGD-30"),
    "cw_steps": (30, "Sec. 5.1: CW-30"),
    "n_inputs": ("the test set", "Tables 1-3"),
    "autoattack": ("not used", "AutoAttack postdates the paper: an extra, stronger reference"),
    "defence_init": ("scratch", "Sec. 5.1: models trained with each defence"),
    "minmax steps": ("40 (MNIST), 7 (CIFAR-10)", "Madry et al. 2018, whose models the paper uses"),
}


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_default=True)


class PsiParams(_Section):
    """The KL ascent of Sec. 4.1 (its settings are ours: the paper names gradient ascent, no numbers)."""

    steps: int = Field(20, ge=1, le=10_000)  # ours
    step_size: Optional[float] = Field(None, gt=0)  # ours: None = 2.5 * eps / steps (Madry et al.'s rule for PGD)
    restarts: int = Field(1, ge=1, le=100)  # ours: random starts in the ball (a start at x never moves: zero gradient)
    # ours: probabilities are clamped at floor inside the KL's logs. Eq. 5 gives the most negative logit probability
    # exactly 0 when its magnitude is the largest (97-100% of clean digits and scenes inputs), so without a floor the
    # KL is unbounded and psi measures the clamp (1e-12: every flippable input scores ~27.6 p_top)
    floor: float = Field(1e-3, gt=0, lt=1)


def _both_attacks() -> List[Literal["apgd-ce", "apgd-dlr"]]:
    """AutoAttackParams.attacks's default (a typed factory: a lambda's list would be inferred as ``List[str]``)."""
    return ["apgd-ce", "apgd-dlr"]


class AutoAttackParams(_Section):
    """AutoAttack (Croce & Hein 2020) as IBM ART provides it; on the CPU two APGD attacks of ``iters`` iterations."""

    enabled: bool = True
    iters: int = Field(30, ge=1, le=10_000)  # Croce & Hein: 100
    attacks: List[Literal["apgd-ce", "apgd-dlr"]] = Field(default_factory=_both_attacks, min_length=1)


class StabilityParams(_Section):
    """Fig. 6: psi over batches of 100 to 1000 inputs."""

    batch_sizes: List[int] = Field(default_factory=lambda: [100, 250, 500, 1000], min_length=1)  # Fig. 6: 100..1000
    draws: int = Field(20, ge=2, le=10_000)  # ours: batches drawn per size
    pool: int = Field(1500, ge=2)  # ours: inputs whose KL is computed (test split first, then val; never train)

    @field_validator("batch_sizes")
    @classmethod
    def _positive(cls, v: List[int]) -> List[int]:
        if any(b < 2 for b in v):
            raise ValueError(f"batch sizes must be >= 2, got {v}")
        return sorted(set(v))


class ReparamParams(_Section):
    """Table 4: the last layer's weights and bias scaled."""

    factors: List[float] = Field(default_factory=lambda: [100.0, 0.01], min_length=1)  # Table 4: *100, /100
    defences: List[str] = Field(default_factory=lambda: ["none", "minmax"])  # Table 4: no defence and MinMax
    n_inputs: int = Field(200, ge=2)  # ours (CPU)


class SurfaceParams(_Section):
    """Decision surfaces (Sec. 3, Figs. 2-4)."""

    n_inputs: int = Field(2, ge=1, le=20)  # ours: inputs pictured per target
    grid: int = Field(41, ge=5, le=401)  # ours: points per axis
    span: float = Field(
        2.0, gt=0
    )  # ours: each axis spans [-span * eps, span * eps] (Fig. 3: the robust plateau ends near eps)


#: The two depths of a method (issue 49): its weak spots with their evidence, or also the paper's comparisons.
Depth = Literal["audit", "study"]


class IntrinsicParams(_Section):
    """params.yaml ``intrinsic`` section."""

    seed: int = 0
    depth: Depth = "audit"  # ours (issue 49): "study" adds the defended copies, Table 4 and Fig. 6
    eps: Optional[float] = Field(
        None, gt=0, lt=1e6
    )  # L-inf eps in the data's units (None: 0.3 grey / 8/255 colour x range)
    n_inputs: int = Field(500, ge=2)  # inputs for psi (the test split, then val): ours (paper: the test set)
    n_attack: int = Field(200, ge=1)  # inputs attacked per model (a prefix of the psi inputs): ours (CPU)
    pgd_steps: int = Field(30, ge=1)  # Sec. 5.1
    cw_steps: int = Field(30, ge=1)  # Sec. 5.1
    psi: PsiParams = Field(default_factory=PsiParams)
    autoattack: AutoAttackParams = Field(default_factory=AutoAttackParams)
    # the defended copies the study compares (depth: study; none at depth audit); per_target.<t>.defences: [] for none
    defences: List[str] = Field(default_factory=lambda: list(DEFENCE_NAMES))
    defence_init: Literal["target", "scratch"] = "target"  # ours (CPU): fine-tune the audited model's weights
    defence_epochs: int = Field(1, ge=1, le=10_000)  # with defence_init: target (scratch: the target's epochs)
    defence_options: Dict[str, Dict[str, Any]] = Field(default_factory=dict)  # defence -> its options
    stability: StabilityParams = Field(default_factory=StabilityParams)
    reparam: ReparamParams = Field(default_factory=ReparamParams)
    surface: SurfaceParams = Field(default_factory=SurfaceParams)
    batch_size: int = Field(250, ge=1)
    max_findings: int = Field(8, ge=0, le=1000)

    @property
    def comparisons(self) -> bool:
        """Whether the paper's comparisons run (``depth: study``): the defended copies, Table 4 and Fig. 6."""
        return self.depth == "study"

    @field_validator("defences")
    @classmethod
    def _known(cls, v: List[str]) -> List[str]:
        return check_defences(v, "intrinsic.defences")

    @field_validator("defence_options")
    @classmethod
    def _options(cls, v: Dict[str, Dict[str, Any]]) -> Dict[str, Dict[str, Any]]:
        check_defences(list(v), "intrinsic.defence_options")
        return v


def check_defences(names: List[str], where: str) -> List[str]:
    for n in names:
        if n not in DEFENCE_NAMES:
            raise ValueError(f"{where}: unknown defence {n!r}; valid: {', '.join(DEFENCE_NAMES)}")
    if len(set(names)) != len(names):
        raise ValueError(f"{where}: a defence is named twice in {names}")
    return list(names)


def default_eps(n_channels: int, lo: float, hi: float) -> float:
    """Sec. 5.1's eps for the data: MNIST's 0.3 for grey-scale (1 channel), CIFAR-10's 8/255 for colour, each times the
    data's range ``hi - lo``."""
    return (EPS_GREY if int(n_channels) == 1 else EPS_COLOUR) * float(hi - lo)
