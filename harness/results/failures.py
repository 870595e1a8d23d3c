"""Why transfers did not count, grouped for a first screen (pure).

A run's attempts that do not count are grouped by failure kind (``model.FAILURES``, in that
order) and then by reason: the error text with what differs from one attempt to the next
(hashes, serials, sizes, seconds) taken out, so that 24 lines of "RRSUM differs: expected 2
records (sum 1b9e…), the copy has 3 (sum 191b…)" read as one reason with a count and the
first case it hit. Unsupported cells are declared by the servers' versions, not failures:
they are grouped the same way but apart, and never make a run fail by themselves. A run in
which no transfer counts measured nothing, whatever the reasons (every cell unsupported,
every attempt failed, no attempt at all): its headline says so, with the reasons, and the
run fails (cli.py run_exit_status).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from harness.results.model import FAILURE_WORDS, FAILURES, Failure, TransferRecord
from harness.results.summary import case_label

# What varies between attempts that failed for one reason: hex digests (whole or cut short
# with an ellipsis), then any number (serials, counts, seconds, addresses' parts).
_HEX = re.compile(r"\b[0-9a-f]{8,}…?", re.IGNORECASE)
_NUMBER = re.compile(r"\d+(?:\.\d+)?")


def reason_key(text: str) -> str:
    """The reason with its varying parts replaced: "RRSUM differs: expected # records (sum
    …), the copy has # (sum …)"."""
    return _NUMBER.sub("#", _HEX.sub("…", text.strip()))


def reason_text(record: TransferRecord) -> str:
    """What the record says went wrong, in its own words."""
    if record.error:
        return record.error.strip().removeprefix("unsupported: ")
    return "not verified" if record.ok and not record.verified else "no reason recorded"


@dataclass
class ReasonGroup:
    """Attempts that failed for one reason."""

    kind: Failure
    key: str  # reason_key of the text
    text: str  # the first attempt's reason as it was written
    count: int
    first_case: str  # the first attempt's case (with its method when a client pull)
    first_repeat: int
    first_host: str
    per_case: dict[str, int] = field(default_factory=dict)  # case -> attempts, run order

    @property
    def cases(self) -> list[str]:
        return list(self.per_case)

    @property
    def words(self) -> str:
        return FAILURE_WORDS[self.kind]

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "words": self.words,
            "reason": self.text,
            "count": self.count,
            "first_case": self.first_case,
            "first_repeat": self.first_repeat,
            "first_host": self.first_host,
            "cases": self.cases,
        }


def _groups(records: list[TransferRecord]) -> list[ReasonGroup]:
    groups: dict[tuple[str, str], ReasonGroup] = {}
    for record in records:
        kind: Failure = record.failure or "harness"
        text = reason_text(record)
        key = reason_key(text)
        label = case_label(record.case, record.method)
        group = groups.get((kind, key))
        if group is None:
            group = groups[(kind, key)] = ReasonGroup(
                kind, key, text, 0, label, record.repeat, record.host
            )
        group.count += 1
        group.per_case[label] = group.per_case.get(label, 0) + 1
    order = {kind: index for index, kind in enumerate(FAILURES)}
    return sorted(groups.values(), key=lambda g: (order[g.kind], -g.count))


@dataclass
class FailureSummary:
    """failed of counted: the attempts meant to count (every one but the unsupported) and
    those that did not (not ok, or not verified), with their reasons."""

    attempts: int
    counted: int  # attempts that were meant to count: all but the unsupported
    failed: int
    unsupported: int
    groups: list[ReasonGroup]
    unsupported_groups: list[ReasonGroup]
    cases_without_result: list[str]  # cases (not unsupported) with no transfer that counts
    unchecked: int = 0  # served, not checked (a stream's serials before its last)

    @property
    def verified(self) -> int:
        return self.counted - self.failed - self.unchecked

    @property
    def nothing_measured(self) -> bool:
        """No transfer counts: the run answers nothing, whatever else it recorded."""
        return self.verified == 0

    def nothing_reasons(self) -> str:
        """Why no transfer counts, in a few words: "2 unsupported by the servers' versions,
        3 failed or not verified" (the reasons' lines say what each was)."""
        if not self.attempts:
            return "no transfer was recorded"
        parts = []
        if self.unsupported:
            parts.append(f"{self.unsupported} unsupported by the servers' versions")
        if self.failed:
            parts.append(f"{self.failed} failed or not verified")
        first = next(iter(self.groups or self.unsupported_groups), None)
        why = f"; the first: {first.text}" if first else ""
        return f"of {self.attempts} attempts, " + ", ".join(parts) + why

    @property
    def headline(self) -> str:
        """The first line of a run's summary."""
        declared = ""
        if self.unsupported:
            declared = (
                f"; {self.unsupported} unsupported by the servers' versions (declared, "
                "not failures)"
            )
        if self.nothing_measured:
            return f"FAILED: nothing was measured: no transfer counts ({self.nothing_reasons()})"
        if self.unchecked:
            declared = (
                f"; {self.unchecked} served but not checked (a stream's serials before its "
                "last: only each secondary's final copy is verified)" + declared
            )
        if not self.failed:
            return (
                f"all {self.verified} checked transfers verified{declared}"
                if (self.unchecked)
                else f"all {self.counted} transfers verified{declared}"
            )
        return (
            f"FAILED: {self.failed} of {self.counted} transfers failed or were not verified "
            f"(they count in no figure){declared}"
        )

    def reason_lines(self, limit: int = 8) -> list[str]:
        """One line per distinct reason, numbered as the case notes refer to it: its count,
        kind, words and the first case."""
        lines = []
        for number, group in enumerate(self.groups[:limit], 1):
            more = len(group.cases) - 1
            where = f"first {group.first_case} repeat {group.first_repeat}"
            if group.first_host not in ("secondary", ""):
                where += f" on {group.first_host}"
            if more:
                where += f"; {more} more case{'s' if more > 1 else ''}"
            lines.append(f"[{number}] {group.count} x {group.words}: {group.text} ({where})")
        rest = self.groups[limit:]
        if rest:
            lines.append(
                f"{sum(g.count for g in rest)} more in {len(rest)} other reasons (see the report)"
            )
        return lines

    def case_notes(self, case: str) -> list[str]:
        """A case's failures by reason, pointing at the numbered reasons: "3 timed out [1]"."""
        return [
            f"{group.per_case[case]} {group.words} [{number}]"
            for number, group in enumerate(self.groups, 1)
            if case in group.per_case
        ]

    def number(self, record: TransferRecord) -> int | None:
        """The number of the reason a failed record is grouped under."""
        key = (record.failure, reason_key(reason_text(record)))
        return next((n for n, g in enumerate(self.groups, 1) if (g.kind, g.key) == key), None)

    def to_json(self) -> dict[str, Any]:
        return {
            "attempts": self.attempts,
            "counted": self.counted,
            "failed": self.failed,
            "verified": self.verified,
            "unsupported": self.unsupported,
            "nothing_measured": self.nothing_measured,
            "unchecked": self.unchecked,
            "reasons": [g.to_json() for g in self.groups],
            "unsupported_reasons": [g.to_json() for g in self.unsupported_groups],
            "cases_without_result": self.cases_without_result,
        }


def summarize_failures(records: Iterable[TransferRecord]) -> FailureSummary:
    items = list(records)
    failed = [r for r in items if not r.counts and not r.unsupported and not r.unchecked]
    unsupported = [r for r in items if r.unsupported]
    by_case: dict[str, list[TransferRecord]] = {}
    for record in items:
        by_case.setdefault(case_label(record.case, record.method), []).append(record)
    without = [
        case
        for case, mine in by_case.items()
        if not any(r.counts for r in mine) and not all(r.unsupported for r in mine)
    ]
    return FailureSummary(
        attempts=len(items),
        counted=len(items) - len(unsupported),
        failed=len(failed),
        unsupported=len(unsupported),
        unchecked=sum(1 for r in items if r.unchecked),
        groups=_groups(failed),
        unsupported_groups=_groups(unsupported),
        cases_without_result=without,
    )


def no_result(records: Iterable[TransferRecord]) -> str | None:
    """Why a case (or zone, or site) has no transfer that counts, in a few words for a
    table's cell: "unsupported: ..." or "no verified transfer: 3 timed out"; None when one
    counts."""
    items = list(records)
    if any(r.counts for r in items):
        return None
    if not items:
        return "no transfer recorded"
    if all(r.unsupported for r in items):
        return "unsupported: " + reason_text(items[0])
    kinds: dict[str, int] = {}
    for record in items:
        if not record.unsupported:
            words = FAILURE_WORDS[record.failure or "harness"]
            kinds[words] = kinds.get(words, 0) + 1
    return "no verified transfer: " + ", ".join(f"{n} {words}" for words, n in kinds.items())
