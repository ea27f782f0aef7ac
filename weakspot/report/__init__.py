"""The audit report: one self-contained HTML page (figures embedded), readable offline."""

from weakspot.report.html import render_report  # noqa: F401
from weakspot.report.inputs import ReportInput, report_input  # noqa: F401
