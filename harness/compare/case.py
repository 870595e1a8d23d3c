"""One case and figure of two runs, compared (pure): the effect, its test and its
detectable change; the verdict comes from the whole family (harness/compare/family.py).

Each side's values go through Yuen's trimmed Welch test (harness/core/power.py): on log
values for times, CPU and memory (the change is the ratio of trimmed geometric means), on
the values themselves for counts and shares (the change is a difference, with a floor:
compare/figures.py FLOORS). A fleet's values are one per repeat, a site's too (when its
last secondary served): the secondaries of one repeat are no independent samples, and
pooling them would make p-values too small (harness/results/fleet.py)."""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field

from harness.compare.figures import (
    DURATION,
    FAILURES,
    FLEET_FIGURES,
    FLOORS,
    UNITS,
    FailureCount,
    Key,
    Values,
    duration_values,
    figure_kind,
    scale_of_figure,
)
from harness.core.power import ABSOLUTE, LOG, Effect, t_quantile, trimmed, yuen
from harness.core.stats import DRIFT_VERDICTS, drift_check, drift_messages, more_failures_p
from harness.core.terms import SERVER_TO_SERVER
from harness.results.fleet import fleet_repeat_values, fleet_repeats
from harness.results.model import TransferRecord
from harness.results.summary import case_label

DEFAULT_THRESHOLD = 0.05
DEFAULT_ALPHA = 0.05

REGRESSION = "regression"
IMPROVEMENT = "improvement"
NO_CHANGE = "no-change"  # no regression, and one of the threshold would have been seen
CANNOT_TELL = "cannot-tell"  # neither: too few values for the spread, a drift, no data
FAILED_IN_B = "failed-in-b"  # every transfer failed in B, none in A
NEW_IN_B = "new-in-b"
NO_DATA = "no-data"
UNSUPPORTED_IN_B = "unsupported-in-b"  # declared by B's versions: A's figure is not checked
MISSING_IN_B = "missing-in-b"  # a figure A recorded and B did not
MISSING_IN_A = "missing-in-a"  # a figure B recorded and A did not: no baseline
NEW_FAILURES = "new-failures"  # B failed where A never did
MORE_FAILURES = "more-failures"  # both failed, B significantly more often
FAILING_IN_BOTH = "failing-in-both"
FEWER_FAILURES = "fewer-failures"
NOT_CONVERGED_IN_B = "not-converged-in-b"  # a fleet whose new serial did not reach all of it
REPORTED = "reported"  # one value per run (a peak): shown, never gated
REGRESSIONS = (REGRESSION, FAILED_IN_B, NEW_FAILURES, MORE_FAILURES, NOT_CONVERGED_IN_B)
UNDECIDED = (CANNOT_TELL, UNSUPPORTED_IN_B, MISSING_IN_B, MISSING_IN_A)

# Kinds of warning, so that the terminal prints one line per kind, not one per case.
DRIFT = "drift"
NOT_CONVERGED = "not converged"  # a fleet's repeat, and who it did not reach
# What one value of a fleet's comparison is (never one secondary's transfer).
PER_SITE_REPEAT = "repeat: when the site's last secondary served, from its first NOTIFY"
PER_FLEET_REPEAT = "repeat: the fleet's last or p95 time, from its first NOTIFY"
ALL_CASES = "all cases"  # the case of a figure's overall comparison


# --- one case and figure ------------------------------------------------------------------


@dataclass
class Side:
    """One run's values of one figure in one case. `durations_s` and `median_s` keep the
    names of the JSON from when durations were the only figure: values are in the
    figure's unit."""

    attempts: int
    n: int  # values (transfers that count, for durations; repeats, for a fleet)
    failed: int  # attempts with no value: not ok or not verified, unsupported included
    median_s: float | None
    level: float | None  # the 20 %-trimmed (geometric, for ratios) mean the test compares
    spread: float | None  # half the 95 % interval of `level`: a share of it for ratios
    durations_s: list[float]  # the values, in the order they were measured
    drift: list[str] = field(default_factory=list)  # drift_check's lines, [] when steady
    drifting: bool = False  # a trend that adds up to the threshold or more over the run
    resolution: float | None = None  # the step its values move in (Values.resolution)


@dataclass
class CaseComparison:
    case: str
    method: str
    a: Side
    b: Side
    change: float | None  # B / A - 1 of the levels (a difference for counts and shares)
    change_ci: tuple[float, float] | None  # its 1 - alpha interval, for reading
    p_value: float | None  # one-sided: is B worse (higher)?
    verdict: str
    site: str | None = None  # a fleet's site
    figure: str = DURATION
    scale: str = LOG
    unit: str = "s"
    threshold: float = DEFAULT_THRESHOLD  # the change that must be seen (floors applied)
    effect: Effect | None = None
    p_adjusted: float | None = None  # Holm's, over the family of the whole comparison
    mde: float | None = None  # the smallest change detected with 80 % power, as `change`
    needs_n: int | None = None  # values a side for mde <= threshold (None: beyond 1000)
    decidable: bool = False
    significant: bool = False
    required: bool = False  # must be decidable for exit 0 (an overall figure, a fleet's)
    in_family: bool = False  # one of Holm's m (a comparison that could reach significance)
    overall: bool = False  # the figure over all cases with a value in both runs
    cases: int = 1  # how many cases an overall comparison combines
    identical: bool = False  # A's and B's values are the same
    single: bool = False  # one value per run: reported, not gated
    reasons: list[str] = field(default_factory=list)  # why it cannot tell
    warnings: list[str] = field(default_factory=list)
    kinds: list[str] = field(default_factory=list)  # the kind of each warning
    failure_kinds: dict[str, dict[str, int]] = field(default_factory=dict)  # run -> kinds
    per: str = "transfer"  # what one value is: a transfer, or (a fleet's) a repeat

    @property
    def case_label(self) -> str:
        label = case_label(self.case, self.method)
        return label if self.site is None else f"{label} @ {self.site}"

    @property
    def label(self) -> str:
        label = self.case_label
        if self.overall:
            return f"{ALL_CASES}: {self.figure}"
        return label if self.figure == DURATION else f"{label}: {self.figure}"

    @property
    def regression(self) -> bool:
        return self.verdict in REGRESSIONS

    @property
    def undecided(self) -> bool:
        return self.verdict in UNDECIDED


def _drift(series: dict[str, list[float]], threshold: float) -> tuple[list[str], bool]:
    """drift_check's lines for each series (one per fleet host: a site's hosts take turns,
    and a near-first host beside a late one is no trend), and whether any trends by the
    threshold or more over its run: then it, not the other run, may be what the change
    measures. A slow first repeat is said, but moves a trimmed mean little."""
    lines: list[str] = []
    drifting = False
    for host, values in series.items():
        prefix = f"{host}: " if len(series) > 1 else ""
        lines += [prefix + line for line in drift_messages(values)]
        check = drift_check(values)
        trend = check.trend
        if check.verdict in DRIFT_VERDICTS and trend is not None:
            drifting |= abs(trend.relative_slope * (trend.n - 1)) >= threshold
    return lines, drifting


def side_of(values: Values, threshold: float, scale: str = LOG) -> Side:
    series = values.series or {"": values.values}
    drift, drifting = ([], False) if values.single else _drift(series, threshold)
    level = spread = None
    usable = scale == LOG and all(v > 0 for v in values.values)
    side = trimmed([math.log(v) for v in values.values] if usable else values.values)
    if side is not None:
        half = t_quantile(0.975, side.df) * math.sqrt(side.d)
        level = math.exp(side.mean) if usable else side.mean
        spread = math.expm1(half) if usable else half
    elif values.values:
        level = statistics.median(values.values)
    return Side(
        attempts=values.attempts,
        n=len(values.values),
        failed=values.attempts - len(values.values),
        median_s=statistics.median(values.values) if values.values else None,
        level=level,
        spread=spread,
        durations_s=values.values,
        drift=drift,
        drifting=drifting,
        resolution=values.resolution,
    )


def threshold_of(figure: str, scale: str, threshold: float, level_a: float | None) -> float:
    """The change a figure must be able to show, as its `change` is expressed: relative for
    ratios, in the figure's unit for counts and shares; never under the figure's floor."""
    floor = FLOORS.get(figure_kind(figure), 0.0)
    level = abs(level_a or 0.0)
    if scale == ABSOLUTE:
        return max(threshold * level, floor)
    return max(threshold, floor / level) if floor and level else threshold


def _preset(a: Side, b: Side, all_unsupported: bool) -> str | None:
    """The verdict when a side has no values, before any test."""
    if a.n and b.n:
        return None
    if a.n:
        return UNSUPPORTED_IN_B if all_unsupported else FAILED_IN_B
    return NEW_IN_B if b.n else NO_DATA


def compare_sides(
    case: str,
    method: str,
    a: Side,
    b: Side,
    *,
    threshold: float,
    alpha: float,
    site: str | None = None,
    figure: str = DURATION,
    single: bool = False,
    unsupported_in_b: bool = False,
) -> CaseComparison:
    """Two samples of one figure (one value per transfer or repeat), tested; or two single
    values (`single`: a peak per run, reported and never gated). The verdict is provisional
    (CANNOT_TELL, or a preset one) until the family is judged."""
    scale = scale_of_figure(figure)
    effect = None if single else yuen(a.durations_s, b.durations_s, scale)
    if effect is not None and effect.scale != scale:
        scale = effect.scale  # a ratio figure with a 0 in it: a difference, against A's level
    change = ci = None
    if effect is not None:
        change = effect.relative if scale == LOG else effect.estimate
        ci = effect.interval(alpha)
    elif a.median_s and b.median_s is not None:
        change = b.median_s / a.median_s - 1
    identical = sorted(a.durations_s) == sorted(b.durations_s) and a.failed == b.failed
    verdict = REPORTED if single else (_preset(a, b, unsupported_in_b) or CANNOT_TELL)
    if not single and verdict == CANNOT_TELL and effect is None:
        verdict = CANNOT_TELL  # a side under 2 values: nothing to test
    level_a = effect.level_a if effect is not None else a.level
    return CaseComparison(
        case=case,
        method=method,
        a=a,
        b=b,
        change=change,
        change_ci=ci,
        p_value=effect.p_worse() if effect is not None else None,
        verdict=verdict,
        site=site,
        figure=figure,
        scale=scale,
        unit=UNITS.get(figure_kind(figure), "s"),
        threshold=threshold_of(figure, scale, threshold, level_a),
        effect=effect,
        identical=identical,
        single=single,
        warnings=[
            f"run {name}: {line}" for name, side in (("A", a), ("B", b)) for line in side.drift
        ],
        kinds=[DRIFT] * (len(a.drift) + len(b.drift)),
    )


def compare_case(
    case: str,
    method: str,
    records_a: list[TransferRecord],
    records_b: list[TransferRecord],
    *,
    threshold: float,
    alpha: float,
    site: str | None = None,
) -> CaseComparison:
    """The durations of one case (and site) in two runs; a fleet's site by one value per
    repeat, when its last secondary served (from the first NOTIFY to the site): a repeat in
    which one of them failed has no value."""

    def values(records: list[TransferRecord]) -> Values:
        if site is None:
            return duration_values(records).get((case, method, site, DURATION), Values([], 0))
        per_repeat = fleet_repeat_values(records)
        times = [v for _, v in sorted(per_repeat.items()) if v is not None]
        return Values(times, len(per_repeat))

    item = compare_sides(
        case,
        method,
        side_of(values(records_a), threshold),
        side_of(values(records_b), threshold),
        threshold=threshold,
        alpha=alpha,
        site=site,
        unsupported_in_b=bool(records_b) and all(r.unsupported for r in records_b),
    )
    if site is not None:
        item.per = PER_SITE_REPEAT
    if item.verdict == UNSUPPORTED_IN_B:  # A's figure goes unchecked: said, never a pass
        item.required = True
        item.reasons.append("unsupported in B only (declared by its versions)")
    return item


def compare_failures(key: Key, a: FailureCount, b: FailureCount, *, alpha: float) -> CaseComparison:
    """Failed of counted in two runs: Boschloo's exact test, one-sided (does B fail more
    often?), in the family like every test. B failing where A never did is a regression
    whatever p says."""
    case, method, site, _ = key
    p = more_failures_p(a.failed, a.counted, b.failed, b.counted)
    if b.failed and not a.failed:
        verdict = NEW_FAILURES
    elif a.failed and b.failed:
        verdict = FAILING_IN_BOTH  # MORE_FAILURES when the family's test says so
    elif a.failed:
        verdict = FEWER_FAILURES
    else:
        verdict = NO_CHANGE

    def side(count: FailureCount) -> Side:
        return Side(count.counted, count.counted - count.failed, count.failed, None, None,
                    None, [])  # fmt: skip

    return CaseComparison(
        case=case,
        method=method,
        a=side(a),
        b=side(b),
        change=None,
        change_ci=None,
        p_value=p,
        verdict=verdict,
        site=site,
        figure=FAILURES,
        identical=(a.failed, a.counted) == (b.failed, b.counted),
        unit=UNITS[FAILURES],
        failure_kinds={"a": a.kinds, "b": b.kinds},
        decidable=True,
    )


def fleet_comparisons(
    records_a: list[TransferRecord],
    records_b: list[TransferRecord],
    *,
    threshold: float,
    alpha: float,
) -> list[CaseComparison]:
    """Per fleet case in both runs: the last secondary's and the 95th percentile's time to
    serve the new serial, one value per repeat (harness/results/fleet.py). A repeat that
    did not get there (not converged: no last time, or fewer than 95 % served) has no value;
    any such repeat in B makes the figure a regression, whatever the times of the others.
    These are the fleet's own figures: they must be decidable for exit 0."""
    repeats_a, repeats_b = fleet_repeats(records_a), fleet_repeats(records_b)
    out = []
    for case in dict.fromkeys(r.case for r in repeats_a):
        mine_a = [r for r in repeats_a if r.case == case]
        mine_b = [r for r in repeats_b if r.case == case]
        if not mine_b:
            continue
        for figure, name in zip(FLEET_FIGURES, ("last_s", "p95_s"), strict=True):
            values_a = [getattr(r, name) for r in mine_a if getattr(r, name) is not None]
            values_b = [getattr(r, name) for r in mine_b if getattr(r, name) is not None]
            item = compare_sides(
                case,
                SERVER_TO_SERVER,
                side_of(Values(values_a, len(mine_a)), threshold),
                side_of(Values(values_b, len(mine_b)), threshold),
                threshold=threshold,
                alpha=alpha,
                figure=figure,
            )
            item.per = PER_FLEET_REPEAT
            item.required = True
            short_b = [r for r in mine_b if getattr(r, name) is None]
            if short_b:
                item.verdict = NOT_CONVERGED_IN_B
                item.identical = False
                for name_, mine in (("A", mine_a), ("B", mine_b)):
                    for r in mine:
                        if getattr(r, name) is None:
                            text = f"run {name_} repeat {r.repeat}: {r.served_of}, not converged"
                            item.warnings.append(text + ": " + "; ".join(r.why_missing()))
                            item.kinds.append(NOT_CONVERGED)
            out.append(item)
    return out
