"""The params.yaml schema: one section per stage, validated before any stage does work.

Caveats first: an unknown key is an error, not ignored (a typo must not silently fall back to a default); each
stage validates only its own section plus the top-level ``device``, so a bad ``gad`` section does not stop a
target's ``prepare``, while ``weakspot check`` validates the whole file. Every random draw takes its seed from the
section that uses it (``targets.<name>.data.seed``, ``targets.<name>.train.seed``, ``gad.seed``, ``scene.seed``...).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Dict, List, Literal, Optional, Tuple

import yaml
from pydantic import BaseModel, ConfigDict, Field, RootModel, ValidationError, field_validator, model_validator

from weakspot.errors import ConfigError
from weakspot.corner.config import CornerParams
from weakspot.examine.config import ExamineParams
from weakspot.gad.config import GadParams
from weakspot.hda.config import HdaParams
from weakspot.intrinsic.config import IntrinsicParams
from weakspot.scene.config import SceneParams
from weakspot.targets import TargetParams, check_target_name


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_default=True)


class ReportParams(_Section):
    """The HTML report."""

    title: str = "weakspot audit"
    max_table_rows: int = Field(20, ge=1, le=10_000)


class RuleParams(BaseModel):
    """One regression rule of the audit history (weakspot/history.py)."""

    model_config = ConfigDict(extra="forbid")
    metric: str = Field(..., description="<stage>/<target>:<dotted.key>, shell wildcards allowed")
    exclude: Optional[str] = Field(None, description="metrics the pattern matches but the rule skips (wildcards)")
    worse: Literal["up", "down", "new"]
    tolerance: float = Field(0.0, ge=0)
    relative: bool = False


class HistoryParams(BaseModel):
    """params.yaml ``history`` section."""

    model_config = ConfigDict(extra="forbid", validate_default=True)
    dir: str = "history"
    #: The DVC remote that `weakspot audit --push` (the nightly flow) pushes every output to: a local folder
    #: (relative to the repository) or any URL DVC knows (s3://, gs://, ssh://... with DVC's plugin installed).
    #: The environment variable WEAKSPOT_DVC_REMOTE overrides it.
    remote: str = ".dvc-store"
    fail_on_regression: bool = True
    rules: List[RuleParams] = Field(default_factory=list)


class ExecutionParams(_Section):
    """How the stages run their fan-outs (``tasks/runner.py``): not what they compute. The results are the same either
    way, so this section is no stage's DVC param: changing the runner or the cluster reruns nothing."""

    runner: Literal["sequential", "dask"] = Field(
        "sequential", description="sequential: one task at a time in the stage's process; dask: Dask workers")
    address: Optional[str] = Field(
        None, description="an existing Dask scheduler (tcp://host:8786); null = a local cluster. The environment "
                          "variable WEAKSPOT_DASK_ADDRESS overrides it and implies runner: dask")
    n_workers: int = Field(2, ge=1, le=1024, description="the local cluster's worker processes")
    threads_per_worker: int = Field(1, ge=1, le=256, description="the local cluster's tasks at a time per worker: "
                                                                  "keep 1 (tasks side by side share torch's global "
                                                                  "random state)")
    retries: int = Field(1, ge=0, le=10, description="times a task whose Dask worker died is resubmitted before the "
                                                     "stage fails naming it")
    resources: Dict[str, float] = Field(
        default_factory=dict, description="Dask worker resources every fan-out task asks for, e.g. {GPU: 1}: only "
                                          "workers started with `dask worker --resources GPU=1` run them, one task "
                                          "per unit at a time (an existing cluster only)")

    @field_validator("resources")
    @classmethod
    def _resources(cls, v: Dict[str, float]) -> Dict[str, float]:
        bad = {k: n for k, n in v.items() if not k or n <= 0}
        if bad:
            raise ValueError(f"{bad}: name -> a positive amount, as `dask worker --resources NAME=AMOUNT` declares it")
        return v

    @field_validator("address")
    @classmethod
    def _address(cls, v: Optional[str]) -> Optional[str]:
        if v is not None and (not v.strip() or any(c.isspace() for c in v)):
            raise ValueError("a Dask scheduler address such as tcp://host:8786, or null for a local cluster")
        return v

    @model_validator(mode="after")
    def _address_needs_dask(self) -> "ExecutionParams":
        if self.address is not None and self.runner != "dask":
            raise ValueError(f"address {self.address!r} is set but runner is {self.runner!r}: set runner: dask (or "
                             "address: null)")
        return self


class TargetsParams(RootModel[Dict[str, TargetParams]]):
    """The ``targets`` mapping: name -> :class:`~weakspot.targets.TargetParams` (see :mod:`weakspot.targets`)."""

    @field_validator("root")
    @classmethod
    def _names(cls, v: Dict[str, TargetParams]) -> Dict[str, TargetParams]:
        if not v:
            raise ValueError("name at least one target (the models under audit)")
        for name in v:
            check_target_name(name)
        return v


SECTION_MODELS: Dict[str, type] = {
    "targets": TargetsParams,
    "report": ReportParams,
    "gad": GadParams,
    "scene": SceneParams,
    "examine": ExamineParams,
    "corner": CornerParams,
    "intrinsic": IntrinsicParams,
    "hda": HdaParams,
    "history": HistoryParams,
    "execution": ExecutionParams,
}


TOP_LEVEL: Dict[str, Any] = {"device": ("auto", "cpu", "cuda")}


def _format_validation_error(err: ValidationError, prefix: str, source: str) -> str:
    lines = []
    for e in err.errors():
        loc = ".".join(str(p) for p in (prefix, *e["loc"]) if p != "")
        value = e.get("input")
        if e["type"] == "extra_forbidden":
            parent = ".".join(str(p) for p in (prefix, *e["loc"][:-1]) if p != "")
            model = _model_at(prefix, e["loc"][:-1])
            allowed = ", ".join(model.model_fields) if model is not None else "see the schema"
            lines.append(f"{source}: unknown key {loc!r} (value {value!r}); allowed keys under {parent or 'the top'}: {allowed}")
        elif isinstance(value, dict):  # a rule across several keys of a section: the message names them
            lines.append(f"{source}: {loc}: {e['msg']}")
        else:
            lines.append(f"{source}: {loc} = {value!r}: {e['msg']}")
    return "\n".join(lines)


def _model_at(section: str, loc: tuple) -> Optional[type]:
    model = SECTION_MODELS.get(section)
    for part in loc:
        if isinstance(model, type) and issubclass(model, RootModel):  # a mapping of name -> model: skip the name
            model = TargetParams
            continue
        if model is None or not isinstance(part, str):
            return model
        field = model.model_fields.get(part)
        ann = getattr(field, "annotation", None) if field else None
        model = ann if isinstance(ann, type) and issubclass(ann, BaseModel) else None
    return model


def read_yaml(path: os.PathLike | str) -> Dict[str, Any]:
    """Read a YAML mapping; a missing file or malformed YAML is a ConfigError naming the file (and line)."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"{path}: params file not found (expected a YAML file; start from the repository's params.yaml)")
    try:
        data = yaml.safe_load(path.read_text())
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        raise ConfigError(f"{path}: malformed YAML{where}: {getattr(exc, 'problem', exc)}") from None
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: the top level must be a mapping of sections, got {type(data).__name__}")
    return data


def validate_top_level(data: Dict[str, Any], source: str = "params.yaml") -> Dict[str, Any]:
    out: Dict[str, Any] = {}
    allowed = sorted(set(TOP_LEVEL) | set(SECTION_MODELS))
    for key in data:
        if key not in allowed:
            raise ConfigError(f"{source}: unknown key {key!r}; allowed top-level keys: {', '.join(allowed)}")
    device = data.get("device", "auto")
    if not isinstance(device, str) or not (device in TOP_LEVEL["device"] or device.startswith("cuda:")):
        raise ConfigError(f"{source}: device = {device!r}: allowed: auto, cpu, cuda (or cuda:N)")
    out["device"] = device
    return out


def validate_section(section: str, data: Dict[str, Any], source: str = "params.yaml") -> BaseModel:
    """Validate one stage's section (missing section = all defaults)."""
    if section not in SECTION_MODELS:
        raise ConfigError(f"unknown params section {section!r}; valid sections: {', '.join(sorted(SECTION_MODELS))}")
    raw = data.get(section)
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise ConfigError(f"{source}: {section} = {raw!r}: must be a mapping of keys")
    try:
        return SECTION_MODELS[section].model_validate(raw)
    except ValidationError as err:
        raise ConfigError(_format_validation_error(err, section, source)) from None


def load_section(section: str, path: os.PathLike | str = "params.yaml") -> Tuple[Dict[str, Any], BaseModel]:
    """Read params.yaml and return (top-level settings, the validated section)."""
    data = read_yaml(path)
    top = validate_top_level(data, str(path))
    return top, validate_section(section, data, str(path))


def load_target(name: str, path: os.PathLike | str = "params.yaml") -> Tuple[Dict[str, Any], TargetParams]:
    """(top-level settings, the validated target ``name``); a ConfigError lists the targets when it is unknown."""
    top, targets = load_section("targets", path)
    if name not in targets.root:
        raise ConfigError(f"{path}: no target {name!r}; targets: {', '.join(targets.root)}")
    return top, targets.root[name]


def check_params(path: os.PathLike | str = "params.yaml") -> Dict[str, Any]:
    """Validate the whole file; return the normalised content (every default filled in)."""
    data = read_yaml(path)
    out: Dict[str, Any] = validate_top_level(data, str(path))
    errors: List[str] = []
    for section in SECTION_MODELS:
        try:
            out[section] = validate_section(section, data, str(path)).model_dump(mode="json")
        except ConfigError as exc:
            errors.append(str(exc))
    if errors:
        raise ConfigError("\n".join(errors))
    return out


def deep_merge(base: Dict[str, Any], override: Dict[str, Any]) -> Dict[str, Any]:
    """Return ``base`` with ``override`` merged in, recursively for mappings."""
    out = dict(base)
    for k, v in override.items():
        if isinstance(v, dict) and isinstance(out.get(k), dict):
            out[k] = deep_merge(out[k], v)
        else:
            out[k] = v
    return out
