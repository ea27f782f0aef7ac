"""The ``corner`` section of params.yaml: corner-case generation (seeds/003, Platon, Avrin & Chan-Hon-Tong 2020).

Caveats first: every default is the paper's where the paper gives a number (cited in a comment: Sec. 3, 4.2, 4.3,
4.5); where the paper is silent -- layer widths, autoencoder epochs and learning rate, the number of seeds, the
realism score's threshold, the boundary tolerance -- the default is ours and says so. The CPU defaults scale the
paper down: a few dozen autoencoder epochs on the target's own training images instead of MNIST-size training, and
200 seeds. An unknown key is an error.

Units: latent coordinates are *standardised* (each latent axis divided by the training codes' standard deviation,
see :class:`weakspot.corner.autoencoder.Generator`), so ``lr`` (Adam's step, about one unit per coordinate per
step), ``fgsm_eps`` on the latent side and ``kde_bandwidth`` are in units of the training codes' spread.
``boundary_margin`` is in probability (``p_top1 - p_top2``), the optimised hardness term is the logit margin.

Two depths (``depth``, ours, issue 49): ``audit`` runs the generator, the search, realism and the independent judge's
controls (the corner cases and their evidence); ``study`` adds the paper's comparisons, FGSM against a latent step
(Sec. 4.5) and the search rerun at the paper's step (``paper_lr_seeds``). The corner cases are the same at both.
"""

from __future__ import annotations

from typing import List, Literal, Optional, Union

from pydantic import BaseModel, ConfigDict, Field, field_validator


#: The paper's settings where it gives them (Sec. 4.1-4.5), for the report's "settings that differ" table.
PAPER_SETTINGS = {
    "steps": (50, "Sec. 4.3"),
    "lr": (0.001, "Sec. 4.3, Adam, latent units not given"),
    "lr_schedule": ("constant", "Sec. 4.3, no schedule mentioned"),
    "fgsm_eps": (0.25, "Sec. 4.5"),
    "realism_weight": (0.0, "Sec. 3: loss alpha * |f(G(s))| - D(G(s)), no realism hinge"),
}


class CornerParams(BaseModel):
    """params.yaml ``corner`` section."""

    model_config = ConfigDict(extra="forbid", validate_default=True)

    seed: int = 0  # ours
    # ours (issue 49): "study" adds the FGSM comparison and the paper-lr rerun
    depth: Literal["audit", "study"] = "audit"
    # ours: the autoencoder fits a seeded sample of at most this many training images (None: all, as the paper)
    train_sample: Optional[int] = Field(10_000, ge=100)

    # Generator (Sec. 4.2): a symmetric convolutional autoencoder, 4 conv layers each side, trained without labels
    # Sec. 4.1: MNIST "can be scattered in 2D", so 2 for grey-scale; "auto" = 2 when C == 1, 8 when C == 3 (ours:
    # rendered RGB scenes do not fit a 2-D code)
    latent_dim: Union[int, Literal["auto"]] = "auto"
    channels: List[int] = Field(
        default_factory=lambda: [16, 32, 32, 64], min_length=4, max_length=4
    )  # ours (widths not given)
    hidden: int = Field(128, ge=2, le=4096)  # ours: one dense layer between the convolutions and the code
    epochs: int = Field(40, ge=1, le=10_000)  # ours: CPU budget (the paper trains on 50,000 MNIST images)
    # ours: CPU budget, caps epochs so that epochs * ceil(n / batch_size) <= this (1259 digits: 25 epochs; 4000
    # scenes: 7 epochs, about a minute on one loaded CPU core)
    max_ae_steps: int = Field(500, ge=1)
    lr_ae: float = Field(3e-3, gt=0, le=1)  # ours (Adam)
    batch_size: int = Field(64, ge=1)  # ours

    # Discriminator (Sec. 3): loss alpha * |f(G(s))| - D(G(s)); Sec. 4.1 drops it for the 2-D MNIST code
    discriminator: Union[bool, Literal["auto"]] = "auto"  # "auto" = use it when the images have 3 channels (ours)
    disc_alpha: float = Field(1.0, gt=0)  # Sec. 3's alpha (hardness/realism trade-off); value ours
    disc_epochs: int = Field(3, ge=1, le=1000)  # ours (CPU budget)
    disc_widen: float = Field(
        2.0, gt=1
    )  # ours: negatives are decoded from a Gaussian this many times wider than the codes

    # Search (Sec. 4.3)
    n_seeds: int = Field(200, ge=1, le=100_000)  # ours (the paper shows a handful)
    seed_source: Literal["kde", "gaussian"] = "kde"  # ours: draw seeds from the codes' KDE or a Gaussian fitted to them
    steps: int = Field(50, ge=1, le=100_000)  # Sec. 4.3: "only 50 gradient step (Adam, lr=0.001)"
    lr: float = Field(0.001, gt=0, le=10)  # Sec. 4.3: Adam, lr = 0.001
    lr_schedule: Literal["constant", "cosine"] = "constant"  # Sec. 4.3: constant; "cosine" anneals to 0 (ours)
    realism_weight: float = Field(
        1.0, ge=0
    )  # ours: weight of the hinge on the latent log-density (0 = paper's 2-D setup)

    # Realism score (independent of the classifier)
    kde_bandwidth: Union[float, Literal["scott"]] = "scott"  # Scott's rule n^(-1/(d+4)) in standardised latent units
    realism_quantile: float = Field(
        0.05, gt=0, lt=1
    )  # ours: realistic = log-density >= this quantile of the training codes'
    boundary_margin: float = Field(0.05, gt=0, lt=1)  # ours: near the boundary = p_top1 - p_top2 < this

    # Independent realism judge (ours, issue 24): neither the audited model nor the autoencoder
    reference_train: int = Field(4000, ge=50)  # ours: training images the reference classifier learns (a seeded sample)
    reference_epochs: int = Field(20, ge=1, le=1000)  # ours: its epochs, capped by reference_max_steps
    reference_max_steps: int = Field(600, ge=1)  # ours: CPU budget, epochs * ceil(n / 64) <= this (a few seconds)
    near_quantile: float = Field(0.95, gt=0, lt=1)  # ours: near the data = nearest training image no farther than
    #   this quantile of real held-out images' nearest-training distances
    n_random: int = Field(1000, ge=10, le=100_000)  # ours: uniform codes in the codes' box, the judge's control
    gate: float = Field(0.8, gt=0, le=1)  # ours: "realistic" only when the model recognises at least this share of
    #   the generator's reconstructions of held-out images, relative to the images themselves
    paper_lr_seeds: int = Field(100, ge=0, le=100_000)  # ours: seeds rerun at the paper's step (lr 0.001, constant)

    # Comparison with FGSM (Sec. 4.5)
    fgsm_eps: float = Field(0.25, gt=0)  # Sec. 4.5: epsilon = 0.25 (pixels in [0, 1]; latent step of the same length)

    # Report
    n_paths: int = Field(6, ge=1, le=50)  # ours: seeds shown in the optimisation-path grid (Fig. 4-5)
    max_findings: int = Field(20, ge=0, le=10_000)  # ours: single corner cases listed as findings
    max_pairs: int = Field(10, ge=0, le=1000)  # ours: class-pair summary rows listed as findings

    @field_validator("latent_dim")
    @classmethod
    def _latent(cls, v):
        if v != "auto" and (isinstance(v, bool) or int(v) < 1 or int(v) > 512):
            raise ValueError(f"latent_dim must be 'auto' or an integer in 1..512, got {v!r}")
        return v

    @field_validator("kde_bandwidth")
    @classmethod
    def _bandwidth(cls, v):
        if v != "scott" and not float(v) > 0:
            raise ValueError(f"kde_bandwidth must be 'scott' or a positive number, got {v!r}")
        return v

    @field_validator("channels")
    @classmethod
    def _channels(cls, v):
        if any(c < 1 or c > 1024 for c in v):
            raise ValueError(f"channels must be four integers in 1..1024, got {v}")
        return v

    @property
    def comparisons(self) -> bool:
        """Whether the paper's comparisons run (``depth: study``): FGSM against a latent step, the paper-lr rerun."""
        return self.depth == "study"

    def resolved_latent_dim(self, n_channels: int) -> int:
        """``latent_dim``, with ``"auto"`` resolved for images of ``n_channels`` channels."""
        if self.latent_dim == "auto":
            return 2 if n_channels == 1 else 8
        return int(self.latent_dim)

    def uses_discriminator(self, n_channels: int) -> bool:
        """``discriminator``, with ``"auto"`` resolved (on for 3-channel images)."""
        if self.discriminator == "auto":
            return n_channels == 3
        return bool(self.discriminator)
