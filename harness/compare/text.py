"""What `xfrbench compare` prints: one line per case and figure, its verdict, and warnings
grouped so that a long run reads in a screen."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from harness.compare.gate import (
    DRIFT,
    DRIFTING,
    FAILED_IN_B,
    FAILURES,
    FEW,
    IMPROVEMENT,
    MAX_CV,
    NEW_IN_B,
    NO_DATA,
    REGRESSION,
    SPREAD,
    CaseComparison,
    Comparison,
)
from harness.compare.stream import SlaComparison
from harness.core import fmt


def _interval(ci: tuple[float, float] | None) -> str:
    return f" [{fmt.seconds(ci[0])}, {fmt.seconds(ci[1])}]" if ci else ""


def _change(item: CaseComparison) -> str:
    if item.change is None:
        return "-"
    text = f"{item.change:+.1%}"
    if item.change_ci:
        text += f" [{item.change_ci[0]:+.1%}, {item.change_ci[1]:+.1%}]"
    return text


def sla_text(item: SlaComparison) -> str:
    """One line per stream case's SLA share, A against B."""
    if item.share_a is None or item.share_b is None or item.change is None:
        return f"{item.label}: no serial in one of the runs"
    return (
        f"{item.label}: {item.met_a} of {item.serials_a} ({item.share_a:.1%}) in A, "
        f"{item.met_b} of {item.serials_b} ({item.share_b:.1%}) in B, "
        f"{item.change * 100:+.1f} points, Fisher p {item.p_value:.3g}: {item.verdict}"
    )


def verdict_text(item: CaseComparison, threshold: float, alpha: float) -> str:
    if item.verdict == REGRESSION:
        return "[bold red]slower: regression[/]"
    if item.verdict == IMPROVEMENT:
        return "[green]faster[/]"
    if item.verdict == DRIFTING:
        return "[yellow]slower, but it drifts: not called a regression[/]"
    if item.verdict == FAILED_IN_B:
        return "[bold red]every transfer failed in B: regression[/]"
    if item.verdict == NEW_IN_B:
        return "results only in B"
    if item.verdict == NO_DATA:
        return "no result in either run"
    if item.identical:
        return "no change (identical)"
    if item.within:
        return f"no change (within ±{threshold:.0%})"
    if item.min_p >= alpha:
        return "~ too few transfers to tell"
    return f"~ no significant change (p >= {alpha:g})"


def _names(items: list[CaseComparison], limit: int = 4) -> str:
    names = [item.label for item in items[:limit]]
    more = len(items) - len(names)
    return ", ".join(names) + (f" and {more} more" if more else "")


def grouped_warnings(result: Comparison) -> list[str]:
    """One line per kind of warning, naming the cases (not one line per case: a run
    compared with a sibling of 3 repeats would print 30)."""
    lines = []
    few: dict[str, list[CaseComparison]] = {}
    for item in result.cases:
        for kind, text in zip(item.kinds, item.warnings, strict=True):
            if kind == FEW:
                few.setdefault(text, []).append(item)
    for text, items in few.items():
        lines.append(f"{text} ({len(items)} of {len(result.cases)}: {_names(items)})")
    for name in ("A", "B"):
        wide = [
            item for item in result.cases
            if SPREAD in item.kinds and (side := item.a if name == "A" else item.b).cv
            and side.cv > MAX_CV
        ]  # fmt: skip
        if wide:
            lines.append(
                f"run {name} spreads wide (CV > {MAX_CV:.0%}: a busy host or a noisy link) in "
                f"{len(wide)} of {len(result.cases)}: {_names(wide)}; their medians move a lot"
            )
    failures = [item for item in result.cases if FAILURES in item.kinds]
    if failures:
        parts = [
            f"{item.label} ({item.a.failed} of {item.a.attempts} in A, "
            f"{item.b.failed} of {item.b.attempts} in B)"
            for item in failures[:4]
        ]
        more = len(failures) - len(parts)
        lines.append(
            "failed or unverified transfers differ: "
            + "; ".join(parts)
            + (f" and {more} more" if more else "")
        )
    drifting = [item for item in result.cases if DRIFT in item.kinds]
    for item in drifting[:4]:
        texts = [t for k, t in zip(item.kinds, item.warnings, strict=True) if k == DRIFT]
        lines.append(f"{item.label} drifts: " + "; ".join(texts))
    if len(drifting) > 4:
        lines.append(f"{len(drifting) - 4} more cases drift")
    return lines


def print_comparison(result: Comparison, console: Console) -> None:
    console.print(
        escape(
            f"A: {result.run_a} ({result.run_id_a})\nB: {result.run_b} ({result.run_id_b})\n"
            f"significant = |change| > {result.threshold:.1%} and Mann-Whitney p < "
            f"{result.alpha:g}; intervals: {1 - result.alpha:.0%} bootstrap"
        ),
        soft_wrap=True,
    )
    if result.identical:
        console.print(
            f"no change: A and B hold the same values in all {len(result.cases)} compared "
            "figures (a run compared with itself?)",
            soft_wrap=True,
        )
    else:
        shared, short = fmt.short_labels([item.label for item in result.cases])
        if shared:
            console.print(escape(f"every case is {shared}; the table shows what * stands for"))
        table = Table(title="median transfer duration, seconds (B against A)")
        for column in ("case", "n A", "n B", "median A", "median B", "change", "p", "verdict"):
            justify = "left" if column in ("case", "verdict") else "right"
            width = max(len(label) for label in short.values()) if column == "case" else None
            table.add_column(
                justify=justify, header=column, overflow="fold", min_width=width and min(width, 40)
            )
        for item in result.cases:
            table.add_row(
                escape(short[item.label]),
                str(item.a.n),
                str(item.b.n),
                fmt.seconds(item.a.median_s) + _interval(item.a.ci_s),
                fmt.seconds(item.b.median_s) + _interval(item.b.ci_s),
                _change(item),
                "-" if item.p_value is None else f"{item.p_value:.3g}",
                verdict_text(item, result.threshold, result.alpha),
            )
        console.print(table)
        for line in grouped_warnings(result):
            console.print(f"[yellow]warning:[/] {escape(line)}", soft_wrap=True)
    for item in result.stream_sla:
        console.print(escape(sla_text(item)), soft_wrap=True)
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
    if result.drifting:
        console.print(
            f"[yellow]{len(result.drifting)} slower case(s) not called a regression because "
            f"their repeats drift[/]: {escape(_names(result.drifting, 10))}; re-run them, "
            "with more repeats, before trusting either run's median",
            soft_wrap=True,
        )
    regressions = result.regressions
    names = ", ".join([item.label for item in regressions] +
                      [item.label for item in result.stream_sla if item.regression])  # fmt: skip
    if names:
        count = len(regressions) + sum(1 for item in result.stream_sla if item.regression)
        console.print(
            f"[bold red]{count} regression(s)[/]: {escape(names)} (exit 1)",
            soft_wrap=True,
        )
    else:
        console.print("no significant regression (exit 0)")
