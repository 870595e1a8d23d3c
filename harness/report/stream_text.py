"""The change-stream part of the terminal summary: per case and site the publication
latency and the SLA share, per secondary its transfers and how far behind it fell, and
every AXFR that replaced an IXFR with the reason in its server's words."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape

from harness.core import fmt
from harness.core.ui import folding_table, print_table
from harness.report.data import ReportData
from harness.results.stream import LatencyRow

NOT_REACHED = "not reached"


def _reached(seconds: float | None, pairs: int) -> str:
    """A percentile over pairs, or why there is none: its rank fell on a pair never served."""
    return NOT_REACHED if seconds is None and pairs else fmt.duration(seconds)


def _bounds(earliest: float | None, latest: float | None, serials: int) -> str:
    if latest is None:
        return _reached(None, serials)
    if earliest is None or fmt.duration(earliest) == fmt.duration(latest):
        return fmt.duration(latest)
    return f"{fmt.duration(earliest)} to {fmt.duration(latest)}"


def sla_cell(row: LatencyRow) -> str:
    if row.sla_share is None:
        return "-"
    if row.sla_low is None or row.sla_high is None:
        return f"{row.sla_share:.1%}"
    return f"{row.sla_share:.1%} [{row.sla_low:.1%}, {row.sla_high:.1%}]"


def print_stream(data: ReportData, console: Console, short: dict[str, str]) -> None:
    stream = data.stream
    if stream is None:
        return
    for item in stream.cases:  # the answer first: the SLA share, then how it came about
        if item.sla:
            label = escape(short.get(item.case, item.case))
            console.print(f"Change stream {label}: [bold]{escape(item.sla)}[/]", soft_wrap=True)
    table = folding_table(
        "Change stream: publication latency, from the primary serving a serial to a "
        "secondary serving it (nearest rank over every pair, the never served ranking last: "
        "not reached when the rank falls on one; load time: 95 % of the secondaries, "
        "RSSAC002, earliest to latest by the latencies' error bars; within SLA: share of "
        "serials with its 95 % Wilson interval)",
        ["case", "site", "serials", "never served", "p50", "p95", "max", "p95 load time",
         "within SLA"],
        left=2,
    )  # fmt: skip
    for item in stream.cases:
        for row in item.latency:
            table.add_row(
                escape(short.get(item.case, item.case)),
                escape(row.site or "fleet"),
                str(row.serials),
                f"{row.never_served} of {row.pairs}",
                _reached(row.p50_s, row.pairs),
                _reached(row.p95_s, row.pairs),
                _reached(row.max_s, row.pairs),
                _bounds(row.load_p95_earliest_s, row.load_p95_s, row.serials),
                sla_cell(row),
            )
    print_table(console, table)
    secondaries = folding_table(
        "Change stream per secondary",
        ["case", "secondary", "served", "transfers", "IXFR", "AXFR", "most behind"],
        left=2,
    )
    for item in stream.cases:
        for facts in item.secondaries:
            secondaries.add_row(
                escape(short.get(item.case, item.case)),
                escape(facts.host),
                f"{facts.served} of {facts.serials}",
                str(facts.transfers),
                str(facts.ixfr),
                str(facts.axfr),
                f"{facts.max_behind_serials} serial{'s' if facts.max_behind_serials != 1 else ''}, "
                f"{fmt.duration(facts.max_behind_s)}",
            )
    print_table(console, secondaries)
    for item in stream.cases:
        label = escape(short.get(item.case, item.case))
        if item.late_publishes:
            console.print(
                f"{label}: {item.late_publishes} of {item.serials} serials published late "
                f"(more than 50 ms after their slot; at most {fmt.duration(item.max_late_s)})",
                soft_wrap=True,
            )
        for facts, fallback in item.fallbacks():
            console.print(
                f"{label}: {escape(facts.host)} took serial {fallback['serial']} by AXFR: "
                f"{escape(str(fallback.get('fallback_kind') or '-'))} "
                f"({escape(str(fallback.get('fallback_by') or '?'))}: "
                f'"{escape(str(fallback["fallback"]))}")',
                soft_wrap=True,
            )
