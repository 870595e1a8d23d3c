"""Which secondaries a visit measures (pure): those that got their first copy and the
warm-up update (protocol.prepare_updates).

A secondary that has not served its first copy by its deadline (or the warm-up serial by
its own) is missing: left out of the measured set for the rest of the visit, not stopped.
Its server keeps trying, and its log from its start on is the evidence of why; every repeat
records it as a failed transfer in those words while the others are measured and counted
(k of N). It does not join later, even if it gets its copy during a repeat: right after a
first copy a secondary answers the next NOTIFY late (the reason for the warm-up), so it
would be measured from another baseline than the others'. The next visit starts it anew.

When no secondary served, there is nothing to measure: the visit fails (NoneServed),
carrying every secondary's words.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from harness.xfr import XfrTimeout

FIRST_COPY = "never got its first copy"
WARMUP = "never served the warm-up serial"


@dataclass(frozen=True)
class Missing:
    """A secondary left out of a visit's measured set."""

    why: str  # FIRST_COPY or WARMUP
    error: str  # its records' error: "missing: <why>: timeout after ..."
    since: float  # unix time its server was started: its words are read from there

    def to_json(self, failures: dict[str, Any]) -> dict[str, Any]:
        """What its records keep in extra["missing"]: why, and its server's failure counts
        since its start (servers/failures.py FailureCounts.to_json(); the repeat's own are
        in server_logged.secondary_failures, as for every record, so that sums over
        records count each line once)."""
        return {"why": self.why, "since": self.since, "secondary_failures": failures}


@dataclass(frozen=True)
class Prepared:
    """What prepare_updates leaves for the visit's repeats."""

    serial: int  # the warm-up's: the next repeat publishes serial + 1
    missing: dict[str, Missing] = field(default_factory=dict)  # host -> why not measured


class NoneServed(XfrTimeout):
    """No secondary served the serial a visit needs before it measures (its first copy, or
    the warm-up): the visit cannot measure. `said`: per secondary, what its server logged
    since its start (a record's server_logged), so the records say why in its words."""

    def __init__(self, message: str, said: dict[str, dict[str, Any]]) -> None:
        super().__init__(message)
        self.said = said


def measured(hosts: list[str], missing: Mapping[str, Missing]) -> list[str]:
    """The hosts a repeat measures, in their order."""
    return [host for host in hosts if host not in missing]


def missing_error(why: str, timeout_text: str) -> str:
    """ "missing: never got its first copy: timeout after 140 s: the gone-1 never served
    dead.test. serial 1"."""
    return f"missing: {why}: {timeout_text}"
