"""The report's cases table: one row per case and method, its counted durations, rates,
bounds, failures by reason, and what its servers logged (pure, over transfer records).

Per-case duration figures come from ``harness.results.summary`` (the same code that writes
summary.json), so an interrupted run without summary.json reports the same figures.
"""

from __future__ import annotations

import statistics
from collections import Counter
from dataclasses import dataclass, field

from harness.core import fmt
from harness.report.logged_failures import LoggedFailures, logged_failures, logged_failures_text
from harness.report.resources_rows import as_float
from harness.results.model import TransferRecord
from harness.results.summary import (
    MAX_STABLE_CV,
    MIN_STABLE_N,
    case_label,
    summarize_case,
    transfer_rate,
)


@dataclass
class CaseRow:
    case: str
    method: str
    transport: str | None
    xfr: str | None
    primary: str | None
    secondary: str | None
    link: str | None  # the emulated link of the case, from cases/*/case.json
    n: int
    ok: int
    failed: int
    unsupported: int
    failure_reasons: list[tuple[str, int]]  # (error, how many), most frequent first
    unsupported_reasons: list[tuple[str, int]]
    durations_s: list[float]  # the transfers that count, in the order they ran
    median_s: float | None
    p10_s: float | None
    p90_s: float | None
    cv: float | None
    throughputs_bps: list[float]
    throughput_bps: float | None  # median
    bound_bps: dict[str, float]  # TransferRecord.bound keys, median over the case's records
    unstable: bool
    unstable_why: str | None
    # The secondaries' failed attempts by category, counted in their own logs' words
    logged_failures: list[LoggedFailures] = field(default_factory=list)
    # An IXFR case's counted transfers that came as whole zones by a fallback a server
    # logged (extra.xfr_seen), and the fallbacks' kinds: (kind, how many), most first
    whole_zones: int = 0
    whole_zone_kinds: list[tuple[str, int]] = field(default_factory=list)
    # Counted transfers timed across two hosts' clocks (run --inventory) whose clocks' error
    # exceeds 10 % of the duration (extra.clock.clock_error_over_10pct), and the largest
    clock_flagged: int = 0
    clock_error_max_s: float | None = None

    @property
    def whole_zone_note(self) -> str | None:
        """'came as AXFR: 5 of 5 (delta too large)', when any IXFR did."""
        if not self.whole_zones:
            return None
        kinds = ", ".join(
            kind if n == self.whole_zones else f"{kind} {n}" for kind, n in self.whole_zone_kinds
        )
        return f"came as AXFR: {self.whole_zones} of {self.ok}" + (f" ({kinds})" if kinds else "")

    @property
    def label(self) -> str:
        return case_label(self.case, self.method)

    @property
    def logged_failures_text(self) -> str:
        return logged_failures_text(self.logged_failures)

    @property
    def model_bound_bps(self) -> float | None:
        if "model" in self.bound_bps:
            return self.bound_bps["model"]
        return min(self.bound_bps.values()) if self.bound_bps else None

    @property
    def limited_by(self) -> str | None:
        """Which bound the model figure is (rate, receive_window, ...), when it says."""
        model = self.model_bound_bps
        if model is None:
            return None
        for key, value in self.bound_bps.items():
            if key != "model" and value == model:
                return key
        return None


def _reasons(records: list[TransferRecord]) -> list[tuple[str, int]]:
    counts = Counter(
        (r.error or ("not verified" if r.ok and not r.verified else "no reason recorded")).strip()
        for r in records
    )
    return sorted(counts.items(), key=lambda item: (-item[1], item[0]))


def _bounds(records: list[TransferRecord]) -> dict[str, float]:
    values: dict[str, list[float]] = {}
    for record in records:
        for key, value in record.bound.items():
            if isinstance(value, int | float) and not isinstance(value, bool) and value > 0:
                values.setdefault(key, []).append(float(value))
    return {key: statistics.median(items) for key, items in values.items()}


def whole_zone_answers(counted: list[TransferRecord]) -> tuple[int, list[tuple[str, int]]]:
    """How many of an IXFR case's counted transfers a server logged as a whole zone sent in
    answer (a logged fallback: the harness counts it, the row must say it), and the kinds of
    fallback, most frequent first."""
    kinds: Counter[str] = Counter()
    for record in counted:
        seen = record.extra.get("xfr_seen") or {}
        if record.xfr == "ixfr" and seen.get("xfr") == "axfr":
            kinds[str(seen.get("fallback_kind") or "no reason logged")] += 1
    return sum(kinds.values()), kinds.most_common()


CLOCK_MARK = "‡"  # beside a median some of whose transfers carry a clock flag


def clock_note(rows: list[CaseRow]) -> str | None:
    """The line under the cases table when a case has transfers timed across two hosts'
    clocks with an error over 10 % of their duration (None when none has)."""
    flagged = [row for row in rows if row.clock_flagged]
    if not flagged:
        return None
    count = sum(row.clock_flagged for row in flagged)
    largest = max(row.clock_error_max_s or 0.0 for row in flagged)
    return (
        f"{CLOCK_MARK} {count} transfer{'s' if count != 1 else ''} of the marked cases were "
        "timed across two hosts' clocks whose measured error (up to "
        f"{fmt.duration(largest)}) exceeds 10 % of the duration: read each with its "
        "duration_error_s (transfers.jsonl extra.clock; the clocks in run.json remote.clocks)."
    )


def clock_flags(records: list[TransferRecord]) -> tuple[int, float | None]:
    """(how many of these counted records carry a clock error over 10 % of their duration,
    the largest such clock error)."""
    errors = []
    for record in records:
        clock = record.extra.get("clock")
        if record.counts and isinstance(clock, dict) and clock.get("clock_error_over_10pct"):
            errors.append(as_float(clock.get("clock_error_s")) or 0.0)
    return len(errors), max(errors, default=None)


def case_rows(records: list[TransferRecord], links: dict[str, str]) -> list[CaseRow]:
    """One row per (case, method), in the order they first ran."""
    groups: dict[tuple[str, str], list[TransferRecord]] = {}
    for record in records:
        groups.setdefault((record.case, record.method), []).append(record)
    rows = []
    for (case, method), items in groups.items():
        summary = summarize_case(case, items)
        counted = [r for r in items if r.counts]
        durations = [float(r.duration_s) for r in counted if r.duration_s is not None]
        rates = [rate for r in counted if (rate := transfer_rate(r)) is not None]
        why = None  # a case with no result is not "unstable": the failures say why
        if summary.unstable and durations:
            if len(durations) < MIN_STABLE_N:
                counted_text = (
                    "1 verified transfer"
                    if len(durations) == 1
                    else (f"{len(durations)} verified transfers")
                )
                why = f"only {counted_text} (fewer than {MIN_STABLE_N})"
            elif summary.cv is not None:
                why = f"CV {summary.cv:.0%} > {MAX_STABLE_CV:.0%}"
        failed = [r for r in items if not r.counts and not r.unsupported and not r.unchecked]
        whole = whole_zone_answers(counted)
        clock_flagged, clock_error_max = clock_flags(items)
        rows.append(
            CaseRow(
                case=case,
                method=method,
                transport=summary.transport,
                xfr=summary.xfr,
                primary=summary.primary_kind,
                secondary=summary.secondary_kind,
                link=links.get(case),
                n=summary.n,
                ok=summary.ok,
                failed=summary.failed,
                unsupported=summary.unsupported,
                failure_reasons=_reasons(failed),
                unsupported_reasons=_reasons([r for r in items if r.unsupported]),
                durations_s=durations,
                median_s=summary.median_s,
                p10_s=summary.p10_s,
                p90_s=summary.p90_s,
                cv=summary.cv,
                throughputs_bps=rates,
                throughput_bps=summary.throughput_bps,
                bound_bps=_bounds(items),
                unstable=summary.unstable,
                unstable_why=why,
                logged_failures=logged_failures(items),
                whole_zones=whole[0],
                whole_zone_kinds=whole[1],
                clock_flagged=clock_flagged,
                clock_error_max_s=clock_error_max,
            )
        )
    return rows
