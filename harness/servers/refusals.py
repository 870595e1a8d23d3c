"""A primary's refusals of outgoing transfers for want of a slot, counted in its own log: pure.

A primary that has as many outgoing transfers running as it allows (BIND's transfers-out,
Knot's and NSD's worker and socket limits) refuses the next request; the secondary retries
later, on its own timer. How a server words that refusal is its dialect's to say: each
dialect module sets `Server.refusals` to a `RefusalWording` written from lines captured in
real runs (tests/fixtures/refusals/), or leaves it None while no such line is known. None
means "not logged": a count of 0 would claim the primary refused nothing.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import tzinfo

from harness.servers.failures import Stamp


@dataclass(frozen=True)
class RefusalWording:
    """The line a primary writes for each transfer request it refuses for want of a slot."""

    line: re.Pattern[str]
    timestamp: Stamp
    resolution_s: float  # a stamp is the start of an interval this long


@dataclass(frozen=True)
class RefusalCount:
    """Refusals one primary logged in a time window; `refusals` None: its dialect has no
    refusal wording (not logged), never 0."""

    server: str
    refusals: int | None
    first_line: str | None = None

    def to_json(self) -> dict[str, object]:
        return {"server": self.server, "refusals": self.refusals, "first_line": self.first_line}


def count_refusals(
    server: str,
    wording: RefusalWording | None,
    log_text: str,
    since: float,
    until: float | None = None,
    *,
    tz: tzinfo | None = None,
) -> RefusalCount:
    """Refusal lines in a primary's log stamped from `since` (unix) to `until` (None: to the
    end). Its lines name no secondary (BIND's do not), so the count is the primary's, over
    the window, not one secondary's. `tz`: the zone its local stamps are in (None: this
    host's, where the harness runs the servers)."""
    if wording is None:
        return RefusalCount(server, None)
    count, first = 0, None
    for line in log_text.splitlines():
        if not wording.line.search(line):
            continue
        stamp = wording.timestamp(line, tz, since)
        if stamp is None or stamp <= since - wording.resolution_s:
            continue
        if until is not None and stamp > until:
            continue
        count += 1
        first = first or line
    return RefusalCount(server, count, first)
