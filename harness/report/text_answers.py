"""The terminal's first-screen answers (report.html's sections of the same names): what
each transport costs, where the time went, the link check, the bound, a cold start's time.
text.py prints them in the order report/screen.py gives."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape

from harness.core import fmt
from harness.core.ui import folding_table, print_table
from harness.report.data import ReportData
from harness.report.html import TRANSPORT_NAMES, index_text, transport_notes
from harness.report.link_checks import first_rows
from harness.report.phases import XOT_NOTE, XOT_WHY
from harness.report.throughput_bound import STEADY_BDPS
from harness.report.transport_costs import ALPHA, CONFIDENCE, TransportCost


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


def print_transports(data: ReportData, console: Console, short: dict[str, str]) -> None:
    """What each transport costs: TCP = 100 per pair, zone and kind."""
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


def print_phases(data: ReportData, console: Console, short: dict[str, str]) -> None:
    """Where the time went: the median transfer's phases per case."""
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


def print_link(data: ReportData, console: Console, short: dict[str, str]) -> None:
    """Did the link do what was asked: RTT and loss, set against measured, per path."""
    if data.real_paths:
        print_real_paths(data, console)
    checks = first_rows(data.links)
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


def print_bound(data: ReportData, console: Console, short: dict[str, str]) -> None:
    """How close to the bound: the long transfers' throughput against the model's."""
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


def real_paths_title(linked: bool) -> str:
    """The real paths table's title: what its figures went through (pure). Ping and the
    probe ran before any server started, so without linkem; the primary's TCP figures are
    the run's transfers', through a site's emulated link where it set one."""
    if not linked:
        return (
            "The real paths (no link asked for): RTT pinged / least seen by the primary's TCP; "
            "-> retransmitted of sent over the run's transfers; -> bandwidth probed (iperf3)"
        )
    return (
        "The real paths under the emulated links (sites marked *): RTT pinged before any "
        "link was emulated / least seen by the primary's TCP through the site's link; "
        "-> retransmitted of sent over the run's transfers, through the link; "
        "-> bandwidth probed (iperf3) before any link was emulated"
    )


def print_real_paths(data: ReportData, console: Console) -> None:
    """An inventory run's paths as found, above the emulated links' check where sites set
    one (remote/paths.py measures them before linkem starts)."""
    table = folding_table(
        real_paths_title(any(path.linked for path in data.real_paths)),
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
            escape(path.site + (" *" if path.linked else "")),
            f"{fmt.duration(path.ping_min_s)} / {fmt.duration(path.tcp_rtt_min_s)}",
            escape(retransmits),
            escape(f"{fmt.rate(path.bandwidth_bps)} ({path.probe_note})"),
        )
    print_table(console, table)


def print_cold_start(data: ReportData, console: Console, short: dict[str, str]) -> None:
    """The cold start's answer: how long the secondaries took to serve every zone, and
    what kept the others from it."""
    table = folding_table(
        "Cold start: from each secondary's start to serving its last zone, verified; "
        "failures in the records' words",
        ["case", "zones", "served", "median", "fastest", "slowest", "failures"],
        left=1,
    )
    for item in data.cold_starts:
        failures = "; ".join(f"{n} x {words}: {first}" for words, n, first in item.failures)
        slowest = fmt.duration(item.slowest_s)
        if item.slowest_host:
            slowest += f" ({item.slowest_host})"
        table.add_row(
            escape(short.get(item.case, item.case)),
            str(item.zones or "-"),
            f"{item.served} of {item.attempts}",
            fmt.duration(item.median_s),
            fmt.duration(item.fastest_s),
            escape(slowest),
            escape(failures or "none"),
        )
    print_table(console, table)
