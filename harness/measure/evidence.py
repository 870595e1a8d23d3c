"""What a measured transfer was seen to be, against what its case names (pure): the
transport (transport_seen.py: the wire's connect ports, the servers' TSIG words) and the
transfer kind (xfr_seen.py: the servers' own lines). A contradiction is the harness's
error, never a result of the case: the record does not count, and says what was logged.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from harness.core.terms import XfrKind
from harness.core.transport import Transport
from harness.measure.logged import Logged
from harness.measure.transport_seen import TransportSeen
from harness.measure.xfr_seen import XfrSeen


@dataclass(frozen=True)
class Evidence:
    transport: Transport
    xfr: XfrKind
    used: TransportSeen
    kind: XfrSeen

    @property
    def wrong(self) -> str | None:
        """Why the transfer is not one of its case, in a line for the record; or None."""
        if (why := self.used.contradiction(self.transport)) is not None:
            return f"not over {self.transport}: {why}"
        if (why := self.kind.contradiction(self.xfr)) is not None:
            return f"not an {self.xfr.upper()}: {why}"
        return None

    def to_json(self) -> dict[str, Any]:
        return {"transport_seen": self.used.to_json(), "xfr_seen": self.kind.to_json()}


def evidence_of(ports: list[int], logged: Logged, transport: Transport, xfr: XfrKind) -> Evidence:
    """One transfer's evidence: the primary's ports it connected to, and its logged lines."""
    used = TransportSeen.of(ports, logged.primary, logged.secondary)
    kind = XfrSeen.of(logged.primary, logged.secondary, logged.fallbacks)
    return Evidence(transport, xfr, used, kind)
