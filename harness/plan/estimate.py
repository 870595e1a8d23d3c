"""How long a scenario will take, roughly (pure): `run --dry-run`'s estimate of the wall time.

A model, not a measurement: each figure below is one the harness measured on a 2-core
Debian 12 VM (the bench/README-*.md named beside it), so a faster host runs sooner and a
busy one later. Per testbed visit (the cases of one matrix cell share one, and the schedule
brings each up `passes` times): building and tearing it down, the primary loading its zone,
the secondaries' first copies and one unrecorded warm-up repeat. Per repeat: the `settle`
pause, publishing the new serial, a few round trips (NOTIFY, SOA query, handshakes: TLS adds
two), the zone's bytes at the slowest of the link's rate, the Mathis bound of a lossy link
and what one server sends, then the verification read. A cold start is paced by the
secondary's serial-query-rate (BIND) or its measured zones a second (Knot).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from harness.link.bounds import mathis_bps, mss_for_mtu
from harness.link.losscheck import expected_loss_rate
from harness.link.path import configured_rtt, through
from harness.plan.case import CasePlan, GroupPlan
from harness.servers import server_class

SOURCES = "bench/README-scale.md, -transfers.md, -verify.md, -fleet.md, and a quick.toml run"
WIRE_BYTES_PER_RECORD = 29  # tld preset: 1 M records 28.9 MB on the wire (README-pull)
TINY_ZONE_BYTES = 250  # the SOA and NS of the tiny preset, with the DNS overhead
SERVER_SEND_BPS = 135e6  # BIND sending 14 M records (404 MB) in 24 s (README-scale)
VERIFY_RECORDS_PER_S = 400e3  # 14 M records read and summed in 31-34 s (README-scale)
PRIMARY_LOAD_S_PER_RECORD = 5.6e-6  # BIND loads 14 M records in 78 s (README-scale)
VISIT_S = 1.0  # testbed, servers starting and teardown of a 1+1 case (quick.toml: 0.9 s)
PER_SECONDARY_S = 0.17  # each further secondary's namespace, link and teardown (README-fleet)
REPEAT_OVERHEAD_S = 0.1  # publishing the serial and observing (quick.toml run)
ROUND_TRIPS = 3  # a transfer's over TCP (bench/README-phases.md)
TLS_ROUND_TRIPS = 2  # what TLS adds to them (the same)
VERIFY_S_PER_ZONE = 1e-3  # 100 k zones verified in 99 s (README-scale)


@dataclass(frozen=True)
class Estimate:
    seconds: float
    visits: int  # testbeds brought up
    transfers: int
    assumptions: str = SOURCES

    def describe(self) -> str:
        return (
            f"estimated wall time about {_minutes(self.seconds)} ({self.visits} testbed "
            f"visit{'s' if self.visits != 1 else ''}, {self.transfers:,} transfers): a model "
            f"of figures measured on a 2-core VM ({self.assumptions}); the run will differ"
        )


def _minutes(seconds: float) -> str:
    if seconds < 90:
        return f"{max(1, round(seconds))} s"
    if seconds < 5400:
        return f"{round(seconds / 60)} min"
    return f"{seconds / 3600:.1f} h"


def zone_bytes(plan: CasePlan) -> float:
    spec = plan.zone_spec
    if spec.preset == "tiny":
        return float(TINY_ZONE_BYTES)
    return float(spec.records * WIRE_BYTES_PER_RECORD)


def transfer_seconds(plan: CasePlan, size: float) -> float:
    """One copy to the slowest secondary: round trips, then the bytes at the slowest rate."""
    slowest = 0.0
    for host in plan.secondaries:
        path = through(host.link, plan.primary.link)
        rtt = configured_rtt(path)
        rates = [SERVER_SEND_BPS]
        if path.forward.rate:
            rates.append(float(path.forward.rate))
        loss = expected_loss_rate(path.forward.loss) if path.forward.loss.active else 0.0
        if loss > 0 and rtt > 0:
            rates.append(mathis_bps(mss_for_mtu(path.forward.mtu), rtt, loss))
        rate = max(min(rates), 1.0)
        trips = ROUND_TRIPS + (TLS_ROUND_TRIPS if plan.transport.tls else 0)
        slowest = max(slowest, trips * rtt + size * 8 / rate)
    return slowest


def _cold_start_seconds(plan: CasePlan) -> float:
    zones = plan.zone_spec.zones
    server = plan.secondaries[0].server
    rate = server_class(server.kind).cold_zones_per_s(server.options)  # the dialect's pace
    return zones / rate + zones * VERIFY_S_PER_ZONE * len(plan.secondaries)


def repeat_seconds(plan: CasePlan) -> float:
    """One repeat of the case, settle included."""
    if plan.cold_start:
        return _cold_start_seconds(plan) + plan.settle
    size = zone_bytes(plan)
    records = plan.zone_spec.records if plan.xfr == "axfr" else plan.changes
    copy = transfer_seconds(plan, size if plan.xfr == "axfr" else min(size, plan.changes * 60))
    verify = len(plan.secondaries) * plan.zone_spec.records / VERIFY_RECORDS_PER_S
    pulls = len(plan.client_pulls) * (copy + records / VERIFY_RECORDS_PER_S)
    return plan.settle + REPEAT_OVERHEAD_S + copy + verify + pulls


def visit_seconds(group: GroupPlan) -> float:
    """Bringing a group's testbed up and down: servers, the primary's load, first copies
    and the warm-up repeat (not for cold starts)."""
    first = group.first
    hosts = len(first.secondaries)
    seconds = VISIT_S + PER_SECONDARY_S * (hosts - 1)
    seconds += first.zone_spec.records * first.zone_spec.zones * PRIMARY_LOAD_S_PER_RECORD
    if not first.cold_start:
        size = zone_bytes(first)
        seconds += transfer_seconds(first, size)
        seconds += hosts * first.zone_spec.records / VERIFY_RECORDS_PER_S
        seconds += repeat_seconds(first)  # the warm-up
    return seconds


def estimate(groups: list[GroupPlan], passes: int, order: str = "interleaved") -> Estimate:
    """The wall time of the run these groups make: each group's testbed visited `passes`
    times (at most as many as a case has repeats), or each case's with order "blocks"."""
    total = 0.0
    visits = 0
    transfers = 0
    for group in groups:
        times = max(1, min(passes, min(case.repeats for case in group.cases)))
        if order == "blocks":
            times *= len(group.cases)
        visits += times
        total += times * visit_seconds(group)
        for case in group.cases:
            total += case.repeats * repeat_seconds(case)
            transfers += case.transfers()
    return Estimate(seconds=total if math.isfinite(total) else 0.0, visits=visits,
                    transfers=transfers)  # fmt: skip
