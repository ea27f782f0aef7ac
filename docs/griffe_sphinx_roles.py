"""A griffe extension for the API reference (mkdocs.yml: the python handler's ``extensions``): the library's
docstrings are written for Sphinx in two ways Markdown would print as they are, and this rewrites both as griffe loads
them (the docstrings themselves are left as they are):

- cross-references in Sphinx's roles (``:func:`weakspot.evidence.correct```, ``:class:`~weakspot.models.X```): each
  becomes inline code of the name it shows (``~`` keeps the last part, ``text <target>`` the text);
- reStructuredText's simple tables of two columns (``=====  =====`` above and below, no header, as
  ``weakspot.findings``' columns): each becomes a list, the first column as inline code;
- an ``Example`` section (numpydoc's singular, which griffe reads as an admonition of prose) is read as ``Examples``,
  so its ``>>>`` lines show as code; a paragraph that ends in reStructuredText's ``::`` before its indented literal
  block ends in ``:`` (the block is code in Markdown too).
"""

from __future__ import annotations

import re
from typing import Any

import griffe

ROLE = re.compile(r":(?:py:)?(?:func|meth|attr|class|mod|data|obj|exc|const|ref):`([^`]+)`")


def _shown(target: str) -> str:
    """What a role's target shows: ``text <target>`` -> text, ``~a.b.c`` -> c, else the name as written."""
    m = re.fullmatch(r"\s*(.+?)\s*<[^>]+>\s*", target)
    if m:
        return m.group(1)
    if target.startswith("~"):
        return target[1:].rsplit(".", 1)[-1]
    return target


SEPARATOR = re.compile(r"^(=+) +(=+)\s*$")


def _tables(text: str) -> str:
    """Every two-column simple table without a header in ``text`` as a list (other tables are left as they are)."""
    lines, out, i = text.split("\n"), [], 0
    while i < len(lines):
        m = SEPARATOR.match(lines[i])
        end = next((j for j in range(i + 1, len(lines)) if lines[j] == lines[i]), None) if m else None
        if m is None or end is None:
            out.append(lines[i])
            i += 1
            continue
        second = m.start(2)
        for row in lines[i + 1 : end]:
            if row[:second].strip():
                out.append(f"- `{row[:second].strip()}`: {row[second:].strip()}")
            elif row.strip() and out:  # a second column's text on a line of its own: the row goes on
                out[-1] += " " + row.strip()
        i = end + 1
    return "\n".join(out)


def plain(text: str) -> str:
    """``text`` with every Sphinx role replaced by inline code, its simple tables by lists, ``Example`` sections read
    as ``Examples`` and ``::`` before a literal block as ``:``."""
    text = _tables(ROLE.sub(lambda m: f"`{_shown(m.group(1))}`", text))
    text = re.sub(r"^(\s*)Example\n\1-+$", lambda m: f"{m.group(1)}Examples\n{m.group(1)}--------", text, flags=re.M)
    return re.sub(r"::\n\n", ":\n\n", text)


class SphinxRoles(griffe.Extension):
    """Rewrite the Sphinx roles of every docstring griffe loads."""

    def on_instance(self, *, node: Any, obj: Any, agent: Any, **kwargs: Any) -> None:
        if obj.docstring is not None:
            obj.docstring.value = plain(obj.docstring.value)
