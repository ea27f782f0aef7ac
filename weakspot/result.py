"""What a stage's library entry point hands back to its flow.

The flow writes ``metrics`` to ``metrics/<stage>.json``, each table to ``plots/<stage>/<name>.csv``, each figure to
``plots/<stage>/<name>.png``, and ``section`` (plus the lineage) to ``plots/<stage>/section.json``; the report stage
renders every section it finds, in pipeline order. The library itself writes nothing.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional


@dataclass
class StageResult:
    """Metrics, tables, figures and a report section produced by one stage.

    Parameters
    ----------
    metrics : dict
        JSON-serialisable numbers (NumPy scalars are fine).
    tables : dict of str -> pandas.DataFrame
        Small tables, written as CSV (DVC plots) and shown in the report when ``section`` names them.
    figures : dict of str -> matplotlib.figure.Figure
        Written as PNG and embedded in the report when ``section`` names them.
    title : str
        The report section's heading.
    summary : list of str
        Paragraphs of plain text (no HTML) that open the section: what was measured and what it means.
    items : list of dict
        Ordered report items: ``{"figure": name, "caption": text}`` or ``{"table": name, "caption": text}``.
    headline : list of str
        One-sentence findings for the report's "At a glance" box (the numbers a reader must not miss).
    key_metrics : list of str
        The metrics shown as cards at the top of the section, in this order (default: the first scalar metrics).
    sample : str
        A method's: what it ran on, in words (which rows, inputs, seeds or renders, how many of how many, drawn with
        which seed), shown on its card in the target's weak spots ("Ran on ...").
    """

    metrics: Dict[str, Any] = field(default_factory=dict)
    tables: Dict[str, Any] = field(default_factory=dict)
    figures: Dict[str, Any] = field(default_factory=dict)
    title: str = ""
    summary: List[str] = field(default_factory=list)
    items: List[Dict[str, str]] = field(default_factory=list)
    headline: List[str] = field(default_factory=list)
    key_metrics: List[str] = field(default_factory=list)
    sample: str = ""

    def section(self, stage: str, target: Optional[str], order: int, lineage: Dict[str, Any]) -> Dict[str, Any]:
        """The report's record of this result as stage ``stage`` on ``target`` (its text, no figures or tables):
        what the pipeline writes as ``section.json`` and the Python API hands the report directly."""
        return {
            "stage": stage,
            "target": target,
            "order": order,
            "title": self.title or stage,
            "summary": list(self.summary),
            "items": list(self.items),
            "headline": list(self.headline),
            "key_metrics": list(self.key_metrics),
            "sample": self.sample,
            "lineage": lineage,
        }

    def check(self) -> "StageResult":
        """Raise ``ValueError`` if an item names a figure or table that is not there."""
        for k in self.key_metrics:
            if k not in self.metrics:
                raise ValueError(f"key metric {k!r} is not among the metrics {sorted(self.metrics)}")
        for item in self.items:
            if "figure" in item and item["figure"] not in self.figures:
                raise ValueError(f"report item names figure {item['figure']!r}, not among {sorted(self.figures)}")
            if "table" in item and item["table"] not in self.tables:
                raise ValueError(f"report item names table {item['table']!r}, not among {sorted(self.tables)}")
        return self
