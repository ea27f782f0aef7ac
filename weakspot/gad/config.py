"""The ``gad`` section of params.yaml: the protocol of Generalized Adversarial Distance (seeds/001, Bennette et al.).

Caveats first: every default is the paper's where the paper gives a number (cited in a comment); where the paper is
silent (the attack's step size and step cap, the network width, the optimiser) the default is ours and says so. An
unknown key is an error. What is audited -- the data, its split and the trained model -- is not here: GAD audits the
targets it is given (:func:`weakspot.gad.protocol.run_target`); the paper's SVM is the built-in scikit-learn
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
    """params.yaml ``gad`` section: extraction, attack, LOESS, and the Sec. V-C protocol (not the targets).

    ``seeds`` are the split / black-box seeds the whole protocol is repeated over (ours: the paper reports one split
    per data set). Each is an offset added to the target's data seed (its bias or stratified split) and training
    seed: 0 is the target as prepared and trained (the audited model, whose rows the findings rank); every other
    value re-draws the split and retrains the target's built-in model as its spec says. A target whose model the
    pipeline cannot retrain (a user's weights) runs seed 0 only. Across-seed figures (mean, 95% Student-t interval
    over seeds, min-max) are what varies from one black box to the next; the interval over the ``replicates`` pools
    of one black box is far narrower, as the pools overlap.
    """

    seed: int = 0  # seeds the design, the pseudo-model and the pools (per target and split seed)
    seeds: List[int] = Field(default_factory=lambda: [0, 1, 2, 3, 4], min_length=1)  # ours (see above)

    # Algorithm 1 (model extraction), Sec. V-A
    design_points: int = Field(50_000, ge=100)  # Sec. V-A: "the size of the design space, N, is 50,000"
    # ours: this share of the design is the evaluation rows, each moved by Gaussian noise of up to `design_jitter`
    # standard deviations per feature (Sec. IV-B: "if a sufficiently large unlabeled evaluation dataset can be
    # obtained, it can be substituted for the LHS design"); the rest is Step 1's Latin hypercube. A pure hypercube
    # over many features lies almost wholly far from the data, where the black box is flat: a pseudo-model fitted to
    # it mimics nothing the attack walks through (breast_cancer's 30 features, an RBF SVM: R^2 on the data -0.8;
    # half the design near the data: 1.0).
    design_data_fraction: float = Field(0.5, ge=0, lt=1)
    design_jitter: float = Field(1.0, ge=0, le=10)
    epochs: int = Field(20, ge=1, le=10_000)  # Sec. V-A: "e is 20 training epochs"
    hidden_units: int = Field(128, ge=2, le=4096)  # ours: the paper gives "5 dense layers" but no widths
    batch_size: int = Field(512, ge=1)  # ours
    lr: float = Field(3e-3, gt=0, le=1)  # ours (Adam)
    holdout_fraction: float = Field(0.1, gt=0, lt=0.9)  # ours: design points held out for the pseudo R^2 (Table I)
    # ours: below this pseudo-model R^2 (the lower of held-out design points and the evaluation data) the
    # adversarial distances mean nothing, and GAD's SDR is not reported for the target (Table I's pseudo R^2 is
    # 0.86-0.99; the paper calls those values "captured the behavior of the black box")
    min_pseudo_r2: float = Field(0.5, ge=-1, le=1)

    # Algorithm 2 (attack)
    feature_scale: Literal["range", "raw"] = (
        "range"  # ours: step and MAE in units of each feature's range (see attack.py)
    )
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

    @field_validator("seeds")
    @classmethod
    def _seeds(cls, v: List[int]) -> List[int]:
        if len(set(v)) != len(v) or any(s < 0 for s in v):
            raise ValueError(f"seeds must be distinct offsets >= 0, got {v}")
        if 0 not in v:
            raise ValueError(f"seeds {v} must include 0, the target as trained (the audited model the findings rank)")
        return sorted(v)

    @model_validator(mode="after")
    def _budget_fits_pool(self) -> "GadParams":
        if self.budget > self.pool_size:
            raise ValueError(f"budget ({self.budget}) must not exceed pool_size ({self.pool_size})")
        return self
