"""params.yaml schema of the examine stage family (paper ``seeds/000``, "Identifying Model Weakness with
Adversarial Examiner").

Defaults are the paper's (each commented with its section); the fast CPU profile overrides them in params.yaml.

Two depths (``depth``, ours, issue 49): ``audit`` runs the examinations and their regions, and the study's experiments
as their own flags say; ``study`` also runs the factor-order check, the strength mode and the planted weakness (Sec.
4.4-4.6), as if ``study.order_check``, ``study.strength`` and ``study.artificial_weakness.enabled`` were true (the
training-set-size study keeps its own flag, ``study.m_study.enabled``), so the ``examine_study`` stage runs. The
examinations and their regions are the same at both depths. The study is one stage for the audit, not per target: it
reads the section's ``depth``, never a target's ``per_target`` entry.
"""

from __future__ import annotations

from typing import Annotated, List, Literal, Optional, Tuple, Union

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, model_validator


def _check_examiners(names):
    """Each name must be a registered examiner (``weakspot.examine.examiners.EXAMINERS``)."""
    from weakspot.examine.examiners import EXAMINERS

    single = isinstance(names, str)
    bad = [n for n in ([names] if single else names) if n not in EXAMINERS]
    if bad:
        raise ValueError(f"unknown examiner(s) {bad}; valid names: {', '.join(EXAMINERS.names())}")
    return names


def _check_arch(name: str) -> str:
    """The name must be a registered architecture (``weakspot.models.ARCHS``)."""
    from weakspot.models.archs import ARCHS

    if name not in ARCHS:
        raise ValueError(f"unknown architecture {name!r}; valid names: {', '.join(ARCHS.names())}")
    return name


ExaminerName = Annotated[str, AfterValidator(_check_examiners)]
"""A registered examiner's name (checked against ``EXAMINERS`` when the params are validated)."""
ExaminerNames = Annotated[List[str], AfterValidator(_check_examiners)]
ArchName = Annotated[str, AfterValidator(_check_arch)]
"""A registered architecture's name (checked against ``weakspot.models.ARCHS``)."""


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_default=True)


class RLParams(_Section):
    """LSTM policy examiner (paper Sec. 2.2 and 4.1)."""

    bins: int = Field(100, ge=2, le=10_000)  # Sec. 4.1: 100 choices per factor
    embedding_size: int = Field(30, ge=1)  # Sec. 4.1
    hidden_size: int = Field(30, ge=1)  # Sec. 4.1
    lr: float = Field(0.001, gt=0, le=1)  # Sec. 4.1, Adam
    batch_size: int = Field(32, ge=1)  # Sec. 4.1: B in Eq. 5; one iteration = one batch
    baseline_decay: float = Field(0.9, ge=0, lt=1)  # REINFORCE baseline (EMA); not given in the paper


class BOParams(_Section):
    """GP-UCB examiner on the bayesian-optimization package (paper Sec. 2.2 and 4.1)."""

    init_points: int = Field(2, ge=1)  # Sec. 4.1: "we allow 2 random examples at the very beginning"
    kappa: float = Field(2.576, ge=0)  # package default UCB weight; not given in the paper
    exploration_decay: Optional[float] = Field(None, gt=0, le=1)  # package option: kappa x this per step (ours)
    ard: bool = False  # one GP length scale per factor (ours; the package has one for all)
    objective: Literal["prob", "logit"] = "prob"  # what the GP models: p (the paper's L) or its log-odds (ours)
    min_length_scale: Optional[float] = Field(None, gt=0, le=10)  # floor on the GP's length scale (unit cube;
    #                                                               None: the package's 1e-5)
    n_restarts_optimizer: int = Field(0, ge=0)  # speed tuning (package: 5); warm-started fits instead
    refit_every: int = Field(5, ge=1)  # GP hyperparameters re-optimised every k steps (speed tuning)
    n_random: int = Field(2000, ge=1)  # acquisition candidates (package: 10000)
    n_smart: int = Field(0, ge=0)  # L-BFGS-B starts (package: 10); 0 = batched local search instead
    n_local: int = Field(300, ge=1)  # local-search candidates per round (speed tuning)
    n_seeds: int = Field(5, ge=1)  # best points perturbed per round
    local_scales: List[float] = [0.1, 0.03, 0.01]  # perturbation scale per round (unit cube)
    stock: bool = False  # True: the package exactly as shipped (slow, ~0.9 s a step at 300 points)


class ArtificialWeaknessParams(_Section):
    """Sec. 4.4: train with viewpoint elevation limited, see whether examiners' late queries leave that range."""

    enabled: bool = True
    factor: str = "view_elevation"  # U_v, Table 1
    train_range: Tuple[float, float] = (-30.0, 30.0)  # Sec. 4.4: [-30, 30] degrees instead of [-90, 90]
    examiners: ExaminerNames = ["rl", "bo", "random"]
    classes: Optional[List[str]] = None  # None: every examined class (Fig. 4 shows "can")
    T: int = Field(250, ge=1)  # Fig. 4: T = 250
    tail: int = Field(50, ge=1)  # metrics: the last 50 queries
    tsne_class: Optional[str] = "can"  # Fig. 4 shows "can"; an unexamined name falls back to the first class


class MStudyParams(_Section):
    """Sec. 4.3 / Table 3: training-set size m (images per training instance)."""

    enabled: bool = True
    values: List[int] = [1, 2, 5, 10]  # Table 3
    examiners: ExaminerNames = ["rl", "bo"]  # Table 3
    T: int = Field(200, ge=1)  # Table 3: T = 200
    classes: Optional[List[str]] = None  # None: every examined class

    @model_validator(mode="after")
    def _positive(self):
        if not self.values or any(v < 1 for v in self.values):
            raise ValueError(f"values: need positive image counts per instance, got {self.values}")
        return self


class StudyParams(_Section):
    """The paper's experiments that need their own models (Sec. 4.3-4.6), trained by ``run_study`` itself with
    ``weakspot.models.ARCHS[arch]`` and ``train_torch_classifier``."""

    arch: ArchName = "small_cnn"  # the paper uses resnet34 (Sec. 4.3, 4.4); small_cnn trains ~6x faster on a CPU
    epochs: int = Field(40, ge=1)  # Sec. 4.1: 40 epochs
    lr: Optional[float] = Field(None, gt=0, le=1)  # None: weakspot.models.PAPER_LR[arch] (Sec. 4.1), else 0.001
    batch_size: int = Field(64, ge=1)  # not given in the paper
    augment: Optional[Literal["hflip"]] = "hflip"  # random horizontal flips; not given in the paper
    lr_schedule: Literal["constant", "cosine"] = "constant"  # Sec. 4.1 gives a constant Adam rate
    m_study: MStudyParams = MStudyParams()  # Sec. 4.3 / Table 3
    artificial_weakness: ArtificialWeaknessParams = ArtificialWeaknessParams()  # Sec. 4.4
    full_model: Optional[str] = None  # a scene target whose trained model serves as the full model (order check,
    #                                   strength, m >= views per instance) instead of training one more (ours)
    classes: Optional[List[str]] = None  # classes of the order check and strength mode (None: examine.classes)
    order_check: bool = True  # Sec. 4.5
    strength: bool = True  # Sec. 4.6 / Fig. 5
    strength_examiner: ExaminerName = "rl"
    T: int = Field(500, ge=1)  # iterations of the order check and strength mode (Sec. 4.5-4.6: as Table 2's T = 500)

    @property
    def enabled(self) -> bool:
        """Whether any experiment is on: the study's stage (``examine_study``) runs only then (always at
        ``examine.depth: study``, which turns the order check, the strength mode and the planted weakness on)."""
        return bool(self.m_study.enabled or self.artificial_weakness.enabled or self.order_check or self.strength)

    def learning_rate(self) -> float:
        """``lr``, or the paper's learning rate of ``arch`` (0.005 ResNet34, 0.001 AlexNet and small_cnn)."""
        from weakspot.models.archs import PAPER_LR

        return float(self.lr) if self.lr is not None else float(PAPER_LR.get(self.arch, 0.001))


class RegionsParams(_Section):
    """The examiner's weak regions (ours, :mod:`weakspot.examine.regions`): a shallow tree on a class's examined
    scenes proposes a box of factor ranges where the model fails; fresh renders inside it, on the class's other unseen
    instances, confirm it against as many random scenes of that class."""

    enabled: bool = True
    max_depth: int = Field(2, ge=1, le=6)  # factor conditions per region, at most
    min_fraction: float = Field(0.1, gt=0, lt=0.5)  # of a class's examined scenes a region must hold
    n_confirm: int = Field(40, ge=5)  # fresh renders inside the region, and as many random ones (the control)


class ExamineParams(_Section):
    """The examine stage family: examiners, their budget and checkpoints (Sec. 4.1-4.2), and the study (Sec. 4.3-4.6).

    The audited model is not configured here: :func:`weakspot.examine.run.examine_target` is given it.
    """

    depth: Literal["audit", "study"] = "audit"  # ours (issue 49): "study" switches the study's experiments on
    examiners: ExaminerNames = ["random", "bo", "rl"]  # Sec. 2.2 (random = T = 0 protocol); names of EXAMINERS
    T: int = Field(500, ge=1)  # Sec. 4.1: 500 iterations (RL: one batch each, BO: one query each)
    checkpoints: List[int] = [0, 100, 300, 500]  # Table 2
    window: int = Field(1, ge=1)  # iterations averaged at a checkpoint (paper: the T-th, Algorithm 1)
    random_batch: int = Field(1, ge=1)  # queries per iteration of the random examiner
    n_random: int = Field(50, ge=2)  # T = 0 protocol and t-SNE's random set (Fig. 3: 50 random)
    tail: int = Field(50, ge=1)  # Fig. 3: the last 50 examined images
    # None: every class (Sec. 4.1: one validation instance per class); an int N: the N classes the model recalls
    # worst on the unseen renders, worst first (the rule when a CPU budget examines fewer than every class)
    classes: Optional[Union[List[str], Annotated[int, Field(ge=1)]]] = None
    tsne_class: Optional[str] = None  # Fig. 3 uses "cap"; None: the first examined class
    n_worst: int = Field(3, ge=1)  # worst images shown per examiner
    render_chunk: int = Field(512, ge=1)  # scenes per renderer call
    seed: int = 0
    repeats: int = Field(
        1, ge=1
    )  # examinations per class, each with its own seeds and sun (paper: one; params.yaml: 3)
    rl: RLParams = RLParams()
    bo: BOParams = BOParams()
    regions: RegionsParams = RegionsParams()
    study: StudyParams = StudyParams()

    @model_validator(mode="after")
    def _checkpoints(self):
        cps = self.checkpoints
        if not cps or sorted(set(cps)) != list(cps) or cps[0] < 0 or cps[-1] > self.T:
            raise ValueError(f"checkpoints: need increasing iterations within [0, T={self.T}], got {cps}")
        if not self.examiners:
            raise ValueError(f"examiners: name at least one of {self._examiner_names()}")
        return self

    @model_validator(mode="after")
    def _depth(self):
        """Depth study: the order check, the strength mode and the planted weakness on, as if their flags were."""
        if self.depth == "study":
            st = self.study
            aw = st.artificial_weakness.model_copy(update={"enabled": True})
            self.study = st.model_copy(update={"order_check": True, "strength": True, "artificial_weakness": aw})
        return self

    @staticmethod
    def _examiner_names() -> List[str]:
        from weakspot.examine.examiners import EXAMINERS

        return EXAMINERS.names()

    def names(self) -> List[str]:
        """Metric keys of the checkpoints: ``T<iterations that ran>`` (never the paper's T when fewer ran)."""
        return [f"T{n}" for n in self.checkpoints]

    def queries_per_iteration(self, examiner: str) -> int:
        """Renders (model queries) one iteration of ``examiner`` costs: RL a batch, BO one, random ``random_batch``."""
        return {"rl": self.rl.batch_size, "bo": 1}.get(examiner, self.random_batch)


#: The paper's settings (seeds/000 Sec. 4.1) for the report's "what ran against the paper" table.
PAPER_SETTINGS = {
    "T": (500, "Sec. 4.1"),
    "rl.lr": (0.001, "Sec. 4.1, Adam"),
    "rl.batch_size": (32, "Sec. 4.1, B in Eq. 5"),
    "rl.bins": (100, "Sec. 4.1"),
    "bo.init_points": (2, "Sec. 4.1"),
    "bo.kappa": (2.576, "the package's default; the paper gives none"),
    "bo.objective": ("prob", "Sec. 4.1: L is the true-class probability; the GP models it"),
    "bo.ard": (False, "the package's GP: one length scale for all factors"),
    "bo.min_length_scale": (None, "the package's GP: bounded below by 1e-5"),
    "random_batch": (1, "T = 0 protocol: one random scene per query"),
    "repeats": (1, "one examination per class (Table 2 gives no interval)"),
}
