"""A change stream's figures from its records (pure): how fast each serial reached the
fleet, per site and for the whole fleet, and what each secondary did to keep up.

Records (measure/stream_records.py) hold one secondary's publication latency of one serial:
from the primary serving it to the secondary serving it (or a later one). From them:

- a serial's load time: when ceil(0.95 N) of the N secondaries served it (RSSAC002's
  definition, "95 % of an operator's instances"), and when all did; per site and for the
  fleet. A secondary that never served it, or whose copy did not verify, has not served it.
- the publication latency distribution per site and for the fleet: p50, p95 and the
  maximum over every (secondary, serial), by nearest rank (each is a latency that was
  measured).
- the share of serials whose load time met `[stream] sla`: "95 % of the fleet served
  99.2 % of serials within 30 s".
- per secondary: transfers made against serials published, IXFRs and AXFRs, each AXFR that
  replaced an IXFR with the reason in its server's words, its failed attempts, and its lag
  over time in serials and seconds.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from harness.results.model import TransferRecord

LOAD_SHARE = 0.95  # RSSAC002: the share of instances that must serve a serial
# A publish counts as late when it started this much after its slot: the flow wakes a few
# ms after a slot on a busy host (up to 16 ms seen here); a primary still taking the last
# serial (an NSD reload of a big zone) makes it late by far more. Records keep the exact value.
LATE_TOLERANCE_S = 0.05
FLEET = ""  # the site name of fleet-wide figures


def nearest_rank(values: Sequence[float], q: float) -> float:
    """The q-th percentile (0..100) by nearest rank: x_(ceil(q n / 100)), a measured value.
    (Kept here until core/stats.py has one; h-fleet moves every percentile there.)"""
    if not values:
        raise ValueError("percentile of no values")
    ordered = sorted(values)
    rank = math.ceil(round(q * len(ordered) / 100, 9))
    return ordered[max(rank, 1) - 1]


def load_time(latencies: Sequence[float | None], share: float = LOAD_SHARE) -> float | None:
    """When ceil(share N) of N secondaries served a serial (None: fewer ever did)."""
    needed = math.ceil(round(share * len(latencies), 9))
    served = sorted(x for x in latencies if x is not None)
    if needed == 0 or len(served) < needed:
        return None
    return served[needed - 1]


def stream_records(records: Iterable[TransferRecord]) -> list[TransferRecord]:
    return [r for r in records if r.trigger == "stream" and r.repeat >= 1]


def _latency(record: TransferRecord) -> float | None:
    return record.duration_s if record.counts else None


@dataclass
class SerialLoad:
    case: str
    repeat: int
    site: str  # FLEET ("") for the whole fleet
    serial: int
    published_s: float | None  # when it was put on the primary, since the stream's start
    late_s: float  # how late its publish started after its slot
    secondaries: int
    served: int
    load_s: float | None  # ceil(0.95 N) served it, from the primary serving it
    all_s: float | None  # every secondary served it
    slowest_host: str | None
    slowest_s: float | None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _site_of(record: TransferRecord) -> str:
    return record.site or record.host


def serial_loads(records: Iterable[TransferRecord]) -> list[SerialLoad]:
    """Per case, repeat and serial: its load time for the fleet, then per site."""
    groups: dict[tuple[str, int, int], list[TransferRecord]] = {}
    for record in stream_records(records):
        if record.serial is not None:
            groups.setdefault((record.case, record.repeat, record.serial), []).append(record)
    out = []
    for (case, repeat, serial), items in groups.items():
        sites = sorted({_site_of(r) for r in items})
        for site in [FLEET, *(sites if len(sites) > 1 else [])]:
            mine = [r for r in items if site == FLEET or _site_of(r) == site]
            latencies = [_latency(r) for r in mine]
            served = [(x, r.host) for x, r in zip(latencies, mine, strict=True) if x is not None]
            slowest = max(served) if served else None
            stream = mine[0].extra.get("stream") or {}
            out.append(
                SerialLoad(
                    case=case,
                    repeat=repeat,
                    site=site,
                    serial=serial,
                    published_s=stream.get("issued_s"),
                    late_s=float(stream.get("late_s") or 0.0),
                    secondaries=len(mine),
                    served=len(served),
                    load_s=load_time(latencies),
                    all_s=slowest[0] if slowest and len(served) == len(mine) else None,
                    slowest_host=slowest[1] if slowest else None,
                    slowest_s=slowest[0] if slowest else None,
                )
            )
    return out


@dataclass
class LatencyRow:
    case: str
    site: str  # FLEET for the whole fleet
    secondaries: int
    serials: int
    n: int  # (secondary, serial) latencies that count
    p50_s: float | None
    p95_s: float | None
    max_s: float | None
    load_p95_s: float | None  # p95 over the serials of their load time (None: one unmet)
    sla_s: float | None
    sla_share: float | None  # serials whose load time met the SLA, of those published

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def latency_rows(
    records: Iterable[TransferRecord], loads: list[SerialLoad], sla: dict[str, float]
) -> list[LatencyRow]:
    """Per case, the fleet's row and each site's (when there are several)."""
    chosen = stream_records(records)
    out = []
    for case in dict.fromkeys(r.case for r in chosen):
        mine = [r for r in chosen if r.case == case]
        sites = sorted({_site_of(r) for r in mine})
        for site in [FLEET, *(sites if len(sites) > 1 else [])]:
            here = [r for r in mine if site == FLEET or _site_of(r) == site]
            values = [x for x in (_latency(r) for r in here) if x is not None]
            serial_loads_here = [x for x in loads if x.case == case and x.site == site]
            load_values = [x.load_s for x in serial_loads_here]
            target = sla.get(case)
            met = None
            if target is not None and serial_loads_here:
                hits = sum(1 for x in load_values if x is not None and x <= target)
                met = hits / len(serial_loads_here)
            out.append(
                LatencyRow(
                    case=case,
                    site=site,
                    secondaries=len({r.host for r in here}),
                    serials=len(serial_loads_here),
                    n=len(values),
                    p50_s=nearest_rank(values, 50) if values else None,
                    p95_s=nearest_rank(values, 95) if values else None,
                    max_s=max(values) if values else None,
                    load_p95_s=nearest_rank([x for x in load_values if x is not None], 95)
                    if load_values and all(x is not None for x in load_values)
                    else None,
                    sla_s=target,
                    sla_share=met,
                )
            )
    return out


@dataclass
class SecondaryFacts:
    case: str
    repeat: int
    host: str
    site: str | None
    kind: str
    serials: int  # published in the repeat
    served: int  # of them, served and verified
    transfers: int  # transfers it made (the servers' logs)
    ixfr: int
    axfr: int
    unknown: int  # transfers no log gave a kind for
    condensed: int  # transfers that carried more than one serial
    fallbacks: list[dict[str, Any]] = field(default_factory=list)
    failures: dict[str, Any] = field(default_factory=dict)  # failed attempts, its words
    max_behind_serials: int = 0
    max_behind_s: float = 0.0
    soa_queries: int | None = None  # the harness's SOA queries to it during the stream

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def lag_series(items: list[TransferRecord]) -> list[tuple[float, int, float]]:
    """One secondary's lag over one repeat's stream: (seconds since the stream started,
    serials published that it does not serve yet, how long the oldest of them has been
    published). At every publish and every first answer with a serial, the lag just before
    and just after it: between two of these the serials behind stay put and the seconds
    behind grow with the clock, so the points joined by straight lines are the lag at every
    instant, and its largest value is among them."""
    published: dict[int, float] = {}
    served: dict[int, float | None] = {}
    for record in items:
        stream = record.extra.get("stream") or {}
        if record.serial is None or stream.get("issued_s") is None:
            continue
        published[record.serial] = float(stream["issued_s"])
        served[record.serial] = None
        if record.duration_s is not None and stream.get("served_s") is not None:
            served[record.serial] = float(stream["served_s"])

    def lag(t: float, after: bool) -> tuple[float, int, float]:
        missing = [
            issued
            for serial, issued in published.items()
            if (issued <= t if after else issued < t)
            and not (
                served[serial] is not None
                and (served[serial] <= t if after else served[serial] < t)
            )  # type: ignore[operator]
        ]
        return round(t, 6), len(missing), round(t - min(missing), 6) if missing else 0.0

    times = sorted({*published.values(), *(t for t in served.values() if t is not None)})
    out: list[tuple[float, int, float]] = []
    for t in times:
        for point in (lag(t, after=False), lag(t, after=True)):
            if not out or out[-1] != point:
                out.append(point)
    return out


def secondary_facts(records: Iterable[TransferRecord]) -> list[SecondaryFacts]:
    """Per case, repeat and secondary: what it did to keep up (module docstring)."""
    groups: dict[tuple[str, int, str], list[TransferRecord]] = {}
    for record in stream_records(records):
        groups.setdefault((record.case, record.repeat, record.host), []).append(record)
    out = []
    for (case, repeat, host), items in groups.items():
        made: dict[int, dict[str, Any]] = {}
        failures: dict[str, Any] = {}
        queries = None
        for record in items:
            queries = (record.extra.get("stream") or {}).get("soa_queries", queries)
            transfer = record.server_logged.get("transfer") or {}
            if "serial" in transfer:
                made[int(transfer["serial"])] = transfer
            failures = record.server_logged.get("secondary_failures") or failures
        kinds = [t.get("xfr") for t in made.values()]
        lag = lag_series(items)
        out.append(
            SecondaryFacts(
                case=case,
                repeat=repeat,
                host=host,
                site=items[0].site,
                kind=items[0].secondary_kind,
                serials=len(items),
                served=sum(1 for r in items if r.counts),
                transfers=len(made),
                ixfr=kinds.count("ixfr"),
                axfr=kinds.count("axfr"),
                unknown=sum(1 for k in kinds if k not in ("ixfr", "axfr")),
                condensed=sum(1 for t in made.values() if t.get("condensed")),
                fallbacks=[
                    {k: t.get(k) for k in ("serial", "fallback_kind", "fallback", "fallback_by")}
                    for serial, t in sorted(made.items())
                    if t.get("fallback")
                ],
                failures=failures,
                max_behind_serials=max((n for _, n, _ in lag), default=0),
                max_behind_s=max((s for _, _, s in lag), default=0.0),
                soa_queries=queries,
            )
        )
    return out


def sla_sentence(row: LatencyRow) -> str | None:
    """ "95 % of the fleet served 99.2 % of serials within 30 s" (None without an SLA)."""
    if row.sla_s is None or row.sla_share is None:
        return None
    where = "the fleet" if row.site == FLEET else f"site {row.site}"
    return (
        f"{LOAD_SHARE:.0%} of {where} served {row.sla_share:.1%} of serials within {row.sla_s:g} s"
    ).replace("%", " %")


def sla_targets(records: Iterable[TransferRecord]) -> dict[str, float]:
    """case -> its target load time in seconds ([stream] sla, in each record's extra)."""
    out = {}
    for record in stream_records(records):
        target = (record.extra.get("stream") or {}).get("sla_s")
        if isinstance(target, int | float):
            out[record.case] = float(target)
    return out


def stream_summary(records: list[TransferRecord]) -> dict[str, Any]:
    """summary.json's "stream" section per case; {} for a run without streams."""
    chosen = stream_records(records)
    if not chosen:
        return {}
    sla = sla_targets(chosen)
    loads = serial_loads(chosen)
    rows = latency_rows(chosen, loads, sla)
    facts = secondary_facts(chosen)
    out: dict[str, Any] = {}
    for case in dict.fromkeys(r.case for r in chosen):
        fleet = next(r for r in rows if r.case == case and r.site == FLEET)
        mine = [x for x in loads if x.case == case and x.site == FLEET]
        late = [x.late_s for x in mine if x.late_s > LATE_TOLERANCE_S]
        out[case] = {
            "load_share": LOAD_SHARE,
            "percentiles": "nearest rank",
            "sla_s": sla.get(case),
            "sla": sla_sentence(fleet),
            "serials": len(mine),
            "late_publishes": len(late),  # started over LATE_TOLERANCE_S after their slot
            "late_tolerance_s": LATE_TOLERANCE_S,
            "max_late_s": max((x.late_s for x in mine), default=0.0),
            "latency": [r.to_dict() for r in rows if r.case == case],
            "loads": [x.to_dict() for x in loads if x.case == case],
            "secondaries": [f.to_dict() for f in facts if f.case == case],
        }
    return out
