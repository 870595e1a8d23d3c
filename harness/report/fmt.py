"""Number formatting shared by the report's HTML and terminal output ("-" for no value)."""

from __future__ import annotations

from harness.units import format_rate

MIB = 1024 * 1024
NONE = "-"


def seconds(value: float | None) -> str:
    """4 significant digits: 2.532, 0.004213, 123.5."""
    return NONE if value is None else f"{value:.4g}"


def rate(value: float | None) -> str:
    return NONE if value is None else format_rate(value)


def percent(value: float | None) -> str:
    return NONE if value is None else f"{value:.1%}"


def mib(value: float | None) -> str:
    return NONE if value is None else f"{value / MIB:.1f}"


def count(value: int | None) -> str:
    return NONE if value is None else f"{value:,}"
