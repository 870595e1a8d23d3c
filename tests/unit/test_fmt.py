"""One unit policy (harness/core/fmt.py): durations auto-scaled to 3 significant digits,
bytes in IEC units, rates in bit/s with SI prefixes; and one throughput."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.core import fmt
from harness.report.data import load_report_data

QUICK = Path(__file__).parent.parent / "fixtures" / "runs" / "report-quick"


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (0.07407, "74.1 ms"),
        (7e-06, "7.00 µs"),
        (0.000152, "152 µs"),
        (0.0009996, "1.00 ms"),  # rounded before the unit is picked: never "1e+03 µs"
        (0.9996, "1.00 s"),
        (1.02, "1.02 s"),
        (123.4, "123 s"),
        (1234.5, "1,230 s"),
        (0.0, "0 s"),
        (None, "-"),
    ],
)
def test_durations_are_scaled_to_three_digits(seconds: float | None, text: str) -> None:
    assert fmt.duration(seconds) == text


def test_an_axis_takes_the_unit_of_its_largest_value() -> None:
    assert fmt.duration_unit([0.02, 0.3]) == (1e-3, "ms")
    assert fmt.duration_unit([0.02, 3.0]) == (1.0, "s")
    assert fmt.duration_unit([5e-6]) == (1e-6, "µs")


def test_bytes_are_iec_and_rates_si() -> None:
    assert fmt.size(161) == "161 B"
    assert fmt.size(87_654) == "85.6 KiB"
    assert fmt.size(28_521_267) == "27.2 MiB"
    assert fmt.rate(10_512_345) == "10.5 Mbit/s"
    assert fmt.rate(25_400) == "25.4 kbit/s"


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
