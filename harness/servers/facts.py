"""What a dialect tells the engine of its server, in the engine's terms: a transfer as the
server logged it, and one of the server's own rate limiters (which settle waits out)."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Literal

from harness.core.terms import ServerKind


@dataclass(frozen=True)
class LoggedTransfer:
    """A transfer as a server logged it; None where its log line does not say."""

    server: ServerKind
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
    at_unix: float | None = None  # that stamp as unix time (to its resolution; Knot: 1 s)
    # Whether the transfer was TSIG-signed, as the line (or its companion) says; None where
    # the server's log does not say (Knot 3.2 either way, NSD 4.6 as a primary).
    signed: bool | None = None
    from_serial: int | None = None  # where an IXFR started, when the log says

    def to_json(self) -> dict[str, object]:
        return asdict(self)


PacedBy = Literal["notify", "query", "served", "reconfig"]


@dataclass(frozen=True)
class Pacing:
    """One of a server's own rate limiters: after the last of the events `after` (a
    primary's NOTIFY, a secondary's SOA query or connect to its primary, its taking a new
    version into service, its reconfiguration by the harness: "notify", "query", "served",
    "reconfig"), it may hold its next action for up to `seconds`. A trigger within that
    time would measure the limiter, not the transfer (measure/settle.py waits it out).
    `why`: the setting, in the server's words."""

    after: tuple[PacedBy, ...]
    seconds: float
    why: str
