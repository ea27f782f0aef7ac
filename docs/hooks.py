"""MkDocs hook: ``<!-- params.yaml: NAME -->`` on a page becomes the section ``NAME`` of the repository's params.yaml
as it is now (the comment lines above it, its key and its indented body), in a YAML code block. The method pages quote
their settings this way, so the site never shows a stale copy of the defaults."""

from __future__ import annotations

import re
from pathlib import Path

PLACEHOLDER = re.compile(r"<!-- params\.yaml: ([A-Za-z_][\w-]*) -->")


def params_section(text: str, name: str) -> str:
    """Section ``name`` of params.yaml's ``text``: the comment block right above its top-level key, the key and
    every line under it up to the next top-level line."""
    lines = text.splitlines()
    start = next((i for i, ln in enumerate(lines) if re.match(rf"{re.escape(name)}:(\s|$)", ln)), None)
    if start is None:
        raise ValueError(f"params.yaml has no top-level section {name!r}")
    top = start
    while top > 0 and lines[top - 1].startswith("#"):
        top -= 1
    end = start + 1
    while end < len(lines) and (not lines[end].strip() or lines[end].startswith(" ")):
        end += 1
    while end > start + 1 and not lines[end - 1].strip():
        end -= 1
    return "\n".join(lines[top:end])


def on_page_markdown(markdown: str, page, config, files) -> str:  # noqa: ARG001 (MkDocs' hook signature)
    if "<!-- params.yaml:" not in markdown:
        return markdown
    text = (Path(config["config_file_path"]).parent / "params.yaml").read_text()
    return PLACEHOLDER.sub(lambda m: "```yaml\n" + params_section(text, m.group(1)) + "\n```", markdown)
