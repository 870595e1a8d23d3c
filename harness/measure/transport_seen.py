"""Which transport a secondary really used for one transfer, from evidence the harness did
not configure: the ports its connects to the primary went to (the primary's wire: 53 for
TCP, 853 for XoT) and whether the transfer was TSIG-signed, as the primary's own log line
says, else the secondary's (servers/<kind>.py, LoggedTransfer.signed). Pure.

A mixed group's primary accepts signed and unsigned transfers on both ports, so a secondary
that kept its old setting after a switch still transfers fine: only this tells.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from harness.core.transport import XOT_PORT, Transport


@dataclass(frozen=True)
class TransportSeen:
    ports: tuple[int, ...]  # distinct ports on the primary it connected to, ascending
    signed: bool | None  # None: neither server's log says
    said_by: str | None = None  # "primary" or "secondary": whose log said `signed`

    @property
    def transport(self) -> Transport | None:
        """The transport, when the evidence names exactly one."""
        if len(self.ports) != 1 or self.signed is None:
            return None
        return Transport.seen(tls=self.ports[0] == XOT_PORT, signed=self.signed)

    def contradiction(self, expected: Transport) -> str | None:
        """What the evidence says against `expected`, or None (also when it says nothing)."""
        want = expected.port
        other = [p for p in self.ports if p != want]
        if other:
            return (
                f"the secondary connected to the primary's port {other[0]}, not {want} ({expected})"
            )
        if self.signed is not None and self.signed != expected.signed:
            said, meant = ("signed", "unsigned") if self.signed else ("unsigned", "signed")
            return f"the {self.said_by}'s log says the transfer was {said}; {expected} is {meant}"
        return None

    def unproven(self, expected: Transport) -> str | None:
        """Why this is no proof that the secondary used `expected`: a contradiction, or no
        connect seen. A TSIG setting no log says stays unproven without failing (Knot 3.2
        logs it on neither side): `signed` None is in the record."""
        wrong = self.contradiction(expected)
        if wrong is not None:
            return wrong
        if not self.ports:
            return "no connect from the secondary to the primary was seen on the wire"
        return None

    @classmethod
    def of(
        cls, ports: list[int], primary: dict[str, Any], secondary: dict[str, Any]
    ) -> TransportSeen:
        """The evidence of one transfer: connect ports from the wire, and the servers' log
        entries of it (LoggedTransfer.to_json(); {} where a server logged none)."""
        distinct = tuple(sorted(set(ports)))
        for side, entry in (("primary", primary), ("secondary", secondary)):
            if entry.get("signed") is not None:
                return cls(distinct, bool(entry["signed"]), side)
        return cls(distinct, None)

    def to_json(self) -> dict[str, Any]:
        return {
            "transport": self.transport.name if self.transport is not None else None,
            "ports": list(self.ports),
            "signed": self.signed,
            "signed_said_by": self.said_by,
        }
