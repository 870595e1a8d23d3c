"""What `xfrbench compare` prints, in the spirit of benchstat: one table per figure, one line
per case, A and B with the spread of each median, the change or "~" when it is not
significant, with p and n beside it; a geometric-mean row; then the warnings, grouped so
that a long run reads in a screen, and the verdict."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape

from harness.compare.case import (
    DRIFT,
    DRIFTING,
    FAILED_IN_B,
    FAILING_IN_BOTH,
    FEW,
    FEWER_FAILURES,
    IMPROVEMENT,
    MAX_CV,
    MORE_FAILURES,
    NEW_FAILURES,
    NEW_IN_B,
    NO_DATA,
    NOT_CONVERGED,
    NOT_CONVERGED_IN_B,
    REGRESSION,
    SPREAD,
    UNSUPPORTED_IN_B,
    CaseComparison,
    Side,
)
from harness.compare.figures import FAILURES, figure_kind
from harness.compare.gate import Comparison, Geomean
from harness.compare.stream import SlaComparison
from harness.core import fmt
from harness.core.ui import folding_table, print_table

TITLES = {
    "duration": "duration (trigger to served)",
    "fleet last": "fleet: the last secondary served (per repeat)",
    "fleet p95": "fleet: 95 % of the secondaries served (per repeat)",
    FAILURES: "failures (failed or not verified, of the transfers meant to count)",
}


def value_text(value: float | None, unit: str) -> str:
    if unit == "bytes":
        return fmt.size(value)
    if unit == "sockets":
        return fmt.NONE if value is None else f"{value:,.3g}"
    return fmt.duration(value)


def _spread(side: Side) -> str:
    """The larger side of the median's interval, as a share of it: "± 3%"."""
    if side.ci_s is None or not side.median_s:
        return ""
    half = max(side.median_s - side.ci_s[0], side.ci_s[1] - side.median_s)
    return f" ± {half / side.median_s:.0%}"


def side_text(item: CaseComparison, side: Side) -> str:
    if item.figure == FAILURES:
        return f"{side.failed} of {side.attempts}"
    if side.median_s is None:
        return f"- ({side.failed} failed)" if side.failed else fmt.NONE
    return value_text(side.median_s, item.unit) + _spread(side)


def p_text(p: float) -> str:
    """p=0.100, p=0.002; p=2.4e-04 below a thousandth (never p=0.000)."""
    return f"p={p:.3f}" if p >= 0.001 else f"p={p:.1e}"


def _p(item: CaseComparison) -> str:
    """benchstat's parenthesis: "p=0.100 n=3+3"."""
    if item.single:
        return "one peak per run"
    n = f"n={item.a.n}+{item.b.n}"
    return n if item.p_value is None else f"{p_text(item.p_value)} {n}"


def _kinds(kinds: dict[str, int]) -> str:
    return ", ".join(f"{n} {words}" for words, n in kinds.items())


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
    """The change and what it means, benchstat's way: "~" when it is not significant."""
    change = f"{item.change:+.1%}" if item.change is not None else ""
    if item.figure == FAILURES:
        p = "" if item.p_value is None else f" ({p_text(item.p_value)})"
        b_kinds = _kinds(item.failure_kinds.get("b", {}))
        return {
            NEW_FAILURES: f"[bold red]new failures: {b_kinds}{p} regression[/]",
            MORE_FAILURES: f"[bold red]more failures: {b_kinds}{p} regression[/]",
            FAILING_IN_BOTH: f"[yellow]failing in both runs{p}[/]: {b_kinds}",
            FEWER_FAILURES: f"[green]fewer failures{p}[/]",
        }.get(item.verdict, f"~{p}")
    if item.verdict == REGRESSION:
        return f"[bold red]{change} ({_p(item)}) regression[/]"
    if item.verdict == IMPROVEMENT:
        return f"[green]{change} ({_p(item)}) better[/]"
    if item.verdict == DRIFTING:
        return f"[yellow]{change} ({_p(item)}) worse, but it drifts: not called a regression[/]"
    if item.verdict == NOT_CONVERGED_IN_B:
        return "[bold red]the fleet did not converge in B: regression[/]"
    if item.verdict == FAILED_IN_B:
        return "[bold red]no verified transfer in B: regression[/]"
    if item.verdict == UNSUPPORTED_IN_B:
        return "[yellow]unsupported in B (declared by its versions, not a failure)[/]"
    if item.verdict == NEW_IN_B:
        return "results only in B"
    if item.verdict == NO_DATA:
        return "no result in either run"
    if item.identical:
        return "~ (identical)"
    if item.single:
        return f"~ ({change} within ±{threshold:.0%}, one peak per run)"
    if item.within:
        return f"~ ({change} within ±{threshold:.0%}; {_p(item)})"
    if item.min_p >= alpha:
        return f"~ ({_p(item)}: too few to tell)"
    return f"~ ({_p(item)})"


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
        lines.append(f"{len(drifting) - 4} more cases drift")
    return lines


def _geomean_row(mean: Geomean, role: str | None) -> list[str]:
    what = f"geomean, {role}" if role else "geomean"
    return [
        f"{what} ({mean.cases} cases)",
        value_text(mean.a, mean.unit),
        value_text(mean.b, mean.unit),
        f"{mean.change:+.1%}",
    ]


def _role(figure: str) -> str | None:
    return figure.split(", ", 1)[1] if ", " in figure else None


def print_tables(result: Comparison, console: Console) -> None:
    """One table per kind of figure, benchstat's way: a line per case (and server role),
    the geometric mean of each figure under its lines."""
    labels = list(dict.fromkeys(item.case_label for item in result.cases))
    shared, short = fmt.short_labels(labels)
    if shared:
        console.print(escape(f"every case is {shared}; the tables show what * stands for"))
    width = max((len(label) for label in short.values()), default=0)
    means = {mean.figure: mean for mean in result.geomeans}
    for kind in dict.fromkeys(figure_kind(item.figure) for item in result.cases):
        items = [item for item in result.cases if figure_kind(item.figure) == kind]
        table = folding_table(
            TITLES.get(kind, kind), ["case", "A", "B", "vs A"], names=min(width + 11, 40),
            trailing=1,
        )  # fmt: skip
        for item in items:
            role = _role(item.figure)
            table.add_row(
                escape(short[item.case_label] + (f", {role}" if role else "")),
                escape(side_text(item, item.a)),
                escape(side_text(item, item.b)),
                verdict_text(item, result.threshold, result.alpha),
            )
        for figure in dict.fromkeys(item.figure for item in items):
            count = sum(1 for item in items if item.figure == figure)
            if figure in means and count > 1:
                row = _geomean_row(means[figure], _role(figure))
                table.add_row(*(f"[bold]{escape(cell)}[/]" for cell in row))
        print_table(console, table)


def print_comparison(result: Comparison, console: Console) -> None:
    head = [
        f"A: {result.run_a} ({result.run_id_a}) {result.servers_a}",
        f"B: {result.run_b} ({result.run_id_b}) {result.servers_b}",
    ]
    for line in head:
        console.print(escape(line), soft_wrap=True)
    if result.differences:
        console.print("[yellow]the runs differ in:[/]")
        for difference in result.differences:
            console.print(f"  {escape(str(difference))}", soft_wrap=True)
    console.print(
        escape(
            f"significant: |change| > {result.threshold:.0%} and Mann-Whitney p < "
            f"{result.alpha:g} (failures: Boschloo's exact test); ± is the larger side of "
            f"the median's {1 - result.alpha:.0%} bootstrap interval; ~ not significant"
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
        print_tables(result, console)
        fleets = dict.fromkeys(item.per for item in result.cases if item.per != "transfer")
        for per in fleets:  # what n counts in a fleet's rows: repeats, not secondaries
            console.print(escape(f"fleet rows: one value per {per}"), soft_wrap=True)
        if not any(item.figure == FAILURES for item in result.cases):
            console.print("failures: none in either run", soft_wrap=True)
        for line in grouped_warnings(result):
            console.print(f"[yellow]warning:[/] {escape(line)}", soft_wrap=True)
    for item in result.stream_sla:
        console.print(escape(sla_text(item)), soft_wrap=True)
    for warning in result.warnings:
        console.print(f"[yellow]warning:[/] {escape(warning)}", soft_wrap=True)
    if result.only_in_a:
        console.print(escape(f"only in A: {', '.join(result.only_in_a)}"), soft_wrap=True)
    if result.only_in_b:
        console.print(escape(f"only in B: {', '.join(result.only_in_b)}"), soft_wrap=True)
    both = result.failing_in_both
    if both:
        console.print(
            f"[yellow]{len(both)} case(s) failing in both runs[/]: "
            f"{escape(', '.join(item.case_label for item in both))}",
            soft_wrap=True,
        )
    if result.drifting:
        console.print(
            f"[yellow]{len(result.drifting)} worse figure(s) not called a regression because "
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
