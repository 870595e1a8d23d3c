"""The plain-text summary `xfrbench report` prints: run facts, cases, resources."""

from __future__ import annotations

from pathlib import Path

from rich.console import Console
from rich.markup import escape

from harness.core import fmt
from harness.core.ui import folding_table, print_table
from harness.report.case_rows import CLOCK_MARK, clock_note
from harness.report.catalog_text import print_catalog
from harness.report.data import ReportData
from harness.report.html import TRANSPORT_NAMES, index_text, transport_notes
from harness.report.phases import XOT_NOTE, XOT_WHY
from harness.report.stream_text import print_stream
from harness.report.text_faults import print_faults
from harness.report.throughput_bound import STEADY_BDPS
from harness.report.transport_costs import ALPHA, CONFIDENCE, TransportCost
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


def _short_missing(why: str | None) -> str:
    """A table cell's reason: "unsupported" (the first lines say by what), or the failures."""
    if why is None:
        return "-"
    return "unsupported" if why.startswith("unsupported") else why


def _transport_cell(cost: TransportCost) -> str:
    if cost.index is None:
        return f"- ({_short_missing(cost.missing)})" if cost.missing else "-"
    text = index_text(cost)
    if cost.p_value is not None:
        text += f" p{cost.p_value:.2g}" + ("*" if cost.significant else "")
    if cost.drift:
        text += " [yellow]drift[/]"
    return text


def print_answers(data: ReportData, console: Console, short: dict[str, str]) -> None:
    """The first screen's four answers, as report.html's top shows them."""
    if data.transports:
        shown = [
            t
            for t in TRANSPORT_NAMES
            if any(c.transport == t for g in data.transports for c in g.costs)
        ]
        keys = data.transport_labels.short
        table = folding_table(
            f"What each transport costs: median duration, TCP = 100 per pair, zone and kind; "
            f"± {CONFIDENCE:.0%} bootstrap interval of the ratio; p Mann-Whitney against TCP, "
            f"* below {ALPHA:g}",
            ["pair / zone / kind", *(TRANSPORT_NAMES[t] for t in shown)],
            names=max(len(label) for label in keys.values()),
        )
        for group in data.transports:
            cells = []
            for t in shown:
                cost = next((c for c in group.costs if c.transport == t), None)
                cells.append("-" if cost is None else _transport_cell(cost))
            tcp = next(c for c in group.costs if c.transport == "tcp")
            if group.baseline_median_s is not None:
                cells[0] = f"100 ({fmt.duration(group.baseline_median_s)})"
                cells[0] += " [yellow]drift[/]" if tcp.drift else ""
            table.add_row(escape(keys[group.key]), *cells)
        print_table(console, table)
        for note in [*transport_notes(data.transports), *data.compare_plan]:
            console.print(escape(note), soft_wrap=True)
    else:
        console.print(
            "What each transport costs: no pair, zone and kind ran TCP and another transport",
            soft_wrap=True,
        )
    for note in data.whole_zone_notes:
        console.print(f"[yellow]{escape(note)}[/]", soft_wrap=True)

    if data.phases:
        table = folding_table(
            "Where the time went: the median transfer's phases, from the reload command "
            "(notify), the control command (retransfer), the start (cold start) or the primary "
            "serving the serial (stream)",
            ["case", "phases: each ends at the instant named", "measured", "secondary logged"],
            left=2,
            names=max(len(short.get(x.label, x.label)) for x in data.phases),
        )
        for item in data.phases:
            parts = [
                f"{seg.name.rsplit(' -> ', 1)[-1]} {fmt.duration(seg.seconds)}"
                for seg in item.segments
            ]
            measured = fmt.NONE if item.missing else fmt.duration(item.duration_s)
            table.add_row(
                escape(short.get(item.label, item.label)),
                escape(item.missing or " | ".join(parts)),
                measured,
                fmt.duration(item.logged_secondary_s),
            )
        print_table(console, table)
        if any(XOT_NOTE in item.notes for item in data.phases):
            console.print(escape(XOT_WHY), soft_wrap=True)

    if data.real_paths:
        print_real_paths(data, console)
    missing = [c for c in data.links if c.missing]
    checks = [c for c in data.links if c.cases > 1] or [c for c in data.links if not c.missing]
    checks += missing
    if checks:
        table = folding_table(
            "Did the link do what was asked: RTT set / smallest measured; loss per "
            "direction summed over the transfers, and its check (-> primary to secondary)",
            ["case", "path", "RTT", "-> loss", "<- loss", "rate set / measured"],
            left=2,
        )
        for check in checks:
            if check.missing:
                label = short.get(check.case, check.case)
                why = _short_missing(check.missing)
                table.add_row(escape(label), escape(check.path), "-", escape(why), "", "")
                continue
            ways = []
            for way in ("forward", "reverse"):
                d = next((d for d in check.directions if d.way == way), None)
                if d is None:
                    ways.append("-")
                    continue
                measured = "-" if d.measured_pct is None else f"{d.measured_pct:.3g} %"
                ways.append(
                    f"{d.loss or 'none'}: {d.dropped:,} of {d.packets:,} ({measured})"
                    + (f" {d.verdict}" if d.verdict else "")
                )
            rates = [
                f"{'->' if d.way == 'forward' else '<-'} {fmt.rate(d.rate_bps)} / "
                f"{fmt.rate(d.measured_rate_bps)}"
                for d in check.directions
                if d.rate_bps or d.measured_rate_bps
            ]
            rtt = f"{fmt.duration(check.rtt_s)} / {fmt.duration(check.rtt_min_s)}"
            if check.rtt_verdict:
                rtt += f" {check.rtt_verdict}"
            table.add_row(
                escape(short.get(check.case, check.case)),
                escape(check.path),
                escape(rtt),
                escape(ways[0]),
                escape(ways[1]),
                escape("; ".join(rates) or "-"),
            )
        print_table(console, table)

    steady = [row for row in data.bounds if row.steady]
    if steady:
        table = folding_table(
            f"How close to the bound (zones of at least {STEADY_BDPS:g} BDPs; throughput "
            "from connect to served)",
            ["case", "throughput", "bound", "of it", "zone / BDP", "cc", "window adv / rmem"],
        )
        for row in steady:
            table.add_row(
                escape(short.get(row.label, row.label)),
                fmt.rate(row.throughput_bps),
                f"{fmt.rate(row.bound_bps)} ({row.limited_by or '?'})",
                fmt.ratio(row.ratio),
                f"{row.bdps:.3g}" if row.bdps is not None else "-",
                row.sender_cc or "?",
                f"{fmt.size(row.advertised_window)} / {fmt.size(row.receive_buffer)}",
            )
        print_table(console, table)
    if data.bounds_missing:
        console.print(
            escape(
                "How close to the bound: no throughput without a verified transfer: "
                + "; ".join(
                    f"{short.get(c, c)} ({_short_missing(w)})" for c, w in data.bounds_missing
                )
            ),
            soft_wrap=True,
        )
    unbounded = [row for row in data.bounds if not row.bound_bps]
    if unbounded:
        console.print(
            f"How close to the bound: {len(unbounded)} of {len(data.bounds)} have no model "
            "bound (an unimpaired link)",
            soft_wrap=True,
        )
    others = [row for row in data.bounds if not row.steady and row.bound_bps]
    if others:
        longest = max(others, key=lambda row: row.bdps or 0.0)
        console.print(
            escape(
                f"How close to the bound: {len(others)} of {len(data.bounds)} too short to "
                f"judge (under {STEADY_BDPS:g} BDPs of data; the longest, "
                f"{short.get(longest.label, longest.label)}, is "
                f"{longest.bdps or 0:.3g} BDPs)"
            ),
            soft_wrap=True,
        )


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


def print_real_paths(data: ReportData, console: Console) -> None:
    """An inventory run's paths as found, where a netns run's link check stands."""
    table = folding_table(
        "The real paths (no link asked for): RTT pinged / least seen by the primary's TCP; "
        "-> retransmitted of sent over the run's transfers; -> bandwidth probed (iperf3)",
        ["secondary", "site", "RTT", "-> retransmitted", "-> bandwidth"],
        left=2,
        trailing=2,
    )
    for path in data.real_paths:
        retransmits = f"{fmt.count(path.retransmits)} of {fmt.count(path.data_segs_out)}"
        if path.retransmit_pct is not None:
            retransmits += f" ({path.retransmit_pct:.3g} %)"
        table.add_row(
            escape(path.host),
            escape(path.site),
            f"{fmt.duration(path.ping_min_s)} / {fmt.duration(path.tcp_rtt_min_s)}",
            escape(retransmits),
            escape(f"{fmt.rate(path.bandwidth_bps)} ({path.probe_note})"),
        )
    print_table(console, table)


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
    print_answers(data, console, short)
    print_fleet(data, console, short)
    print_faults(data, console)
    print_stream(data, console, short)
    print_catalog(data, console, short)

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
