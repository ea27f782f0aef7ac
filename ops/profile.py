"""``weakspot profile NAME``: ``profiles/NAME.yaml`` merged into params.yaml (mappings recursively), the previous file
kept as ``params.yaml.bak``.

params.yaml is edited, not rewritten: a round-trip YAML library (ruamel.yaml) keeps every comment, the key order and
the flow style (``vae: {latent_dim: 8, hidden: 64}`` stays on its line); a value the profile sets changes in place,
a key the profile adds is appended at the end of its mapping, and a line's comment stays with its key even where the
profile changed the value (it may then describe the old value: the header line names the profile and the .bak).

Caveats first: the merged file is validated before params.yaml is replaced, so a profile that does not fit leaves it
untouched; the edited text must read back (PyYAML, as the stages read it) as exactly the profile merged into the
old values, or nothing is written. A mapping the profile replaces with a scalar or a list (``key: null``) loses the
comments inside it, as it loses its lines (the .bak has them); blank lines and section comments that followed it move
to the new value.
"""

from __future__ import annotations

import io
import json
import re
import shutil
import sys
from pathlib import Path
from typing import Any, Dict, Optional, Tuple

import yaml
from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap, CommentedSeq
from ruamel.yaml.error import CommentMark
from ruamel.yaml.tokens import CommentToken

from weakspot.config import deep_merge, read_yaml
from weakspot.errors import ConfigError
from weakspot.io import write_text

from tasks.settings import check_params
from ops.engine.dvc import PARAMS

#: The header line a merge writes at the top of params.yaml (an earlier one is replaced: the .bak has it).
HEADER = "# profile {name} merged in by `weakspot profile`; previous file: {backup}\n"
_OLD_HEADER = re.compile(r"\A(# profile \S+ merged in by `weakspot profile`;[^\n]*\n)+")


def _round_trip():
    """ruamel.yaml's round-trip reader and writer, set to write params.yaml back unchanged: 120 columns (the file's
    line length), block sequences indented under their key, quotes kept, None written as ``null``."""
    rt = YAML(typ="rt")
    rt.width = 120
    rt.indent(mapping=2, sequence=4, offset=2)
    rt.preserve_quotes = True
    rt.representer.add_representer(type(None), lambda rep, _: rep.represent_scalar("tag:yaml.org,2002:null", "null"))
    return rt


def _same(a: Any, b: Any) -> bool:
    """The same data, types included (1, 1.0 and true differ)."""
    dump = lambda x: json.dumps(x, default=str)  # noqa: E731
    try:
        return dump(a) == dump(b)
    except (TypeError, ValueError):
        return False


def _flow(node: Any) -> Optional[bool]:
    """A ruamel collection's flow style (True: ``{...}``/``[...]``); None for anything else."""
    return bool(node.fa.flow_style()) if isinstance(node, (CommentedMap, CommentedSeq)) else None


def _fresh(value: Any, style: Any, old: Any = None) -> Any:
    """``value`` (as PyYAML read it from the profile) as ruamel data: collections in the profile's style (``style``:
    the profile's own node for it), else in the style of the value they replace (``old``); a scalar the profile wrote
    quoted or formatted its way is kept as written when it reads as the same value."""
    if isinstance(value, dict):
        out = CommentedMap()
        for k, v in value.items():
            out[k] = _fresh(v, style.get(k) if isinstance(style, dict) else None)
    elif isinstance(value, list):
        out = CommentedSeq()
        for i, v in enumerate(value):
            out.append(_fresh(v, style[i] if isinstance(style, list) and i < len(style) else None))
    else:
        return style if style is not None and _same(style, value) else value
    flow = _flow(style) if _flow(style) is not None else _flow(old)
    if flow:
        out.fa.set_flow_style()
    elif flow is not None:
        out.fa.set_block_style()
    return out


def _entry_slot(node: Any, key: Any) -> Tuple[Any, Any, int]:
    """Where ruamel keeps the comment lines that follow ``node[key]``: (container, key, index into
    ``container.ca.items[key]``) of the entry's deepest last entry (the entry itself for a scalar or a flow
    collection, after which the lines that follow open the next key instead)."""
    value = node[key]
    if isinstance(value, (CommentedMap, CommentedSeq)) and value and not _flow(value):
        return _last_slot(value)
    return node, key, 2 if isinstance(node, CommentedMap) else 0


def _last_slot(node: Any) -> Optional[Tuple[Any, Any, int]]:
    """``_entry_slot`` of the last entry of ``node`` (a block collection); None for an empty or a flow one."""
    if not node or _flow(node):
        return None
    return _entry_slot(node, next(reversed(node)) if isinstance(node, CommentedMap) else len(node) - 1)


def _detach_tail(slot: Optional[Tuple[Any, Any, int]]) -> Optional[str]:
    """Take from a slot (``_entry_slot``) the comment text from its first blank line on (the blank lines and section
    comments that belong before whatever follows); the line's own comment and its continuation lines stay."""
    if slot is None:
        return None
    container, key, idx = slot
    entry = container.ca.items.get(key)
    token = entry[idx] if entry and len(entry) > idx else None
    text = getattr(token, "value", None)
    cut = text.find("\n\n") if isinstance(text, str) else -1
    if cut < 0:
        return None
    keep = text[: cut + 1]
    if keep.strip():
        token.value = keep
    else:
        entry[idx] = None
    return "\n" + text[cut + 1 :]


def _attach_tail(slot: Optional[Tuple[Any, Any, int]], text: Optional[str]) -> None:
    """Put comment text taken by ``_detach_tail`` in a slot, after the comment already there."""
    if slot is None or not text:
        return
    container, key, idx = slot
    entry = container.ca.items.setdefault(key, [None, None, None, None] if idx == 2 else [None, None])
    old = entry[idx]
    if old is not None and old.value:
        old.value = old.value.rstrip("\n") + text
    else:
        entry[idx] = CommentToken(text, CommentMark(0), None)


def _merge_into(node: Any, override: Dict[str, Any], style: Any) -> None:
    """``override`` merged into the ruamel mapping ``node`` in place, as ``deep_merge`` merges plain data: mappings
    recursively, anything else replaced where it stood or appended at the end of the mapping; the blank lines and
    section comments that followed the old value (or the mapping's old last entry) follow the new one."""
    for key, value in override.items():
        sub = style.get(key) if isinstance(style, dict) else None
        old = node.get(key)
        if isinstance(value, dict) and isinstance(old, CommentedMap):
            if not old and _flow(sub) is not None:  # ``{}`` filled in: as the profile writes it
                old.fa.set_flow_style() if _flow(sub) else old.fa.set_block_style()
            _merge_into(old, value, sub)
        elif key in node:
            if not _same(old, value):
                tail = _detach_tail(_entry_slot(node, key))
                node[key] = _fresh(value, sub, old)
                _attach_tail(_entry_slot(node, key), tail)
        else:
            tail = _detach_tail(_last_slot(node))
            node[key] = _fresh(value, sub)
            _attach_tail(_entry_slot(node, key), tail)


def merged_text(params_text: str, profile_text: str, header: str = "") -> str:
    """params.yaml's text with the profile merged in (comments, key order and style kept), ``header`` (a comment line)
    in place of an earlier profile's. Raises ConfigError where the result does not read back (PyYAML) as exactly
    ``deep_merge(params, profile)``."""
    rt = _round_trip()
    base, prof = yaml.safe_load(params_text) or {}, yaml.safe_load(profile_text) or {}
    if not isinstance(prof, dict):
        raise ConfigError(f"a profile is a YAML mapping, got {type(prof).__name__}")
    doc = rt.load(params_text)
    _merge_into(doc, prof, rt.load(profile_text))
    out = io.StringIO()
    rt.dump(doc, out)
    text = header + _OLD_HEADER.sub("", out.getvalue())
    try:
        back = yaml.safe_load(text)
    except yaml.YAMLError:
        back = None  # a collection the round trip cannot write in place (e.g. a block list emptied to [])
    if back != deep_merge(base, prof):
        raise ConfigError(
            "the profile merged into params.yaml does not read back as the merged values (a YAML value "
            "the round trip writes differently); params.yaml left as it was"
        )
    return text


def apply_profile(name: str, params_file: "str | Path" = PARAMS, profiles: "str | Path" = "profiles") -> Path:
    """Merge ``<profiles>/<name>.yaml`` into ``params_file``; returns the backup of the previous file."""
    prof = Path(profiles) / f"{name}.yaml"
    if not prof.is_file():
        names = sorted(p.stem for p in Path(profiles).glob("*.yaml"))
        raise ConfigError(f"profile {name!r} not found at {prof}; available: {', '.join(names) or '(none)'}")
    read_yaml(params_file), read_yaml(prof)  # a missing or malformed file: a ConfigError naming it (and the line)
    backup = Path(params_file).with_suffix(".yaml.bak")
    header = HEADER.format(name=name, backup=backup)
    try:
        text = merged_text(Path(params_file).read_text(), prof.read_text(), header)
    except ConfigError as err:  # the values still merge; only the comments cannot be kept this time
        if "a YAML mapping" in str(err):
            raise
        print(
            f"weakspot profile: {err}; writing the merged values without params.yaml's comments (the backup "
            f"{backup} keeps them)",
            file=sys.stderr,
        )
        text = header + yaml.safe_dump(deep_merge(read_yaml(params_file), read_yaml(prof)), sort_keys=False)
    tmp = Path(params_file).with_suffix(".candidate.yaml")
    write_text(tmp, text)
    try:
        check_params(tmp)
    finally:
        tmp.unlink(missing_ok=True)
    shutil.copyfile(params_file, backup)
    write_text(params_file, text)
    return backup
