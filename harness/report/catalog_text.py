"""The catalog part of the terminal summary: per case, catalog phase and consumer, the
members served and their provisioning latency, the consumer's CPU and memory peak, and
what a restart transferred again (results/catalog.py)."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape

from harness.core import fmt
from harness.core.ui import folding_table, print_table
from harness.report.data import ReportData

NOT_REACHED = "not reached"


def _latency(seconds: float | None, served: int, members: int) -> str:
    """A percentile, or why there is none: its rank fell on a member never served."""
    return NOT_REACHED if seconds is None and members > served else fmt.duration(seconds)


def print_catalog(data: ReportData, console: Console, short: dict[str, str]) -> None:
    if not data.catalog:
        return
    table = folding_table(
        "Catalog zones: provisioning latency per member, from the primary serving the "
        "catalog version (provision and restart: from the consumer's start) to the consumer "
        "serving the member's SOA at its serial (removal: no longer answering for it; coo: "
        "from the new catalog served to the consumer's log of the move); re-transfers: after "
        "a restart, or of the moved members after a change of ownership; "
        "nearest rank over every (consumer, member), the never served ranking last",
        ["case", "phase", "consumer", "served", "p50", "p95", "last", "consumer CPU",
         "consumer peak", "re-transfers"],
        left=3,
    )  # fmt: skip
    for row in data.catalog:
        members, served = row["members"], row["served"]
        peak = row["consumer_peak_bytes"]
        again = row["transfers_after_restart"]
        table.add_row(
            escape(short.get(row["case"], row["case"])),
            escape(row["phase"]),
            escape(row["consumer"] or "all"),
            f"{served:,} of {members:,}",
            _latency(row["p50_s"], served, members),
            _latency(row["p95_s"], served, members),
            _latency(row["last_s"], served, members),
            fmt.duration(row["consumer_cpu_s"]) if row["consumer_cpu_s"] is not None else "-",
            fmt.size(peak) if peak is not None else "-",
            str(again) if again is not None else "-",
        )
    print_table(console, table)
