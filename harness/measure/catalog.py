"""Catalog zones (trigger "catalog"): consumers provisioning member zones from a catalog the
primary publishes, timed per member and per catalog version. Pure against `CatalogBench`;
measure/live_catalog.py carries it out on real servers.

A repeat, with its phases (plan/catalog.py):

- provision: each consumer starts fresh with the catalog zone alone configured and must
  come to serve every member the catalog names. A member's provisioning latency runs from
  the later of the primary serving that catalog serial and the consumer's start, to the
  consumer's first answer with the member's SOA at its serial (every member's SOA serial is
  checked that way; `sample` members are read back whole and verified against the primary).
- add: a catalog version adding `add` new members (their zones loaded on the primary since
  it started): latency from the primary first serving the new catalog serial.
- remove: a version removing the `remove` newest members: latency until the consumer no
  longer answers for the member (REFUSED, NOTAUTH or SERVFAIL).
- restart: each consumer stopped and started again once all are served: how many members
  it transferred again (its own log: NSD #427's shape) and how long until it served all.

Figures per consumer and phase (one record each): k of N served, p50 / p95 / last by nearest
rank over all N, a member never served ranking last (so "not reached" when the rank falls
on one, never dropped: results/stream.py `reached`), the consumer's CPU seconds and charged
memory peak, its failed attempts in its own words. A phase where not every member was served
is a `timeout` failure; a sample that did not verify, a `verification` one. A catalog that
names a zone twice, whose version property a consumer must reject, or with two PTR
targets at a member node, is published as written, its problems in the records, and fails
them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from harness.measure.bench import Bench, Emit, secondary_names
from harness.measure.records import Observed, RecordContext, transfer_record
from harness.measure.steps import Seconds, settle
from harness.plan.catalog import CatalogPlan
from harness.results.stream import reached
from harness.zonegen.catalog import Member, catalog_problems

FAILURES_KEPT = 10  # a consumer's failed attempts kept per record, in its own words


@dataclass(frozen=True)
class Usage:
    """A consumer's CPU seconds so far and its charged memory peak (None: not read)."""

    cpu_s: float | None
    peak_bytes: int | None


class CatalogBench(Bench, Protocol):
    """What the catalog flow needs beyond the other flows."""

    def catalog_members(self) -> list[Member]:
        """The members the primary's catalog names now."""

    def catalog_serial(self) -> int:
        """The catalog's serial the primary serves now."""

    def sleep(self, seconds: float) -> None: ...

    def put_catalog(self, members: list[Member]) -> tuple[int, float]:
        """Publish a catalog version naming `members` (the primary's dialect: an update or a
        file and reload) and wait until the primary serves it: (its serial, when)."""

    def start_consumers(self) -> float:
        """Every consumer fresh (no member, no catalog on disk) and started: when."""

    def restart_consumer(self, host: str) -> float:
        """Stop `host` and start it again with what it kept on disk: when it started."""

    def wait_members(
        self, hosts: list[str], zones: list[str], deadline: float
    ) -> dict[str, dict[str, float]]:
        """Per host, when it first served each of `zones` at its base serial (those served
        by `deadline`)."""

    def wait_gone(
        self, hosts: list[str], zones: list[str], deadline: float
    ) -> dict[str, dict[str, float]]:
        """Per host, when it first no longer answered for each of `zones`."""

    def usage(self, host: str) -> Usage: ...

    def member_transfers(self, host: str, since: float) -> int | None:
        """Incoming member transfers `host` logged since `since` (unix; None: not logged)."""

    def member_failures(self, host: str, since: float) -> list[str]:
        """`host`'s failed attempts and refusals since `since` (unix), in its own words."""


@dataclass
class PhaseSeen:
    """One phase at one consumer: the latency of each member (None: not reached)."""

    phase: str
    serial: int
    origin: float  # bench clock: the latencies' zero
    origin_is: str  # "primary served" | "consumer started"
    latencies: dict[str, float | None] = field(default_factory=dict)

    def figures(self) -> dict[str, Any]:
        values = list(self.latencies.values())
        served = sum(v is not None for v in values)
        out: dict[str, Any] = {
            "members": len(values),
            "served": served,
            "p50_s": _round(reached(values, 50)),
            "p95_s": _round(reached(values, 95)),
            "last_s": _round(reached(values, 100)),
        }
        if served < len(values):
            missing = sorted(z for z, v in self.latencies.items() if v is None)
            out["not_served"] = missing[:FAILURES_KEPT]
        return out


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 6)


def _latencies(zones: list[str], seen: dict[str, float], origin: float) -> dict[str, float | None]:
    """Each zone's latency from `origin` (never negative: a member seen before the origin
    was already served then), None when never seen."""
    return {z: (max(0.0, seen[z] - origin) if z in seen else None) for z in zones}


def catalog_repeat(
    bench: CatalogBench, ctx: RecordContext, repeat: int, emit: Emit, extra: dict[str, Any]
) -> None:
    """One repeat of a catalog case: its phases in order, one record per consumer each."""
    plan = ctx.plan
    catalog = plan.catalog
    assert catalog is not None, "a catalog case has a catalog plan"
    hosts = secondary_names(plan)
    spec = plan.zone_spec
    seconds = Seconds()
    settle(bench, seconds)
    members = bench.catalog_members()
    problems = catalog_problems(members, catalog.version)
    serial = bench.catalog_serial()
    started_wall = bench.wall()
    bench.mark("transfer-start", repeat)
    t0 = bench.start_consumers()
    zones = sorted({m.zone for m in members})
    phase = PhaseSeen("provision", serial, t0, "consumer started")
    _measure(bench, ctx, repeat, emit, extra, hosts, phase, zones, started_wall, problems)
    if catalog.add:
        _interval(bench, catalog)
        start = len(members) - len(catalog.names)
        first_new = catalog.members + catalog.add * (repeat - 1)
        new = [catalog.member(spec.origin, spec.seed, first_new + k) for k in range(catalog.add)]
        members = members[:start] + new + members[start:]
        when_wall = bench.wall()
        serial, served = bench.put_catalog(members)
        phase = PhaseSeen("add", serial, served, "primary served")
        new_zones = [m.zone for m in new]
        _measure(bench, ctx, repeat, emit, extra, hosts, phase, new_zones, when_wall, problems)
    if catalog.remove:
        _interval(bench, catalog)
        generated = members[: len(members) - len(catalog.names)]
        gone, kept = generated[-catalog.remove :], generated[: -catalog.remove]
        members = kept + members[len(generated) :]
        when_wall = bench.wall()
        serial, served = bench.put_catalog(members)
        phase = PhaseSeen("remove", serial, served, "primary served")
        gone_zones = [m.zone for m in gone]
        _measure(
            bench, ctx, repeat, emit, extra, hosts, phase, gone_zones, when_wall, problems,
            removed=True,
        )  # fmt: skip
    if catalog.restart_secondary:
        zones = sorted({m.zone for m in members})
        for host in hosts:
            when_wall = bench.wall()
            t = bench.restart_consumer(host)
            phase = PhaseSeen("restart", serial, t, "consumer started")
            _measure(
                bench, ctx, repeat, emit, extra, [host], phase, zones, when_wall, problems,
                restarted=True,
            )  # fmt: skip
    bench.mark("transfer-end", repeat)
    with bench.spent.phase("teardown"):
        bench.stop_secondaries()


def _interval(bench: CatalogBench, catalog: CatalogPlan) -> None:
    """The gap between two catalog versions (a consumer may batch catalog updates: BIND's
    min-update-interval, 5 s by default)."""
    end = bench.clock() + catalog.interval
    while bench.clock() < end:
        bench.sleep(min(0.5, end - bench.clock()))


def _measure(
    bench: CatalogBench,
    ctx: RecordContext,
    repeat: int,
    emit: Emit,
    extra: dict[str, Any],
    hosts: list[str],
    phase: PhaseSeen,
    zones: list[str],
    since_wall: float,
    problems: list[str],
    *,
    removed: bool = False,
    restarted: bool = False,
) -> None:
    """Wait for `zones` at every host in `hosts` (served, or gone when `removed`), then
    record each host's phase."""
    plan = ctx.plan
    catalog = plan.catalog
    assert catalog is not None
    deadline = bench.clock() + plan.timeout
    # CPU is the phase's (a restarted or fresh consumer's from its start); the memory peak
    # is the highest since the consumer started.
    before = {h: (bench.usage(h).cpu_s or 0.0) if phase.origin_is != "consumer started" else 0.0
              for h in hosts}  # fmt: skip
    with bench.spent.phase("transfer"):
        if removed:
            seen = bench.wait_gone(hosts, zones, deadline)
        else:
            seen = bench.wait_members(hosts, zones, deadline)
    for host in hosts:
        mine = PhaseSeen(phase.phase, phase.serial, phase.origin, phase.origin_is)
        mine.latencies = _latencies(zones, seen.get(host, {}), phase.origin)
        figures = mine.figures()
        all_served = figures["served"] == figures["members"]
        errors: list[str] = []
        records = 0
        sample: list[str] = []
        if all_served and not removed and catalog.sample:
            sample = _sample(zones, catalog.sample)
            with bench.spent.phase("verify"):
                checks = bench.verify_zones(host, sample, bench.base_serial)
            for zone, check in checks.items():
                records += check.records or 0
                if not check.ok:
                    errors.append(f"{zone}: {check.problem}")
        usage = bench.usage(host)
        failures = bench.member_failures(host, since_wall - 1.0)
        facts: dict[str, Any] = {
            "phase": phase.phase,
            "catalog_serial": phase.serial,
            "origin": phase.origin_is,
            **figures,
            # Every served member's latency, in ms, sorted (the summary pools them).
            "latencies_ms": sorted(
                round(v * 1000) for v in mine.latencies.values() if v is not None
            ),
            "verified_sample": len(sample),
            "consumer_cpu_s": None if usage.cpu_s is None else round(usage.cpu_s - before[host], 3),
            "consumer_peak_bytes": usage.peak_bytes,
            "failures": failures[:FAILURES_KEPT],
        }
        if restarted:
            facts["transfers_after_restart"] = bench.member_transfers(host, since_wall - 1.0)
        if problems:
            facts["catalog_problems"] = problems
        if not all_served:
            what = "stopped answering for" if removed else "served"
            error = (
                f"timeout after {plan.timeout:g} s: {host} {what} {figures['served']} of "
                f"{figures['members']} members ({phase.phase})"
            )
            if failures:
                error += f"; it said: {failures[0]}"
            failed: Any = "timeout"
        elif errors:
            error, failed = "; ".join(errors[:5]), "verification"
        elif problems:
            error, failed = "catalog: " + "; ".join(problems[:5]), "verification"
        else:
            error, failed = None, None
        observed = Observed(
            serial=phase.serial,
            duration_s=figures["last_s"] if all_served else None,
            started_at=since_wall,
            ok=failed is None,
            error=error,
            verified=failed is None,
            failure=failed,
            records=records or None,
            phases={k: v for k in ("p50_s", "p95_s") if (v := figures[k]) is not None},
            extra={"catalog": facts} | extra,
        )
        emit(transfer_record(ctx, host=host, repeat=repeat, zone=catalog.zone, observed=observed))


def _sample(zones: list[str], count: int) -> list[str]:
    """`count` zones spread evenly over the sorted list (the first and last among them)."""
    if count >= len(zones):
        return list(zones)
    if count == 1:
        return [zones[-1]]
    step = (len(zones) - 1) / (count - 1)
    return list(dict.fromkeys(zones[round(k * step)] for k in range(count)))
