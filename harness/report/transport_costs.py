"""What each transport costs (pure): per server pair, zone and transfer kind, each transport's
median duration against TCP's (TCP = 100), the bootstrap interval of that ratio, the
Mann-Whitney test against TCP, and the drift flags that say when a case's durations trend.

One of the first screen's answers: ``data.build_report_data`` calls ``transport_costs`` with
the parsed records, and the renderers (HTML, terminal) only format the result; compare uses
``drift_messages`` too. Every figure comes from the server-to-server records that count (ok
and verified), through the statistics of harness/core/stats.py, so the report says what the rest
of the harness says. A fleet case gives one value per repeat (its convergence time), not one
per secondary: its secondaries of one repeat are no independent samples.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable
from dataclasses import dataclass, field

from harness.core.stats import (
    bootstrap_intervals,
    drift_messages,
    mann_whitney_p,
    min_two_sided_p,
)
from harness.core.terms import SERVER_TO_SERVER, TRANSPORTS
from harness.report.outliers import Outlier, outlier, without
from harness.results.failures import no_result
from harness.results.fleet import fleet_repeat_values
from harness.results.model import TransferRecord

BASELINE = "tcp"  # the transport the others are normalised to (= 100)
PER_FLEET_REPEAT = "fleet repeat (its last secondary, from its first NOTIFY)"
ALPHA = 0.05  # significance level of the Mann-Whitney test against TCP
CONFIDENCE = 0.95  # of the bootstrap interval of the ratio of medians


def transport_group(case: str, transport: str) -> str | None:
    """The case's name without its transport: "bind-bind/preset=tiny/axfr". Case names are
    "pair/axes.../transport/xfr" (harness/spec/loader.py), so the cases of one pair, zone
    and kind differ only in that segment; None for a name that does not follow it."""
    parts = case.split("/")
    if len(parts) < 3 or parts[-2] != transport:
        return None
    return "/".join(parts[:-2] + parts[-1:])


def case_values(records: list[TransferRecord]) -> list[float]:
    """What a case's statistics take, in the order it ran: its verified durations, one per
    transfer; a fleet's, one per repeat (its convergence time: when its last secondary
    served, from the repeat's first NOTIFY), never one per secondary."""
    if any(r.site is not None for r in records):
        per_repeat = fleet_repeat_values(records)
        return [v for _, v in sorted(per_repeat.items()) if v is not None]
    return [float(r.duration_s) for r in records if r.counts and r.duration_s]


def host_drift(records: list[TransferRecord]) -> list[str]:
    """drift_messages of a case's values in the order they ran (a fleet's: per repeat);
    per secondary host where a case of one has several (records of an older layout)."""
    if any(r.site is not None for r in records):
        return drift_messages(case_values(records))
    series: dict[str, list[float]] = {}
    for record in records:
        if record.counts and record.duration_s is not None:
            host = record.host
            series.setdefault(host, []).append(float(record.duration_s))
    if len(series) == 1:
        return drift_messages(next(iter(series.values())))
    return [f"{host}: {line}" for host, values in series.items() for line in drift_messages(values)]


@dataclass
class TransportCost:
    transport: str
    case: str | None  # None: the group has no case of this transport
    n: int  # transfers that count
    median_s: float | None
    index: float | None = None  # 100 x median / TCP's median
    ci: tuple[float, float] | None = None  # bootstrap interval of the index
    p_value: float | None = None  # two-sided Mann-Whitney against TCP's durations
    testable: bool = False  # whether these sample sizes allow p < ALPHA at all
    significant: bool = False
    drift: list[str] = field(default_factory=list)
    missing: str | None = None  # why there is no figure ("unsupported: ...", "3 failed")
    # One repeat far from the rest, of this case or of TCP's (report/outliers.py): the
    # interval is then the others' (`ci_others`), and a line says what happened to it.
    outliers: list[Outlier] = field(default_factory=list)
    ci_others: tuple[float, float] | None = None

    @property
    def spread(self) -> float | None:
        """The larger side of the interval: "111 ±3" as the CZ.NIC table writes it; the
        others' when one repeat is far from the rest."""
        ci = self.ci_others if self.outliers else self.ci
        if ci is None or self.index is None:
            return None
        return max(self.index - ci[0], ci[1] - self.index)


@dataclass
class TransportGroup:
    key: str  # the case name without its transport
    primary: str | None
    secondary: str | None
    xfr: str | None
    baseline_case: str
    baseline_median_s: float | None  # None: TCP has no verified transfer (the row stays)
    baseline_n: int
    costs: list[TransportCost]  # in TRANSPORTS order, TCP first
    per: str = "transfer"  # what one value is: a transfer, or a fleet's repeat

    @property
    def drifting(self) -> bool:
        return any(cost.drift for cost in self.costs)


def transport_costs(
    records: Iterable[TransferRecord], *, alpha: float = ALPHA, confidence: float = CONFIDENCE
) -> list[TransportGroup]:
    """Per server pair, zone and transfer kind with a TCP case and another: each
    transport's median duration as an index (TCP = 100), the bootstrap interval of that
    ratio of medians, the Mann-Whitney p against TCP's durations, and drift flags. A group
    whose TCP case has no verified transfer keeps its row: its costs have medians but no
    index, and TCP's says why."""
    by_case: dict[str, list[TransferRecord]] = {}
    for record in records:
        if record.method == SERVER_TO_SERVER:
            by_case.setdefault(record.case, []).append(record)
    groups: dict[str, dict[str, str]] = {}  # group -> transport -> case
    for case, items in by_case.items():
        key = transport_group(case, items[0].transport)
        if key is not None:
            groups.setdefault(key, {})[items[0].transport] = case

    def durations(case: str) -> list[float]:
        return case_values(by_case[case])

    out = []
    for key, cases in groups.items():
        if BASELINE not in cases or len(cases) < 2:
            continue  # nothing to normalise against, or nothing to compare
        base = durations(cases[BASELINE])
        base_median = statistics.median(base) if base else None
        first = by_case[cases[BASELINE]][0]
        base_far = outlier(cases[BASELINE], by_case[cases[BASELINE]])
        costs = []
        for transport in TRANSPORTS:
            case = cases.get(transport)
            if case is None:
                continue
            values = durations(case)
            if not values:
                missing = no_result(by_case[case])
                costs.append(TransportCost(transport, case, 0, None, missing=missing))
                continue
            median = statistics.median(values)
            drift = host_drift(by_case[case])
            if base_median is None:
                missing = "no TCP baseline"
                costs.append(TransportCost(transport, case, len(values), median, drift=drift,
                                           missing=missing))  # fmt: skip
                continue
            if transport == BASELINE:
                costs.append(
                    TransportCost(transport, case, len(values), median, index=100.0, drift=drift)
                )
                continue
            _, _, change = bootstrap_intervals(base, values, confidence)
            ci = (100 * (1 + change[0]), 100 * (1 + change[1])) if change else None
            far = [] if first.site is not None else [
                o for o in (base_far, outlier(case, by_case[case])) if o is not None
            ]  # fmt: skip
            ci_others = None
            if far:  # the interval of the others: what a reader can use
                mine = far[-1] if far[-1].case == case else None
                _, _, rest = bootstrap_intervals(
                    without(base, base_far), without(values, mine), confidence
                )
                ci_others = (100 * (1 + rest[0]), 100 * (1 + rest[1])) if rest else None
            p = mann_whitney_p(base, values)
            costs.append(
                TransportCost(
                    transport=transport,
                    case=case,
                    n=len(values),
                    median_s=median,
                    index=100 * median / base_median,
                    ci=ci,
                    p_value=p,
                    testable=min_two_sided_p(len(base), len(values)) < alpha,
                    significant=p is not None and p < alpha,
                    drift=drift,
                    outliers=far,
                    ci_others=ci_others,
                )
            )
        out.append(
            TransportGroup(
                key=key,
                primary=first.primary_kind,
                secondary=first.secondary_kind,
                xfr=first.xfr,
                baseline_case=cases[BASELINE],
                baseline_median_s=base_median,
                baseline_n=len(base),
                costs=costs,
                per=PER_FLEET_REPEAT if first.site is not None else "transfer",
            )
        )
    return out
