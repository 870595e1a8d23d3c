"""Outliers in words (pure): one repeat far from the rest, and what its record says happened.

A transport table's cell read "129 ±1370" when one of five repeats met a retransmission
timeout (1.1 s against 0.3 s): the interval was honest and told a reader nothing (issue
34). Where a case has exactly one value far above the others (`far_one`), its cell keeps
the median ratio (the median does not move much for one value) with the spread of the
others and a mark, and a line names the repeat and what its record says: the packets its
link dropped, a SYN sent again, a second connection, the secondary's logged failures
(`records_say`), in the words "retransmission timeout" or "retry after N s" when they fit.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Any

from harness.core import fmt
from harness.results.model import TransferRecord

MARK = "†"
FAR_RATIO = 2.0  # at least twice the others' median ...
FAR_MADS = 5.0  # ... and more than five of their median absolute deviations above it
MIN_VALUES = 4  # with fewer, no value is "the rest"
RTO_MIN_S = 0.2  # Linux's smallest retransmission timeout: a wait this long can be one


def _far(value: float, centre: float, mad: float) -> bool:
    return value >= FAR_RATIO * centre and value - centre > FAR_MADS * max(mad, 0.01 * centre)


def far_one(values: list[float]) -> int | None:
    """The index of the one value far above the others, None when none or more than one
    is (a second far value makes them a mode of the case, not an accident)."""
    if len(values) < MIN_VALUES:
        return None
    top = max(range(len(values)), key=values.__getitem__)
    others = values[:top] + values[top + 1 :]
    centre = statistics.median(others)
    mad = statistics.median(abs(v - centre) for v in others)
    if centre <= 0 or not _far(values[top], centre, mad):
        return None
    return None if _far(max(others), centre, mad) else top


def _drops(link: Any) -> tuple[int, int]:
    """Packets the emulator dropped towards the secondary and back, in one record."""
    ways = {"forward": 0, "reverse": 0}
    for name, entry in link.items() if isinstance(link, dict) else []:
        if not isinstance(entry, dict):
            continue
        way = name.rsplit(" ", 1)[-1]
        lost = entry.get("dropped_loss", entry.get("dropped", 0))
        if way in ways and isinstance(lost, int):
            ways[way] += lost
    return ways["forward"], ways["reverse"]


def records_say(record: TransferRecord, excess_s: float) -> str:
    """What `record` says of a transfer that took `excess_s` longer than its case's others:
    "retransmission timeout: the link dropped 2 packets (-> 2, <- 0); ..."."""
    facts = []
    forward, reverse = _drops(record.extra.get("link"))
    if forward or reverse:
        dropped = forward + reverse
        packets = "packet" if dropped == 1 else "packets"
        facts.append(f"the link dropped {dropped} {packets} (→ {forward}, ← {reverse})")
    wire = record.extra.get("wire") if isinstance(record.extra.get("wire"), dict) else {}
    syns, connections = int(wire.get("syns", 0)), int(wire.get("connections", 0))
    if syns > max(connections, 1):
        facts.append(f"the secondary sent {syns} SYNs for {connections} connection(s)")
    if connections > 1:
        facts.append(f"it opened {connections} connections")
    soa = wire.get("soa_query_s")
    if isinstance(soa, int | float) and soa >= RTO_MIN_S:
        facts.append(f"its SOA query came {fmt.duration(soa)} after the trigger")
    logged = record.server_logged.get("secondary_failures") if record.server_logged else None
    failures = {k: v for k, v in (logged or {}).items() if isinstance(v, int) and v and k != "zone"}
    retried = bool(failures.get("retry")) or connections > 1
    if failures:
        facts.append(
            "the secondary logged "
            + ", ".join(f"{k.replace('_', ' ')} x{v}" for k, v in failures.items())
        )
    tcp = record.extra.get("tcp") if isinstance(record.extra.get("tcp"), dict) else {}
    if tcp.get("total_retrans"):
        facts.append(f"its connection retransmitted {tcp['total_retrans']} segments")
    if retried:
        words = f"retry after {excess_s:.1f} s"
    elif (forward or reverse or syns > max(connections, 1)) and excess_s >= RTO_MIN_S:
        words = "retransmission timeout"
    else:
        words = "nothing in the records explains it"
        facts = facts or ["no drop on the link, no second connection, no failure logged"]
    return f"{words}: {'; '.join(facts)}"


@dataclass
class Outlier:
    """One far repeat of a case: its record's repeat and host, its value and the others'."""

    case: str
    repeat: int
    host: str
    value_s: float
    others_s: float  # median of the others
    says: str  # records_say's words

    def line(self, label: str) -> str:
        return (
            f"{MARK} {label}: repeat {self.repeat} ({self.host}) took "
            f"{fmt.duration(self.value_s)} against {fmt.duration(self.others_s)} for the "
            f"others (median); its cell gives the others' spread. The record says: {self.says}."
        )


def outlier(case: str, records: list[TransferRecord]) -> Outlier | None:
    """The case's one far transfer (over its counted records, in the order they ran)."""
    counted = [r for r in records if r.counts and r.duration_s]
    values = [float(r.duration_s or 0.0) for r in counted]
    at = far_one(values)
    if at is None:
        return None
    far = counted[at]
    others = statistics.median(values[:at] + values[at + 1 :])
    return Outlier(
        case, far.repeat, far.host, values[at], others, records_say(far, values[at] - others)
    )


def without(values: list[float], found: Outlier | None) -> list[float]:
    """The case's values without its far one (the same values when it has none)."""
    if found is None:
        return values
    out = list(values)
    out.remove(found.value_s)
    return out
