"""What HDA measured on one target (:func:`weakspot.hda.run.run`'s result): one dataclass per research question of
seeds/004 Sec. 4, the numbers and arrays :mod:`weakspot.hda.report` and :mod:`weakspot.hda.figures` read.

Caveats first: these hold raw numbers (unrounded, NaN where a quantity does not exist), arrays and the repaired
model's weights; no prose, no figures. At ``hda.depth: audit`` (``HdaResult.depth``) the paper's comparisons did
not run: the distribution holds the validity threshold only (no Table 3, no FID, no samples), the seeds hold no local
robustness (``log10_p`` NaN, ``pearson`` empty, ``floor_share`` NaN, Table 5 without it), the generators HDA's GA
only (no FID), and there is no adversarially trained model nor fine-tuning. Keys of the ``evals`` dicts are ``(generator, seed set)``: generators
``hda``, ``foda`` and, on a white-box model, ``pgd`` and ``coverage``; seed sets ``selected`` (HDA's) and ``random``.
Timings (``seconds``) vary between runs and never enter the metrics.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple

import numpy as np

from weakspot.hda.generate import CaseEval, LocalResult


@dataclass
class Landscape:
    """The KDE's log density on the plane of the training codes' first two principal components (the figure's
    grid), and where the candidate seeds' codes fall on it."""

    gx: np.ndarray  # (g, g) grid coordinates
    gy: np.ndarray
    log_density: np.ndarray  # (g, g), relative to the median training input's
    candidates: np.ndarray  # (n_candidates, 2) the candidates' codes on the plane


@dataclass
class Distribution:
    """RQ1, HDA stage 1 (Table 3, Fig. 3): the VAE + KDE approximation of the global distribution."""

    table3: Any  # DataFrame: VAE encoder against PCA (CS, HS, VS, reconstruction SSE); None at depth audit
    fid: Dict[str, float]  # FID of decoded samples to the training data: "kde", "uniform" (empty at depth audit)
    samples_kde: Optional[np.ndarray]  # the first decoded samples of each, for the figure (None at depth audit)
    samples_uniform: Optional[np.ndarray]
    featurizer: str  # which features FID is computed on ("" at depth audit: no FID)
    validity: Any = None  # the OODA / "% valid AEs" threshold (weakspot.hda.ooda.Validity), None without one
    reference: Any = None  # the FID reference CNN's settings and test accuracy (weakspot.hda.reference.Reference.info)


@dataclass
class Seeds:
    """RQ1, HDA stage 2 (Table 4) and the seed selection (Table 5): the candidates, their densities and indicators,
    the estimated local robustness of random balls, HDA's seeds and random ones (indices into the candidates)."""

    X: np.ndarray  # candidate seeds: correctly classified inputs, test split first
    y: np.ndarray
    names: List[str]  # each candidate's name for the findings
    log_density: np.ndarray  # relative log density of each candidate
    indicator: str  # "gradient" or "separation": the one that selected the seeds
    gradient: Optional[np.ndarray]  # None on a black-box model
    separation: np.ndarray
    selected: np.ndarray  # HDA's seeds, best first
    random: np.ndarray  # random seeds (the first balls)
    balls: np.ndarray  # the random balls of Table 4 (drawn at depth audit too: the random seeds are drawn from them)
    log10_p: np.ndarray  # log10 P(misclassified in the ball), NaN where not estimated (everywhere at depth audit)
    pearson: Dict[str, Optional[float]]  # Table 4: "gradient" (None on a black box), "separation"; empty at audit
    floor_share: float  # share of the balls stopped at the estimator's floor (NaN at depth audit)
    #: "random", "selected" -> mean log_density, indicator and (depth study) log10_local_robustness
    table5: Dict[str, Dict[str, float]]
    selected_proba: np.ndarray  # the model's probabilities on the selected seeds
    landscape: Landscape


@dataclass
class Generators:
    """RQ2 (Tables 6-7): every generator's test cases around both seed sets, and their evaluation (HDA's GA only, no
    FID, at depth audit)."""

    results: Dict[Tuple[str, str], LocalResult]
    evals: Dict[Tuple[str, str], CaseEval]
    allocation: Dict[str, np.ndarray]  # seed set -> test cases per seed
    coverage_rate: Optional[float]  # neuron coverage at the end of the fuzzing (None where it did not run)
    #: generator -> why it did not run on this white-box model (``coverage`` on a module whose layers no forward hook
    #: sees, e.g. TorchScript); a black box's missing white-box generators are not listed
    skipped: Dict[str, str] = field(default_factory=dict)


@dataclass
class AdversarialModel:
    """RQ3 (Table 8): FGSM, PGD, AutoAttack and HDA on the audited model (``normal``) and on an adversarially
    trained one (``adversarial``), each on its own seeds."""

    evals: Dict[str, Dict[str, CaseEval]]  # model -> attack ("fgsm", "pgd", "autoattack", "hda") -> evaluation
    seed_log_density: Dict[str, float]  # model -> mean relative log density of its seeds
    label: str  # what the adversarially trained model is (empty when none)


@dataclass
class Finetuning:
    """RQ4 (Table 9): adversarial fine-tuning with each method's test cases, before and after."""

    before: Dict[str, Optional[float]]  # train_acc, test_acc, global_robustness, pgd_robustness of the audited model
    after: Dict[str, Dict[str, Optional[float]]]  # method -> the same, after fine-tuning with its test cases
    test_cases: Dict[str, int]  # method -> test cases it fine-tuned with
    seeds: Dict[str, int]  # method -> seeds those came from
    validation: Dict[str, int]  # pool, hda_aes, pgd_aes: the validation set of global robustness
    train_inputs: int  # training inputs mixed in
    repaired: Optional[Dict[str, Any]] = None  # the HDA-fine-tuned model's state_dict (CPU tensors)
    #: indices into the validation pool: ``tune`` (the half fine-tuning seeds come from), ``held`` (the half the
    #: validation AEs are made around; disjoint from ``tune``), ``seeds`` (method -> the seeds it fine-tuned with)
    split: Dict[str, Any] = field(default_factory=dict)
    #: the HDA-repaired model attacked again next to the audited one: ``hda_search`` (a fresh GA search around the
    #: held-out seeds: AE rate of its test cases), ``pgd_accuracy`` and ``autoattack_accuracy`` (on test inputs), each
    #: ``before``/``after`` as ``{"rate", "n"}``
    reattack: Dict[str, Dict[str, Any]] = field(default_factory=dict)
    #: method of ``hda.finetune.methods`` -> why it was not fine-tuned with (as :attr:`Generators.skipped`)
    skipped: Dict[str, str] = field(default_factory=dict)


@dataclass
class HdaResult:
    """Everything HDA measured on one target."""

    classes: List[str]
    radius: float
    clip: Tuple[float, float]
    distribution: Distribution
    seeds: Seeds
    generators: Generators
    adversarial: Optional[AdversarialModel]  # None on a black-box model or at depth audit
    finetuning: Optional[Finetuning]  # None on a black-box model, with hda.finetune disabled or at depth audit
    seconds: Dict[str, float] = field(default_factory=dict)
    adversarial_info: Dict[str, Any] = field(default_factory=dict)  # the adversarially trained model's lineage
    depth: str = "audit"  # hda.depth that ran: "audit" (the weak spots and their evidence) or "study" (the paper's too)

    @property
    def study(self) -> bool:
        """Whether the paper's comparisons ran (``hda.depth: study``)."""
        return self.depth == "study"

    @property
    def white_box(self) -> bool:
        return self.seeds.gradient is not None
