"""One throughput wherever the harness prints one."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.report.data import load_report_data

QUICK = Path(__file__).parent.parent / "fixtures" / "runs" / "report-quick"


def test_one_throughput_in_the_cases_and_the_bound_tables() -> None:
    """A real quick.toml run: the cases table and the bound table said 10.5 and 11.6 Mbit/s
    for one case (bytes over the whole duration, and over connect to served)."""
    data = load_report_data(QUICK)
    bounds = {row.label: row for row in data.bounds}
    compared = 0
    for row in data.cases:
        bound = bounds.get(row.label)
        if bound is None or row.throughput_bps is None:
            continue
        assert row.throughput_bps == pytest.approx(bound.throughput_bps), row.label
        compared += 1
    assert compared >= 8
