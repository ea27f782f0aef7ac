"""Targets (the models under audit) and methods (what audits them), and which method fits which target.

Caveats first: whether a method fits a target is decided from params.yaml alone (the data source's modality, the
model's kind, a scene to render), before anything is trained, so the pipeline knows its stages up front and the
report can say *why* a method did not run on a target. A target's ``methods`` list restricts it further; a method
that does not fit is never an error.

A target is data + model::

    targets:
      digits:
        data:  {source: digits}
        model: {kind: builtin, arch: lenet}
        train: {epochs: 60, lr: 0.003}
      phoneme:
        data:  {source: "keel:phoneme", bias: {preset: phoneme}}   # the GAD paper's biased training split
        model: {kind: builtin, arch: svm_grid}
      mine:
        data:  {source: "csv:data/my_table.csv", label: target}
        model: {kind: sklearn, weights: models/my_model.pkl}

Adding a method: register it here with :func:`register_method` (name, paper, what it needs), write its flow
``flows/<name>.py`` (see DESIGN.md, "Adding a method"); the pipeline, the config validation and the report pick
it up from this registry.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Dict, List, Literal, Optional, Tuple, Union

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from weakspot.models.spec import ModelSpec
from weakspot.registry import Registry

#: data source kinds whose inputs are images (everything else is tabular)
IMAGE_SOURCES = ("digits", "torchvision", "scenes")
#: the data source that is the render stage's output: the scene the examiner can render
SCENE_SOURCE = "scenes"
_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_]{0,39}$")


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_default=True)


class BiasRuleParams(_Section):
    """Keep a training row of class ``label`` only where ``feature`` is above/below a cut (GAD paper, Sec. V-A).

    Give exactly one of ``threshold`` (in the feature's units) or ``quantile`` (of the feature over the data set).
    Rows of other classes are untouched; the test split is never biased.
    """

    feature: str
    label: Union[int, str] = Field(..., description="class name or code whose training rows the rule filters")
    keep: Literal["above", "below"]
    threshold: Optional[float] = None
    quantile: Optional[float] = Field(None, ge=0.0, le=1.0)

    @model_validator(mode="after")
    def _one_cut(self) -> "BiasRuleParams":
        if (self.threshold is None) == (self.quantile is None):
            raise ValueError("give exactly one of threshold (feature units) or quantile (0..1)")
        return self


class BiasParams(_Section):
    """A deliberately biased training split, as the GAD paper builds its black boxes (seeds/001 Sec. V-A).

    ``preset`` (phoneme, yeast1, breast_cancer) fills every field left unset from the paper's set-up; the test split
    is a uniform draw of ``n_test`` rows, the training split the other rows that pass every rule (subsampled to
    ``n_train``), and the validation split the rows the bias or the subsampling left out.
    """

    preset: Optional[str] = Field(None, description="phoneme | yeast1 | breast_cancer: the paper's bias")
    rules: Optional[List[BiasRuleParams]] = None
    n_train: Optional[int] = Field(None, ge=10)
    n_test: Optional[int] = Field(None, ge=10)
    seed: int = 0


class DataParams(_Section):
    """Where a target's data come from and how they are split."""

    source: str = Field("digits", description="digits | keel:phoneme | keel:yeast1 | sklearn:breast_cancer | "
                                              "csv:PATH | parquet:PATH | torchvision:NAME | scenes")
    label: Optional[str] = Field(None, description="label column, for csv:/parquet: sources")
    root: Optional[str] = Field(None, description="local folder for torchvision: and keel: sources")
    features: Optional[List[str]] = Field(None, description="tabular feature columns to keep (default: all)")
    fractions: Tuple[float, float, float] = Field((0.7, 0.15, 0.15), description="train, validation, test")
    seed: int = 0
    bias: Optional[BiasParams] = Field(None, description="a biased training split (GAD paper); null for none")

    @field_validator("fractions")
    @classmethod
    def _fractions_sum_to_one(cls, v: Tuple[float, float, float]) -> Tuple[float, float, float]:
        if any(f <= 0 for f in v) or abs(sum(v) - 1.0) > 1e-6:
            raise ValueError(f"must be three positive numbers summing to 1 (train, val, test), got {list(v)}")
        return v

    @property
    def kind(self) -> str:
        return self.source.split(":", 1)[0]

    @property
    def modality(self) -> str:
        return "image" if self.kind in IMAGE_SOURCES else "tabular"

    def files(self) -> List[str]:
        """Files of the user's own data (csv:/parquet:) that the pipeline must hash to rerun on change."""
        kind, _, arg = self.source.partition(":")
        return [arg] if kind in ("csv", "parquet") and arg else []


class TrainParams(_Section):
    """Training of a built-in model (ignored for a user's model that comes with weights)."""

    epochs: int = Field(60, ge=1, le=10_000)
    lr: float = Field(3e-3, gt=0, le=1)
    batch_size: int = Field(64, ge=1)
    weight_decay: float = Field(0.0, ge=0)
    augment: Optional[Literal["hflip"]] = Field(None, description="hflip: random horizontal flips (images)")
    lr_schedule: Literal["constant", "cosine"] = Field(
        "constant", description="cosine: the learning rate anneals from lr to 0 over training")
    seed: int = 0
    options: Dict[str, Any] = Field(default_factory=dict,
                                    description="options of a built-in scikit-learn architecture (svm_grid: kernels, C, gamma, cv)")
    calibration_bins: int = Field(15, ge=2, le=100)


class TargetParams(_Section):
    """One model under audit: data, model, training, and what the methods need to know of it."""

    data: DataParams = Field(default_factory=DataParams)
    model: ModelSpec = Field(default_factory=ModelSpec)
    train: TrainParams = Field(default_factory=TrainParams)
    methods: Optional[List[str]] = Field(None, description="only these methods (default: every method that fits)")
    class_of_interest: Optional[Union[int, str]] = Field(
        None, description="class whose confident errors GAD searches (name or code; default: the bias preset's, or code 1)")
    class_map: Optional[Dict[str, str]] = Field(
        None, description="the model's class name -> scene class, for a user's classifier of rendered objects")
    defences: Optional[List[str]] = Field(
        None, description="defended models the intrinsic method trains from this target (default: intrinsic.defences; [] for none)")

    @field_validator("defences")
    @classmethod
    def _known_defences(cls, v: Optional[List[str]]) -> Optional[List[str]]:
        if v is not None:
            from weakspot.intrinsic.config import check_defences

            check_defences(v, "defences")
        return v

    @field_validator("methods")
    @classmethod
    def _known_methods(cls, v: Optional[List[str]]) -> Optional[List[str]]:
        if v is not None:
            for name in v:
                METHODS.get(name)  # a ConfigError (ValueError) listing the valid names
        return v

    @model_validator(mode="after")
    def _arch_is_registered(self) -> "TargetParams":
        if self.model.kind == "builtin":
            if self.model.arch not in builtin_archs():
                raise ValueError(f"model.arch {self.model.arch!r} is not a built-in architecture; valid: "
                                 f"{', '.join(builtin_archs())}")
        return self

    # --- what a method may ask of a target -------------------------------------------------------------------
    @property
    def modality(self) -> str:
        return self.data.modality

    @property
    def white_box(self) -> bool:
        """Gradients are available: a torch module (built-in torch architecture or the user's)."""
        if self.model.kind == "torch":
            return True
        if self.model.kind == "builtin":
            from weakspot.models import ARCHS

            return self.model.arch in ARCHS
        return False

    @property
    def renderable(self) -> bool:
        """The examiner can render the target's classes: scene data, or a class map onto the scene's classes."""
        return self.data.kind == SCENE_SOURCE or bool(self.class_map)

    @property
    def trains(self) -> bool:
        """The pipeline trains this model (a built-in architecture without weights)."""
        return self.model.kind == "builtin" and self.model.weights is None


def builtin_archs() -> List[str]:
    """Every built-in architecture: torch (``ARCHS``) and scikit-learn (``SKLEARN_ARCHS``)."""
    from weakspot import models

    names = list(models.ARCHS.names())
    sk = getattr(models, "SKLEARN_ARCHS", None)
    return sorted(names + (list(sk.names()) if sk is not None else []))


def check_target_name(name: str) -> str:
    if not isinstance(name, str) or not _NAME.match(name):
        raise ValueError(f"target name {name!r}: use a letter, then letters, digits or '_' (at most 40; stages are named <step>-<target>)")
    return name


# ----------------------------------------------------------------------------------------------- methods


@dataclass(frozen=True)
class Method:
    """A method of audit and what it needs of a target.

    Parameters
    ----------
    name : str
        The key in params.yaml, dvc.yaml stage names (``<name>-<target>``), metrics and findings.
    title : str
        The report's section heading.
    paper : str
        The paper it implements (``seeds/00N``).
    modalities : tuple of str
        ``image`` and/or ``tabular``.
    white_box : bool
        Needs gradients (a torch model).
    scene : bool
        Needs a scene it can render (the examiner).
    """

    name: str
    title: str
    paper: str
    modalities: Tuple[str, ...] = ("image", "tabular")
    white_box: bool = False
    scene: bool = False

    def misfit(self, target: TargetParams) -> Optional[str]:
        """Why this method does not run on ``target`` (``None`` when it does)."""
        if target.methods is not None and self.name not in target.methods:
            return f"the target lists methods {target.methods} only"
        if target.modality not in self.modalities:
            return f"needs {' or '.join(self.modalities)} data; the target's data are {target.modality}"
        if self.white_box and not target.white_box:
            return f"needs gradients (a torch model); the target's model is a {target.model.kind} black box"
        if self.scene and not target.renderable:
            return "needs a scene it can render (data source 'scenes', or a class_map onto the scene's classes)"
        return None


METHODS = Registry("method")


def register_method(method: Method) -> Method:
    METHODS.register(method.name)(method)
    return method


register_method(Method("gad", "Generalized Adversarial Distance", "seeds/001 (Bennette et al.)",
                       modalities=("tabular",)))
register_method(Method("examine", "Adversarial examiner", "seeds/000 (Shu et al., AAAI 2020)",
                       modalities=("image",), scene=True))
register_method(Method("intrinsic", "Intrinsic robustness", "seeds/002 (Yu et al., IJCAI 2019)",
                       modalities=("image",), white_box=True))
register_method(Method("corner", "Corner cases", "seeds/003 (Platon, Avrin & Chan-Hon-Tong, ECAI 2020)",
                       modalities=("image",), white_box=True))
# black-box at its core (the GA reads probabilities only); its gradient indicator, PGD and coverage baselines and the
# fine-tuning run where the model is a torch module
register_method(Method("hda", "Hierarchical distribution-aware testing", "seeds/004 (Huang et al.)",
                       modalities=("image",)))


def fits(target: TargetParams) -> Dict[str, Optional[str]]:
    """Method name -> ``None`` (runs on the target) or the reason it does not, for every registered method."""
    return {name: METHODS.get(name).misfit(target) for name in METHODS}


@dataclass(frozen=True)
class Pair:
    target: str
    method: str


def pairs(targets: Dict[str, TargetParams]) -> List[Pair]:
    """Every (target, method) that runs, in params order then registry order."""
    return [Pair(t, m) for t, p in targets.items() for m, why in fits(p).items() if why is None]
