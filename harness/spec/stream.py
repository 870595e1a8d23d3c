"""A change stream ([stream], with `trigger = "stream"`): new serials published on a
schedule, whether or not the fleet keeps up, and the propagation target they are held to.

    [stream]
    interval = "5s"        # time between new serials (the mean with arrival = "poisson")
    duration = "5m"        # or: updates = 60 (exactly one of the two)
    changes = 100          # records per update (default zones.ixfr_changes)
    arrival = "fixed"      # or "poisson": exponential gaps, seeded by schedule_seed
    sla = "30s"            # optional: the load time a serial should meet
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Literal

from pydantic import Field, model_validator

from harness.spec.fields import Duration, Strict
from harness.zonegen import tld

if TYPE_CHECKING:
    from harness.spec.scenario import Scenario

MIN_INTERVAL_S = 0.01  # a publish every 10 ms is already far beyond any primary's pace
MAX_UPDATES = 100_000
MAX_CHANGE_SHARE = 0.10  # an update changes at most 10 % of the zone, as large IXFRs do
MIN_CHANGE_LIMIT = 2  # ...and small zones may still replace their 2 records (tiny)


class StreamSpec(Strict):
    interval: Duration
    updates: int | None = Field(default=None, ge=1, le=MAX_UPDATES)
    duration: Duration | None = None
    changes: int | None = Field(default=None, ge=1, le=10_000_000)
    arrival: Literal["fixed", "poisson"] = "fixed"
    sla: Duration | None = None

    @model_validator(mode="after")
    def _workable(self) -> StreamSpec:
        if self.interval < MIN_INTERVAL_S:
            raise ValueError(
                f"interval {self.interval:g} s is below {MIN_INTERVAL_S:g} s; give e.g. '200ms'"
            )
        if (self.updates is None) == (self.duration is None):
            raise ValueError(
                "give exactly one of 'updates' (how many serials) and 'duration' (for how "
                "long), e.g. updates = 60 or duration = '5m'"
            )
        if self.duration is not None and self.duration < self.interval:
            raise ValueError(
                f"duration {self.duration:g} s is shorter than one interval "
                f"({self.interval:g} s); give a longer duration or a shorter interval"
            )
        if self.sla is not None and self.sla <= 0:
            raise ValueError("sla must be more than 0, e.g. '30s'")
        return self


def change_limit(records: int) -> int:
    """The most records one update may change in a zone of `records` records."""
    return max(MIN_CHANGE_LIMIT, int(records * MAX_CHANGE_SHARE))


def most_serials(stream: StreamSpec) -> int:
    """The most serials one repeat of the stream publishes (with Poisson arrivals over a
    duration: the expected count and five standard deviations more)."""
    if stream.updates is not None:
        return stream.updates
    assert stream.duration is not None
    expected = stream.duration / stream.interval
    if stream.arrival == "fixed":
        return max(1, math.ceil(round(expected, 9)))
    return math.ceil(expected + 5 * math.sqrt(expected)) + 1


def stream_problem(scenario: Scenario) -> tuple[str, str] | None:
    """(key, what is wrong) when the scenario's stream cannot run on its zone: an update
    changes more than 10 % of it (more is a new zone every interval: an AXFR workload, not
    a stream of changes), or a TLD zone has too few delegations for the whole chain of
    change sets (each delegation is edited at most once along it: zonegen/changes.py)."""
    stream = scenario.stream
    if stream is None:
        return None
    zones = scenario.zones
    changes = stream.changes or zones.ixfr_changes
    key = "stream.changes" if stream.changes is not None else "zones.ixfr_changes"
    if zones.preset == "tiny":  # the plan takes tiny's 2 records, whatever is asked
        return None
    records = zones.record_count
    limit = change_limit(records)
    if changes > limit:
        return key, (
            f"{changes:,} changes per update are more than 10 % of the {records:,}-record "
            f"zone; give at most {limit:,}, or more zones.records"
        )
    if zones.preset != "tld":
        return None
    delegations = tld.plan(zones.origin, records, zones.seed).full
    per_set = changes // 2 or changes
    # The warm-up, then every repeat of every case of the testbed (transports x kinds).
    sets = 1 + len(scenario.transports) * len(scenario.xfr) * scenario.max_repeats * most_serials(
        stream
    )
    if sets * per_set > delegations:
        return "stream", (
            f"{sets:,} change sets (the warm-up, and up to {most_serials(stream):,} serials "
            f"per repeat, case and transfer kind) of {changes:,} changes edit "
            f"{sets * per_set:,} delegations; the {records:,}-record zone has {delegations:,}: "
            "give fewer updates, a shorter duration, fewer changes or more zones.records"
        )
    return None
