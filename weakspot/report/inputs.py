"""The report's input, assembled by one function for the pipeline's report stage and for ``weakspot.audit``.

Caveat first: this module reads no files and knows neither the pipeline's file layout nor Prefect or DVC. The report
flow reads what the stages wrote (each section, its figures and tables, every metric, each method's findings) and
``weakspot.audit`` holds the same in memory; both hand it to :func:`report_input`, which builds each target's weak
spots (a card per method: its findings, or why it did not run), corrects each target's candidates as one family,
and returns a :class:`ReportInput` whose :meth:`~ReportInput.render` is the page.

>>> inp = report_input({}, sections=[], figures={}, tables={}, metrics={}, findings={}, title="empty")
>>> inp.groups["train"], "<h1>empty</h1>" in inp.render()
('Targets: data and models', True)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Dict, List, Mapping, Optional, Sequence, Tuple

if TYPE_CHECKING:  # pragma: no cover
    from weakspot.targets import TargetDescription

#: the heading the targets' own sections (each model's accuracy and calibration) stand under
TARGETS_GROUP = "Targets: data and models"


@dataclass
class ReportInput:
    """Everything the report shows, as :func:`weakspot.report.html.render_report` takes it.

    Parameters
    ----------
    sections : list of dict
        Each stage's section (``stage``, ``target``, ``order``, ``title``, ``summary``, ``items``, ``sample``, ...).
    figures : mapping of "key/name" -> PNG bytes
    tables : mapping of "key/name" -> pandas.DataFrame
    metrics : mapping of key -> its metrics dict
        Keyed ``stage/target`` (``stage`` for a shared stage).
    targets : list of dict
        One per target: ``name``, ``intro``, ``model``, ``accuracy`` and a card per method (its corrected findings
        and what it ran on, or the reason it did not run).
    groups : dict of stage -> heading
        The heading each stage's sections stand under.
    title : str
        The page's title.
    run_info : mapping, optional
        Shown in the page header (e.g. the time and git commit).
    max_table_rows : int
        Tables longer than this are cut in the page.
    since : mapping, optional
        The comparison with the previous audit.
    trend_png : bytes, optional
        The trend over past audits (PNG).
    """

    sections: List[Dict[str, Any]]
    figures: Mapping[str, bytes]
    tables: Mapping[str, Any]
    metrics: Mapping[str, Mapping[str, Any]]
    targets: List[Dict[str, Any]]
    groups: Dict[str, str]
    title: str = "weakspot audit"
    run_info: Optional[Mapping[str, Any]] = None
    max_table_rows: int = 20
    since: Optional[Mapping[str, Any]] = None
    trend_png: Optional[bytes] = None

    def render(self) -> str:
        """The report: one self-contained HTML page (:func:`weakspot.report.html.render_report`)."""
        from weakspot.report.html import render_report

        return render_report(
            self.sections,
            figures=self.figures,
            tables=self.tables,
            metrics=self.metrics,
            title=self.title,
            run_info=self.run_info,
            max_table_rows=self.max_table_rows,
            targets=list(self.targets),
            groups=self.groups,
            since=self.since,
            trend_png=self.trend_png,
        )


def method_groups() -> Dict[str, str]:
    """Stage -> heading for the stages every audit has: the targets' own (``train``) and each method's (its title
    and paper)."""
    from weakspot import methods

    return {"train": TARGETS_GROUP, **{m.name: f"{m.title} ({m.paper})" for m in methods.all_methods()}}


def target_entry(
    name: str,
    target: "TargetDescription",
    metrics: Mapping[str, Mapping[str, Any]],
    samples: Mapping[Tuple[Any, Any], str],
    findings: Mapping[Tuple[str, str], Any],
    not_run: Mapping[Tuple[str, str], str],
) -> Dict[str, Any]:
    """One target's weak spots, before the correction: a line on its data and model, and a card per method with
    its findings and what it ran on, or why it did not run (it does not fit, then ``not_run``'s reason)."""
    from weakspot import methods

    m = metrics.get(f"train/{name}", {})
    intro = target.described
    if "test_accuracy" in m:
        intro += f"; test accuracy {m['test_accuracy']:.1%}" + (f", ECE {m['ece']:.3f}" if "ece" in m else "")
    cards = []
    for method, reason in methods.fits(target).items():
        meta = methods.get(method)
        card: Dict[str, Any] = {"name": method, "title": meta.title, "paper": meta.paper, "anchor": f"{method}-{name}"}
        why = reason or not_run.get((name, method))
        if why:
            card["reason"] = why
        elif (name, method) in findings:
            card["findings"] = findings[(name, method)]
            card["sample"] = samples.get((method, name), "")
        cards.append(card)
    return {
        "name": name,
        "intro": intro + ".",
        "methods": cards,
        "model": target.model_label,
        "accuracy": m.get("test_accuracy"),
    }


def report_input(
    targets: Mapping[str, "TargetDescription"],
    *,
    sections: Sequence[Mapping[str, Any]],
    figures: Mapping[str, bytes],
    tables: Mapping[str, Any],
    metrics: Mapping[str, Mapping[str, Any]],
    findings: Mapping[Tuple[str, str], Any],
    not_run: Optional[Mapping[Tuple[str, str], str]] = None,
    title: str = "weakspot audit",
    run_info: Optional[Mapping[str, Any]] = None,
    max_table_rows: int = 20,
    groups: Optional[Mapping[str, str]] = None,
    since: Optional[Mapping[str, Any]] = None,
    trend_png: Optional[bytes] = None,
) -> ReportInput:
    """The report's input: what the audit produced, with each target's weak spots corrected as one family.

    Parameters
    ----------
    targets : mapping of name -> TargetParams or InMemoryTarget
        The targets audited, in the report's order.
    sections : sequence of dict
        Each stage's section; a method's ``sample`` (what it ran on) goes on its card.
    figures, tables, metrics : mapping
        As :class:`ReportInput` holds them; ``metrics["train/<target>"]`` gives each target's accuracy.
    findings : mapping of (target, method) -> pandas.DataFrame
        The findings of every method that ran (in :mod:`weakspot.findings`' shape).
    not_run : mapping of (target, method) -> str, optional
        Why a method that fits a target did not run on it (its stage failed, it was not asked for).
    title, run_info, max_table_rows, since, trend_png
        As :class:`ReportInput` holds them.
    groups : mapping of stage -> heading, optional
        Headings of the caller's own stages, over :func:`method_groups`.

    Returns
    -------
    ReportInput
    """
    from weakspot.findings import correct_targets

    samples = {(s.get("stage"), s.get("target")): str(s.get("sample") or "") for s in sections}
    entries = [target_entry(n, t, metrics, samples, findings, not_run or {}) for n, t in targets.items()]
    return ReportInput(
        sections=[dict(s) for s in sections],
        figures=figures,
        tables=tables,
        metrics=metrics,
        targets=correct_targets(entries),
        groups={**method_groups(), **(groups or {})},
        title=title,
        run_info=run_info,
        max_table_rows=max_table_rows,
        since=since,
        trend_png=trend_png,
    )
