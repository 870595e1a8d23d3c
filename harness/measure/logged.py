"""What the servers' logs say about one transfer or one cold start, as the flows keep it
(bench.Bench.logged, cold_start_log), and the fallback lines of one transfer (pure).

Each is read into a frozen value with the fields the records need; its `server_logged()` is
the one place that names the record's `server_logged` keys (a flow never packs them)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from harness.servers import count_failures, count_refusals
from harness.servers.base import Server, zone_name
from harness.servers.fallbacks import FALLBACK_KINDS
from harness.servers.log_reading import last_incoming, last_outgoing


@dataclass(frozen=True)
class Logged:
    """A transfer as the servers logged it (sizes where they say them)."""

    secondary: dict[str, Any] = field(default_factory=dict)
    primary: dict[str, Any] = field(default_factory=dict)
    failures: dict[str, Any] = field(default_factory=dict)  # the secondary's, this repeat
    # The primary's refusals for want of a slot so far in this repeat, to any secondary
    # (servers/refusals.py RefusalCount.to_json(); refusals None: not logged).
    refusals: dict[str, Any] = field(default_factory=dict)
    # Lines of either server saying an IXFR became an AXFR since the repeat began, to this
    # secondary (base.Fallback.to_json()), the most specific first (transfer_fallbacks).
    fallbacks: list[dict[str, Any]] = field(default_factory=list)

    def sizes(self, copy_records: int | None, full_zone: bool) -> tuple[int | None, ...]:
        """Bytes, messages and records, from whichever server logged them; None where neither
        did (Knot logs no record count, NSD 4.6 no sizes at all). An AXFR carries the whole
        zone, so its record count is the copy's when no log says it."""

        def pick(key: str) -> int | None:
            for source in (self.secondary, self.primary):
                if source.get(key) is not None:
                    return int(source[key])
            return None

        records = pick("records")
        if records is None and full_zone:
            records = copy_records
        return pick("bytes"), pick("messages"), records

    def server_logged(self, *, refusals: bool = True) -> dict[str, Any]:
        """The record's `server_logged`: each side's logged transfer, the secondary's failed
        attempts and (`refusals`) the primary's refusals, which a faulted repeat's records
        have never carried (their server account is extra["fault"]["server"])."""
        fields = {
            "secondary": self.secondary,
            "primary": self.primary,
            "secondary_failures": self.failures,
        }
        return fields | ({"primary_refusals": self.refusals} if refusals else {})


@dataclass(frozen=True)
class ColdStartLog:
    transfers: int  # incoming transfers the secondary logged
    # Their sizes summed; None when its log does not say them (NSD 4.6, PowerDNS).
    bytes: int | None
    messages: int | None
    # Failed attempts by category in its own wording, and the first one's time since it
    # started (harness.servers.failures.FailureCounts.to_json()).
    failures: dict[str, Any]
    # When its log says the last incoming transfer ended, seconds since it was started,
    # and the resolution of its stamps (Knot: 1 s): the servers' own view of the duration.
    last_transfer_s: float | None = None
    stamp_resolution_s: float | None = None

    def server_logged(self) -> dict[str, Any]:
        """The record's `server_logged` for a cold start."""
        return {
            "secondary_transfers": self.transfers,
            "secondary_failures": self.failures,
            "secondary_last_transfer_s": self.last_transfer_s,
            "stamp_resolution_s": self.stamp_resolution_s,
        }


Clock = Callable[[float], float]  # the engine's unix time on a host's clock


def _same(at: float) -> float:
    return at


def transfer_fallbacks(
    primary: type[Server],
    primary_log: str,
    secondary: type[Server],
    secondary_log: str,
    zone: str,
    address: str,
    since: float,
    since_secondary: float | None = None,
) -> list[dict[str, Any]]:
    """The lines saying an IXFR of `zone` became an AXFR, logged since `since` (unix time, to
    the stamps' resolution) by the primary about the secondary at `address`, or by that
    secondary (since `since_secondary` on its host's clock, where that is another): the
    most specific kind first (as measure/stream_logs.py chooses)."""
    zone = zone_name(zone)
    theirs = since if since_secondary is None else since_secondary
    found = [
        f
        for f in primary.parse_fallbacks(primary_log)
        if f.side == "out" and f.zone == zone and primary.peer_is(f.peer, address)
        and (f.at_unix is None or f.at_unix > since - primary.failures.resolution_s)
    ] + [
        f
        for f in secondary.parse_fallbacks(secondary_log)
        if f.side == "in" and f.zone == zone
        and (f.at_unix is None or f.at_unix > theirs - secondary.failures.resolution_s)
    ]  # fmt: skip
    found.sort(key=lambda f: FALLBACK_KINDS.index(f.kind))
    return [f.to_json() for f in found]


def transfer_logged(
    secondary: type[Server],
    secondary_log: str,
    primary: type[Server],
    primary_log: str,
    where: tuple[str, int, str],
    since: float,
    now: float,
    clocks: tuple[Clock, Clock] = (_same, _same),
) -> Logged:
    """`where` = (zone, serial, the secondary's address): the secondary's logged incoming
    transfer and failures since `since` (unix time), the primary's logged outgoing transfer
    to it, the primary's refusals (to anyone) since then, and the fallback lines. `clocks`:
    the secondary's and the primary's host clock (Place.host_time), which their logs stamp:
    the engine's `since` and `now` are put on each before its log is read."""
    zone, serial, address = where
    on_secondary, on_primary = clocks
    incoming = last_incoming(secondary, secondary_log, zone, serial)
    outgoing = last_outgoing(primary, primary_log, zone, serial, address)
    return Logged(
        incoming.to_json() if incoming else {},
        outgoing.to_json() if outgoing else {},
        # Nulls where it does not log a category, even if none failed.
        count_failures(secondary.kind, secondary_log, on_secondary(since)).to_json(),
        count_refusals(primary.kind, primary_log, on_primary(since), on_primary(now)).to_json(),
        transfer_fallbacks(
            primary,
            primary_log,
            secondary,
            secondary_log,
            zone,
            address,
            on_primary(since),
            on_secondary(since),
        ),
    )
