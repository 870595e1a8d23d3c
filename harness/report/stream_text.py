"""The change-stream part of the terminal summary: per case and site the publication
latency and the SLA share, per secondary its transfers and how far behind it fell, and
every AXFR that replaced an IXFR with the reason in its server's words."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape

from harness.core import fmt
from harness.core.ui import folding_table, print_table
from harness.report.data import ReportData


def print_stream(data: ReportData, console: Console, short: dict[str, str]) -> None:
    stream = data.stream
    if stream is None:
        return
    table = folding_table(
        "Change stream: publication latency, from the primary serving a serial to a "
        "secondary serving it (nearest rank; load time: 95 % of the secondaries, RSSAC002)",
        ["case", "site", "serials", "p50", "p95", "max", "p95 load time", "within SLA"],
        left=2,
    )
    for item in stream.cases:
        for row in item.latency:
            table.add_row(
                escape(short.get(item.case, item.case)),
                escape(row.site or "fleet"),
                str(row.serials),
                fmt.duration(row.p50_s),
                fmt.duration(row.p95_s),
                fmt.duration(row.max_s),
                fmt.duration(row.load_p95_s),
                "-" if row.sla_share is None else f"{row.sla_share:.1%}",
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
        if item.sla:
            console.print(f"{label}: {escape(item.sla)}", soft_wrap=True)
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
