"""Render report sections into one self-contained HTML page through the Jinja2 templates in ``templates/``.

Caveat first: this module only formats what it is given; it reads no files but its own templates. The report flow
collects each stage's ``section.json``, figures (PNG bytes) and tables, and passes them here; :mod:`.view` turns them
into plain text for the templates, which escape every value they print (autoescape), so nothing here is marked safe.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any, Dict, List, Mapping, Optional

import jinja2

from weakspot.report import view
from weakspot.report.view import verdict_line  # noqa: F401  (part of this module's interface)


@lru_cache(maxsize=1)
def environment() -> jinja2.Environment:
    """The templates' environment: HTML autoescaped, a missing variable an error (not an empty string)."""
    return jinja2.Environment(
        loader=jinja2.PackageLoader("weakspot.report", "templates"),
        autoescape=jinja2.select_autoescape(["html"]),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )


def weak_spots_html(target: Mapping[str, Any], max_findings: int = 4) -> str:
    """The "Weak spots of <target>" section: every method's top findings side by side, with their examples.

    ``target``: ``{"name", "intro", "methods": [{"name", "title", "paper", "reason" (skipped) or "findings"
    (a DataFrame in the findings shape), "anchor"}]}``.
    """
    return environment().get_template("weak_spots.html").render(target=view.target(target, max_findings))


def compare_html(cmp: Mapping[str, Any], curve_png: Optional[bytes] = None) -> str:
    """``weakspot compare``'s page: two targets on the same data side by side (see :mod:`ops.verdict.compare`)."""
    return environment().get_template("compare.html").render(c=view.comparison(cmp, curve_png))


def since_html(since: Mapping[str, Any], trend_png: Optional[bytes] = None, max_rows: int = 40) -> str:
    """The "Since the last audit" section: the verdict, the regressions first, every watched metric's move, and
    the trend over past audits."""
    return environment().get_template("since.html").render(since=view.since_section(since, trend_png, max_rows))


def render_report(
    sections: List[Dict[str, Any]],
    *,
    figures: Mapping[str, bytes],
    tables: Mapping[str, Any],
    metrics: Mapping[str, Mapping[str, Any]],
    title: str = "weakspot audit",
    run_info: Optional[Mapping[str, Any]] = None,
    max_table_rows: int = 20,
    targets: Optional[List[Mapping[str, Any]]] = None,
    groups: Optional[Mapping[str, str]] = None,
    since: Optional[Mapping[str, Any]] = None,
    trend_png: Optional[bytes] = None,
) -> str:
    """Return the report as one HTML string: "At a glance", the weak spots of each target, then every section.

    Parameters
    ----------
    sections : list of dict
        Each with ``stage``, ``target`` (or None), ``order``, ``title``, ``summary`` (list of str), ``items`` and
        ``lineage``; its key is ``stage/target`` (``stage`` for a shared stage).
    figures : mapping of "key/name" -> PNG bytes
    tables : mapping of "key/name" -> pandas.DataFrame
    metrics : mapping of key -> its metrics dict
    run_info : mapping shown in the page header (e.g. the time and git commit)
    max_table_rows : int
        Tables longer than this are cut in the page (the CSV keeps every row).
    targets : list of mapping, optional
        One per target, as :func:`weak_spots_html` takes it; shown first.
    groups : mapping of stage -> group heading, optional
        Sections of these stages are shown under one heading each (e.g. gad -> "Generalized Adversarial Distance").
    since : mapping, optional
        :func:`weakspot.history.since_last`'s comparison with the previous audit, shown after the weak spots (with
        ``trend_png``, the trend figure) and as one line in the header.

    Examples
    --------
    >>> page = render_report([], figures={}, tables={}, metrics={}, title="empty")
    >>> "<h1>empty</h1>" in page
    True
    """
    return (
        environment()
        .get_template("page.html")
        .render(
            view.page(
                sections,
                figures=figures,
                tables=tables,
                metrics=metrics,
                title=title,
                run_info=run_info,
                max_table_rows=max_table_rows,
                targets=targets,
                groups=groups,
                since=since,
                trend_png=trend_png,
            )
        )
    )
