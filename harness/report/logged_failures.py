"""What the secondaries logged of their failed attempts, per case, in a cell of text.

Every server-to-server record carries its secondary's failure counts by category
(``server_logged.secondary_failures``, ``harness.servers.failures.FailureCounts``), counted
in that server's own wording. A case's cell sums them per server kind: "refused 5, timed
out ≥2 (BIND)", or "none". A category the server does not log is never 0: it is left out of
the cell and said once under the table ("not logged, so never counted: retries (BIND)"); a
count where it does not log every one is a floor ("≥3"); records of before these rules (0
for every category) read as they were written.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from harness.results.model import TransferRecord
from harness.servers import DIALECTS
from harness.servers.failures import CATEGORIES, FailureCategory, FailureCounts

CATEGORY_WORDS: dict[FailureCategory, str] = {
    "address_not_available": "address not available",
    "refused": "refused",
    "timed_out": "timed out",
    "unreachable": "unreachable",
    "retry": "retries",
    "other_failure": "other",
}


@dataclass(frozen=True)
class LoggedFailures:
    """One server kind's failure counts over a case's records: None where it logs none."""

    server: str
    counts: dict[FailureCategory, int | None]
    floors: frozenset[FailureCategory]  # counts of categories it does not log every time
    records: int  # records that carried counts

    @property
    def name(self) -> str:
        titles: dict[str, str] = {kind: dialect.title for kind, dialect in DIALECTS.items()}
        return titles.get(self.server, self.server)  # a kind no dialect has now: as written

    @property
    def found(self) -> bool:
        """Whether any failure was logged."""
        return any(self.counts.values())

    @property
    def text(self) -> str:
        found = [
            f"{CATEGORY_WORDS[c]} {'≥' if c in self.floors else ''}{n}"
            for c, n in self.counts.items()
            if n
        ]
        return f"{', '.join(found)} ({self.name})" if found else "none"

    @property
    def silent(self) -> list[str]:
        """The categories this server kind does not log."""
        return [CATEGORY_WORDS[c] for c, n in self.counts.items() if n is None]


def logged_failures(records: Iterable[TransferRecord]) -> list[LoggedFailures]:
    """Per secondary server kind, in the order they first appear: the sum of each category
    over the records that carry counts (None where none of them logged it)."""
    by_server: dict[str, list[FailureCounts]] = {}
    for record in records:
        counts = FailureCounts.from_json(record.server_logged.get("secondary_failures"))
        if counts is not None:
            by_server.setdefault(counts.server or record.secondary_kind, []).append(counts)
    out = []
    for server, items in by_server.items():
        sums: dict[FailureCategory, int | None] = {}
        floors = set()
        for category in CATEGORIES:
            values = [n for item in items if (n := item.count(category)) is not None]
            sums[category] = sum(values) if values else None
            if any(item.floor(category) for item in items):
                floors.add(category)
        out.append(LoggedFailures(server, sums, frozenset(floors), len(items)))
    return out


def logged_failures_text(items: list[LoggedFailures]) -> str:
    """The cell: each server kind's counts, "none" when none logged a failure, "-" where no
    record carried counts."""
    if not items:
        return "-"
    if not any(item.found for item in items):
        return "none"
    return " | ".join(item.text for item in items if item.found)


def unlogged_note(items: Iterable[LoggedFailures]) -> str | None:
    """The line under the table: what each server kind never logs, so never counts."""
    silent: dict[str, dict[str, None]] = {}
    for item in items:
        if item.silent:
            silent.setdefault(item.name, {}).update(dict.fromkeys(item.silent))
    if not silent:
        return None
    order = list(CATEGORY_WORDS.values())
    parts = [
        f"{', '.join(sorted(words, key=order.index))} ({name})" for name, words in silent.items()
    ]
    return "failures logged: counted in each server's own words; not logged, so never counted: " + (
        "; ".join(parts)
    )
