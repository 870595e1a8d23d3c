"""Failure lines in the servers' own logs, counted by category: pure functions over log text.

Every server words a failed transfer its own way, so each kind has its own tables, written
from lines captured in real runs of BIND 9.18.49, Knot 3.2.6 and NSD 4.6.1 as secondaries
(tests/fixtures/failures/, whose README lists each wording):

- attempt patterns: the one line per failed network attempt, with a `reason` group holding
  the server's error text; that server's REASONS table maps the text to a category, and any
  text it does not know is `other_failure`;
- fixed patterns: lines whose category does not depend on a reason text (a retry scheduled,
  a query that ran out of retries, an attempt skipped);
- follow-up patterns: further lines the same failed attempt writes. They count as failing
  lines but not again as an attempt.

Which line is the attempt, per server:
- BIND: "transfer of '<zone>' from <addr>: failed to connect: <reason>" (its "Transfer
  status: <reason>" and "Transfer completed: 0 messages" lines follow), and for the SOA query
  before it "refresh: failure trying primary ...: <reason>" or "refresh: retry limit for
  primary ... exceeded" (a query that timed out). BIND tries the transfer over TCP even after
  the SOA query of a zone with no data failed, so one refresh can count two failed attempts:
  a UDP query and a TCP connect, each a failure of its own on the wire.
- Knot: "refresh, remote <id>, address <addr>, failed (<reason>)", one per address tried;
  "remote <id> not usable" and "zone event 'refresh' failed" follow it, and "refresh, failed
  (...), next retry at <time>" closes the refresh event: that one counts as a retry.
- NSD: "xfrd: connect <addr> failed: <strerror>" (connect() failed at once, as it does when
  no port is free; names no zone) or "<zone>: Could not tcp connect to <addr>: <strerror>"
  (the non-blocking connect failed later, as a refused one does): one line per attempt.

What the servers never write at their configured severities (see the fixtures' README): BIND
9.18 logs its retries only at debug level, and NSD 4.6.1 logs neither its timeouts nor its
retries (only in debug builds). Their `retry` (and NSD's `timed_out`) counts are then 0
because the log is silent, not because nothing failed.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, tzinfo
from typing import Literal

from harness.servers.catalog import ServerKind

FailureCategory = Literal["address_not_available", "refused", "timed_out", "retry", "other_failure"]
CATEGORIES: tuple[FailureCategory, ...] = (
    "address_not_available",
    "refused",
    "timed_out",
    "retry",
    "other_failure",
)


@dataclass(frozen=True)
class Dialect:
    """One server kind's failure wording and time stamps."""

    kind: ServerKind
    attempts: tuple[re.Pattern[str], ...]  # each with a `reason` group
    reasons: dict[str, FailureCategory]  # the server's own error texts
    fixed: tuple[tuple[re.Pattern[str], FailureCategory], ...]
    follow_ups: tuple[re.Pattern[str], ...]
    timestamp: Callable[[str, tzinfo | None], float | None]
    # A stamp is the start of an interval this long (Knot writes whole seconds).
    resolution_s: float


def _epoch(text: str, fmt: str, tz: tzinfo | None) -> float:
    """Unix time of a stamp written in local time without an offset. `tz` is the zone the
    server ran in; None: this host's local zone, as the servers run here."""
    moment = datetime.strptime(text, fmt)
    return moment.replace(tzinfo=tz).timestamp() if tz else moment.timestamp()


# --- BIND 9.18 -----------------------------------------------------------------------------

# print-time iso8601 (servers/bind/named.conf.j2): local time, milliseconds, no offset.
_BIND_STAMP = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}) ")


def bind_timestamp(line: str, tz: tzinfo | None = None) -> float | None:
    match = _BIND_STAMP.match(line)
    return _epoch(match[1], "%Y-%m-%dT%H:%M:%S.%f", tz) if match else None


BIND_ATTEMPTS = (
    # xfrin.c xfrin_fail(): "<what>: <isc_result_totext>" at error severity, once per failed
    # transfer; <what> is "failed to connect" in every capture, but any stage may fail.
    re.compile(r"xfer-in: error: transfer of '[^']+' from \S+: [^:]+: (?P<reason>.+)$"),
    # The SOA query before a transfer (UDP; an ICMP port unreachable reads "refused").
    re.compile(r"refresh: failure trying primary \S+ \(source \S+\): (?P<reason>.+)$"),
)
BIND_REASONS: dict[str, FailureCategory] = {
    "address not available": "address_not_available",
    "connection refused": "refused",
    "timed out": "timed_out",
}
BIND_FIXED: tuple[tuple[re.Pattern[str], FailureCategory], ...] = (
    # The SOA query went unanswered through all its UDP retries: a timeout.
    (re.compile(r"refresh: retry limit for primary \S+ exceeded \(source \S+\)$"), "timed_out"),
    # No connect at all: an earlier timeout put the primary in the unreachable cache.
    (
        re.compile(
            r"got_transfer_quota: skipping zone transfer as primary \S+ \(source \S+\) "
            r"is unreachable \(cached\)$"
        ),
        "other_failure",
    ),
)
BIND_FOLLOW_UPS = (
    # "Transfer status: success" is the only status that is not a failure.
    re.compile(r"transfer of '[^']+' from \S+: Transfer status: (?!success$).+$"),
    # A failed transfer still ends with "Transfer completed", empty.
    re.compile(r"transfer of '[^']+' from \S+: Transfer completed: 0 messages, "),
)

# --- Knot 3.2 ------------------------------------------------------------------------------

# KNOT_LOG_TIME_FORMAT "%Y-%m-%dT%H:%M:%S%z": local time, whole seconds, with its offset.
_KNOT_STAMP = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d[+-]\d{4}) ")


def knot_timestamp(line: str, tz: tzinfo | None = None) -> float | None:
    """`tz` is unused: Knot writes its offset."""
    match = _KNOT_STAMP.match(line)
    if not match:
        return None
    return datetime.strptime(match[1], "%Y-%m-%dT%H:%M:%S%z").timestamp()


KNOT_ATTEMPTS = (
    # zone.c log_try_addr_error(): one line per primary address tried ("remote <id>, " is
    # left out for the zone's preferred primary).
    re.compile(r"\] refresh, (?:remote \S+, )?address \S+, failed \((?P<reason>.+)\)$"),
)
KNOT_REASONS: dict[str, FailureCategory] = {
    "address is not available": "address_not_available",
    # KNOT_ECONN: Knot 3.2 reports every connect or I/O error but a timeout with this text;
    # with nothing listening on the primary it is a refused connect (the capture's case).
    "connection reset": "refused",
    "connection timeout": "timed_out",
}
KNOT_FIXED: tuple[tuple[re.Pattern[str], FailureCategory], ...] = (
    # event_refresh(): the refresh event failed and its next try is scheduled.
    (re.compile(r"\] refresh, failed \([^)]+\), next retry at \S+$"), "retry"),
)
KNOT_FOLLOW_UPS = (
    # The primary's answer to a transfer, before the address line that fails on it.
    re.compile(r"\] [AI]XFR, incoming, remote \S+, server responded with error '[^']+'$"),
    re.compile(r"\] refresh, remote \S+ not usable$"),
    re.compile(r"\] refresh, address \S+ not usable$"),
    re.compile(r"\] zone event 'refresh' failed \([^)]+\)$"),
)

# --- NSD 4.6 -------------------------------------------------------------------------------

# log-time-ascii: "[YYYY-MM-DD HH:MM:SS.mmm]" in local time, no offset.
_NSD_STAMP = re.compile(r"^\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3})\] ")


def nsd_timestamp(line: str, tz: tzinfo | None = None) -> float | None:
    match = _NSD_STAMP.match(line)
    if not match:
        return None
    return _epoch(match[1], "%Y-%m-%d %H:%M:%S.%f", tz)


NSD_ATTEMPTS = (
    # xfrd-tcp.c: connect() failed at once (no zone named).
    re.compile(r"\]: error: xfrd: connect \S+ failed: (?P<reason>.+)$"),
    # xfrd-tcp.c: the non-blocking connect failed (SO_ERROR), for this zone.
    re.compile(r"\]: error: \S+: Could not tcp connect to \S+: (?P<reason>.+)$"),
)
NSD_REASONS: dict[str, FailureCategory] = {  # strerror() texts
    "Cannot assign requested address": "address_not_available",
    "Connection refused": "refused",
}
NSD_FIXED: tuple[tuple[re.Pattern[str], FailureCategory], ...] = ()
NSD_FOLLOW_UPS: tuple[re.Pattern[str], ...] = ()

DIALECTS: dict[ServerKind, Dialect] = {
    "bind": Dialect(
        "bind", BIND_ATTEMPTS, BIND_REASONS, BIND_FIXED, BIND_FOLLOW_UPS, bind_timestamp, 0.001
    ),
    "knot": Dialect(
        "knot", KNOT_ATTEMPTS, KNOT_REASONS, KNOT_FIXED, KNOT_FOLLOW_UPS, knot_timestamp, 1.0
    ),
    "nsd": Dialect(
        "nsd", NSD_ATTEMPTS, NSD_REASONS, NSD_FIXED, NSD_FOLLOW_UPS, nsd_timestamp, 0.001
    ),
}


def classify(kind: ServerKind, line: str) -> FailureCategory | Literal["follow-up"] | None:
    """The category of one log line: a failure category, "follow-up" for a further line of
    an attempt already counted, or None for a line that reports no failure."""
    dialect = DIALECTS[kind]
    for pattern in dialect.attempts:
        match = pattern.search(line)
        if match:
            return dialect.reasons.get(match["reason"].strip(), "other_failure")
    for pattern, category in dialect.fixed:
        if pattern.search(line):
            return category
    if any(pattern.search(line) for pattern in dialect.follow_ups):
        return "follow-up"
    return None


@dataclass(frozen=True)
class FailureCounts:
    """Failed attempts by category in one server's log, and when the first one came.

    `failing_lines` counts every line that reports a failure, follow-ups included: beside
    the category counts it shows how many lines one failed attempt writes.
    `first_failure_s` runs from the server's start to the first line counted in a category
    and is never negative: a stamp is the start of an interval `resolution_s` long (1 s for
    Knot), so a failure stamped within that interval before the start counts as 0 s.
    """

    server: ServerKind
    address_not_available: int = 0
    refused: int = 0
    timed_out: int = 0
    retry: int = 0
    other_failure: int = 0
    failing_lines: int = 0
    first_failure_s: float | None = None
    first_failure_line: str | None = None
    resolution_s: float = 0.0

    @property
    def attempts(self) -> int:
        """Failed attempts (a retry scheduled is not an attempt of its own)."""
        return self.address_not_available + self.refused + self.timed_out + self.other_failure

    def to_json(self) -> dict[str, object]:
        return {
            "server": self.server,
            **{category: getattr(self, category) for category in CATEGORIES},
            "failing_lines": self.failing_lines,
            "first_failure_s": self.first_failure_s,
            "first_failure_line": self.first_failure_line,
            "resolution_s": self.resolution_s,
        }


def count_failures(
    kind: ServerKind, log_text: str, started_at: float | None, *, tz: tzinfo | None = None
) -> FailureCounts:
    """Count the failure lines in a `kind` server's log.

    `started_at`: unix time the server was started. Lines stamped before it (by more than
    the stamp's resolution) belong to an earlier run writing to the same file and are left
    out, so every figure is "since this start". None: count every line, and no
    `first_failure_s` (the first line is still given).
    `tz`: the zone the server wrote its local time stamps in (BIND, NSD; Knot writes its
    offset); None: this host's local zone, since the harness runs the servers here.
    """
    dialect = DIALECTS[kind]
    counts = dict.fromkeys(CATEGORIES, 0)
    failing = 0
    first_s: float | None = None
    first_line: str | None = None
    for line in log_text.splitlines():
        category = classify(kind, line)
        if category is None:
            continue
        stamp = None
        if started_at is not None:
            stamp = dialect.timestamp(line, tz)
            if stamp is not None and stamp <= started_at - dialect.resolution_s:
                continue  # an earlier run's line
        failing += 1
        if category == "follow-up":
            continue
        counts[category] += 1
        if first_line is None:
            first_line = line
            if started_at is not None and stamp is not None:
                first_s = max(0.0, stamp - started_at)
    return FailureCounts(
        kind,
        **counts,
        failing_lines=failing,
        first_failure_s=first_s,
        first_failure_line=first_line,
        resolution_s=dialect.resolution_s,
    )


__all__ = [
    "CATEGORIES",
    "DIALECTS",
    "Dialect",
    "FailureCategory",
    "FailureCounts",
    "bind_timestamp",
    "classify",
    "count_failures",
    "knot_timestamp",
    "nsd_timestamp",
]
