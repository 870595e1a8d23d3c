"""A cold start timed without a single query: each zone's incoming transfer as the secondary
logged it, read from its log as it grows.

Polling thousands of zones costs the servers CPU of their own (bench/observer measures how
much it changes a cold start). With `cold_start_poll = "off"` the secondary's log is the
only clock: a zone counts as served from the end of the interval its log stamp starts
(Knot stamps whole seconds), and no earlier than the stamp itself, so its error bar is the
stamp's resolution. The log is read from where the last read stopped, complete lines only.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable

from harness.measure.processes import RunningServer
from harness.servers.base import zone_name
from harness.servers.facts import LoggedTransfer
from harness.xfr.poll_zones import ZonesServed, ZonesTimeout

READ_EVERY = 0.5  # seconds between two reads of the log


def first_logged(
    events: Iterable[LoggedTransfer], wanted: set[str], found: dict[str, float]
) -> None:
    """Add to `found` the first incoming transfer's stamp (unix) of each wanted zone."""
    for event in events:
        if event.direction != "in" or event.at_unix is None:
            continue
        zone = zone_name(event.zone).lower()
        if zone in wanted and zone not in found:
            found[zone] = event.at_unix


def to_served(
    zones: list[str],
    found: dict[str, float],
    started_unix: float,
    since: float,
    resolution_s: float,
) -> ZonesServed:
    """Log stamps as a poller's result: served at the end of each stamp's interval, known
    unserved at its start (times on the monotonic clock of `since`, the start)."""
    result = ZonesServed(served={}, since=since)
    for zone in zones:
        stamp = found.get(zone_name(zone).lower())
        if stamp is None:
            continue
        offset = max(0.0, stamp - started_unix)
        result.served[zone] = since + offset + resolution_s
        result.unserved[zone] = since + offset
    return result


def wait_logged_zones(
    running: RunningServer,
    zones: list[str],
    since: float,
    deadline: float,
    clock: Callable[[], float] = time.monotonic,
) -> ZonesServed:
    """Wait until `running`'s log shows an incoming transfer of every zone (or `deadline`,
    then ZonesTimeout with what was logged); checks that the server lives between reads."""
    dialect = type(running.server)
    resolution = dialect.failures.resolution_s
    started = running.started_at if running.started_at is not None else time.time()
    wanted = {zone_name(zone).lower() for zone in zones}
    found: dict[str, float] = {}
    offset, partial = 0, b""
    while True:
        running.alive()
        try:
            with open(running.server.log_path, "rb") as log:
                log.seek(offset)
                data = log.read()
        except FileNotFoundError:
            data = b""
        offset += len(data)
        data = partial + data
        cut = data.rfind(b"\n") + 1
        data, partial = data[:cut], data[cut:]
        if data:
            first_logged(dialect.parse_log(data.decode(errors="replace")), wanted, found)
        if len(found) == len(wanted):
            break
        if clock() >= deadline:
            result = to_served(zones, found, started, since, resolution)
            pending = len(wanted) - len(found)
            raise ZonesTimeout(
                f"timeout after {clock() - since:.1f} s: {pending} of {len(zones)} zones "
                f"not logged as transferred by the {running.name} (no polling: its log is "
                "the clock); see its log, or raise the scenario's timeout",
                result,
            )
        time.sleep(READ_EVERY)
    return to_served(zones, found, started, since, resolution)
