"""The plain-text summary `xfrbench report` prints: run facts, cases, resources."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from rich.console import Console
from rich.markup import escape

from harness.core import fmt
from harness.core.ui import folding_table, print_table
from harness.report.case_rows import CLOCK_MARK, clock_note
from harness.report.catalog_text import print_catalog
from harness.report.data import ReportData
from harness.report.stream_text import print_stream
from harness.report.text_answers import (
    print_bound,
    print_cold_start,
    print_link,
    print_phases,
    print_transports,
)
from harness.report.text_faults import print_faults
from harness.results.fleet import NOT_CONVERGED, refused_text
from harness.results.folder import TRANSFERS
from harness.results.resources import MEMORY_NOTE, SOCKETS_NOTE

CASE_COLUMNS = [
    "case",
    "method",
    "n",
    "ok",
    "failed",
    "unsup",
    "median",
    "p10",
    "p90",
    "throughput",
    "bound",
    "note",
]
# Shown before the note where a record holds its secondary's failure counts (since 2026-11).
LOGGED_COLUMN = "failures logged"

# What the CPU figure covers, in one line (report.html says it in full, as the README does).
CPU_WINDOW_SHORT = (
    "CPU per transfer: each server's cgroup from just before the new zone version is put "
    "on the primary and reloaded to the secondary's first answer with the new serial, "
    "before verification (the primary's includes loading it); cold start: from the "
    "secondary's start until it serves every zone."
)


def _method(method: str) -> str:
    return method.replace("server-to-server", "server").replace("client-pull-", "pull ")


def print_fleet(data: ReportData, console: Console, short: dict[str, str]) -> None:
    fleet = data.fleet
    if fleet is None:
        return
    table = folding_table(
        "Fleet: time from each repeat's first NOTIFY (to any secondary) until its "
        "secondaries serve it; p95 by nearest rank over the whole fleet; medians over repeats, "
        "a repeat that did not converge counting as never",
        ["case", "secondaries", "served, per repeat", "p95", "last", "last sites",
         "refused (primary's log)", "reconnected", "possibly waited"],
    )  # fmt: skip
    for item in fleet.cases:
        lasts = sorted({r.last_site for r in item.repeats if r.last_site})
        table.add_row(
            escape(short.get(item.case, item.case)),
            str(item.secondaries),
            ", ".join(r.served_of.removesuffix(" served") for r in item.repeats),
            _converged(item.median_p95_s),
            _converged(item.median_last_s),
            escape(", ".join(lasts) or "-"),
            NOT_LOGGED if item.refusals is None else str(item.refusals),
            "-" if item.reconnected is None else str(item.reconnected),
            str(item.possibly_waited),
        )
    print_table(console, table)
    console.print(escape(FLEET_WAITS), soft_wrap=True)
    for item in fleet.cases:
        for repeat in item.not_converged:
            console.print(
                escape(
                    f"{short.get(item.case, item.case)} repeat {repeat.repeat}: "
                    f"{repeat.served_of}, not converged; missing: "
                    + "; ".join(repeat.why_missing())
                    + (f"; {refused_text(repeat.refusals)}" if repeat.refusals else "")
                ),
                soft_wrap=True,
            )
    sites = folding_table(
        "Fleet per site",
        ["case", "site", "ok", "median", "throughput", "bound", "loss checks"],
        left=2,
    )
    for item in fleet.cases:
        for site in item.sites:
            checks = ", ".join(f"{v} x{n}" for v, n in site.loss_checks.items()) or "-"
            sites.add_row(
                escape(short.get(item.case, item.case)),
                escape(site.site),
                f"{site.ok} of {site.transfers}",
                fmt.duration(site.median_s),
                fmt.rate(site.throughput_bps),
                fmt.rate(site.bound_bps),
                escape(checks),
            )
    print_table(console, sites)
    for growth in fleet.growth:
        table = folding_table(
            f"The primary as the fleet grows: {growth.group} (per repeat, medians)",
            ["secondaries", "CPU", "peak connections", "bytes sent", "median last"],
            left=0,
        )
        for point in growth.points:
            table.add_row(
                str(point.secondaries),
                fmt.duration(point.cpu_s),
                fmt.count(point.peak_connections),
                fmt.size(point.tx_bytes),
                fmt.duration(point.median_last_s),
            )
        print_table(console, table)


NOT_LOGGED = "not logged"
FLEET_WAITS = (
    "Fleet slots: refused = transfers the primary refused for want of a slot, counted in "
    "its log in its own words (not logged: its server's wording is not known); reconnected "
    "= secondaries that opened more than one connection (by source port); possibly waited "
    "= connected later after their SOA query than 3 round trips + 50 ms explain, a guess "
    "(a busy CPU looks the same)."
)


def _converged(seconds: float | None) -> str:
    """A fleet time, or why there is none: the fleet did not get there."""
    return NOT_CONVERGED if seconds is None else fmt.duration(seconds)


Printer = Callable[[ReportData, Console, dict[str, str]], None]
# One printer per first-screen section of report/screen.py, under its name there.
PRINTERS: dict[str, Printer] = {
    "transports": print_transports,
    "phases": print_phases,
    "link": print_link,
    "bound": print_bound,
    "fleet": print_fleet,
    "faults": lambda data, console, _short: print_faults(data, console),
    "stream": print_stream,
    "cold-start": print_cold_start,
    "catalog": print_catalog,
}


def print_failures(data: ReportData, console: Console, report: Path | None = None) -> None:
    """The first lines: failed of counted, one line per distinct reason (numbered as the
    cases' notes refer to them), the unsupported cells, and where the details are."""
    failures = data.failures
    style = "bold red" if failures.failed or failures.nothing_measured else "green"
    console.print(f"[{style}]{escape(failures.headline)}[/]", soft_wrap=True)
    for line in failures.reason_lines():
        console.print(f"  {escape(line)}", soft_wrap=True)
    for group in failures.unsupported_groups:
        cases = len(group.cases)
        console.print(
            escape(
                f"  unsupported: {group.text} ({cases} case{'s' if cases > 1 else ''}, "
                f"first {group.first_case})"
            ),
            soft_wrap=True,
        )
    if failures.failed:
        where = f"{report}#failures" if report else f"xfrbench report {data.run.run_dir}"
        console.print(
            escape(f"  details: {where}; every attempt: {data.run.run_dir}/{TRANSFERS}"),
            soft_wrap=True,
        )


def print_summary(data: ReportData, console: Console, report: Path | None = None) -> None:
    run = data.run
    servers = ", ".join(f"{s.kind} {s.version or '?'}" for s in run.servers) or "-"
    commit = (run.git_commit or "-")[:12] + (" (dirty)" if run.git_dirty else "")
    shared, short = data.labels.shared, data.labels.short
    width = max((len(label) for label in short.values()), default=0)
    print_failures(data, console, report)
    lines = [
        f"run {run.run_id}: scenario {run.scenario or '-'}, "
        f"spec hash {(run.spec_hash or '-')[:16]}",
        f"host {run.hostname or '-'}, kernel {run.kernel or '-'}, harness commit {commit}",
        f"servers {servers}; link backend {run.link_backend or '-'}"
        + (f"; link {data.uniform_link}" if data.uniform_link else ""),
        f"interrupted: {'no' if run.state == 'complete' else 'yes (' + run.state + ')'}",
    ]
    if run.zone:
        lines.insert(3, f"zone {run.zone}")
    if run.cpu_placement or run.cpu_split:
        placement = run.cpu_placement or "placement not recorded"
        lines.append(f"CPU: {run.cpu_split or '-'}; {placement}")
    if shared:
        lines.append(f"every case is {shared}; the tables show what * stands for")
    for line in lines:
        console.print(escape(line), soft_wrap=True)
    for warning in data.warnings:
        console.print(f"[yellow]warning:[/] {escape(warning)}", soft_wrap=True)
    screen = data.screen
    for name in screen.shown:  # this run's answer first (report/screen.py)
        PRINTERS[name](data, console, short)
    if screen.left_out_line:
        console.print(escape(screen.left_out_line), soft_wrap=True)

    logged = data.failures_logged
    table = folding_table(
        "cases (ok = verified transfers that count)",
        [*CASE_COLUMNS[:-1], *([LOGGED_COLUMN] if logged else []), CASE_COLUMNS[-1]],
        left=2,
        names=width,
        trailing=1,
    )
    for row in data.cases:
        notes = []
        if row.unstable_why:
            notes.append(f"unstable: {row.unstable_why}")
        if row.whole_zone_note:
            notes.append(row.whole_zone_note)
        if row.failed:
            notes.append("failed: " + ", ".join(data.failures.case_notes(row.label)))
        if row.unsupported_reasons:
            reason = row.unsupported_reasons[0][0].removeprefix("unsupported: ")
            notes.append(f"unsupported: {reason}")
        mark = f" {CLOCK_MARK}" if row.clock_flagged else ""
        if row.clock_flagged:
            notes.append(f"clock error > 10 %: {row.clock_flagged} of {row.ok}")
        table.add_row(
            escape(short.get(row.label, row.label)),
            _method(row.method),
            str(row.n),
            str(row.ok),
            str(row.failed),
            str(row.unsupported),
            fmt.duration(row.median_s) + mark,
            fmt.duration(row.p10_s),
            fmt.duration(row.p90_s),
            fmt.rate(row.throughput_bps),
            fmt.rate(row.model_bound_bps),
            *([escape(row.logged_failures_text)] if logged else []),
            escape("; ".join(notes)),
        )
    print_table(console, table)
    if any(row.logged_failures for row in data.cases):
        if not logged:
            console.print("failures logged by the secondaries: none", soft_wrap=True)
        if data.unlogged_failures_note:
            console.print(escape(data.unlogged_failures_note), soft_wrap=True)
    if note := clock_note(data.cases):
        console.print(escape(note), soft_wrap=True)

    if data.resources:
        resources = folding_table(
            f"resources per case (from {data.resources_source}; per transfer: medians)",
            [
                "case",
                "role",
                "CPU/transfer",
                "anon peak/transfer",
                "conns/transfer",
                "TIME_WAIT left/transfer",
                "harness conns",
                "anon peak in case",
                "charged peak",
                "namespace TIME_WAIT peak",
            ],
            left=2,
            names=width,
        )
        for item in data.resources:
            for role, figures in item.roles.items():
                resources.add_row(
                    escape(short.get(item.case, item.case)),
                    role,
                    fmt.duration(figures.cpu_total_s_per_transfer),
                    fmt.size(figures.memory_peak_per_transfer_bytes),
                    fmt.count(figures.connections_per_transfer),
                    fmt.count(figures.time_wait_left_per_transfer),
                    fmt.count(figures.harness_connections_per_transfer),
                    fmt.size(figures.anon_peak_bytes),
                    fmt.size(figures.charged_peak_bytes),
                    fmt.count(figures.namespace_time_wait_peak),
                )
        print_table(console, resources)
        console.print(escape(CPU_WINDOW_SHORT), soft_wrap=True)
        console.print(escape(MEMORY_NOTE), soft_wrap=True)
        console.print(escape(SOCKETS_NOTE), soft_wrap=True)
    else:
        console.print(f"resources: {escape(data.resources_note or 'none')}", soft_wrap=True)
    if report is not None:
        console.print(f"report: {escape(str(report))}", soft_wrap=True)
