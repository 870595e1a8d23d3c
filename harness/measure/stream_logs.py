"""A secondary's transfers during a stream, from the servers' own log lines (pure).

The secondary's log says which serials it took (every dialect logs an incoming transfer's
serial); where it does not say the kind (BIND and NSD 4.6 log none on the incoming side),
the primary's line for the transfer out to that secondary does ("IXFR started (serial 5 ->
7)", "AXFR-style IXFR ended"). An AXFR that replaced an IXFR carries the reason either
server gave, in its own words (servers/<kind>.py fallback_wording), the most specific one
when both did: "incomplete history, serial 2, fallback to AXFR" (Knot, the primary) says
more than "receiving AXFR-style IXFR" (Knot, the secondary).
"""

from __future__ import annotations

from harness.measure.stream_records import StreamTransfer
from harness.servers.base import Server, zone_name
from harness.servers.facts import LoggedTransfer
from harness.servers.fallbacks import FALLBACK_KINDS, Fallback


def _fallback_for(
    fallbacks: list[Fallback], after: float | None, until: float | None
) -> Fallback | None:
    """The most specific fallback line logged in (after, until]: the window of one transfer
    (from the previous transfer's end to its own, to the stamps' resolution)."""
    inside = [
        f
        for f in fallbacks
        if f.at_unix is not None
        and until is not None
        and f.at_unix <= until
        and (after is None or f.at_unix > after)
    ]
    if not inside:
        return None
    return min(inside, key=lambda f: FALLBACK_KINDS.index(f.kind))


# The primary may log a transfer's end after the secondary logged taking it (BIND writes
# "IXFR ended" once it has cleaned up; an NSD secondary committed 2 ms before it here).
END_SKEW_S = 1.0


def _sent_for(
    sent: list[LoggedTransfer], entry: LoggedTransfer, slack: float
) -> LoggedTransfer | None:
    """The primary's last logged transfer of the same serial to this secondary, ended no
    later than END_SKEW_S after the secondary's (plus the stamps' resolution)."""
    limit = slack + END_SKEW_S
    matches = [
        e
        for e in sent
        if e.serial == entry.serial
        and (e.at_unix is None or entry.at_unix is None or e.at_unix <= entry.at_unix + limit)
    ]
    return matches[-1] if matches else None


def stream_transfers(
    secondary: type[Server],
    secondary_log: str,
    primary: type[Server],
    primary_log: str,
    zone: str,
    address: str,
    since: float,
) -> list[StreamTransfer]:
    """The incoming transfers of `zone` by the secondary at `address`, logged since `since`
    (unix time), with their kind and, for an AXFR in place of an IXFR, why."""
    zone = zone_name(zone)
    slack = secondary.failures.resolution_s + primary.failures.resolution_s
    sent = [
        e
        for e in primary.parse_log(primary_log)
        if e.direction == "out" and e.zone == zone and primary.peer_is(e.peer, address)
    ]
    fallbacks = [
        f
        for f in primary.parse_fallbacks(primary_log)
        if f.side == "out" and f.zone == zone and primary.peer_is(f.peer, address)
    ] + [f for f in secondary.parse_fallbacks(secondary_log) if f.side == "in" and f.zone == zone]
    out = []
    previous: float | None = None
    for entry in secondary.parse_log(secondary_log):
        if entry.direction != "in" or entry.zone != zone:
            continue
        if entry.at_unix is not None and entry.at_unix < since - slack:
            previous = entry.at_unix
            continue
        match = _sent_for(sent, entry, slack)
        xfr, source = entry.xfr, "secondary"
        if xfr is None and match is not None:
            xfr, source = match.xfr, "primary"
        first = entry.from_serial
        if first is None and match is not None:
            first = match.from_serial
        why = None
        if xfr == "axfr":
            until = None if entry.at_unix is None else entry.at_unix + slack
            why = _fallback_for(fallbacks, previous, until)
        out.append(
            StreamTransfer(
                serial=entry.serial,
                xfr=xfr,
                from_serial=first,
                at_unix=entry.at_unix,
                fallback=None if why is None else why.text,
                fallback_kind=None if why is None else why.kind,
                fallback_by=None
                if why is None
                else f"{why.server} ({'primary' if why.side == 'out' else 'secondary'})",
                bytes=entry.bytes if entry.bytes is not None else (match.bytes if match else None),
                messages=entry.messages
                if entry.messages is not None
                else (match.messages if match else None),
                source=source,
            )
        )
        previous = entry.at_unix
    return out
