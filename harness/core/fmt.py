"""Number formatting shared by the report's HTML, its terminal summary, its plots and compare
("-" for no value). One unit policy: durations auto-scaled (µs, ms, s) to 3 significant
digits; bytes in IEC units (KiB, MiB, GiB); rates in bit/s with SI prefixes."""

from __future__ import annotations

from harness.core.units import format_rate

MIB = 1024 * 1024
NONE = "-"


def duration(value: float | None) -> str:
    """Seconds in the unit that reads best, 3 significant digits: 152 µs, 72.3 ms, 1.00 s,
    123 s; 1,230 s from a thousand seconds up (never 1.23e+03)."""
    if value is None:
        return NONE
    if value == 0:
        return "0 s"
    rounded = float(f"{value:.3g}")  # 0.9996 s is 1 s, not 1e+03 ms
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6)):
        if abs(rounded) >= scale or unit == "µs":
            number = rounded / scale
            if abs(number) >= 1000:
                return f"{number:,.0f} {unit}"
            return f"{number:#.3g}".rstrip(".") + f" {unit}"  # 1.00 s, as a column aligns
    raise AssertionError("unreachable")


def duration_unit(values: list[float]) -> tuple[float, str]:
    """(scale, unit) for an axis or a column of durations: the unit of the largest value,
    so that every tick reads in one unit (s, ms or µs)."""
    top = max((abs(v) for v in values), default=0.0)
    for unit, scale in (("s", 1.0), ("ms", 1e-3)):
        if top >= scale:
            return scale, unit
    return 1e-6, "µs"


def rate(value: float | None) -> str:
    return NONE if value is None else format_rate(value)


def percent(value: float | None) -> str:
    return NONE if value is None else f"{value:.1%}"


def count(value: float | None) -> str:
    """A count, or a median of counts (2.5 between two transfers that left 2 and 3)."""
    if value is None:
        return NONE
    return f"{int(value):,}" if float(value).is_integer() else f"{value:,.1f}"


def ratio(value: float | None) -> str:
    """0.034 -> '3.4 %', 0.9 -> '90 %'."""
    return NONE if value is None else f"{value * 100:.3g} %"


def size(value: float | None) -> str:
    """Bytes in the unit a reader thinks in: 161 B, 85.6 KiB, 27.2 MiB."""
    if value is None:
        return NONE
    for unit, scale in (("GiB", 1024**3), ("MiB", MIB), ("KiB", 1024)):
        if value >= scale:
            return f"{value / scale:.3g} {unit}"
    return f"{value:.0f} B"


def short_labels(names: list[str]) -> tuple[str, dict[str, str]]:
    """Case names without the "/" segments every one of them has ("bind-bind"), so that a
    narrow column shows what tells them apart instead of cutting it off: (the shared part
    as a pattern, "bind-bind/*"; name -> short label). Names that would come out alike stay
    whole."""
    split = {name: name.split("/") for name in names}
    if len(split) < 2:
        return "", {name: name for name in names}
    common = set.intersection(*(set(parts) for parts in split.values()))
    # The shared part as a pattern, "*" where the names differ: "bind-bind/*", "*/axfr".
    pattern: list[str] = []
    for part in split[next(iter(split))]:
        kept = part if part in common else "*"
        if kept != "*" or pattern[-1:] != ["*"]:
            pattern.append(kept)
    shared = "/".join(pattern) if common else ""
    short = {
        name: "/".join(p for p in parts if p not in common) or name for name, parts in split.items()
    }
    if len(set(short.values())) != len(short):
        return "", {name: name for name in names}
    return shared, short
