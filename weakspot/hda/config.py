"""The ``hda`` section of params.yaml: hierarchical distribution-aware testing (seeds/004, Huang et al.).

Caveats first: the paper gives the norm-ball radii (Table 1: 0.1 MNIST, 0.08 Fashion-MNIST, 0.03 SVHN and CIFAR-10),
the number of seeds of Tables 5-7 (100), the FID sample size (1000), the fine-tuning schedule (10 epochs, "slow
start, fast decay") and the test-case budgets of Table 9 (300 / 3000 / 30000 from 100 / 1000 / 10000 seeds); it
does not give the VAE's architecture, the GA's population, operators, lambda or iterations ("hundreds"), nor the
local-robustness estimator's settings: those defaults are ours and say so. The CPU default scales the paper down,
each named in the report by what ran: the seeds per experiment, the GA's generations, the balls of Table 4, the
fine-tuning data and epochs. ``depth`` says how much of the paper runs: ``audit`` (the default) the weak spots
and their evidence, ``study`` the paper's comparisons too. ``per_target`` sets any key per target (the scenes
target's model is ~100x slower per query than the digits' LeNet; ``per_target: {<t>: {depth: study}}`` runs the
whole study on one target). An unknown key is an error.
"""

from __future__ import annotations

from typing import Any, Literal, Optional

from pydantic import BaseModel, ConfigDict, Field, field_validator

#: Table 1's radii: grey-scale images take MNIST's 0.1, colour images CIFAR-10's 0.03 (fractions of the data range).
RADIUS_GREY = 0.1
RADIUS_COLOUR = 0.03

#: The paper's settings where it gives them, for the report's "settings that differ" table.
PAPER_SETTINGS = {
    "n_seeds": (100, "Tables 5-8: averaged over 100 seeds"),
    "robustness.n_balls": (1000, "Table 4: 1000 random norm balls"),
    "fid_samples": (1000, "Fig. 3: 1000 samples"),
    "ga.generations": ("hundreds (until convergence)", "Fig. 5"),
    "finetune.epochs": (10, "Sec. 4.1, RQ4"),
    "finetune.seeds": ("100 / 1000 / 10000", "Table 9"),
    "finetune.train": ("the full training set", "Sec. 4.1, RQ4"),
}


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_default=True)


class VaeParams(_Section):
    """The VAE whose encoder compresses the data for the global distribution (Sec. 3.2); its settings are ours."""

    latent_dim: int = Field(8, ge=1, le=512)
    hidden: int = Field(64, ge=4, le=4096)  # the encoder's last hidden layer (also the FID features)
    epochs: int = Field(30, ge=1, le=10_000)
    max_steps: int = Field(1500, ge=1)  # CPU budget: caps epochs * batches
    lr: float = Field(2e-3, gt=0, le=1)
    batch_size: int = Field(128, ge=1)
    beta: float = Field(1.0, gt=0)


class RobustnessParams(_Section):
    """Local robustness of a norm ball (Definition 1), estimated by adaptive multilevel splitting (Webb et al. 2019,
    the estimator the paper invokes); the sample counts are ours."""

    n_balls: int = Field(300, ge=3)  # Table 4: 1000
    particles: int = Field(32, ge=4)
    rho: float = Field(0.1, gt=0, lt=1)
    mh_steps: int = Field(5, ge=1)
    log_p_min: float = Field(-30.0, lt=0)  # natural log: the estimator stops below it (as Webb et al.'s does)
    max_levels: int = Field(300, ge=1)


class GaParams(_Section):
    """The two-step GA of Algorithm 1; population, operators, lambda and generations are ours."""

    population: int = Field(20, ge=4, le=10_000)
    generations: int = Field(40, ge=1, le=100_000)
    metric: Literal["ssim", "mse", "psnr"] = "ssim"  # the perceptual term (Sec. 3.4; SSIM best on colour images)
    lam: float = Field(20.0, ge=0)  # lambda of Eq. 8 (0 = the regular GA of Fig. 6): 0.05 of SSIM = J of 1
    switch_at: float = Field(0.5, gt=0, le=1)  # "most of the population" adversarial -> fitness 2
    crossover: bool = True
    mutation_rate: float = Field(0.05, gt=0, le=1)  # per pixel
    mutation_scale: float = Field(0.5, gt=0, le=2)  # uniform noise of +- scale * radius on a mutated pixel
    elite: int = Field(2, ge=0)


class CoverageParams(_Section):
    """The coverage-guided baseline: neuron coverage (Pei et al.) guiding a DeepHunter-style fuzzer. ``iterations``
    None gives it HDA's GA's queries per seed (:func:`coverage_iterations`): the two search on equal terms."""

    iterations: Optional[int] = Field(None, ge=1)
    mutants: int = Field(20, ge=1)
    threshold: float = Field(0.5, gt=0, lt=1)


class FodaParams(_Section):
    """FODA (Dola et al.): test cases decoded from the VAE's latent space around a seed's code."""

    samples: int = Field(20, ge=1)  # decoded test cases drawn per seed
    scale: float = Field(1.0, gt=0)  # of the encoder's sigma


class FidParams(_Section):
    """FID's features (:mod:`weakspot.hda.reference`): a small CNN this stage trains on the training sample, never the
    audited model; and how much a FID rests on (ours: the paper uses Inception's features and gives no interval)."""

    width: int = Field(16, ge=4, le=256)  # the reference CNN's first block's channels
    train: int = Field(3000, ge=10)  # training inputs it learns from (a seeded sample)
    epochs: int = Field(10, ge=1, le=1000)
    lr: float = Field(2e-3, gt=0, le=1)
    batch_size: int = Field(64, ge=1)
    min_aes: int = Field(20, ge=2)  # no FID claim from fewer AEs than this
    bootstrap: int = Field(50, ge=0)  # resamples of the (seed, AE) pairs for the 95% interval (0: none)


class OodaParams(_Section):
    """OODA (Dola et al., Table 7): an attack's AEs kept only where the VAE's reconstruction probability reaches a
    threshold; the threshold is this quantile of held-out real inputs' (ours: Dola et al. tune it per data set)."""

    quantile: float = Field(0.05, gt=0, lt=1)
    samples: int = Field(8, ge=1)  # latent draws per input for the reconstruction probability (An and Cho)


class FinetuneParams(_Section):
    """RQ4 (Table 9): adversarial fine-tuning with each method's test cases."""

    enabled: bool = True
    methods: list = Field(default_factory=lambda: ["hda", "pgd", "coverage"])
    pool: int = Field(300, ge=2)  # validation inputs drawn by global density (paper: 10000)
    seeds: int = Field(100, ge=1)  # seeds whose test cases fine-tune the model (paper: 100 / 1000 / 10000)
    cases_per_seed: int = Field(3, ge=1)  # paper: 3 test cases per seed (300 from 100 seeds)
    train: int = Field(2000, ge=0)  # training inputs mixed in (ours, CPU; paper: the full training set)
    epochs: int = Field(10, ge=1)  # paper: 10
    lr: float = Field(1e-3, gt=0, le=1)  # peak of the slow-start fast-decay schedule (Jeddi et al.)
    batch_size: int = Field(64, ge=1)

    @field_validator("methods")
    @classmethod
    def _methods(cls, v: list) -> list:
        bad = [m for m in v if m not in ("hda", "pgd", "coverage")]
        if bad:
            raise ValueError(
                f"unknown fine-tuning method(s) {bad}; valid: hda, pgd, coverage (FODA's test cases "
                "have no ground-truth label, Remark 4)"
            )
        return v


class HdaParams(_Section):
    """params.yaml ``hda`` section."""

    seed: int = 0
    # ours: how much of seeds/004 runs. "audit": the weak spots with their evidence (the VAE+KDE density, the
    # fragility indicator, the seed selection, HDA's two-step GA around the selected seeds and around random control
    # seeds). "study": also the paper's comparisons (Tables 3-4 and Fig. 3 with the FID reference network, the FODA,
    # PGD, OODA and coverage baselines of Tables 6-7, Table 8's adversarially trained model, Table 9's fine-tuning and
    # the repaired model). Both draw the same random numbers up to the GA: their seeds and weak spots are the same.
    depth: Literal["audit", "study"] = "audit"
    # ours: the VAE, the KDE and RQ4 use a seeded sample of at most this many training inputs (None: all, as the paper)
    train_sample: Optional[int] = Field(10_000, ge=100)
    radius: Optional[float] = Field(None, gt=0, lt=1e6)  # L-inf radius, data units (None: Table 1's by colour)
    pool: int = Field(1000, ge=2)  # candidate seeds: correctly classified inputs, test split first (paper: test set)
    n_seeds: int = Field(50, ge=1)  # k (paper: 100)
    cases_per_seed: int = Field(3, ge=1)  # test cases per seed on average, allocated by density (Sec. 3.4)
    indicator: Literal["auto", "gradient", "separation"] = "auto"  # auto: gradient on white-box models
    normalise: Literal["rank", "max"] = "rank"  # Sec. 3.3 (ii): both quantities to one scale
    vae: VaeParams = Field(default_factory=VaeParams)
    robustness: RobustnessParams = Field(default_factory=RobustnessParams)
    ga: GaParams = Field(default_factory=GaParams)
    pgd_steps: int = Field(30, ge=1)
    coverage: CoverageParams = Field(default_factory=CoverageParams)
    foda: FodaParams = Field(default_factory=FodaParams)
    fid_samples: int = Field(1000, ge=10)  # Fig. 3
    fid: FidParams = Field(default_factory=FidParams)
    ooda: OodaParams = Field(default_factory=OodaParams)
    adversarial_model: bool = True  # RQ3 (Table 8): the intrinsic stage's min-max model
    autoattack_iters: int = Field(20, ge=1)
    finetune: FinetuneParams = Field(default_factory=FinetuneParams)
    batch_size: int = Field(1024, ge=1)
    max_findings: int = Field(12, ge=0, le=1000)

    @property
    def comparisons(self) -> bool:
        """Whether the paper's comparisons run (``depth: study``): Tables 3-4, the baselines, Tables 8-9, the repair."""
        return self.depth == "study"


def coverage_iterations(p: HdaParams) -> int:
    """The coverage fuzzer's iterations: ``coverage.iterations``, else as many as give it HDA's GA's queries per seed
    (``population x (generations + 1)``, :func:`weakspot.hda.generate.two_step_ga`) in ``coverage.mutants`` a round.

    >>> coverage_iterations(HdaParams(ga={"population": 20, "generations": 100}, coverage={"mutants": 20}))
    101
    """
    if p.coverage.iterations is not None:
        return int(p.coverage.iterations)
    return max(1, -(-p.ga.population * (p.ga.generations + 1) // p.coverage.mutants))


def default_radius(n_channels: int, lo: float, hi: float) -> float:
    """Table 1's radius for the data: MNIST's 0.1 for grey-scale, CIFAR-10's 0.03 for colour, times the range."""
    return (RADIUS_GREY if int(n_channels) == 1 else RADIUS_COLOUR) * float(hi - lo)


def radius_of(p: HdaParams, n_channels: int, clip: Any) -> float:
    """``p.radius``, else Table 1's for the data (:func:`default_radius`)."""
    return float(p.radius if p.radius is not None else default_radius(n_channels, *clip))
