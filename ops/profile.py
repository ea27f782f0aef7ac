"""``weakspot profile NAME``: ``profiles/NAME.yaml`` merged into params.yaml (mappings recursively), the previous file
kept as ``params.yaml.bak``.

Caveats first: the merged file is validated before params.yaml is replaced, so a profile that does not fit leaves it
untouched; the YAML is rewritten, so comments in params.yaml are not kept (the .bak has them).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import yaml

from weakspot.config import check_params, deep_merge, read_yaml
from weakspot.errors import ConfigError
from weakspot.io import write_text

import ops.params  # noqa: F401  (the history and execution sections, registered)
from ops.dvc import PARAMS


def apply_profile(name: str, params_file: "str | Path" = PARAMS, profiles: "str | Path" = "profiles") -> Path:
    """Merge ``<profiles>/<name>.yaml`` into ``params_file``; returns the backup of the previous file."""
    prof = Path(profiles) / f"{name}.yaml"
    if not prof.is_file():
        names = sorted(p.stem for p in Path(profiles).glob("*.yaml"))
        raise ConfigError(f"profile {name!r} not found at {prof}; available: {', '.join(names) or '(none)'}")
    merged = deep_merge(read_yaml(params_file), read_yaml(prof))
    tmp = Path(params_file).with_suffix(".candidate.yaml")
    write_text(tmp, yaml.safe_dump(merged, sort_keys=False))
    try:
        check_params(tmp)
    finally:
        tmp.unlink(missing_ok=True)
    backup = Path(params_file).with_suffix(".yaml.bak")
    shutil.copyfile(params_file, backup)
    write_text(params_file, f"# profile {name} merged in by `weakspot profile`; previous file: {backup}\n"
               + yaml.safe_dump(merged, sort_keys=False))
    return backup
