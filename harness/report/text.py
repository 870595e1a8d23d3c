"""The plain-text summary `xfrbench report` prints: run facts, cases, resources."""

from __future__ import annotations

from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from harness.report import fmt
from harness.report.compare import (
    FAILED_IN_B,
    IMPROVEMENT,
    NEW_IN_B,
    NO_DATA,
    REGRESSION,
    CaseComparison,
    Comparison,
)
from harness.report.data import ReportData


def _method(method: str) -> str:
    return method.replace("server-to-server", "server").replace("client-pull-", "pull ")


def print_summary(data: ReportData, console: Console, report: Path | None = None) -> None:
    run = data.run
    servers = ", ".join(f"{s.kind} {s.version or '?'}" for s in run.servers) or "-"
    commit = (run.git_commit or "-")[:12] + (" (dirty)" if run.git_dirty else "")
    lines = [
        f"run {run.run_id}: scenario {run.scenario or '-'}, "
        f"spec hash {(run.spec_hash or '-')[:16]}",
        f"host {run.hostname or '-'}, kernel {run.kernel or '-'}, harness commit {commit}",
        f"servers {servers}; link backend {run.link_backend or '-'}"
        + (f"; link {data.uniform_link}" if data.uniform_link else ""),
        f"interrupted: {'no' if run.state == 'complete' else 'yes (' + run.state + ')'}; "
        f"{run.transfers} transfers",
    ]
    for line in lines:
        console.print(escape(line), soft_wrap=True)
    for warning in data.warnings:
        console.print(f"[yellow]warning:[/] {escape(warning)}", soft_wrap=True)

    table = Table(title="cases (seconds; ok = verified transfers that count)")
    for column in ("case", "method", "n", "ok", "failed", "unsup", "median", "p10", "p90"):
        table.add_column(column, justify="left" if column in ("case", "method") else "right")
    table.add_column("throughput", justify="right")
    table.add_column("bound", justify="right")
    table.add_column("note")
    for row in data.cases:
        notes = []
        if row.unstable_why:
            notes.append(f"unstable: {row.unstable_why}")
        if row.failure_reasons:
            reasons = [f"{r} (x{n})" if n > 1 else r for r, n in row.failure_reasons[:3]]
            more = len(row.failure_reasons) - len(reasons)
            notes.append(
                f"{row.failed} failed: " + "; ".join(reasons) + (f"; +{more} more" if more else "")
            )
        if row.unsupported_reasons:
            reason = row.unsupported_reasons[0][0].removeprefix("unsupported: ")
            notes.append(f"unsupported: {reason}")
        table.add_row(
            escape(row.case),
            _method(row.method),
            str(row.n),
            str(row.ok),
            str(row.failed),
            str(row.unsupported),
            fmt.seconds(row.median_s),
            fmt.seconds(row.p10_s),
            fmt.seconds(row.p90_s),
            fmt.rate(row.throughput_bps),
            fmt.rate(row.model_bound_bps),
            escape("; ".join(notes)),
        )
    console.print(table)

    if data.resources:
        resources = Table(title=f"resources per case (from {data.resources_source})")
        for column in ("case", "role", "CPU s/transfer", "peak RSS MiB", "peak TIME_WAIT"):
            resources.add_column(column, justify="left" if column in ("case", "role") else "right")
        for item in data.resources:
            for role, figures in item.roles.items():
                resources.add_row(
                    escape(item.case),
                    role,
                    fmt.seconds(figures.cpu_total_s_per_transfer),
                    fmt.mib(figures.peak_rss_bytes),
                    fmt.count(figures.peak_time_wait),
                )
        console.print(resources)
    else:
        console.print(f"resources: {escape(data.resources_note or 'none')}", soft_wrap=True)
    if report is not None:
        console.print(f"report: {escape(str(report))}", soft_wrap=True)


# --- compare ------------------------------------------------------------------------------


def _interval(ci: tuple[float, float] | None) -> str:
    return f" [{fmt.seconds(ci[0])}, {fmt.seconds(ci[1])}]" if ci else ""


def _change(item: CaseComparison) -> str:
    if item.change is None:
        return "-"
    text = f"{item.change:+.1%}"
    if item.change_ci:
        text += f" [{item.change_ci[0]:+.1%}, {item.change_ci[1]:+.1%}]"
    return text


def verdict_text(item: CaseComparison, threshold: float, alpha: float) -> str:
    if item.verdict == REGRESSION:
        return "[bold red]slower: regression[/]"
    if item.verdict == IMPROVEMENT:
        return "[green]faster[/]"
    if item.verdict == FAILED_IN_B:
        return "[bold red]every transfer failed in B: regression[/]"
    if item.verdict == NEW_IN_B:
        return "results only in B"
    if item.verdict == NO_DATA:
        return "no result in either run"
    if item.change is not None and abs(item.change) <= threshold:
        return f"no change (within {threshold:.0%})"
    if item.min_p >= alpha:
        return "too few transfers to tell"
    return f"not significant (p >= {alpha:g})"


def print_comparison(result: Comparison, console: Console) -> None:
    console.print(
        escape(
            f"A: {result.run_a} ({result.run_id_a})\nB: {result.run_b} ({result.run_id_b})\n"
            f"significant = |change| > {result.threshold:.1%} and Mann-Whitney p < "
            f"{result.alpha:g}; intervals: {1 - result.alpha:.0%} bootstrap"
        ),
        soft_wrap=True,
    )
    table = Table(title="median transfer duration, seconds (B against A)")
    for column in ("case", "n A", "n B", "median A", "median B", "change", "p", "verdict"):
        table.add_column(column, justify="left" if column in ("case", "verdict") else "right")
    for item in result.cases:
        table.add_row(
            escape(item.label),
            str(item.a.n),
            str(item.b.n),
            fmt.seconds(item.a.median_s) + _interval(item.a.ci_s),
            fmt.seconds(item.b.median_s) + _interval(item.b.ci_s),
            _change(item),
            "-" if item.p_value is None else f"{item.p_value:.3g}",
            verdict_text(item, result.threshold, result.alpha),
        )
    console.print(table)
    for item in result.cases:
        for warning in item.warnings:
            console.print(
                f"[yellow]warning:[/] {escape(item.label)}: {escape(warning)}", soft_wrap=True
            )
    for warning in result.warnings:
        console.print(f"[yellow]warning:[/] {escape(warning)}", soft_wrap=True)
    if result.differences:
        console.print("[yellow]the runs differ in:[/]")
        for difference in result.differences:
            console.print(f"  {escape(str(difference))}", soft_wrap=True)
    if result.only_in_a:
        console.print(escape(f"only in A: {', '.join(result.only_in_a)}"), soft_wrap=True)
    if result.only_in_b:
        console.print(escape(f"only in B: {', '.join(result.only_in_b)}"), soft_wrap=True)
    regressions = result.regressions
    if regressions:
        names = ", ".join(item.label for item in regressions)
        console.print(
            f"[bold red]{len(regressions)} regression(s)[/]: {escape(names)} (exit 1)",
            soft_wrap=True,
        )
    else:
        console.print("no significant regression (exit 0)")
