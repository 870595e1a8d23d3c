"""Parsing of the units used in scenario files and flags: durations, rates, sizes, percentages.

Pure functions. Each raises ValueError with a message that says what is allowed; callers
attach the file and key.
"""

from __future__ import annotations

import re

_NUMBER = r"(?P<num>[0-9]+(?:\.[0-9]*)?|\.[0-9]+)"
_UNIT_RE = re.compile(rf"^\s*{_NUMBER}\s*(?P<unit>[a-zA-Zµ%]*)\s*$")

# Microseconds per unit: integer factors keep '200us' exactly 0.0002 s.
_DURATION_US = {"us": 1, "µs": 1, "ms": 1000, "s": 1_000_000, "m": 60_000_000, "min": 60_000_000}
# Bits per second. tc spells bytes per second "mbps", which people misread: we refuse it.
_RATE_UNITS = {"bit": 1, "kbit": 10**3, "mbit": 10**6, "gbit": 10**9}
_SIZE_UNITS = {
    "": 1,
    "b": 1,
    "k": 1024,
    "kb": 1000,
    "kib": 1024,
    "m": 1024**2,
    "mb": 1000**2,
    "mib": 1024**2,
    "g": 1024**3,
    "gb": 1000**3,
    "gib": 1024**3,
}


def _split(text: str) -> tuple[float, str]:
    match = _UNIT_RE.match(text)
    if not match:
        raise ValueError(f"cannot parse {text!r} as a number with a unit")
    return float(match["num"]), match["unit"]


def _negative(value: object) -> bool:
    return (isinstance(value, int | float) and value < 0) or (
        isinstance(value, str) and value.strip().startswith("-")
    )


def parse_duration(value: str | int | float) -> float:
    """'150ms' -> 0.15 seconds. A bare number is seconds. Units: us, ms, s, m."""
    if isinstance(value, bool):
        raise ValueError("expected a duration such as '150ms', not a boolean")
    if _negative(value):
        raise ValueError(f"{value!r} is negative; a duration must be 0 or more")
    if isinstance(value, int | float):
        return float(value)
    number, unit = _split(value)
    unit = unit.lower() if unit else "s"
    if unit not in _DURATION_US:
        raise ValueError(f"unknown duration unit {unit!r} in {value!r}; use us, ms, s or m")
    return number * _DURATION_US[unit] / 1e6


def parse_rate(value: str | int) -> int:
    """'100mbit' -> 100_000_000 bits per second. Units: bit, kbit, mbit, gbit."""
    if isinstance(value, bool):
        raise ValueError("expected a rate such as '100mbit', not a boolean")
    if _negative(value):
        raise ValueError(f"{value!r} is negative; a rate must be more than 0")
    if isinstance(value, int | float):
        raise ValueError(f"{value!r} has no unit; write it like '100mbit' (bit, kbit, mbit, gbit)")
    number, unit = _split(value)
    unit = unit.lower()
    if unit in {"bps", "kbps", "mbps", "gbps"}:
        raise ValueError(
            f"{value!r} is ambiguous (tc reads 'mbps' as bytes per second); "
            "write bits per second: bit, kbit, mbit, gbit"
        )
    if not unit:
        raise ValueError(f"{value!r} has no unit; write it like '100mbit' (bit, kbit, mbit, gbit)")
    if unit not in _RATE_UNITS:
        raise ValueError(f"unknown rate unit {unit!r} in {value!r}; use bit, kbit, mbit or gbit")
    bits = round(number * _RATE_UNITS[unit])
    if bits <= 0:
        raise ValueError(f"{value!r} is zero; a rate must be more than 0 (omit it for no limit)")
    return bits


def parse_size(value: str | int) -> int:
    """'64KiB' -> 65536 bytes. A bare number is bytes. k/m/g are binary, kB/MB decimal."""
    if isinstance(value, bool):
        raise ValueError("expected a size such as '4MiB', not a boolean")
    if _negative(value):
        raise ValueError(f"{value!r} is negative; a size must be 0 or more")
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        raise ValueError(f"{value!r}: a size is a whole number of bytes, or a string like '4MiB'")
    number, unit = _split(value)
    unit = unit.lower()
    if unit not in _SIZE_UNITS:
        raise ValueError(
            f"unknown size unit {unit!r} in {value!r}; use B, KiB, MiB, GiB, kB, MB, GB"
        )
    return round(number * _SIZE_UNITS[unit])


def _bare_percent(value: object, number: float) -> str:
    written = f"{number:.10g}"
    if number <= 1:
        # 0.015 may be a percentage or a fraction (netem's 0.015 % vs 1.5 %): show both.
        fraction = f"{number * 100:.10g}"
        return (
            f"{value!r} has no unit: read as a percentage it is {written}%, read as a "
            f"fraction {fraction}%; write '{written}%' or '{fraction}%'"
        )
    return f"{value!r} has no unit; write it like '{written}%'"


def parse_percent(value: str | int | float, *, written: bool = True) -> float:
    """'0.5%' -> 0.5 (percent, 0 to 100). In what a person wrote (`written`, a scenario
    file, a flag) the '%' is required: a bare 0.015 could mean 0.015 % or 1.5 %, and only
    0, the same either way, may go without it. Values the harness itself stored (a case's
    resolved scenario, JSON) are numbers in percent and pass with `written=False`."""
    if isinstance(value, bool):
        raise ValueError("expected a percentage such as '1%', not a boolean")
    if isinstance(value, int | float):
        number, unit = float(value), ""
    else:
        text = value.strip()
        number, unit = _split(text.removeprefix("-"))
        if unit not in {"%", ""}:
            raise ValueError(f"cannot parse {value!r} as a percentage; write it like '1.5%'")
        if text.startswith("-"):
            number = -number
    if not 0.0 <= number <= 100.0:
        raise ValueError(f"{value!r} is out of range; allowed: 0% to 100%")
    if written and not unit and number != 0:
        raise ValueError(_bare_percent(value, number))
    return number


def format_duration(seconds: float) -> str:
    """0.15 -> '150ms': short, exact enough for case names and tables."""
    if seconds == 0:
        return "0ms"
    if seconds < 1e-3:
        return f"{seconds * 1e6:g}us"
    if seconds < 1:
        return f"{seconds * 1e3:g}ms"
    return f"{seconds:g}s"


def format_rate(bits_per_second: float) -> str:
    for unit, scale in (("Gbit/s", 1e9), ("Mbit/s", 1e6), ("kbit/s", 1e3)):
        if bits_per_second >= scale:
            return f"{bits_per_second / scale:.3g} {unit}"
    return f"{bits_per_second:.3g} bit/s"
