"""What `xfrbench compare` prints, in the spirit of benchstat: one table per figure, one line
per case and an "all cases" line, A and B with the spread of each, the change, and beside
it what the comparison could have seen (its detectable change, or how many repeats it
would need); then the warnings, grouped so that a long run reads in a screen, and the
verdict with its exit status."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape

from harness.compare.case import (
    ALL_CASES,
    CANNOT_TELL,
    DRIFT,
    FAILED_IN_B,
    FAILING_IN_BOTH,
    FEWER_FAILURES,
    IMPROVEMENT,
    MISSING_IN_A,
    MISSING_IN_B,
    MORE_FAILURES,
    NEW_FAILURES,
    NEW_IN_B,
    NO_DATA,
    NOT_CONVERGED,
    NOT_CONVERGED_IN_B,
    REGRESSION,
    REPORTED,
    UNSUPPORTED_IN_B,
    CaseComparison,
    Side,
)
from harness.compare.figures import FAILURES, PEAK_MEMORY, figure_kind
from harness.compare.gate import EXIT_CANNOT_TELL, Comparison
from harness.core import fmt
from harness.core.power import LOG
from harness.core.ui import folding_table, print_table

TITLES = {
    "duration": "duration (trigger to served)",
    "fleet last": "fleet: the last secondary served (per repeat)",
    "fleet p95": "fleet: 95 % of the secondaries served (per repeat)",
    PEAK_MEMORY: "peak memory (one per case and run: reported, not gated)",
    FAILURES: "failures (failed or not verified, of the transfers meant to count)",
}


def value_text(value: float | None, unit: str) -> str:
    if value is None:
        return fmt.NONE
    if unit == "bytes":
        return fmt.size(value)
    if unit in ("sockets", "count"):
        return f"{value:,.3g}"
    if unit == "share":
        return f"{value:.1%}"
    return fmt.duration(value)


def _spread(item: CaseComparison, side: Side) -> str:
    """Half the 95 % interval of the side's level: "± 3%" for ratios, in the unit else."""
    if side.spread is None or item.single or not side.spread:
        return ""
    if item.scale == LOG:
        return f" ± {side.spread:.0%}"
    return f" ± {value_text(side.spread, item.unit)}"


def side_text(item: CaseComparison, side: Side) -> str:
    if item.figure == FAILURES:
        return f"{side.failed} of {side.attempts}"
    if item.overall:
        return value_text(side.level, item.unit)
    if side.level is None:
        return f"- ({side.failed} failed)" if side.failed else fmt.NONE
    return value_text(side.level, item.unit) + _spread(item, side)


def p_text(p: float) -> str:
    """p=0.100, p=0.002; p=2.4e-04 below a thousandth (never p=0.000)."""
    return f"p={p:.3f}" if p >= 0.001 else f"p={p:.1e}"


def change_text(item: CaseComparison, value: float | None) -> str:
    if value is None:
        return ""
    if item.scale == LOG:
        return f"{value:+.1%}"
    if item.unit == "share":
        return f"{value * 100:+.1f} points"
    return f"{value:+.3g}"


def _n(item: CaseComparison) -> str:
    if item.overall:
        return f"{item.cases} cases"
    return f"n={item.a.n}+{item.b.n}"


def _mde(item: CaseComparison) -> str:
    """What the comparison could have seen."""
    if item.mde is None:
        return ""
    return f"MDE {change_text(item, item.mde).lstrip('+')}"


def _kinds(kinds: dict[str, int]) -> str:
    return ", ".join(f"{n} {words}" for words, n in kinds.items())


def _failures_text(item: CaseComparison) -> str:
    p = "" if item.p_value is None else f" ({p_text(item.p_value)})"
    b_kinds = _kinds(item.failure_kinds.get("b", {}))
    return {
        NEW_FAILURES: f"[bold red]new failures: {b_kinds}{p} regression[/]",
        MORE_FAILURES: f"[bold red]more failures: {b_kinds}{p} regression[/]",
        FAILING_IN_BOTH: f"[yellow]failing in both runs{p}[/]: {b_kinds}",
        FEWER_FAILURES: f"[green]fewer failures{p}[/]",
    }.get(item.verdict, f"~{p}")


FIXED = {
    NOT_CONVERGED_IN_B: "[bold red]the fleet did not converge in B: regression[/]",
    FAILED_IN_B: "[bold red]no verified transfer in B: regression[/]",
    UNSUPPORTED_IN_B: "[yellow]cannot tell: unsupported in B only (declared by its versions)[/]",
    MISSING_IN_B: "[yellow]cannot tell: not recorded in B[/]",
    MISSING_IN_A: "[yellow]cannot tell: not recorded in A[/]",
    NEW_IN_B: "results only in B",
    NO_DATA: "no result in either run",
}


def verdict_text(item: CaseComparison) -> str:
    """The change and what it means: a regression, better, ~ (no regression, with what it
    could have seen), or cannot tell (with what it would need)."""
    if item.figure == FAILURES:
        return _failures_text(item)
    if item.verdict in FIXED:
        return FIXED[item.verdict]
    change = change_text(item, item.change)
    p = "" if item.p_value is None else f"{p_text(item.p_value)} "
    if item.verdict == REPORTED:
        return f"{change} (one value per run: reported, not gated)"
    if item.verdict == REGRESSION:
        low, high = item.change_ci or (None, None)
        ci = f" [{change_text(item, low)}, {change_text(item, high)}]" if low is not None else ""
        return f"[bold red]{change}{ci} ({p}{_n(item)}) regression[/]"
    if item.verdict == IMPROVEMENT:
        return f"[green]{change} ({_n(item)}) better[/]"
    if item.identical:
        return "~ (identical)"
    if item.verdict == CANNOT_TELL:
        why = "; ".join(item.reasons) or "too few values"
        mde = f", {_mde(item)}" if item.mde is not None else ""
        return f"[yellow]cannot tell: {change} ({_n(item)}{mde}): {why}[/]"
    return f"~ {change} ({_mde(item)}, {_n(item)})"


def _names(items: list[CaseComparison], limit: int = 4) -> str:
    names = [item.label for item in items[:limit]]
    more = len(items) - len(names)
    return ", ".join(names) + (f" and {more} more" if more else "")


def grouped_warnings(result: Comparison) -> list[str]:
    """One line per kind of warning, naming the cases (not one line per case)."""
    lines = []
    for item in result.cases:  # a fleet that did not converge: who it missed, per repeat
        lines += [
            f"{item.label}: {text}"
            for kind, text in zip(item.kinds, item.warnings, strict=True)
            if kind == NOT_CONVERGED
        ]
    drifting = [item for item in result.cases if DRIFT in item.kinds]
    for item in drifting[:4]:
        texts = [t for k, t in zip(item.kinds, item.warnings, strict=True) if k == DRIFT]
        lines.append(f"{item.label} drifts: " + "; ".join(texts))
    if len(drifting) > 4:
        lines.append(f"{len(drifting) - 4} more comparisons drift")
    return lines


def _row_label(item: CaseComparison, short: dict[str, str]) -> str:
    role = item.figure.split(", ", 1)[1] if ", " in item.figure else None
    name = f"{ALL_CASES} ({item.cases})" if item.overall else short[item.case_label]
    return name + (f", {role}" if role else "")


def print_tables(result: Comparison, console: Console) -> None:
    """One table per kind of figure: a line per case (and server role), the figure over
    all cases under them, in bold."""
    labels = list(dict.fromkeys(c.case_label for c in result.cases if not c.overall))
    shared, short = fmt.short_labels(labels)
    if shared:
        console.print(escape(f"every case is {shared}; the tables show what * stands for"))
    width = max((len(label) for label in short.values()), default=0)
    for kind in dict.fromkeys(figure_kind(item.figure) for item in result.cases):
        items = [item for item in result.cases if figure_kind(item.figure) == kind]
        table = folding_table(TITLES.get(kind, kind), ["case", "A", "B", "B against A"],
                              names=min(width + 11, 40), trailing=1)  # fmt: skip
        for item in items:
            cells = [_row_label(item, short), side_text(item, item.a), side_text(item, item.b)]
            cells = [escape(cell) for cell in cells]
            if item.overall:
                cells = [f"[bold]{cell}[/]" for cell in cells]
            table.add_row(*cells, verdict_text(item))
        print_table(console, table)


def _method_line(result: Comparison) -> str:
    return (
        f"each figure: Yuen's 20 %-trimmed Welch test (ratios of trimmed geometric means; "
        f"counts and shares as differences); {result.power}; thresholds: "
        f"{result.threshold:.0%} (durations, fleets, streams, counts), "
        f"{result.resource_threshold:.0%} (CPU and memory per transfer); a regression is "
        f"significant and at least half its threshold; ± is half the 95 % interval of a "
        f"side's trimmed mean; MDE: the smallest change seen with 80 % power"
    )


def _verdict_lines(result: Comparison) -> list[str]:
    regressions = result.regressions
    if regressions:
        return [f"[bold red]{len(regressions)} regression(s)[/]: "
                f"{escape(_names(regressions, 10))} (exit 1)"]  # fmt: skip
    status = result.exit_status
    if status == EXIT_CANNOT_TELL:
        what = [escape(issue) for issue in result.issues]
        undecided = result.undecided
        if undecided:
            what.append(escape(f"{len(undecided)} required comparison(s) cannot tell: "
                               f"{_names(undecided, 6)}"))  # fmt: skip
        return [f"[bold yellow]cannot tell[/]: {'; '.join(what)} (exit {EXIT_CANNOT_TELL})"]
    return ["no regression at the stated power: every required figure could have shown a "
            "change of its threshold (exit 0)"]  # fmt: skip


def print_comparison(result: Comparison, console: Console) -> None:
    head = [
        f"A: {result.run_a} ({result.run_id_a}) {result.servers_a}",
        f"B: {result.run_b} ({result.run_id_b}) {result.servers_b}",
    ]
    if result.axis:
        head = [f"one interleaved A/B run, axis {result.axis}", *head]
    for line in head:
        console.print(escape(line), soft_wrap=True)
    if result.differences:
        console.print("[yellow]the runs differ in:[/]")
        for difference in result.differences:
            console.print(f"  {escape(str(difference))}", soft_wrap=True)
    console.print(escape(_method_line(result)), soft_wrap=True)
    if result.identical:
        console.print(
            f"no change: A and B hold the same values in all {len(result.cases)} compared "
            "figures (a run compared with itself?)",
            soft_wrap=True,
        )
    else:
        print_tables(result, console)
        per = dict.fromkeys(item.per for item in result.cases if item.per != "transfer")
        for what in per:  # what n counts in a fleet's or stream's rows
            console.print(escape(f"fleet and stream rows: one value per {what}"), soft_wrap=True)
        if not any(item.figure == FAILURES for item in result.cases):
            console.print("failures: none in either run", soft_wrap=True)
        for line in grouped_warnings(result):
            console.print(f"[yellow]warning:[/] {escape(line)}", soft_wrap=True)
    if result.not_recorded:
        console.print(escape(f"not recorded in either run: {', '.join(result.not_recorded)}"),
                      soft_wrap=True)  # fmt: skip
    for warning in result.warnings:
        console.print(f"[yellow]warning:[/] {escape(warning)}", soft_wrap=True)
    for note in result.notes:
        console.print(f"note: {escape(note)}", soft_wrap=True)
    if result.only_in_a:
        console.print(escape(f"only in A (cannot tell): {', '.join(result.only_in_a)}"),
                      soft_wrap=True)  # fmt: skip
    if result.only_in_b:
        console.print(escape(f"only in B: {', '.join(result.only_in_b)}"), soft_wrap=True)
    both = result.failing_in_both
    if both:
        console.print(f"[yellow]{len(both)} case(s) failing in both runs[/]: "
                      f"{escape(', '.join(item.case_label for item in both))}",
                      soft_wrap=True)  # fmt: skip
    unjudged = result.unjudged
    if unjudged:
        console.print(escape(
            f"{len(unjudged)} per-case comparison(s) cannot tell (judged for regressions, not "
            f"required; --strict requires them): {_names(unjudged)}"), soft_wrap=True)  # fmt: skip
    for line in _verdict_lines(result):
        console.print(line, soft_wrap=True)
