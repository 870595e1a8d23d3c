"""One case and figure of two runs, compared (pure): the statistics and the verdict of
each figure (see harness/compare/gate.py for what is compared and why).

A fleet's values are one per repeat, a site's too (when its last secondary served): the
secondaries of one repeat are no independent samples, and pooling them would make p-values
too small (harness/results/fleet.py)."""

from __future__ import annotations

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
)
from harness.core.stats import (
    DRIFT_VERDICTS,
    bootstrap_intervals,
    coefficient_of_variation,
    drift_check,
    drift_messages,
    mann_whitney_p,
    min_two_sided_p,
    more_failures_p,
    repeats_for_alpha,
)
from harness.core.terms import SERVER_TO_SERVER
from harness.results.fleet import fleet_repeat_values, fleet_repeats
from harness.results.model import TransferRecord
from harness.results.summary import case_label

DEFAULT_THRESHOLD = 0.05
DEFAULT_ALPHA = 0.05
MIN_N = 5  # fewer transfers per case and run: a single outlier moves the median
MAX_CV = 0.10

REGRESSION = "regression"
IMPROVEMENT = "improvement"
NO_CHANGE = "no-change"
DRIFTING = "drifting"  # significantly worse, but a side drifts: not called a regression
FAILED_IN_B = "failed-in-b"  # every transfer failed in B, none in A
NEW_IN_B = "new-in-b"
NO_DATA = "no-data"
UNSUPPORTED_IN_B = "unsupported-in-b"  # declared by B's versions, not a failure
NEW_FAILURES = "new-failures"  # B failed where A never did
MORE_FAILURES = "more-failures"  # both failed, B significantly more often
FAILING_IN_BOTH = "failing-in-both"
FEWER_FAILURES = "fewer-failures"
NOT_CONVERGED_IN_B = "not-converged-in-b"  # a fleet whose new serial did not reach all of it
REGRESSIONS = (REGRESSION, FAILED_IN_B, NEW_FAILURES, MORE_FAILURES, NOT_CONVERGED_IN_B)

# Kinds of warning, so that the terminal prints one line per kind, not one per case.
FEW = "few transfers"
SPREAD = "wide spread"
DRIFT = "drift"
NOT_CONVERGED = "not converged"  # a fleet's repeat, and who it did not reach
# What one value of a fleet's comparison is (never one secondary's transfer).
PER_SITE_REPEAT = "repeat: when the site's last secondary served, from its first NOTIFY"
PER_FLEET_REPEAT = "repeat: the fleet's last or p95 time, from its first NOTIFY"


# --- one case and figure ------------------------------------------------------------------


@dataclass
class Side:
    """One run's values of one figure in one case. The field names are the JSON's, kept
    from when durations were the only figure: values are in the figure's unit."""

    attempts: int
    n: int  # values (transfers that count, for durations)
    failed: int  # attempts with no value: not ok or not verified, unsupported included
    median_s: float | None
    ci_s: tuple[float, float] | None
    cv: float | None
    durations_s: list[float]  # the values, in the order they were measured
    drift: list[str] = field(default_factory=list)  # drift_check's lines, [] when steady
    drifting: bool = False  # a trend that adds up to the threshold or more over the run


@dataclass
class CaseComparison:
    case: str
    method: str
    a: Side
    b: Side
    change: float | None  # median B / median A - 1
    change_ci: tuple[float, float] | None
    p_value: float | None
    min_p: float  # the smallest p these sample sizes allow
    significant: bool
    verdict: str
    warnings: list[str] = field(default_factory=list)
    kinds: list[str] = field(default_factory=list)  # the kind of each warning
    site: str | None = None  # a fleet's site
    figure: str = DURATION
    within: bool = False  # the change's whole interval lies within the threshold
    identical: bool = False  # A's and B's values are the same
    single: bool = False  # one value per run: no test
    unit: str = "s"
    failure_kinds: dict[str, dict[str, int]] = field(default_factory=dict)  # run -> kinds
    per: str = "transfer"  # what one value is: a transfer, or (a fleet's) a repeat

    @property
    def case_label(self) -> str:
        label = case_label(self.case, self.method)
        return label if self.site is None else f"{label} @ {self.site}"

    @property
    def label(self) -> str:
        label = self.case_label
        return label if self.figure == DURATION else f"{label}: {self.figure}"

    @property
    def regression(self) -> bool:
        return self.verdict in REGRESSIONS


def _drift(series: dict[str, list[float]], threshold: float) -> tuple[list[str], bool]:
    """drift_check's lines for each series (one per fleet host: a site's hosts take turns,
    and a near-first host beside a late one is no trend), and whether any trends by the
    threshold or more over its run: then it, not the other run, may be what the change
    measures. A slow first repeat is said, but moves a median little."""
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


def side_of(values: Values, threshold: float) -> Side:
    series = values.series or {"": values.values}
    drift, drifting = ([], False) if values.single else _drift(series, threshold)
    return Side(
        attempts=values.attempts,
        n=len(values.values),
        failed=values.attempts - len(values.values),
        median_s=statistics.median(values.values) if values.values else None,
        ci_s=None,
        cv=coefficient_of_variation(values.values),
        durations_s=values.values,
        drift=drift,
        drifting=drifting,
    )


def stability_warnings(a: Side, b: Side, alpha: float) -> list[str]:
    return [text for _, text in _stability(a, b, alpha)]


def _stability(a: Side, b: Side, alpha: float) -> list[tuple[str, str]]:
    """(kind, text) of each reason not to trust the comparison of these two sides."""
    warnings = []
    smallest = min(a.n, b.n)
    if 0 < smallest < MIN_N:
        floor = min_two_sided_p(a.n, b.n)
        needed = max(MIN_N, repeats_for_alpha(alpha))
        if floor >= alpha:
            warnings.append((
                FEW,
                f"unstable: n={a.n} vs {b.n}: the smallest two-sided Mann-Whitney p possible "
                f"is {floor:.3g}, so no change can be significant at alpha {alpha:g}; run at "
                f"least {needed} transfers per case in each run (scenario repeats)",
            ))  # fmt: skip
        else:
            warnings.append((
                FEW,
                f"unstable: n={a.n} vs {b.n}: fewer than {MIN_N} transfers, one slow transfer "
                f"moves the median; run at least {needed} transfers per case in each run",
            ))  # fmt: skip
    for name, side in (("A", a), ("B", b)):
        if side.cv is not None and side.cv > MAX_CV:
            warnings.append((
                SPREAD,
                f"unstable: run {name} spread is wide (CV {side.cv:.1%} > {MAX_CV:.0%}): "
                "a busy host or a noisy link; its median is not a reliable figure",
            ))  # fmt: skip
    for name, side in (("A", a), ("B", b)):
        for line in side.drift:
            warnings.append((DRIFT, f"run {name}: {line}"))
    return warnings


def _verdict(a: Side, b: Side, significant: bool, worse: bool, all_unsupported: bool) -> str:
    if a.n and b.n:
        if significant and worse:
            return DRIFTING if (a.drifting or b.drifting) else REGRESSION
        return IMPROVEMENT if significant else NO_CHANGE
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
    """The comparison of two samples of one figure (one value per transfer or repeat), or
    of two single values (`single`: a peak per run, which no test can judge)."""
    kind = figure_kind(figure)
    floor = FLOORS.get(kind, 0.0)
    change = change_ci = p = None
    if a.median_s is not None and b.median_s is not None:
        base = max(a.median_s, floor)
        change = (b.median_s - a.median_s) / base if base else None
    if not single:
        a.ci_s, b.ci_s, change_ci = bootstrap_intervals(a.durations_s, b.durations_s, 1 - alpha)
        p = mann_whitney_p(a.durations_s, b.durations_s)
    beyond = change is not None and abs(change) > threshold
    if single:
        gap = abs((b.median_s or 0.0) - (a.median_s or 0.0))
        significant = beyond and gap >= floor
    else:
        significant = beyond and p is not None and p < alpha
    identical = sorted(a.durations_s) == sorted(b.durations_s) and a.failed == b.failed
    verdict = _verdict(a, b, significant, bool(change and change > 0), unsupported_in_b)
    if change_ci is not None:
        within = -threshold <= change_ci[0] and change_ci[1] <= threshold
    else:
        within = change is not None and abs(change) <= threshold
    stability = [] if identical or single else _stability(a, b, alpha)
    return CaseComparison(
        case=case,
        method=method,
        a=a,
        b=b,
        change=change,
        change_ci=change_ci,
        p_value=p,
        min_p=1.0 if single else min_two_sided_p(a.n, b.n),
        significant=significant,
        verdict=verdict,
        warnings=[text for _, text in stability],
        kinds=[kind for kind, _ in stability],
        site=site,
        figure=figure,
        within=within or identical,
        identical=identical,
        single=single,
        unit=UNITS.get(kind, "s"),
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
            return duration_values(records)[(case, method, site, DURATION)]
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
    return item


def compare_failures(key: Key, a: FailureCount, b: FailureCount, *, alpha: float) -> CaseComparison:
    """Failed of counted in two runs: Boschloo's exact test, one-sided (does B fail more
    often?). B failing where A never did is a regression whatever p says."""
    case, method, site, _ = key
    p = more_failures_p(a.failed, a.counted, b.failed, b.counted)
    if b.failed and not a.failed:
        verdict = NEW_FAILURES
    elif b.failed and p is not None and p < alpha:
        verdict = MORE_FAILURES
    elif a.failed and b.failed:
        verdict = FAILING_IN_BOTH
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
        min_p=more_failures_p(0, a.counted, b.counted, b.counted) or 1.0,
        significant=verdict in (NEW_FAILURES, MORE_FAILURES, FEWER_FAILURES),
        verdict=verdict,
        site=site,
        figure=FAILURES,
        identical=(a.failed, a.counted) == (b.failed, b.counted),
        unit=UNITS[FAILURES],
        failure_kinds={"a": a.kinds, "b": b.kinds},
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
    any such repeat in B makes the figure a regression, whatever the times of the others."""
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
            short_b = [r for r in mine_b if getattr(r, name) is None]
            if short_b:
                item.verdict = NOT_CONVERGED_IN_B
                item.identical = item.within = False
                for name_, mine in (("A", mine_a), ("B", mine_b)):
                    for r in mine:
                        if getattr(r, name) is None:
                            text = f"run {name_} repeat {r.repeat}: {r.served_of}, not converged"
                            item.warnings.append(text + ": " + "; ".join(r.why_missing()))
                            item.kinds.append(NOT_CONVERGED)
            out.append(item)
    return out
