"""The params.yaml schema: one section per stage or method, validated before any stage does work.

Caveats first: an unknown key is an error, not ignored (a typo must not silently fall back to a default); each
stage validates only its own section plus the top-level ``device``, so a bad ``gad`` section does not stop a
target's ``prepare``, while ``weakspot check`` validates the whole file. Every random draw takes its seed from the
section that uses it (``targets.<name>.data.seed``, ``targets.<name>.train.seed``, ``gad.seed``, ``scene.seed``...).

The sections are found through registries, not imported here: a method's section is its registered params model
(:mod:`weakspot.methods`, imported only when that section is validated), the scene's is
``weakspot.scene.config.SceneParams``, and the operations package registers its own (:func:`register_section`).

Per-target settings, in one style for every method: a method's section may hold ``per_target: {<target>: {...}}``,
the keys of that section to use on that target, merged over the section (mappings recursively)::

    hda:
      n_seeds: 50
      per_target:
        scenes: {n_seeds: 24, vae: {max_steps: 200}}
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple, Type, cast

import yaml
from pydantic import BaseModel, ConfigDict, Field, RootModel, ValidationError, field_validator

from weakspot.device import DEFAULT_THREADS, valid_threads
from weakspot.errors import ConfigError
from weakspot.targets import TargetParams, check_target_name


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_default=True)


class ReportParams(_Section):
    """The HTML report."""

    title: str = "weakspot audit"
    max_table_rows: int = Field(20, ge=1, le=10_000)


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


#: The library's own sections (a model, or ``"module:Class"`` imported when the section is validated); every method's
#: section comes from :mod:`weakspot.methods`, and the operations package adds its own with :func:`register_section`.
_SECTIONS: Dict[str, Any] = {
    "targets": TargetsParams,
    "report": ReportParams,
    "scene": "weakspot.scene.config:SceneParams",
}

#: The key of a method's section that holds its per-target overrides.
PER_TARGET = "per_target"

TOP_LEVEL: Dict[str, Any] = {"device": ("auto", "cpu", "cuda"), "threads": int}


def register_section(name: str, model: Any) -> None:
    """Add a params section that is no method's (a model class or a ``"module:Class"`` reference)."""
    _SECTIONS[name] = model


def _methods() -> Any:
    from weakspot import methods

    return methods


def section_names() -> List[str]:
    """Every section params.yaml may hold: the library's, the registered ones and every method's (none imported)."""
    return sorted(set(_SECTIONS) | set(_methods().available()))


def is_method(section: str) -> bool:
    return section not in _SECTIONS and section in _methods().available()


def section_model(section: str) -> Type[BaseModel]:
    """The pydantic model of ``section``; a ConfigError lists the valid sections."""
    if section in _SECTIONS:
        model = _SECTIONS[section]
        if isinstance(model, str):
            import importlib

            module, _, attr = model.partition(":")
            model = _SECTIONS[section] = getattr(importlib.import_module(module), attr)
        return model
    if is_method(section):
        return _methods().get(section).params
    raise ConfigError(f"unknown params section {section!r}; valid sections: {', '.join(section_names())}")


def _format_validation_error(err: ValidationError, prefix: str, source: str) -> str:
    lines = []
    for e in err.errors():
        loc = ".".join(str(p) for p in (prefix, *e["loc"]) if p != "")
        value = e.get("input")
        if e["type"] == "extra_forbidden":
            parent = ".".join(str(p) for p in (prefix, *e["loc"][:-1]) if p != "")
            model = _model_at(prefix, e["loc"][:-1])
            allowed = ", ".join(model.model_fields) if model is not None else "see the schema"
            if prefix.split(".")[0] != "targets" and is_method(prefix.split(".")[0]) and len(e["loc"]) == 1:
                allowed += f", {PER_TARGET}"
            lines.append(
                f"{source}: unknown key {loc!r} (value {value!r}); allowed keys under {parent or 'the top'}: {allowed}"
            )
        elif isinstance(value, dict):  # a rule across several keys of a section: the message names them
            lines.append(f"{source}: {loc}: {e['msg']}")
        else:
            lines.append(f"{source}: {loc} = {value!r}: {e['msg']}")
    return "\n".join(lines)


def _model_at(prefix: str, loc: tuple) -> Optional[Type[BaseModel]]:
    try:
        model: Optional[Type[BaseModel]] = section_model(prefix.split(".")[0])
    except ConfigError:
        return None
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
        raise ConfigError(
            f"{path}: params file not found (expected a YAML file; start from the repository's params.yaml)"
        )
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


def validate_top_level(data: Dict[str, Any], source: str = "params.yaml", *, every_key: bool = True) -> Dict[str, Any]:
    """The top-level settings (``device``, ``threads``); with ``every_key`` an unknown top-level key is an error
    too."""
    if every_key:
        allowed = sorted(set(TOP_LEVEL) | set(section_names()))
        for key in data:
            if key not in allowed:
                raise ConfigError(f"{source}: unknown key {key!r}; allowed top-level keys: {', '.join(allowed)}")
    device = data.get("device", "auto")
    if not isinstance(device, str) or not (device in TOP_LEVEL["device"] or device.startswith("cuda:")):
        raise ConfigError(f"{source}: device = {device!r}: allowed: auto, cpu, cuda (or cuda:N)")
    threads = data.get("threads", DEFAULT_THREADS)
    if not valid_threads(threads):
        raise ConfigError(f"{source}: threads = {threads!r}: must be a whole number of CPU threads, 1 or more")
    return {"device": device, "threads": threads}


def _raw_section(section: str, data: Dict[str, Any], source: str) -> Dict[str, Any]:
    raw = data.get(section)
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise ConfigError(f"{source}: {section} = {raw!r}: must be a mapping of keys")
    return raw


def per_target(section: str, data: Dict[str, Any], source: str = "params.yaml") -> Dict[str, Dict[str, Any]]:
    """A method section's ``per_target`` overrides: target name -> keys of the section (``{}`` when none)."""
    if not is_method(section):
        return {}
    pt = _raw_section(section, data, source).get(PER_TARGET) or {}
    if not isinstance(pt, dict) or not all(isinstance(v, dict) for v in pt.values()):
        raise ConfigError(
            f"{source}: {section}.{PER_TARGET} = {pt!r}: must map target names to keys of the {section} section"
        )
    if any(PER_TARGET in v for v in pt.values()):
        raise ConfigError(f"{source}: {section}.{PER_TARGET}: a target's overrides cannot hold {PER_TARGET}")
    return pt


def _validate(section: str, raw: Dict[str, Any], prefix: str, source: str) -> BaseModel:
    try:
        return section_model(section).model_validate(raw)
    except ValidationError as err:
        raise ConfigError(_format_validation_error(err, prefix, source)) from None


def validate_section(
    section: str, data: Dict[str, Any], source: str = "params.yaml", target: Optional[str] = None
) -> BaseModel:
    """Validate one section of params.yaml's content ``data`` (a missing section = all defaults); for a method's
    section and a ``target``, with that target's ``per_target`` overrides merged in."""
    section_model(section)  # an unknown section names the valid ones
    raw = _raw_section(section, data, source)
    overrides = per_target(section, data, source)
    base = {k: v for k, v in raw.items() if k != PER_TARGET} if is_method(section) else raw
    if target is None or target not in overrides:
        return _validate(section, base, section, source)
    _validate(section, base, section, source)  # an error in the shared keys is named there
    return _validate(section, deep_merge(base, overrides[target]), f"{section}.{PER_TARGET}.{target}", source)


def load_section(
    section: str, path: os.PathLike | str = "params.yaml", target: Optional[str] = None
) -> Tuple[Dict[str, Any], BaseModel]:
    """Read params.yaml and return (top-level settings, the validated section, for ``target`` when given)."""
    data = read_yaml(path)
    top = validate_top_level(data, str(path), every_key=False)
    return top, validate_section(section, data, str(path), target)


def target_of(name: str, data: Dict[str, Any], source: str = "params.yaml") -> TargetParams:
    """The validated target ``name`` of params.yaml's content; a ConfigError lists the targets when it is unknown."""
    targets = cast(TargetsParams, validate_section("targets", data, source))  # the section's model
    if name not in targets.root:
        raise ConfigError(f"{source}: no target {name!r}; targets: {', '.join(targets.root)}")
    return targets.root[name]


def load_target(name: str, path: os.PathLike | str = "params.yaml") -> Tuple[Dict[str, Any], TargetParams]:
    """(top-level settings, the validated target ``name``) from params.yaml."""
    data = read_yaml(path)
    return validate_top_level(data, str(path), every_key=False), target_of(name, data, str(path))


def check_params(path: os.PathLike | str = "params.yaml") -> Dict[str, Any]:
    """Validate the whole file (every section, every target's overrides); return the normalised content (every
    default filled in, ``per_target`` kept as written)."""
    data = read_yaml(path)
    out: Dict[str, Any] = validate_top_level(data, str(path))
    errors: List[str] = []
    names: List[str] = []
    try:
        names = list(cast(TargetsParams, validate_section("targets", data, str(path))).root)
    except ConfigError:
        pass  # reported below
    for section in section_names():
        try:
            out[section] = validate_section(section, data, str(path)).model_dump(mode="json")
            overrides = per_target(section, data, str(path))
            unknown = [t for t in overrides if names and t not in names]
            if unknown:
                raise ConfigError(
                    f"{path}: {section}.{PER_TARGET}: no target {', '.join(map(repr, unknown))}; "
                    f"targets: {', '.join(names)}"
                )
            for t in overrides:
                validate_section(section, data, str(path), target=t)
            if overrides:
                out[section][PER_TARGET] = overrides
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
