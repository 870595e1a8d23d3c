"""The fleet section's numbers (pure): how a new serial spread over each fleet, per site, and
what the primary spent as the fleet grew.

Part of the report's model (data.py). The figures themselves are harness/results/fleet.py's,
the code that writes summary.json's "fleet" section: the report reads that section when the
run wrote it and computes the same from transfers.jsonl and samples.jsonl when it did not
(an interrupted run), or when an older harness wrote it (interpolated percentiles, a
"last" over the served secondaries only), as it does for resources.
"""

from __future__ import annotations

import re
import statistics
from dataclasses import dataclass, fields
from typing import Any

from harness.core.stats import PERCENTILE_METHOD
from harness.results.fleet import (
    FleetRepeat,
    PrimaryCost,
    SiteRow,
    fleet_summary,
)
from harness.results.folder import SUMMARY_JSON, TRANSFERS
from harness.results.model import TransferRecord

_SIZE_SEGMENT = re.compile(r"(^|\.)count=\d+$")  # a matrix axis over a site's count


@dataclass
class FleetCase:
    case: str
    secondaries: int
    median_last_s: float | None  # None: fewer than half of the repeats converged
    median_p95_s: float | None
    refusals: int | None  # the primary's log over the repeats; None: not logged
    reconnected: int | None  # None: not counted (older records)
    possibly_waited: int  # a heuristic (harness/results/fleet.py)
    repeats: list[FleetRepeat]
    sites: list[SiteRow]
    primary: list[PrimaryCost]
    converged: str = ""  # "2 of 3 repeats converged"

    @property
    def not_converged(self) -> list[FleetRepeat]:
        return [r for r in self.repeats if not r.converged]

    def convergence(self) -> list[tuple[int, list[tuple[float, float]]]]:
        """Per repeat, the fraction of the fleet serving the new serial over time: one step
        (seconds since the repeat's first NOTIFY, fraction) per secondary that served it. A
        repeat that did not converge stops short of 1."""
        out = []
        for repeat in self.repeats:
            times = sorted(repeat.times.values())
            size = repeat.secondaries or len(times)
            out.append((repeat.repeat, [(t, (i + 1) / size) for i, t in enumerate(times)]))
        return out


@dataclass
class GrowthPoint:
    case: str
    secondaries: int
    repeats: int
    cpu_s: float | None  # median over repeats of the primary's CPU seconds per repeat
    peak_connections: int | None  # highest over repeats
    tx_bytes: float | None  # median over repeats of the bytes it sent
    median_last_s: float | None


@dataclass
class FleetGrowth:
    """The cases of a matrix that differ only in fleet size, smallest first."""

    group: str  # the case name without its size axis
    points: list[GrowthPoint]


@dataclass
class FleetData:
    source: str  # "summary.json" or "transfers.jsonl"
    cases: list[FleetCase]
    growth: list[FleetGrowth]


def _rows(kind: type[Any], items: Any) -> list[Any]:
    """Dataclasses from summary.json's dicts; keys this version does not know are ignored."""
    names = {f.name for f in fields(kind)}
    return [kind(**{k: v for k, v in item.items() if k in names}) for item in items]


def _cases(section: dict[str, Any]) -> list[FleetCase]:
    out = []
    for case, figures in section.items():
        out.append(
            FleetCase(
                case=case,
                secondaries=int(figures.get("secondaries") or 0),
                median_last_s=figures.get("median_last_s"),
                median_p95_s=figures.get("median_p95_s"),
                refusals=_count(figures.get("refusals")),
                reconnected=_count(figures.get("reconnected")),
                possibly_waited=int(figures.get("possibly_waited") or 0),
                repeats=_rows(FleetRepeat, figures.get("repeats") or []),
                sites=_rows(SiteRow, figures.get("sites") or []),
                primary=_rows(PrimaryCost, figures.get("primary") or []),
                converged=str(figures.get("converged") or ""),
            )
        )
    return out


def _count(value: Any) -> int | None:
    return None if value is None else int(value)


def _current(section: dict[str, Any]) -> bool:
    """Whether a stored fleet section says convergence and its percentile method: one of
    an older harness (interpolated percentiles, "last" over the served only) is recomputed
    from the records."""
    return all(
        isinstance(figures, dict) and figures.get("percentiles") == PERCENTILE_METHOD
        for figures in section.values()
    )


def size_group(case: str) -> str:
    """The case name without the segments that set a fleet's size ("count=16")."""
    parts = [p for p in case.split("/") if not _SIZE_SEGMENT.search(p)]
    return "/".join(parts)


def fleet_growth(cases: list[FleetCase]) -> list[FleetGrowth]:
    """The primary's cost per repeat against the fleet size, per group of cases that differ
    only in size; only groups with two sizes or more."""
    groups: dict[str, list[FleetCase]] = {}
    for item in cases:
        groups.setdefault(size_group(item.case), []).append(item)
    out = []
    for group, items in groups.items():
        if len({item.secondaries for item in items}) < 2:
            continue
        points = []
        for item in sorted(items, key=lambda c: c.secondaries):
            cpu = [c.cpu_s for c in item.primary if c.cpu_s is not None]
            conns = [c.peak_connections for c in item.primary if c.peak_connections is not None]
            sent = [c.tx_bytes for c in item.primary if c.tx_bytes is not None]
            points.append(
                GrowthPoint(
                    case=item.case,
                    secondaries=item.secondaries,
                    repeats=len(item.primary),
                    cpu_s=statistics.median(cpu) if cpu else None,
                    peak_connections=max(conns) if conns else None,
                    tx_bytes=statistics.median(sent) if sent else None,
                    median_last_s=item.median_last_s,
                )
            )
        out.append(FleetGrowth(group, points))
    return out


def fleet_data(
    summary: dict[str, Any] | None,
    records: list[TransferRecord],
    samples: list[dict[str, Any]] | None,
) -> FleetData | None:
    """The fleet section, None for a run without fleets."""
    stored = summary.get("fleet") if isinstance(summary, dict) else None
    if isinstance(stored, dict) and stored and _current(stored):
        try:
            cases, source = _cases(stored), SUMMARY_JSON
        except (TypeError, ValueError, AttributeError):  # a damaged section: recompute
            stored = None
    if not (isinstance(stored, dict) and stored and _current(stored)):
        computed = fleet_summary(records, samples or [])
        if not computed:
            return None
        cases, source = _cases(computed), TRANSFERS
    return FleetData(source=source, cases=cases, growth=fleet_growth(cases))
