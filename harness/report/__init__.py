"""Reading finished runs for people: `xfrbench report` (report.html and a terminal summary)
and `xfrbench compare` (run B against run A, case by case). Files in, nothing else: a report
or a comparison can be made on any host from a copied run folder."""

from harness.report.data import ReportData, build_report_data, load_report_data

__all__ = ["ReportData", "build_report_data", "load_report_data"]
