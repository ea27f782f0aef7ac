"""The ``gad`` section of params.yaml: the protocol of Generalized Adversarial Distance (seeds/001, Bennette et al.).

Caveats first: every default is the paper's where the paper gives a number (cited in a comment); where the paper is
silent (the attack's step size and step cap, the network width, the optimiser) the default is ours and says so. An
unknown key is an error. What is audited -- the data, its split and the trained model -- is not here: GAD audits the
targets it is given (:func:`weakspot.gad.experiment.run_target`); the paper's SVM is the built-in scikit-learn
architecture ``svm_grid`` (:mod:`weakspot.models.sklearn_archs`) and its biased splits are
:data:`weakspot.data.BIAS_PRESETS`.
"""

from __future__ import annotations

from typing import List, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from weakspot.gad.search import SEARCHES


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_default=True)


class SearchParams(_Model):
    """Hyper-parameters of the baselines (Sec. V-C); the originals' values where known, else ours."""

    lakkaraju_clusters: int = Field(8, ge=1, le=100)  # ours (Lakkaraju et al. 2017 pick k by their DSP objective)
    lakkaraju_exploration: float = Field(2.0, gt=0)  # UCB1 constant (Auer et al. 2002), as in Lakkaraju et al.'s UUB
    lakkaraju_discount: float = Field(1.0, gt=0, le=1)  # < 1: discounted UCB for drifting arms; 1 = UCB1 (ours)
    bansal_weld_clusters: int = Field(8, ge=1, le=100)  # ours
    bansal_weld_prior_strength: float = Field(2.0, gt=0)  # Beta prior pseudo-counts centred on 1 - confidence (ours)
    bandwidth: float = Field(0.5, gt=0)  # similarity kernel width, a multiple of the pool's median distance (ours)
    facility_l2: float = Field(1.0, gt=0)  # ridge on the logistic meta-model (Maurer & Bennette 2019; value ours)


class GadParams(_Model):
    """params.yaml ``gad`` section: extraction, attack, LOESS, and the Sec. V-C protocol (not the targets)."""

    seed: int = 0

    # Algorithm 1 (model extraction), Sec. V-A
    design_points: int = Field(50_000, ge=100)  # Sec. V-A: "the size of the design space, N, is 50,000"
    epochs: int = Field(20, ge=1, le=10_000)  # Sec. V-A: "e is 20 training epochs"
    hidden_units: int = Field(128, ge=2, le=4096)  # ours: the paper gives "5 dense layers" but no widths
    batch_size: int = Field(512, ge=1)  # ours
    lr: float = Field(3e-3, gt=0, le=1)  # ours (Adam)
    holdout_fraction: float = Field(0.1, gt=0, lt=0.9)  # ours: design points held out for the pseudo R^2 (Table I)

    # Algorithm 2 (attack)
    feature_scale: Literal["range", "raw"] = "range"  # ours: step and MAE in units of each feature's range (see attack.py)
    step_size: float = Field(0.002, gt=0, le=1)  # ours: epsilon; the paper gives none
    max_steps: int = Field(1000, ge=1)  # ours: the paper's loop has no cap
    refine_iters: int = Field(8, ge=0, le=50)  # ours: bisection on the last step, so MAE is not quantised to epsilon

    # GAD (Eq. 2) and LOESS (Sec. IV-A)
    loess_frac: float = Field(2.0 / 3.0, gt=0, le=1)  # Cleveland's span default; the paper gives none
    loess_iterations: int = Field(0, ge=0, le=10)  # robustifying iterations of statsmodels' lowess (ours: 0)

    # Protocol (Sec. V-C)
    replicates: int = Field(100, ge=1)  # Sec. V-C: "each search is run 100 times"
    pool_size: int = Field(250, ge=2)  # Sec. V-C: "a random 250 instance subset"
    pool_max_fraction: float = Field(0.8, gt=0, le=1)  # ours: a pool is at most this share of the eligible set
    confidence_threshold: float = Field(0.65, ge=0.5, lt=1)  # Sec. V-C: "confidence greater than 65%"
    budget: int = Field(50, ge=1)  # Sec. V-C: "a 50 sample query set"
    # every registered search (weakspot.gad.search.SEARCHES), in name order
    searches: List[str] = Field(default_factory=lambda: SEARCHES.names(), min_length=1)
    search: SearchParams = SearchParams()
    reliability_bins: int = Field(10, ge=2, le=50)  # Fig. 2

    @field_validator("searches")
    @classmethod
    def _known_searches(cls, v: List[str]) -> List[str]:
        bad = [s for s in v if s not in SEARCHES]
        if bad:
            raise ValueError(f"unknown search(es) {bad}; valid: {', '.join(SEARCHES.names())}")
        if len(set(v)) != len(v):
            raise ValueError(f"searches must be distinct, got {v}")
        return v

    @model_validator(mode="after")
    def _budget_fits_pool(self) -> "GadParams":
        if self.budget > self.pool_size:
            raise ValueError(f"budget ({self.budget}) must not exceed pool_size ({self.pool_size})")
        return self
