"""Targets: the models under audit, each data + model, and what a method may ask of one.

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

What each method needs of a target, and so which methods run on it, is each method's own declaration
(:class:`weakspot.methods.Method`, ``misfit``); a method's settings for one target live in that method's section
(``<method>.per_target.<target>``), not here.

A model audited from Python (``weakspot.audit``) has no params.yaml entry: :class:`InMemoryTarget` describes it (its
data's modality, its model's kind, whether its training rows are given), answering what a method and the report ask
of a target as :class:`TargetParams` does, with no source spec or factory to parse.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Literal, Optional, Tuple, Union

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from weakspot.models.spec import ModelSpec

#: data source kinds whose inputs are images (everything else is tabular)
IMAGE_SOURCES = ("digits", "torchvision", "scenes", "imagefolder", "npz")
#: the data source that is the render stage's output: the scene the examiner can render
SCENE_SOURCE = "scenes"
#: the named parts a target's data may be given in (instead of one source weakspot splits)
PARTS = ("train", "val", "test")
#: data source kinds whose argument is the user's own file or folder (hashed as the prepare stage's deps)
FILE_SOURCES = ("csv", "parquet", "imagefolder", "npz")
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

    source: Optional[str] = Field(
        None,
        description="digits (the default without named parts) | keel:phoneme | "
        "keel:yeast1 | sklearn:breast_cancer | csv:PATH | parquet:PATH | "
        "torchvision:NAME | imagefolder:FOLDER | npz:PATH | scenes",
    )
    label: Optional[str] = Field(None, description="label column, for csv:/parquet: sources")
    root: Optional[str] = Field(None, description="local folder for torchvision: and keel: sources")
    features: Optional[List[str]] = Field(None, description="tabular feature columns to keep (default: all)")
    image_size: Optional[int] = Field(
        None,
        ge=4,
        le=1024,
        description="imagefolder:/npz: sources: resize every image to this side (needed for mixed sizes)",
    )
    fractions: Tuple[float, float, float] = Field((0.7, 0.15, 0.15), description="train, validation, test")
    seed: int = 0
    bias: Optional[BiasParams] = Field(None, description="a biased training split (GAD paper); null for none")
    train: Optional[str] = Field(
        None,
        description="named parts instead of one source: the rows the model was trained on (a source spec, as source)",
    )
    val: Optional[str] = Field(None, description="named parts: validation rows the model never trained on")
    test: Optional[str] = Field(None, description="named parts: the evaluation rows the model never saw")
    unlabelled: Optional[str] = Field(
        None,
        description="csv:PATH | parquet:PATH: production rows without labels "
        "(the same feature columns; a label column is ignored), which "
        "GAD's to-label list ranks for a person to label",
    )

    @model_validator(mode="after")
    def _one_source_or_parts(self) -> "DataParams":
        named = [k for k in PARTS if getattr(self, k) is not None]
        if named and self.test is None:
            raise ValueError(
                f"named parts {named} need a test part (data.test: the evaluation rows the model never saw)"
            )
        if not named and self.source is None:
            self.source = "digits"
        if named and self.source is not None:
            raise ValueError(
                "give either data.source (one source weakspot splits) or named parts "
                "(data.train / data.val / data.test), not both"
            )
        if named and self.bias is not None:
            raise ValueError("data.bias builds a training split from one source; with named parts the split is yours")
        if named:
            kinds = {getattr(self, k).split(":", 1)[0] for k in named}
            if len(kinds) > 1:
                raise ValueError(
                    f"the named parts come from different kinds of source ({sorted(kinds)}); give one kind"
                )
            if kinds & {SCENE_SOURCE}:
                raise ValueError(
                    "the rendered scenes are split by the render (data.source: scenes), not in named parts"
                )
        if self.unlabelled is not None:
            if self.unlabelled.split(":", 1)[0] not in ("csv", "parquet"):
                raise ValueError(
                    f"data.unlabelled {self.unlabelled!r}: give a table (csv:PATH or parquet:PATH); GAD's "
                    "to-label list, which ranks these rows, audits tables"
                )
            if self.modality != "tabular":
                raise ValueError("data.unlabelled holds table rows, but the target's data are images")
        return self

    @property
    def named_parts(self) -> Dict[str, str]:
        """``{part: spec}`` of the named parts given (empty for one source)."""
        return {k: getattr(self, k) for k in PARTS if getattr(self, k) is not None}

    @property
    def described(self) -> str:
        """The source, or the named parts ("train csv:a.csv, test csv:b.csv"), for the report's prose."""
        parts = self.named_parts
        out = ", ".join(f"{k} {v}" for k, v in parts.items()) if parts else self.source
        assert out is not None  # the validator: named parts, or a source (default digits)
        return out + (f", unlabelled {self.unlabelled}" if self.unlabelled else "")

    @property
    def spec(self) -> str:
        """The source spec that says what kind of data these are (the test part's with named parts)."""
        if self.test is not None:
            return self.test
        assert self.source is not None  # the validator: named parts (a test part among them), or a source
        return self.source

    @field_validator("fractions")
    @classmethod
    def _fractions_sum_to_one(cls, v: Tuple[float, float, float]) -> Tuple[float, float, float]:
        if any(f <= 0 for f in v) or abs(sum(v) - 1.0) > 1e-6:
            raise ValueError(f"must be three positive numbers summing to 1 (train, val, test), got {list(v)}")
        return v

    @property
    def kind(self) -> str:
        return self.spec.split(":", 1)[0]

    @property
    def modality(self) -> str:
        return "image" if self.kind in IMAGE_SOURCES else "tabular"

    def files(self) -> List[str]:
        """Files of the user's own data (csv:/parquet:) that the pipeline must hash to rerun on change."""
        out = []
        for spec in (list(self.named_parts.values()) or [self.spec]) + ([self.unlabelled] if self.unlabelled else []):
            kind, _, arg = spec.partition(":")
            if kind in FILE_SOURCES and arg:
                out.append(arg)
        return out


class TrainParams(_Section):
    """Training of a built-in model (ignored for a user's model that comes with weights)."""

    epochs: int = Field(60, ge=1, le=10_000)
    lr: float = Field(3e-3, gt=0, le=1)
    batch_size: int = Field(64, ge=1)
    weight_decay: float = Field(0.0, ge=0)
    augment: Optional[Literal["hflip"]] = Field(None, description="hflip: random horizontal flips (images)")
    lr_schedule: Literal["constant", "cosine"] = Field(
        "constant", description="cosine: the learning rate anneals from lr to 0 over training"
    )
    seed: int = 0
    options: Dict[str, Any] = Field(
        default_factory=dict,
        description="options of a built-in scikit-learn architecture (svm_grid: kernels, C, gamma, cv)",
    )
    calibration_bins: int = Field(15, ge=2, le=100)


class TargetParams(_Section):
    """One model under audit: data, model, training, and what the methods need to know of it."""

    data: DataParams = Field(default_factory=DataParams)
    model: ModelSpec = Field(default_factory=ModelSpec)
    train: TrainParams = Field(default_factory=TrainParams)
    methods: Optional[List[str]] = Field(None, description="only these methods (default: every method that fits)")
    class_of_interest: Optional[Union[int, str]] = Field(
        None,
        description="class whose confident errors GAD searches (name or code; default: the bias preset's, or code 1)",
    )
    class_map: Optional[Dict[str, str]] = Field(
        None, description="the model's class name -> scene class, for a user's classifier of rendered objects"
    )

    @field_validator("methods")
    @classmethod
    def _known_methods(cls, v: Optional[List[str]]) -> Optional[List[str]]:
        if v is not None:
            from weakspot.methods import available

            unknown = [name for name in v if name not in available()]
            if unknown:
                raise ValueError(f"unknown method(s) {unknown}; methods: {', '.join(available())}")
        return v

    @model_validator(mode="after")
    def _arch_is_registered(self) -> "TargetParams":
        if self.model.kind == "builtin":
            if self.model.arch not in builtin_archs():
                raise ValueError(
                    f"model.arch {self.model.arch!r} is not a built-in architecture; valid: "
                    f"{', '.join(builtin_archs())}"
                )
        return self

    # --- what a method may ask of a target -------------------------------------------------------------------
    @property
    def modality(self) -> str:
        return self.data.modality

    @property
    def white_box(self) -> bool:
        """Gradients are available: a torch module (built-in torch architecture, the user's, or TorchScript)."""
        if self.model.kind in ("torch", "torchscript"):
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

    @property
    def has_train(self) -> bool:
        """The rows the model was trained on are known: weakspot trains it, the data name a train part, or the
        source has one (a torchvision set's official train part, the render's training instances)."""
        if self.data.named_parts:
            return self.data.train is not None
        return self.trains or self.data.kind in ("torchvision", SCENE_SOURCE)

    # --- what the report says of a target --------------------------------------------------------------------
    @property
    def described(self) -> str:
        """Its data and model, for the report's prose: "Data keel:phoneme; model builtin svm_grid"."""
        m = self.model
        return f"Data {self.data.described}; model {m.kind} {m.arch or m.weights or m.factory}"

    @property
    def model_label(self) -> str:
        """Its model in the report's table of targets: the kind and the architecture or file name."""
        m = self.model
        return f"{m.kind} {m.arch or Path(str(m.weights or m.factory)).name}"


@dataclass(frozen=True)
class InMemoryModel:
    """The model of an :class:`InMemoryTarget`: a Python object, named for a person.

    Parameters
    ----------
    kind : {"torch", "sklearn", "callable", "onnx"}
        A torch module (white-box; a TorchScript module too), a fitted estimator with ``predict_proba``, a function
        x -> probabilities, or an onnxruntime session (black-box).
    name : str
        What a person calls it: its class or function name (``RandomForestClassifier``).
    """

    kind: Literal["torch", "sklearn", "callable", "onnx"]
    name: str

    @property
    def described(self) -> str:
        """Its name, saying where it is: ``RandomForestClassifier (in memory)``."""
        return f"{self.name} (in memory)"


@dataclass(frozen=True)
class InMemoryTarget:
    """A model under audit given as Python objects (``weakspot.audit``), not in params.yaml: what a method may ask
    of it and what the report says of it, as :class:`TargetParams` answers both for a target in params.yaml.

    It names no source and no factory: its data and model are the objects given, and there is nothing to parse,
    load or retrain from.

    Parameters
    ----------
    modality : {"image", "tabular"}
        What the data are.
    model : InMemoryModel
        The model's kind and name.
    has_train : bool
        The rows the model was trained on are given.
    data : str
        The data in words, for the report ("2500 test rows given to weakspot.audit").
    train : TrainParams
        Training settings for a method that trains a model like it (intrinsic robustness's defended models).
    methods : list of str, optional
        Only these methods (default: every method that fits).

    Examples
    --------
    >>> t = InMemoryTarget("tabular", InMemoryModel("sklearn", "RandomForestClassifier"), False, "2500 test rows")
    >>> t.white_box, t.model_label
    (False, 'sklearn RandomForestClassifier (in memory)')
    """

    modality: Literal["image", "tabular"]
    model: InMemoryModel
    has_train: bool
    data: str
    train: TrainParams = field(default_factory=TrainParams)
    methods: Optional[List[str]] = None

    @property
    def white_box(self) -> bool:
        """Gradients are available: the model is a torch module."""
        return self.model.kind == "torch"

    @property
    def renderable(self) -> bool:
        """Never: no scene renders the classes of a model given in process."""
        return False

    @property
    def trains(self) -> bool:
        """Never: the model given is the model audited; weakspot does not retrain it."""
        return False

    @property
    def described(self) -> str:
        """Its data and model, for the report's prose."""
        return f"Data {self.data}; model {self.model.kind} {self.model.described}"

    @property
    def model_label(self) -> str:
        """Its model in the report's table of targets."""
        return f"{self.model.kind} {self.model.described}"


#: what a method may ask of a target (``Method.misfit``) and the report says of it: one in params.yaml, or in memory
TargetDescription = Union[TargetParams, InMemoryTarget]


def builtin_archs() -> List[str]:
    """Every built-in architecture: torch (``ARCHS``) and scikit-learn (``SKLEARN_ARCHS``)."""
    from weakspot import models

    names = list(models.ARCHS.names())
    sk = getattr(models, "SKLEARN_ARCHS", None)
    return sorted(names + (list(sk.names()) if sk is not None else []))


def check_target_name(name: str) -> str:
    if not isinstance(name, str) or not _NAME.match(name):
        raise ValueError(
            f"target name {name!r}: use a letter, then letters, digits or '_' (at most 40; stages are named <step>-<target>)"
        )
    return name
