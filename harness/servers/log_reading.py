"""Reading a server's log in its own dialect: the lines since a moment, and the transfer
that brought or sent one serial (pure: the text is read by the caller)."""

from __future__ import annotations

from harness.servers.base import Server, zone_name
from harness.servers.facts import LoggedTransfer


def lines_since(server: type[Server], text: str, since: float) -> list[str]:
    """The log lines stamped at or after `since` (unix time, to the stamps' resolution);
    a line without a stamp goes with the one before it."""
    out: list[str] = []
    keep = False
    for line in text.splitlines():
        stamp = server.failures.timestamp(line, None)
        if stamp is not None:
            keep = stamp > since - server.failures.resolution_s
        if keep:
            out.append(line)
    return out


def last_incoming(server: type[Server], text: str, zone: str, serial: int) -> LoggedTransfer | None:
    """The secondary's own record of the transfer that brought `serial` of `zone`."""
    matches = [
        entry
        for entry in server.parse_log(text)
        if entry.direction == "in"
        and entry.zone == zone_name(zone)
        and entry.serial in (serial, None)
    ]
    return matches[-1] if matches else None


def last_outgoing(
    server: type[Server], text: str, zone: str, serial: int, to: str
) -> LoggedTransfer | None:
    """The primary's own record of sending `serial` of `zone` to the address `to` (not the
    harness's verification pulls from 127.0.0.1)."""
    matches = [
        entry
        for entry in server.parse_log(text)
        if entry.direction == "out"
        and entry.zone == zone_name(zone)
        and entry.serial in (serial, None)
        and server.peer_is(entry.peer, to)
    ]
    return matches[-1] if matches else None
