"""Parsers for the servers' own transfer log lines: pure functions over log text.

Each server logs its own view of a transfer; the harness stores it beside its own
measurement so that a reader can see both (for instance BIND's "0.004 secs" against the
harness's trigger-to-served time, which includes the NOTIFY and SOA round trips).
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass


@dataclass(frozen=True)
class LoggedTransfer:
    server: str  # bind | knot | nsd
    direction: str  # in | out
    zone: str
    xfr: str | None  # axfr | ixfr, when the line says
    serial: int | None
    duration_s: float | None
    messages: int | None
    records: int | None
    bytes: int | None
    logged_at: str  # the line's own timestamp, as written
    peer: str | None

    def to_json(self) -> dict[str, object]:
        return asdict(self)


_BIND_IN = re.compile(
    r"^(?P<at>\S+) xfer-in: \w+: transfer of '(?P<zone>[^/]+)/IN' from (?P<peer>\S+): "
    r"Transfer completed: (?P<msgs>\d+) messages, (?P<recs>\d+) records, (?P<bytes>\d+) bytes, "
    r"(?P<secs>[\d.]+) secs .*\(serial (?P<serial>\d+)\)"
)
_BIND_OUT = re.compile(
    r"^(?P<at>\S+) xfer-out: \w+: client \S+ (?P<peer>\S+) \([^)]*\): transfer of "
    r"'(?P<zone>[^/]+)/IN': (?P<xfr>AXFR|IXFR) ended: (?P<msgs>\d+) messages, (?P<recs>\d+) "
    r"records, (?P<bytes>\d+) bytes, (?P<secs>[\d.]+) secs .*\(serial (?P<serial>\d+)\)"
)
_KNOT = re.compile(
    r"^(?P<at>\S+) \w+: \[(?P<zone>[^\]]+)\] (?P<xfr>AXFR|IXFR), (?P<dir>incoming|outgoing), "
    r"remote (?P<peer>\S+?),? finished, (?P<secs>[\d.]+) seconds, (?P<msgs>\d+) messages, "
    r"(?P<bytes>\d+) bytes"
)
_KNOT_SERIAL = re.compile(r"serial (?:\d+ -> )?(?P<serial>\d+)")
_NSD_COMMIT = re.compile(
    r"^\[(?P<at>[^\]]+)\] nsd\[\d+\]: \w+: xfrd: zone (?P<zone>\S+) committed \"received update "
    r"to serial (?P<serial>\d+) at \S+ from (?P<peer>\S+?)\"?(?:\s|$)"
)


def _zone(name: str) -> str:
    return name if name.endswith(".") else name + "."


def parse_bind(text: str) -> list[LoggedTransfer]:
    out: list[LoggedTransfer] = []
    for line in text.splitlines():
        match = _BIND_IN.match(line)
        direction, xfr = "in", None
        if not match:
            match = _BIND_OUT.match(line)
            direction = "out"
            if not match:
                continue
            xfr = match["xfr"].lower()
        out.append(
            LoggedTransfer(
                "bind",
                direction,
                _zone(match["zone"]),
                xfr,
                int(match["serial"]),
                float(match["secs"]),
                int(match["msgs"]),
                int(match["recs"]),
                int(match["bytes"]),
                match["at"],
                match["peer"],
            )
        )
    return out


def parse_knot(text: str) -> list[LoggedTransfer]:
    out: list[LoggedTransfer] = []
    started_serial: dict[tuple[str, str, str], int] = {}
    for line in text.splitlines():
        if ", started" in line:
            # Knot names the serial on the 'started' line of an outgoing transfer only.
            head = re.search(
                r"\[(?P<zone>[^\]]+)\] (?P<xfr>AXFR|IXFR), (?P<dir>\w+), remote "
                r"(?P<peer>\S+?),",
                line,
            )
            serial = _KNOT_SERIAL.search(line)
            if head and serial:
                started_serial[(head["zone"], head["dir"], head["peer"])] = int(serial["serial"])
            continue
        match = _KNOT.match(line)
        if not match:
            continue
        key = (match["zone"], match["dir"], match["peer"])
        out.append(
            LoggedTransfer(
                "knot",
                "in" if match["dir"] == "incoming" else "out",
                _zone(match["zone"]),
                match["xfr"].lower(),
                started_serial.pop(key, None),
                float(match["secs"]),
                int(match["msgs"]),
                None,
                int(match["bytes"]),
                match["at"],
                match["peer"],
            )
        )
    return out


def parse_nsd(text: str) -> list[LoggedTransfer]:
    """NSD 4.6 logs the commit of an incoming transfer, with no duration or size."""
    out: list[LoggedTransfer] = []
    for line in text.splitlines():
        match = _NSD_COMMIT.match(line)
        if match:
            out.append(
                LoggedTransfer(
                    "nsd",
                    "in",
                    _zone(match["zone"]),
                    None,
                    int(match["serial"]),
                    None,
                    None,
                    None,
                    None,
                    match["at"],
                    match["peer"],
                )
            )
    return out


PARSERS = {"bind": parse_bind, "knot": parse_knot, "nsd": parse_nsd}


def last_incoming(kind: str, text: str, zone: str, serial: int) -> LoggedTransfer | None:
    """The secondary's own record of the transfer that brought `serial` of `zone`."""
    matches = [
        entry
        for entry in PARSERS[kind](text)
        if entry.direction == "in" and entry.zone == _zone(zone) and entry.serial in (serial, None)
    ]
    return matches[-1] if matches else None
