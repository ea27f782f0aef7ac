"""GAD's report on a target: the section (metrics, Table I, figures, prose), the findings and the to-label list."""

from __future__ import annotations

import io
from typing import Any, List

from weakspot.gad.config import GadParams
from weakspot.gad.experiment import DatasetOutcome, findings_of, result_of
from weakspot.methods import AuditTarget, MethodReport


def _parquet(df: Any) -> bytes:
    buf = io.BytesIO()
    df.to_parquet(buf, engine="pyarrow", index=False)
    return buf.getvalue()


def report(outcomes: List[DatasetOutcome], params: GadParams, target: AuditTarget) -> MethodReport:
    weak_spots, to_label = findings_of(outcomes[0])
    return MethodReport(section=result_of(outcomes, params), findings=weak_spots,
                        extras={"to_label.parquet": _parquet(to_label),
                                "to_label.csv": to_label.to_csv(index=False).encode()})
