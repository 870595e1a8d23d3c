"""Which transfer kind the servers logged for one transfer, judged against the case's
(pure). The primary's outgoing line first (BIND's "AXFR-style IXFR" is an AXFR: the whole
zone went out), else the secondary's incoming one (servers/<kind>.py, LoggedTransfer.xfr).

A secondary that cannot be told to ask AXFR only (Knot 3.2) asks IXFR in an "axfr" case,
and a primary that provides IXFR answers with one: the record would show IXFR times in the
AXFR row. And an IXFR answered with a whole zone is an IXFR only when a server's own line
says it fell back (servers/<kind>.py fallback_wording); otherwise the case measured AXFRs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from harness.core.terms import XfrKind


@dataclass(frozen=True)
class XfrSeen:
    xfr: XfrKind | None  # None: neither server's log says (NSD 4.6 as both, PowerDNS out)
    said_by: str | None = None  # "primary" or "secondary": whose log said `xfr`
    # A server's own line saying an IXFR became an AXFR in this transfer's window
    # (base.Fallback.to_json()), the most specific one; None when none was logged.
    fallback: dict[str, Any] | None = None

    @classmethod
    def of(
        cls,
        primary: dict[str, Any],
        secondary: dict[str, Any],
        fallbacks: list[dict[str, Any]] | tuple[dict[str, Any], ...] = (),
    ) -> XfrSeen:
        """The evidence of one transfer: the servers' log entries of it
        (LoggedTransfer.to_json(); {} where a server logged none) and their fallback lines."""
        first = fallbacks[0] if fallbacks else None
        for side, entry in (("primary", primary), ("secondary", secondary)):
            if entry.get("xfr") in ("axfr", "ixfr"):
                return cls(entry["xfr"], side, first)
        return cls(None, None, first)

    def contradiction(self, expected: XfrKind) -> str | None:
        """What the logs say against `expected`, or None (also when they say nothing)."""
        if self.xfr is None or self.xfr == expected:
            return None
        said = f"the {self.said_by}'s log says"
        if expected == "axfr":
            sent = "it sent an IXFR" if self.said_by == "primary" else "it took an IXFR"
            return f"asked AXFR, {said} {sent}"
        if self.fallback is not None:
            return None  # a logged fallback: the IXFR case's own outcome, kept in the record
        sent = "it sent a whole zone" if self.said_by == "primary" else "it took a whole zone"
        return f"asked IXFR, {said} {sent} (AXFR), and no line of either says it fell back"

    def to_json(self) -> dict[str, Any]:
        return {
            "xfr": self.xfr,
            "said_by": self.said_by,
            "fallback": None if self.fallback is None else self.fallback.get("text"),
            "fallback_kind": None if self.fallback is None else self.fallback.get("kind"),
        }
