"""A change stream's figures from its records (pure): how fast each serial reached the
fleet, per site and for the whole fleet, and what each secondary did to keep up.

Records (measure/stream_records.py) hold one secondary's publication latency of one serial:
from the primary serving it to the secondary serving it (or a later one). From them:

- a serial's load time: when ceil(0.95 N) of the N secondaries served it (RSSAC002's
  definition, "95 % of an operator's instances"), and when all did; per site and for the
  fleet. A secondary that never served it, or whose copy did not verify, has not served it;
  a serial before the last is served when the secondary served it and its final copy
  verified (the record is `unchecked`: that serial's own copy was not read).
  Each latency may have ended up to its `duration_error_s` before it was seen, so a load
  time, the k-th smallest latency, lies between the k-th smallest of the earliest ends
  (`load_earliest_s`) and the k-th smallest as seen (`load_s`).
- the publication latency distribution per site and for the fleet: p50, p95 and the
  maximum over every (secondary, serial) of published serials, by nearest rank. A pair
  never served ranks after every served one (as if infinitely late): the percentiles are
  not those of the survivors, and one whose rank falls on a pair never served is None,
  "not reached" (p95 is not reached when more than 5 % were never served; the maximum
  when any was).
- the share of serials whose load time met `[stream] sla`: "95 % of the fleet served
  99.2 % of serials within 30 s", with its 95 % Wilson score interval (the serials as a
  binomial sample); a serial meets it when its load time as seen, the latest bound, does.
- per secondary: transfers made against serials published, IXFRs and AXFRs, each AXFR that
  replaced an IXFR with the reason in its server's words, its failed attempts, and its lag
  over time in serials and seconds.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

# One nearest rank for every figure (core/stats.py); still importable from here.
from harness.core.stats import nearest_rank as nearest_rank
from harness.results.groups import fleet_and_sites, group_by
from harness.results.model import TransferRecord
from harness.servers.failures import CATEGORIES

LOAD_SHARE = 0.95  # RSSAC002: the share of instances that must serve a serial
# A publish counts as late when it started this much after its slot: the flow wakes a few
# ms after a slot on a busy host (up to 16 ms seen here); a primary still taking the last
# serial (an NSD reload of a big zone) makes it late by far more. Records keep the exact value.
LATE_TOLERANCE_S = 0.05
FLEET = ""  # the site name of fleet-wide figures


def reached(values: Sequence[float | None], q: float) -> float | None:
    """The q-th percentile (0..100) by nearest rank of `values` in which None (never
    served) ranks after every number: None when the rank falls on one (not reached)."""
    needed = math.ceil(round(q * len(values) / 100, 9))
    served = sorted(x for x in values if x is not None)
    if needed == 0 or len(served) < needed:
        return None
    return served[needed - 1]


def load_time(latencies: Sequence[float | None], share: float = LOAD_SHARE) -> float | None:
    """When ceil(share N) of N secondaries served a serial (None: fewer ever did)."""
    return reached(latencies, share * 100)


WILSON_Z = 1.959963984540054  # the standard normal's 97.5 % quantile: a 95 % interval


def wilson_interval(hits: int, n: int, z: float = WILSON_Z) -> tuple[float, float] | None:
    """The Wilson score interval of a binomial share hits / n (None for n = 0): it stays
    inside [0, 1] and does not collapse at 0 or n hits, where the SLA share often is."""
    if n <= 0:
        return None
    share, z2 = hits / n, z * z
    centre = (share + z2 / (2 * n)) / (1 + z2 / n)
    half = z * math.sqrt(share * (1 - share) / n + z2 / (4 * n * n)) / (1 + z2 / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def stream_records(records: Iterable[TransferRecord]) -> list[TransferRecord]:
    return [r for r in records if r.trigger == "stream" and r.repeat >= 1]


def _latency(record: TransferRecord) -> float | None:
    """A served pair's latency: its copy verified, or (a serial before the last) served
    by a secondary whose final copy verified, not checked itself."""
    return record.duration_s if record.counts or record.unchecked else None


def _earliest(record: TransferRecord) -> float | None:
    """The earliest the latency may have ended: as seen, less its error."""
    if (seen := _latency(record)) is None:
        return None
    return max(0.0, seen - (record.duration_error_s or 0.0))


def _pairs(records: Iterable[TransferRecord]) -> list[TransferRecord]:
    """The (secondary, serial) pairs of serials the primary served: a serial never
    published, or never served by the primary, is the harness's failure, not the fleet's."""
    return [r for r in records if r.failure != "publish"]


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
    load_earliest_s: float | None = None  # the earliest load_s may have been (error bars)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _site_of(record: TransferRecord) -> str:
    return record.site or record.host


def serial_loads(records: Iterable[TransferRecord]) -> list[SerialLoad]:
    """Per case, repeat and serial: its load time for the fleet, then per site."""
    groups = group_by(
        stream_records(records),
        lambda r: (r.case, r.repeat, r.serial or 0),
        lambda r: r.serial is not None,
    )
    out = []
    for (case, repeat, serial), items in groups.items():
        for site, mine in fleet_and_sites(items, _site_of, FLEET):
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
                    load_earliest_s=load_time([_earliest(r) for r in mine]),
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
    # Over every pair (`pairs`), the never served ranking last: None when not reached.
    p50_s: float | None
    p95_s: float | None
    max_s: float | None
    load_p95_s: float | None  # p95 over the serials of their load time (None: not reached)
    sla_s: float | None
    sla_share: float | None  # serials whose load time met the SLA, of those published
    pairs: int = 0  # (secondary, serial) pairs of serials the primary served
    never_served: int = 0  # of them, never served (or not by a verified copy)
    load_p95_earliest_s: float | None = None  # the same over the load times' earliest bounds
    sla_met: int | None = None  # serials whose load time met the SLA
    sla_low: float | None = None  # the share's 95 % Wilson score interval
    sla_high: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def latency_rows(
    records: Iterable[TransferRecord], loads: list[SerialLoad], sla: dict[str, float]
) -> list[LatencyRow]:
    """Per case, the fleet's row and each site's (when there are several)."""
    chosen = stream_records(records)
    out = []
    for case, mine in group_by(chosen, lambda r: r.case).items():
        for site, here in fleet_and_sites(mine, _site_of, FLEET):
            pairs = [_latency(r) for r in _pairs(here)]
            served = [x for x in pairs if x is not None]
            serial_loads_here = [x for x in loads if x.case == case and x.site == site]
            load_values = [x.load_s for x in serial_loads_here]
            target = sla.get(case)
            met, hits, interval = None, None, None
            if target is not None and serial_loads_here:
                hits = sum(1 for x in load_values if x is not None and x <= target)
                met = hits / len(serial_loads_here)
                interval = wilson_interval(hits, len(serial_loads_here))
            out.append(
                LatencyRow(
                    case=case,
                    site=site,
                    secondaries=len({r.host for r in here}),
                    serials=len(serial_loads_here),
                    n=len(served),
                    p50_s=reached(pairs, 50),
                    p95_s=reached(pairs, 95),
                    max_s=reached(pairs, 100),
                    load_p95_s=reached(load_values, 95),
                    sla_s=target,
                    sla_share=met,
                    pairs=len(pairs),
                    never_served=len(pairs) - len(served),
                    load_p95_earliest_s=reached([x.load_earliest_s for x in serial_loads_here], 95),
                    sla_met=hits,
                    sla_low=interval[0] if interval else None,
                    sla_high=interval[1] if interval else None,
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
    served: int  # of them, served (verified, or before the last and not checked)
    transfers: int  # transfers it made (the servers' logs)
    ixfr: int
    axfr: int
    unknown: int  # transfers no log gave a kind for
    condensed: int  # transfers that carried more than one serial
    fallbacks: list[dict[str, Any]] = field(default_factory=list)
    failures: dict[str, Any] = field(default_factory=dict)  # failed attempts, its words

    @property
    def failure_counts(self) -> dict[str, int]:
        """Each category of failed attempt it logged, with its count (the log's other facts,
        its stamps' resolution, its first failing line, left out)."""
        return {
            category: count
            for category in CATEGORIES
            if isinstance(count := self.failures.get(category), int) and count
        }

    max_behind_serials: int = 0
    max_behind_s: float = 0.0
    soa_queries: int | None = None  # the harness's SOA queries to it during the stream
    verified: int = 0  # of the served, those whose copy was checked (the final serial's)

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
    groups = group_by(stream_records(records), lambda r: (r.case, r.repeat, r.host))
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
                served=sum(1 for r in items if _latency(r) is not None),
                verified=sum(1 for r in items if r.counts),
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
    interval = ""
    if row.sla_low is not None and row.sla_high is not None:
        interval = (
            f" ({row.sla_met} of {row.serials}; 95% interval {row.sla_low:.1%} to "
            f"{row.sla_high:.1%}, Wilson)"
        )
    return (
        f"{LOAD_SHARE:.0%} of {where} served {row.sla_share:.1%} of serials within "
        f"{row.sla_s:g} s{interval}"
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
            "percentiles": "nearest rank over every pair; the never served rank last",
            "load_bounds": "earliest: the latencies less their duration_error_s",
            "sla_interval": "Wilson score, 95 %",
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
