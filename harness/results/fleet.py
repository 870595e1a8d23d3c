"""A fleet's figures from its records (pure): how fast a new serial reached the whole fleet,
which site was last, who waited for a transfer slot, per-site tables, and what the primary
spent per repeat as the fleet grows.

Propagation is counted from one origin per repeat, so that secondaries are comparable:
with trigger "notify" the first NOTIFY the primary sent in that repeat (a secondary's
record is timed from its own NOTIFY: its fleet time adds how much later that NOTIFY left);
with "retransfer" the control command, the records' own origin. A secondary "waited for a
slot" when it connected more than once during its transfer (refused, then retried) or when
its connect came later after its SOA query than a round trip or three can explain: the
primary's transfers-out (BIND), xfrd (NSD) or worker limits (Knot) held it back.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from typing import Any

from harness.core.terms import SERVER_TO_SERVER
from harness.results.model import TransferRecord
from harness.results.summary import percentile

SLOT_GRACE_S = 0.050  # a connect this much (plus 3 RTT) after the SOA query waited


@dataclass
class FleetRepeat:
    case: str
    repeat: int
    secondaries: int
    served: int  # verified transfers that count
    first_s: float | None
    p50_s: float | None
    p95_s: float | None
    last_s: float | None
    last_host: str | None
    last_site: str | None
    waited: int  # secondaries that waited for a transfer slot
    times: dict[str, float] = field(default_factory=dict)  # host -> fleet time

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def fleet_time(record: TransferRecord) -> float | None:
    """Seconds from the repeat's trigger (the reload command with notify) to served."""
    if record.duration_s is None:
        return None
    return record.duration_s + record.phases.get("notify_sent", 0.0)


def waited_for_slot(record: TransferRecord) -> bool:
    wire = record.extra.get("wire") or {}
    if wire.get("connects", 0) > 1:
        return True
    soa, connect = record.phases.get("soa_query"), record.phases.get("connect")
    if soa is None or connect is None:
        return False
    rtt = float(record.extra.get("path_rtt_s") or 0.0)
    return connect - soa > SLOT_GRACE_S + 3 * rtt


def _host(record: TransferRecord) -> str:
    return record.host


def fleet_repeats(records: Iterable[TransferRecord]) -> list[FleetRepeat]:
    """One entry per (case, repeat) of fleet records, in the order they ran."""
    groups: dict[tuple[str, int], list[TransferRecord]] = {}
    for record in records:
        if record.method != SERVER_TO_SERVER or record.site is None or record.repeat < 1:
            continue
        if record.trigger == "stream":  # one record per serial: results/stream.py's figures
            continue
        groups.setdefault((record.case, record.repeat), []).append(record)
    out = []
    for (case, repeat), items in groups.items():
        counted = [r for r in items if r.counts]
        raw = {_host(r): fleet_time(r) for r in counted}
        times = {host: t for host, t in raw.items() if t is not None}
        notify = [r.phases["notify_sent"] for r in counted if "notify_sent" in r.phases]
        origin = min(notify) if notify else 0.0
        times = {host: round(t - origin, 6) for host, t in times.items()}
        ordered = sorted(times.values())
        last_host = max(times, key=lambda h: times[h]) if times else None
        sites = {_host(r): r.site for r in items}
        out.append(
            FleetRepeat(
                case=case,
                repeat=repeat,
                secondaries=len(items),
                served=len(counted),
                first_s=ordered[0] if ordered else None,
                p50_s=statistics.median(ordered) if ordered else None,
                p95_s=percentile(ordered, 95) if ordered else None,
                last_s=ordered[-1] if ordered else None,
                last_host=last_host,
                last_site=sites.get(last_host) if last_host else None,
                waited=sum(1 for r in counted if waited_for_slot(r)),
                times=times,
            )
        )
    return out


@dataclass
class SiteRow:
    case: str
    site: str
    secondaries: int
    transfers: int
    ok: int
    median_s: float | None
    throughput_bps: float | None  # median
    bound_bps: float | None  # median model bound of its path
    loss_checks: dict[str, int]  # verdict -> how many direction checks said it

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def site_rows(records: Iterable[TransferRecord]) -> list[SiteRow]:
    """Per case and site: durations, throughput against the site's bound, loss checks."""
    groups: dict[tuple[str, str], list[TransferRecord]] = {}
    for record in records:
        if record.method != SERVER_TO_SERVER or record.site is None:
            continue
        groups.setdefault((record.case, record.site), []).append(record)
    rows = []
    for (case, site), items in groups.items():
        counted = [r for r in items if r.counts]
        durations = [float(r.duration_s) for r in counted if r.duration_s is not None]
        rates = [r.bytes * 8 / r.duration_s for r in counted if r.bytes and r.duration_s]
        bounds = [r.bound["model"] for r in items if r.bound.get("model")]
        verdicts: dict[str, int] = {}
        for r in items:
            for direction in (r.extra.get("link") or {}).values():
                check = direction.get("loss_check") if isinstance(direction, dict) else None
                if check:
                    verdicts[check["verdict"]] = verdicts.get(check["verdict"], 0) + 1
        rows.append(
            SiteRow(
                case=case,
                site=site,
                secondaries=len({_host(r) for r in items}),
                transfers=len(items),
                ok=len(counted),
                median_s=statistics.median(durations) if durations else None,
                throughput_bps=statistics.median(rates) if rates else None,
                bound_bps=statistics.median(bounds) if bounds else None,
                loss_checks=verdicts,
            )
        )
    return rows


@dataclass
class PrimaryCost:
    case: str
    repeat: int
    cpu_s: float | None  # the primary's CPU from the repeat's start mark to its end mark
    peak_rss_bytes: int | None
    peak_connections: int | None  # established TCP connections, highest sampled
    tx_bytes: int | None  # sent on its links during the repeat

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def primary_costs(samples: Iterable[dict[str, Any]]) -> list[PrimaryCost]:
    """Per case and repeat, what the primary spent between the repeat's marks (samples of
    role "primary" with the repeat set: its start mark, periodic ones, its end mark)."""
    groups: dict[tuple[str, int], list[dict[str, Any]]] = {}
    for sample in samples:
        if sample.get("role") != "primary" or not isinstance(sample.get("repeat"), int):
            continue
        groups.setdefault((str(sample.get("case")), sample["repeat"]), []).append(sample)
    out = []
    for (case, repeat), lines in groups.items():
        lines.sort(key=lambda s: s.get("t", 0))
        start = next((s for s in lines if s.get("event") == "transfer-start"), None)
        end = next((s for s in reversed(lines) if s.get("event") == "transfer-end"), None)
        cpu = tx = None
        if start is not None and end is not None and start.get("pid") == end.get("pid"):
            cpu = _cpu(end) - _cpu(start)
            tx = int(end.get("net_tx_bytes", 0)) - int(start.get("net_tx_bytes", 0))
        rss = [int(s["rss_bytes"]) for s in lines if isinstance(s.get("rss_bytes"), int)]
        conns = [int((s.get("tcp_states") or {}).get("established", 0)) for s in lines]
        out.append(
            PrimaryCost(
                case=case,
                repeat=repeat,
                cpu_s=round(cpu, 6) if cpu is not None and cpu >= 0 else None,
                peak_rss_bytes=max(rss) if rss else None,
                peak_connections=max(conns) if conns else None,
                tx_bytes=tx if tx is not None and tx >= 0 else None,
            )
        )
    return out


def _cpu(sample: dict[str, Any]) -> float:
    return float(sample.get("cpu_user_s", 0.0)) + float(sample.get("cpu_system_s", 0.0))


def fleet_summary(records: list[TransferRecord], samples: list[dict[str, Any]]) -> dict[str, Any]:
    """summary.json's "fleet" section: per case, its repeats, its sites and the primary's
    cost; {} for a run without fleets."""
    repeats = fleet_repeats(records)
    if not repeats:
        return {}
    sites = site_rows(records)
    costs = primary_costs(samples)
    out: dict[str, Any] = {}
    for case in dict.fromkeys(r.case for r in repeats):
        mine = [r for r in repeats if r.case == case]
        lasts = [r.last_s for r in mine if r.last_s is not None]
        p95s = [r.p95_s for r in mine if r.p95_s is not None]
        out[case] = {
            "secondaries": max(r.secondaries for r in mine),
            "median_last_s": statistics.median(lasts) if lasts else None,
            "median_p95_s": statistics.median(p95s) if p95s else None,
            "waited": sum(r.waited for r in mine),
            "repeats": [r.to_dict() for r in mine],
            "sites": [s.to_dict() for s in sites if s.case == case],
            "primary": [c.to_dict() for c in costs if c.case == case],
        }
    return out
