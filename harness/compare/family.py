"""The verdicts of one `compare` (pure): each figure's overall comparison over the cases,
Holm's correction over every test of the call, and for each comparison whether it is a
regression, no regression at the stated power, or cannot tell.

- Overall: per figure (and role), the mean of the per-case effects of the cases with a
  value in both runs (harness/core/power.py `combine`, which says why not weighted). It is what sees
  a broad change no single case can resolve: CPU per transfer spreads 10-35 % per case.
- The families: every comparison that can reach significance, failures included, in one
  of two: the required ones (below) and the per-case ones, alpha / 2 each. A comparison
  of two identical constant samples (one connection per transfer in every transfer of both
  runs) cannot reach significance at any level, so it is left out of m (Tarone's argument:
  it cannot make a false discovery). Holm's step-down procedure over each family's
  one-sided p-values ("is B worse?") keeps the chance of any false regression at alpha in
  all, whatever the dependence between them. One family for all would put the three or
  so required comparisons to alpha / 51 with quick.toml; at alpha / 6 the secondary's CPU
  over 16 cases is decidable at 10 repeats (an MDE of 8-9 % instead of 10 %).
- A regression: rejected by Holm, and worse by at least half the threshold (a smaller
  change is not worth a failed gate, however sure: FLOOR_SHARE). Drift is no excuse: a
  significant worsening is a regression whether or not a side drifts.
- The detectable change (MDE) is taken at its family's alpha / m, the level Holm puts a
  lone change to,
  with 80 % power; "no regression" (NO_CHANGE) needs MDE <= the threshold, else the
  comparison cannot tell, and says how many values a side would do. A B that is worse
  while a side drifts, with the change's interval reaching a regression's size (half the
  threshold), cannot tell either: drifting values are not one distribution, so the spread
  understates what the next run would show.
- Which must be decidable for exit 0 (`required`): each figure's overall comparison, a
  fleet's and a stream's own figures. Per-case comparisons are judged for regressions and
  shown with their MDE; under `strict` they must be decidable too. The reference run
  (quick20-a) is why: per-case durations spread 1-7 % and per-case CPU 10-35 %, so at 10
  repeats a per-case MDE of 5 % is out of reach for most cases, while the overall figures
  resolve it (tests/unit/test_compare_calibration.py).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

from harness.compare.case import (
    ALL_CASES,
    CANNOT_TELL,
    FAILING_IN_BOTH,
    IMPROVEMENT,
    MORE_FAILURES,
    NO_CHANGE,
    REGRESSION,
    REPORTED,
    CaseComparison,
    Side,
    threshold_of,
)
from harness.compare.figures import FAILURES, Thresholds
from harness.core import fmt
from harness.core.power import (
    FLOOR_SHARE,
    LOG,
    POWER,
    combine,
    detectable,
    holm,
    repeats_needed,
    t_quantile,
)
from harness.core.terms import SERVER_TO_SERVER

PROCEDURE = "Holm"


def _testable(item: CaseComparison) -> bool:
    """In the family: a comparison with a test that could reach significance."""
    if item.figure == FAILURES:
        return item.p_value is not None and (item.a.failed + item.b.failed) > 0
    effect = item.effect
    if item.single or effect is None or item.verdict != CANNOT_TELL:
        return False
    return not (effect.se <= 0 and effect.estimate == 0)  # constant and equal: Tarone


def _side_of_overall(items: list[CaseComparison], which: str) -> Side:
    sides = [getattr(item, which) for item in items]
    return Side(
        attempts=sum(s.attempts for s in sides),
        n=sum(s.n for s in sides),
        failed=sum(s.failed for s in sides),
        median_s=None,
        level=None,
        spread=None,
        durations_s=[],
        resolution=max((s.resolution for s in sides if s.resolution), default=None),
    )


def overall_comparisons(
    items: list[CaseComparison], thresholds: Thresholds
) -> list[CaseComparison]:
    """Per figure, the combination of its per-case effects. A figure compared in one case
    only has no overall comparison: that case's is the figure's, and is required."""
    out = []
    by_figure: dict[str, list[CaseComparison]] = {}
    for item in items:
        if item.figure != FAILURES and not item.single and item.effect is not None:
            by_figure.setdefault(item.figure, []).append(item)
    for figure, mine in by_figure.items():
        if len(mine) == 1:
            mine[0].required = True
            continue
        scales = {item.effect.scale for item in mine if item.effect is not None}
        effects = [item.effect for item in mine if item.effect is not None]
        if len(scales) > 1:  # a ratio figure with a 0 somewhere: judged case by case
            continue
        combined = combine(effects)
        assert combined is not None
        identical = all(item.identical for item in mine)
        scale = combined.scale
        a, b = _side_of_overall(mine, "a"), _side_of_overall(mine, "b")
        a.level, b.level = combined.level_a, combined.level_b
        out.append(
            CaseComparison(
                case=ALL_CASES,
                method=SERVER_TO_SERVER,
                a=a,
                b=b,
                change=combined.relative if scale == LOG else combined.estimate,
                change_ci=None,
                p_value=combined.p_worse(),
                verdict=CANNOT_TELL,
                figure=figure,
                scale=scale,
                unit=mine[0].unit,
                threshold=threshold_of(figure, scale, thresholds.of(figure), combined.level_a),
                effect=combined,
                required=True,
                overall=True,
                cases=len(mine),
                identical=identical,
                per=mine[0].per,
            )
        )
    return out


def _on_scale(value: float, scale: str) -> float:
    return math.log1p(value) if scale == LOG else value


def _from_scale(value: float, scale: str) -> float:
    return math.expm1(value) if scale == LOG else value


def _mean_n(item: CaseComparison) -> float:
    if item.overall:
        return (item.a.n + item.b.n) / (2 * max(1, item.cases))
    return (item.a.n + item.b.n) / 2


def _judge(item: CaseComparison, rejected: bool, level: float, alpha: float) -> None:
    """The verdict of one tested comparison (module docstring)."""
    effect = item.effect
    assert effect is not None
    limit = _on_scale(item.threshold, item.scale)
    floor = FLOOR_SHARE * limit
    item.change_ci = effect.interval(alpha)
    mde = detectable(effect.se, effect.df, level, limit)
    item.mde = _from_scale(mde, item.scale)
    item.decidable = mde <= limit
    if not item.decidable:
        item.needs_n = repeats_needed(effect.se, effect.df, _mean_n(item), level, limit)
    worse = effect.estimate > 0
    # A drift can hide a regression only where the change's interval reaches one: a B
    # worse by 0.4 % whose whole interval stays under half the threshold is no regression
    # however its sides drift (it made an A/A run flaky: "cannot tell" 2 runs in 5).
    reach = effect.estimate + (
        t_quantile(1 - alpha / 2, effect.df) * effect.se if effect.se > 0 else 0.0
    )
    drifting = (item.a.drifting or item.b.drifting) and reach >= floor
    item.significant = rejected and abs(effect.estimate) >= floor
    if item.significant and worse:
        item.verdict = REGRESSION
        item.decidable = True
    elif effect.estimate <= -floor and (1 - effect.p_worse() if effect.se > 0 else 1.0) < level:
        item.verdict = IMPROVEMENT  # as sure the other way as a lone regression must be
        item.decidable = True
    elif item.identical:
        item.verdict, item.decidable = NO_CHANGE, True
    elif item.decidable and not (worse and drifting):
        item.verdict = NO_CHANGE
    else:
        item.verdict = CANNOT_TELL
        if worse and drifting:
            item.decidable = False
            item.reasons.append("worse while a side drifts: its spread understates the next run's")
        if item.needs_n is not None or mde > limit:
            needs = f"n >= {item.needs_n}" if item.needs_n else "n > 1000"
            item.reasons.append(f"needs {needs} a run")
    _within_resolution(item)


def resolution_problem(
    verdict: str,
    level_a: float,
    level_b: float,
    threshold: float,
    scale: str,
    resolution: float | None,
) -> str | None:
    """Why values read in steps of `resolution` (seconds) cannot support `verdict`, or None
    (pure): a difference of levels within one step is neither a regression nor an
    improvement, and "no change" needs a change of the threshold to be more than a step.
    `threshold` is relative on the LOG scale, in the figure's unit on the ABSOLUTE one."""
    if not resolution:
        return None
    step = fmt.duration(resolution)
    if verdict in (REGRESSION, IMPROVEMENT) and abs(level_b - level_a) <= resolution:
        return (f"B - A ({fmt.duration(level_b - level_a)}) is within the values' resolution "
                f"({step} steps)")  # fmt: skip
    change = threshold * abs(level_a) if scale == LOG else threshold
    if verdict == NO_CHANGE and change < resolution:
        return f"a change of the threshold ({fmt.duration(change)}) is under one step ({step})"
    return None


def _within_resolution(item: CaseComparison) -> None:
    """A verdict the values' resolution cannot support becomes "cannot tell" (CPU read
    from /proc moves in 10 ms ticks: a transfer's 6.7 ms against 10 ms is no regression)."""
    effect = item.effect
    if effect is None or item.identical:
        return
    resolution = max((s.resolution for s in (item.a, item.b) if s.resolution), default=None)
    problem = resolution_problem(item.verdict, effect.level_a, effect.level_b, item.threshold,
                                 item.scale, resolution)  # fmt: skip
    if problem is not None:
        item.verdict, item.decidable, item.significant = CANNOT_TELL, False, False
        item.reasons.append(problem)


@dataclass
class Family:
    """One of the two families Holm's procedure runs over, and its share of alpha."""

    name: str
    m: int
    alpha: float

    @property
    def level(self) -> float:
        """alpha / m: the level a lone change faces, where detectable changes are taken."""
        return self.alpha / max(1, self.m)


OVERALL_FAMILY = "overall"  # the required comparisons: each figure over all cases, fleets'
CASE_FAMILY = "per case"


def judge(items: list[CaseComparison], alpha: float) -> list[Family]:
    """Holm over each family, then each comparison's verdict (in place). The required
    comparisons (each figure overall, a fleet's and a stream's own figures) and the
    per-case ones are two families with alpha / 2 each (alpha whole when one is empty):
    by Bonferroni between them, the chance of any false regression stays at most alpha,
    and the few comparisons that must be decidable are not put to the level of a hundred."""
    groups = {OVERALL_FAMILY: [], CASE_FAMILY: []}  # type: dict[str, list[CaseComparison]]
    for item in items:
        if _testable(item):
            groups[OVERALL_FAMILY if item.required else CASE_FAMILY].append(item)
    share = alpha / max(1, sum(1 for members in groups.values() if members))
    families = []
    for name, members in groups.items():
        family = Family(name, len(members), share if members else 0.0)
        families.append(family)
        p_values = [float(item.p_value) for item in members if item.p_value is not None]
        rejected, adjusted = holm(p_values, share)
        for item, reject, p_adj in zip(members, rejected, adjusted, strict=True):
            item.in_family = True
            item.p_adjusted = p_adj
            if item.figure == FAILURES:
                if item.verdict == FAILING_IN_BOTH and reject:
                    item.verdict, item.significant = MORE_FAILURES, True
                continue
            _judge(item, reject, family.level, alpha)
    for item in items:
        if item.in_family or item.verdict == REPORTED:
            continue
        if item.effect is not None and item.verdict == CANNOT_TELL:  # constant and equal
            item.verdict, item.decidable, item.mde = NO_CHANGE, True, 0.0
        elif item.verdict == CANNOT_TELL and not item.reasons:
            item.reasons.append("under 2 values in a run")
    return families


def undecided(items: Iterable[CaseComparison], strict: bool) -> list[CaseComparison]:
    """The comparisons that keep the verdict from "no regression" (exit 4 when nothing is a
    regression): every required one that cannot tell, and under `strict` every one."""
    return [item for item in items if item.undecided and (item.required or strict)]


def power_words(families: list[Family], alpha: float) -> str:
    """ "Holm's correction, family-wise error 0.05: overall m=3 at 0.025, ..."."""
    parts = [f"{f.name} m={f.m} at {f.alpha:g}" for f in families if f.m]
    levels = ", ".join(f"{f.level:.2g}" for f in families if f.m)
    return (
        f"one-sided tests (is B worse?), {PROCEDURE}'s correction within each family, "
        f"family-wise error {alpha:g} in all: {'; '.join(parts) or 'no test'}; detectable "
        f"changes at alpha/m ({levels}) with {POWER:.0%} power"
    )
