"""Number formatting shared by the report's HTML, its terminal summary and compare ("-" for
no value)."""

from __future__ import annotations

from harness.core.units import format_rate

MIB = 1024 * 1024
NONE = "-"


def seconds(value: float | None) -> str:
    """4 significant digits: 2.532, 0.004213, 123.5."""
    return NONE if value is None else f"{value:.4g}"


def milliseconds(value: float | None) -> str:
    """Seconds as milliseconds: 19.6 ms, 850 ms, 1,110 ms (never 1.11e+03)."""
    if value is None:
        return NONE
    ms = value * 1000
    return f"{ms:,.0f} ms" if ms >= 100 else f"{ms:.3g} ms"


def rate(value: float | None) -> str:
    return NONE if value is None else format_rate(value)


def percent(value: float | None) -> str:
    return NONE if value is None else f"{value:.1%}"


def mib(value: float | None) -> str:
    return NONE if value is None else f"{value / MIB:.1f}"


def count(value: int | None) -> str:
    return NONE if value is None else f"{value:,}"


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
