"""How many repeats `compare` needs (pure): what `run --dry-run` says of a scenario before it
runs, from the spread of a reference run, and what a run's report says from its own
spread; what the gate's families make of it. It lives below report/ and compare/, so both
read it; its figure names and thresholds are compare's (tests/unit/test_planning.py holds
them equal).

The reference is a real run (quick20-a: scenarios/quick.toml with 20 repeats, bind -> bind,
20 ms RTT, 0.1 % loss; its values are tests/fixtures/compare/quick20-a.json): per case, the
winsorized standard deviation of log values, Yuen's measure of spread. Their root mean
square over the 16 cases is what a figure over all cases sees: durations 0.029 (1-6 % per
case), CPU per transfer 0.118 (6-22 % per case). Another setup spreads differently:
`compare` then says what it could see from the run's own values; this is the plan.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from harness.core.power import detectable, trimmed, yuen_factor

DURATION = "duration"  # compare/figures.py's names of the two figures planned here
CPU = "CPU per transfer"
DEFAULT_RESOURCE_THRESHOLD = 0.10  # compare's --resource-threshold

REFERENCE = "quick20-a"
# figure -> root mean square over cases of the per-case winsorized SD of log values
REFERENCE_SPREADS = {DURATION: 0.029, CPU: 0.118}
# The gated figures a run usually records: durations, and CPU and memory for two roles.
ASSUMED_OVERALL = 5
MAX_REPEATS = 200
# Under 5 values Yuen's test trims nothing, and one retransmission timeout (quick20-a had a
# transfer at 65x its case's median) decides the mean: no plan counts on fewer.
MIN_REPEATS = 5


@dataclass(frozen=True)
class Plan:
    figure: str
    threshold: float
    mde_overall: float  # relative: the smallest change over all cases seen with 80 % power
    mde_case: float  # the same in one typical case
    needed_overall: int | None  # repeats for mde_overall <= threshold (None: over 200)
    needed_case: int | None


WINSORIZED_SHARE = 0.642  # a normal sample's 20 %-winsorized SD, as a share of its SD


def _mde(spread: float, n: int, cases: int, level: float, threshold: float) -> float:
    """Under 5 values nothing is trimmed, and Yuen's test is Welch's on the full SD, which
    the reference's winsorized one understates by WINSORIZED_SHARE."""
    factor = yuen_factor(n)
    if not factor:
        return math.inf
    if math.floor(0.2 * n) == 0:
        spread /= WINSORIZED_SHARE
    se = spread * math.sqrt(2 / factor) / math.sqrt(cases)
    h = n - 2 * math.floor(0.2 * n)
    df = 2 * (h - 1) * cases
    return math.expm1(detectable(se, df, level, math.log1p(threshold)))


def _needed(spread: float, cases: int, level: float, threshold: float) -> int | None:
    for n in range(MIN_REPEATS, MAX_REPEATS + 1):
        if _mde(spread, n, cases, level, threshold) <= threshold:
            return n
    return None


def measured_spread(samples: Iterable[Sequence[float]]) -> float | None:
    """A run's own spread of one figure, as REFERENCE_SPREADS holds the reference run's: the
    root mean square over cases of each case's 20 %-winsorized standard deviation of log
    values (cases with fewer than 5 positive values left out; None when none is left)."""
    squares = []
    for values in samples:
        logs = [math.log(v) for v in values if v > 0]
        if len(logs) < MIN_REPEATS:
            continue
        found = trimmed(logs)
        if found is None:
            continue
        n, h = found.n, found.h
        squares.append(found.d * h * (h - 1) / (n - 1))  # s_w^2 back from Yuen's variance
    if not squares:
        return None
    return math.sqrt(sum(squares) / len(squares))


def plan(
    repeats: int,
    cases: int,
    *,
    threshold: float = 0.05,
    resource_threshold: float = DEFAULT_RESOURCE_THRESHOLD,
    alpha: float = 0.05,
    spreads: dict[str, float] | None = None,
) -> list[Plan]:
    """Per reference figure: what `compare` could see at `repeats` a run over `cases`
    cases, and the repeats that would resolve its threshold, overall and in one case. The
    levels are the families' (compare/family.py): alpha / 2 over the overall figures, alpha
    / 2 over every per-case one."""
    overall_level = alpha / 2 / ASSUMED_OVERALL
    case_level = alpha / 2 / max(1, ASSUMED_OVERALL * cases)
    out = []
    for figure, spread in (REFERENCE_SPREADS if spreads is None else spreads).items():
        limit = resource_threshold if figure == CPU else threshold
        out.append(
            Plan(
                figure=figure,
                threshold=limit,
                mde_overall=_mde(spread, repeats, cases, overall_level, limit),
                mde_case=_mde(spread, repeats, 1, case_level, limit),
                needed_overall=_needed(spread, cases, overall_level, limit),
                needed_case=_needed(spread, 1, case_level, limit),
            )
        )
    return out


def _pct(value: float) -> str:
    if not math.isfinite(value):
        return "none"
    return f"{value:.0%}" if value >= 0.1 else f"{value:.1%}"


def _n(value: int | None) -> str:
    return f">= {value}" if value is not None else f"> {MAX_REPEATS}"


def plan_lines(
    repeats: int,
    cases: int,
    *,
    spreads: dict[str, float] | None = None,
    source: str = f"spreads of a reference run, {REFERENCE}",
    **options: float,
) -> tuple[list[str], bool]:
    """The lines saying what `compare` could detect at `repeats` over `cases` cases and what
    it would need, and whether it would likely say "cannot tell" (an overall figure whose
    detectable change is over its threshold). `spreads`: a run's own (measured_spread),
    named by `source`; default the reference run's."""
    plans = plan(repeats, cases, spreads=spreads, **options)
    parts = [
        f"{p.figure} {_pct(p.mde_overall)} over all {cases} cases ({_pct(p.mde_case)} in one case)"
        for p in plans
    ]
    needs = [
        f"{p.figure} {p.threshold:.0%} over all cases needs repeats {_n(p.needed_overall)} "
        f"(in one case {_n(p.needed_case)})"
        for p in plans
    ]
    lines = [
        f"compare's power at {repeats} repeats ({source}; 80 % power, Holm over the "
        f"families): it can detect {'; '.join(parts)}",
        "repeats needed: " + "; ".join(needs),
    ]
    short = any(p.mde_overall > p.threshold for p in plans)
    return lines, short


def run_plan_lines(durations: dict[str, list[float]], cpu: dict[str, list[float]]) -> list[str]:
    """What `compare` could detect with a run's own spread, at its repeats: `durations` per
    case, `cpu` per case and role (each its values in run order). [] when the run has no
    case with enough values to say."""
    spreads = {}
    for figure, samples in ((DURATION, durations), (CPU, cpu)):
        spread = measured_spread(samples.values())
        if spread is not None:
            spreads[figure] = spread
    counts = sorted(len(values) for values in durations.values() if values)
    if not counts:
        return []
    repeats = counts[len(counts) // 2]
    if DURATION not in spreads:
        return [
            f"compare's power: {repeats} verified transfers a case are too few to measure "
            f"this run's spread ({MIN_REPEATS} at least); `run --dry-run` says what the "
            "reference run's spread would need"
        ]
    lines, _ = plan_lines(repeats, len(durations), spreads=spreads, source="this run's spread")
    return lines
