"""Per-case summary figures (pure): counts, duration statistics, throughput.

Only records that are ok AND verified (``TransferRecord.counts``) enter a figure. Percentiles
(p10, p90) are taken by nearest rank (``harness.core.stats.nearest_rank``): each is one
transfer's real duration, never a value between two. A case is
``unstable`` when fewer than 3 transfers count or when the coefficient of variation of its
durations exceeds 10 %: its median should not be compared with another run's.
"""

from __future__ import annotations

import csv
import io
import statistics
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from typing import Any

from harness.core.stats import drift_check, nearest_rank
from harness.core.terms import SERVER_TO_SERVER
from harness.results.groups import group_by
from harness.results.model import TransferRecord

MIN_STABLE_N = 3
MAX_STABLE_CV = 0.10


@dataclass
class CaseSummary:
    case: str
    n: int  # attempts
    ok: int  # ok and verified: the ones that count
    unsupported: int
    failed: int  # not ok, or ok but not verified (never counted)
    median_s: float | None
    p10_s: float | None  # nearest rank
    p90_s: float | None  # nearest rank
    mean_s: float | None
    stdev_s: float | None
    cv: float | None
    throughput_bps: float | None  # median of transfer_rate: connect to served
    records_per_s: float | None  # median of records / duration_s
    unstable: bool
    bound_bps: float | None = None  # the model bound the throughput is read against
    transport: str | None = None
    xfr: str | None = None
    primary_kind: str | None = None
    secondary_kind: str | None = None
    method: str | None = None
    # harness.core.stats.drift_check over the durations in the order they ran: "drift",
    # "possible drift", "no drift" or "too few", and the sentences that say why.
    drift: str | None = None
    drift_notes: list[str] = field(default_factory=list)
    unchecked: int = 0  # served, copy not checked (a stream's serials before its last)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def transfer_rate(record: TransferRecord) -> float | None:
    """The one throughput the harness prints, in bit/s: zone bytes x 8 over the transfer
    itself, from the secondary's connect (seen on the primary's wire) to served. The NOTIFY
    and SOA round trips before the connect are no part of what a window or a rate limits.
    Without a connect seen (a client pull, whose duration starts at its connect; a run
    without the wire watch) over the whole duration; None without bytes or time."""
    if not record.bytes or not record.duration_s:
        return None
    connect = record.phases.get("connect")
    if connect is not None and record.duration_s > connect:
        return record.bytes * 8 / (record.duration_s - connect)
    return record.bytes * 8 / record.duration_s


def _common(records: list[TransferRecord], name: str) -> str | None:
    values = {getattr(r, name) for r in records}
    return values.pop() if len(values) == 1 else None


@dataclass(frozen=True)
class Counted:
    """A group's records that count (ok and verified), their durations, and the medians
    every table prints beside its counts: duration, throughput (transfer_rate) and the
    model bound of the group's paths (over all its records, counted or not)."""

    records: list[TransferRecord]
    durations: list[float]
    median_s: float | None
    throughput_bps: float | None
    bound_bps: float | None


def counted(records: list[TransferRecord]) -> Counted:
    mine = [r for r in records if r.counts]
    durations = [float(r.duration_s) for r in mine if r.duration_s is not None]
    rates = [rate for r in mine if (rate := transfer_rate(r)) is not None]
    bounds = [r.bound["model"] for r in records if r.bound.get("model")]
    return Counted(
        mine,
        durations,
        statistics.median(durations) if durations else None,
        statistics.median(rates) if rates else None,
        statistics.median(bounds) if bounds else None,
    )


def summarize_case(case: str, records: list[TransferRecord]) -> CaseSummary:
    figures = counted(records)
    counted_ = figures.records
    unsupported = sum(1 for r in records if r.unsupported)
    unchecked = sum(1 for r in records if r.unchecked)
    durations = figures.durations
    rr_rates = [
        r.records / r.duration_s for r in counted_ if r.records is not None and r.duration_s
    ]
    mean = statistics.fmean(durations) if durations else None
    stdev = statistics.stdev(durations) if len(durations) >= 2 else None
    cv = stdev / mean if stdev is not None and mean else None
    unstable = len(durations) < MIN_STABLE_N or (cv is not None and cv > MAX_STABLE_CV)
    # Run order: transfers.jsonl is appended as transfers finish; a fleet's repeat is one
    # point (its slowest secondary), so secondaries of one repeat do not pose as a trend.
    by_repeat: dict[int, float] = {}
    for r in counted_:
        if r.duration_s is not None:
            by_repeat[r.repeat] = max(by_repeat.get(r.repeat, 0.0), float(r.duration_s))
    drift = drift_check(list(by_repeat.values())) if by_repeat else None
    return CaseSummary(
        case=case,
        n=len(records),
        ok=len(counted_),
        unsupported=unsupported,
        failed=len(records) - len(counted_) - unsupported - unchecked,
        unchecked=unchecked,
        median_s=figures.median_s,
        p10_s=nearest_rank(durations, 10) if durations else None,
        p90_s=nearest_rank(durations, 90) if durations else None,
        mean_s=mean,
        stdev_s=stdev,
        cv=cv,
        throughput_bps=figures.throughput_bps,
        records_per_s=statistics.median(rr_rates) if rr_rates else None,
        unstable=unstable,
        bound_bps=figures.bound_bps,
        transport=_common(records, "transport"),
        xfr=_common(records, "xfr"),
        primary_kind=_common(records, "primary_kind"),
        secondary_kind=_common(records, "secondary_kind"),
        method=_common(records, "method"),
        drift=drift.verdict if drift else None,
        drift_notes=list(drift.messages) if drift else [],
    )


def summarize(records: Iterable[TransferRecord]) -> list[CaseSummary]:
    """One summary per case and method (server-to-server, client pulls), in the order they
    first appear: a client pull and a server-to-server transfer are different figures."""
    by_case = group_by(records, lambda r: (r.case, r.method))
    return [summarize_case(case, items) for (case, _), items in by_case.items()]


CSV_FIELDS = [
    "case",
    "primary_kind",
    "secondary_kind",
    "transport",
    "xfr",
    "method",
    "n",
    "ok",
    "unsupported",
    "failed",
    "median_s",
    "p10_s",
    "p90_s",
    "mean_s",
    "stdev_s",
    "cv",
    "throughput_bps",
    "records_per_s",
    "bound_bps",
    "unstable",
    "drift",
]


def to_csv(summaries: Iterable[CaseSummary]) -> str:
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=CSV_FIELDS, extrasaction="ignore", lineterminator="\n")
    writer.writeheader()
    for summary in summaries:
        row = summary.to_dict()
        writer.writerow({k: "" if row[k] is None else row[k] for k in CSV_FIELDS})
    return out.getvalue()


def case_label(case: str, method: str) -> str:
    """The case name, plus the method when it is a client pull (a different figure)."""
    if method == SERVER_TO_SERVER:
        return case
    return f"{case} [{method.removeprefix('client-')}]"
