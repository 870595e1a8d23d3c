"""Failure lines in the servers' own logs, counted by category: pure functions over log text.

Every server words a failed transfer its own way, so each dialect module (bind.py, knot.py,
nsd.py, pdns.py) holds a `FailureWording` of its own, written from lines captured in real runs
of BIND 9.18.49, Knot 3.2.6, NSD 4.6.1 and PowerDNS 4.7.3 as secondaries
(tests/fixtures/failures/, whose README lists each wording); this module only applies one. A
wording has:

- attempt patterns: the one line per failed network attempt, with a `reason` group holding
  the server's error text; that server's REASONS table maps the text to a category, and any
  text it does not know is `other_failure`;
- fixed patterns: lines whose category does not depend on a reason text (a retry scheduled,
  a query that ran out of retries, an attempt skipped). One with a `count` group reports
  that many attempts at once (PowerDNS: "had 10 timeouts" for one round of SOA queries);
  attempts it includes that had a line of their own since the last such line (`recounted`:
  PowerDNS's SOA query answered with an error rcode) are left out of its count;
- follow-up patterns: further lines the same failed attempt writes. They count as failing
  lines but not again as an attempt;
- the categories it does not log, or not every time (`unlogged`): BIND 9.18 logs no retry,
  NSD 4.6.1 neither a retry nor the expiry of its own transfer timer. Where such a server
  logged none, its count is None, "not logged", never 0: a 0 would say nothing failed that
  way. A count it did log there is a floor.

Which line counts as the attempt, and what a server never writes, is said in each dialect
module, beside its wording.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, tzinfo
from typing import Literal, get_args

# address_not_available: no local port or address to connect from (EADDRNOTAVAIL);
# refused: the primary's host or server said no (a reset connect, REFUSED, NOTAUTH);
# timed_out: nothing came back in time; unreachable: the network said the primary cannot be
# reached (ICMP host unreachable), or the server skipped the attempt because it holds the
# primary as unreachable (BIND's cache); retry: a retry scheduled (not an attempt);
# other_failure: any other reason, in the server's words.
FailureCategory = Literal[
    "address_not_available", "refused", "timed_out", "unreachable", "retry", "other_failure"
]
CATEGORIES: tuple[FailureCategory, ...] = get_args(FailureCategory)
# (line, the zone a server wrote its local-time stamps in, a unix time the stamp lies near:
# the server's start, for stamps written without a year) -> unix time, or None
Stamp = Callable[[str, "tzinfo | None", "float | None"], "float | None"]


@dataclass(frozen=True)
class FailureWording:
    """One server kind's failure wording and time stamps."""

    attempts: tuple[re.Pattern[str], ...]  # each with a `reason` group
    reasons: dict[str, FailureCategory]  # the server's own error texts
    fixed: tuple[tuple[re.Pattern[str], FailureCategory], ...]
    follow_ups: tuple[re.Pattern[str], ...]
    timestamp: Stamp
    # A stamp is the start of an interval this long (Knot writes whole seconds).
    resolution_s: float
    # Categories it does not log, or not every time: None where it logged none (see above).
    unlogged: frozenset[FailureCategory] = field(kw_only=True)
    # Attempt lines that the next `count` line counts again (see the module's docstring).
    recounted: tuple[re.Pattern[str], ...] = field(default=(), kw_only=True)


def local_epoch(text: str, fmt: str, tz: tzinfo | None) -> float:
    """Unix time of a stamp written in local time without an offset. `tz` is the zone the
    server ran in; None: this host's local zone, as the servers run here."""
    moment = datetime.strptime(text, fmt)
    return moment.replace(tzinfo=tz).timestamp() if tz else moment.timestamp()


def classify(wording: FailureWording, line: str) -> FailureCategory | Literal["follow-up"] | None:
    """The category of one log line: a failure category, "follow-up" for a further line of
    an attempt already counted, or None for a line that reports no failure."""
    for pattern in wording.attempts:
        match = pattern.search(line)
        if match:
            return wording.reasons.get(match["reason"].strip(), "other_failure")
    for pattern, category in wording.fixed:
        if pattern.search(line):
            return category
    if any(pattern.search(line) for pattern in wording.follow_ups):
        return "follow-up"
    return None


def reported_count(wording: FailureWording, line: str) -> int | None:
    """How many failed attempts a line of a fixed pattern with a `count` group reports; None
    for any other line (one attempt)."""
    for pattern, _category in wording.fixed:
        match = pattern.search(line)
        if match and "count" in pattern.groupindex:
            return int(match["count"])
    return None


@dataclass(frozen=True)
class FailureCounts:
    """Failed attempts by category in one server's log, and when the first one came.

    `failing_lines` counts every line that reports a failure, follow-ups included: beside
    the category counts it shows how many lines one failed attempt writes.
    `first_failure_s` runs from the server's start to the first line counted in a category
    and is never negative: a stamp is the start of an interval `resolution_s` long (1 s for
    Knot), so a failure stamped within that interval before the start counts as 0 s.
    A category count is None where the server does not log it ("not logged"); `unlogged`
    names the categories its wording cannot vouch for, so a count there is a floor.
    """

    server: str
    address_not_available: int | None = 0
    refused: int | None = 0
    timed_out: int | None = 0
    unreachable: int | None = 0
    retry: int | None = 0
    other_failure: int | None = 0
    failing_lines: int = 0
    first_failure_s: float | None = None
    first_failure_line: str | None = None
    resolution_s: float = 0.0
    unlogged: tuple[FailureCategory, ...] = ()

    def count(self, category: FailureCategory) -> int | None:
        value: int | None = getattr(self, category)
        return value

    def floor(self, category: FailureCategory) -> bool:
        """Whether a count found is only a floor: the server does not log every one."""
        return category in self.unlogged and self.count(category) is not None

    @property
    def attempts(self) -> int:
        """Failed attempts logged (a retry scheduled is not an attempt of its own); a floor
        when a category is not logged."""
        return sum(self.count(c) or 0 for c in CATEGORIES if c != "retry")

    def to_json(self) -> dict[str, object]:
        return {
            "server": self.server,
            **{category: self.count(category) for category in CATEGORIES},
            "unlogged": list(self.unlogged),
            "failing_lines": self.failing_lines,
            "first_failure_s": self.first_failure_s,
            "first_failure_line": self.first_failure_line,
            "resolution_s": self.resolution_s,
        }

    @classmethod
    def from_json(cls, data: object) -> FailureCounts | None:
        """The counts a record holds, or None where it holds none ({} or missing: a record
        written when nothing failed, or before the counts were kept). Readable back to the
        first records: a category a record does not name (one added since) is 0, as every
        count was before `unlogged` existed; a value that is not a count is None."""
        if not isinstance(data, dict) or not data:
            return None
        counts: dict[str, int | None] = {}
        for category in CATEGORIES:
            value = data.get(category, 0)
            ok = isinstance(value, int) and not isinstance(value, bool)
            counts[category] = value if ok else None
        unlogged = data.get("unlogged")
        first_line = data.get("first_failure_line")
        return cls(
            str(data.get("server", "")),
            **counts,
            failing_lines=int(_number(data.get("failing_lines")) or 0),
            first_failure_s=_number(data.get("first_failure_s")),
            first_failure_line=first_line if isinstance(first_line, str) else None,
            resolution_s=_number(data.get("resolution_s")) or 0.0,
            unlogged=tuple(c for c in CATEGORIES if isinstance(unlogged, list) and c in unlogged),
        )


def _number(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def count_failures(
    server: str,
    wording: FailureWording,
    log_text: str,
    started_at: float | None,
    *,
    tz: tzinfo | None = None,
) -> FailureCounts:
    """Count the failure lines in a `server`'s log, in its `wording`.

    `started_at`: unix time the server was started. Lines stamped before it (by more than
    the stamp's resolution) belong to an earlier run writing to the same file and are left
    out, so every figure is "since this start". None: count every line, and no
    `first_failure_s` (the first line is still given).
    `tz`: the zone the server wrote its local time stamps in (BIND, NSD; Knot writes its
    offset); None: this host's local zone, since the harness runs the servers here.
    """
    counts: dict[FailureCategory, int] = dict.fromkeys(CATEGORIES, 0)
    failing = 0
    first_s: float | None = None
    first_line: str | None = None
    recounted = 0  # attempts with a line of their own that the next count line includes
    for line in log_text.splitlines():
        category = classify(wording, line)
        if category is None:
            continue
        stamp = None
        if started_at is not None:
            stamp = wording.timestamp(line, tz, started_at)
            if stamp is not None and stamp <= started_at - wording.resolution_s:
                continue  # an earlier run's line
        failing += 1
        if category == "follow-up":
            continue
        reported = reported_count(wording, line)
        if reported is None:
            counts[category] += 1
            recounted += any(pattern.search(line) for pattern in wording.recounted)
        else:
            counts[category] += max(0, reported - recounted)
            recounted = 0
        if first_line is None:
            first_line = line
            if started_at is not None and stamp is not None:
                first_s = max(0.0, stamp - started_at)
    unlogged = tuple(c for c in CATEGORIES if c in wording.unlogged)
    return FailureCounts(
        server,
        **{c: None if c in unlogged and not n else n for c, n in counts.items()},
        failing_lines=failing,
        first_failure_s=first_s,
        first_failure_line=first_line,
        resolution_s=wording.resolution_s,
        unlogged=unlogged,
    )
