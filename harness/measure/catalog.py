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
  it started): latency from the primary first serving the new catalog serial. With
  `versions` > 1, that many versions (`add`, `add 2`, ...) each `interval` after the one
  before whether or not it was served, every one measured from its own serial.
- remove: a version removing the `remove` newest members: latency until the consumer no
  longer answers for the member (REFUSED, NOTAUTH or SERVFAIL).
- change: the next serial of one member's zone, published on the primary: latency from
  the primary serving it until the consumer serves the member at it.
- rename: a version whose first member's node (its id kept) names another zone: latency
  until the new zone is served, and when the old one stopped being answered for.
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

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Protocol

from harness.measure.bench import Bench, Emit, secondary_names
from harness.measure.records import Observed, RecordContext, transfer_record
from harness.measure.steps import Seconds, settle
from harness.plan.catalog import CatalogPlan
from harness.results.stream import reached
from harness.zonegen.catalog import Member, catalog_problems, coo_versions

FAILURES_KEPT = 10  # a consumer's failed attempts kept per record, in its own words


@dataclass(frozen=True)
class Usage:
    """A consumer's CPU seconds so far and its charged memory peak (None: not read)."""

    cpu_s: float | None
    peak_bytes: int | None


class CatalogBench(Bench, Protocol):
    """What the catalog flow needs beyond the other flows."""

    def catalog_members(self, zone: str | None = None) -> list[Member]:
        """The members the primary's catalog (`zone`: another it serves) names now."""

    def catalog_serial(self) -> int:
        """The catalog's serial the primary serves now."""

    def sleep(self, seconds: float) -> None: ...

    def put_catalog(self, members: list[Member], zone: str | None = None) -> tuple[int, float]:
        """Publish a catalog version naming `members` (the primary's dialect: an update or a
        file and reload) and wait until the primary serves it: (its serial, when). `zone`:
        another catalog the primary serves (a change of ownership's), not the first."""

    def start_consumers(self) -> float:
        """Every consumer fresh (no member, no catalog on disk) and started: when."""

    def restart_consumer(self, host: str) -> float:
        """Stop `host` and start it again with what it kept on disk: when it started."""

    def put_member(self, zone: str) -> tuple[int, float]:
        """Publish the next serial of member `zone` on the primary (its dialect) and wait
        until the primary serves it: (that serial, when)."""

    def wait_members(
        self, hosts: list[str], zones: list[str], deadline: float, serial: int | None = None
    ) -> dict[str, dict[str, float]]:
        """Per host, when it first served each of `zones` at `serial` (None: the pool's base
        serial), those served by `deadline`."""

    def wait_gone(
        self, hosts: list[str], zones: list[str], deadline: float
    ) -> dict[str, dict[str, float]]:
        """Per host, when it first no longer answered for each of `zones`."""

    def usage(self, host: str) -> Usage: ...

    def member_transfers(
        self, host: str, since: float, zones: list[str] | None = None
    ) -> int | None:
        """Incoming member transfers `host` logged since `since` (unix; None: not logged),
        of `zones` alone when given."""

    def ownership_changes(self, host: str, to: str, since: float) -> dict[str, float] | None:
        """Members `host` logged as moved to the catalog `to` since `since` (unix): zone ->
        when (unix); None when its dialect writes no such line."""

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
    run = _Run(bench, ctx, repeat, emit, extra, problems)
    # A member whose zone the change re-publishes serves a later serial from then on (this
    # repeat and the next): no sample of it is read back against the pool's sums.
    if catalog.change == "zone":
        run.unsampled.add(members[0].zone)
    serial = bench.catalog_serial()
    started_wall = bench.wall()
    bench.mark("transfer-start", repeat)
    t0 = bench.start_consumers()
    # The members an earlier repeat moved to the change of ownership's catalog stay there.
    moved = bench.catalog_members(catalog.coo_zone) if catalog.coo else []
    zones = sorted({m.zone for m in (*members, *moved)})
    run.measure(hosts, PhaseSeen("provision", serial, t0, "consumer started"), zones, started_wall)
    if catalog.add:
        members = _add_versions(run, hosts, members)
    if catalog.remove:
        _interval(bench, catalog)
        generated = members[: len(members) - len(catalog.names)]
        gone, kept = generated[-catalog.remove :], generated[: -catalog.remove]
        members = kept + members[len(generated) :]
        when_wall = bench.wall()
        serial, served = bench.put_catalog(members)
        phase = PhaseSeen("remove", serial, served, "primary served")
        run.measure(hosts, phase, [m.zone for m in gone], when_wall, removed=True)
    if catalog.change == "zone":
        _interval(bench, catalog)
        zone, when_wall = members[0].zone, bench.wall()
        member_serial, served = bench.put_member(zone)
        phase = PhaseSeen("change", bench.catalog_serial(), served, "primary served")
        run.measure(hosts, phase, [zone], when_wall, serial=member_serial)
    if catalog.change == "rename":
        _interval(bench, catalog)
        old = members[0]
        renamed = catalog.member(spec.origin, spec.seed, catalog.renamed_index(repeat))
        members = [dataclasses.replace(old, zone=renamed.zone), *members[1:]]
        when_wall = bench.wall()
        serial, served = bench.put_catalog(members)
        phase = PhaseSeen("rename", serial, served, "primary served")
        run.measure(hosts, phase, [renamed.zone], when_wall, renamed_from=old.zone)
    if catalog.coo:
        members, moved = _coo(run, hosts, members, moved)
    if catalog.restart_secondary:
        zones = sorted({m.zone for m in (*members, *moved)})
        for host in hosts:
            when_wall = bench.wall()
            t = bench.restart_consumer(host)
            phase = PhaseSeen("restart", bench.catalog_serial(), t, "consumer started")
            run.measure([host], phase, zones, when_wall, restarted=True)
    bench.mark("transfer-end", repeat)
    with bench.spent.phase("teardown"):
        bench.stop_secondaries()


@dataclass
class _Published:
    """One adding version: its phase, serial, when the primary served it (bench clock and
    unix), its new members, and each consumer's CPU seconds so far when it was served."""

    phase: str
    serial: int
    served: float
    wall: float
    zones: list[str]
    cpu_at: dict[str, float]


def _add_versions(run: _Run, hosts: list[str], members: list[Member]) -> list[Member]:
    """`versions` versions each adding `add` new members, the first `interval` after the
    provisioning, each next `interval` after the one before was published, served or not
    (an operator's pace: BIND batches what comes within its min-update-interval). Until
    the next version is due, every member added so far and not yet served is polled; each
    version is one record per consumer, its latencies from the primary serving it, its CPU
    from then to the next version (the last's: until all were served)."""
    bench, catalog = run.bench, run.catalog
    spec = run.ctx.plan.zone_spec
    _interval(bench, catalog)
    start = len(members) - len(catalog.names)
    published: list[_Published] = []
    seen: dict[str, dict[str, float]] = {h: {} for h in hosts}
    began = bench.clock()
    for version, phase in enumerate(catalog.add_phases(), start=1):
        first = catalog.added_index(run.repeat, version)
        new = [catalog.member(spec.origin, spec.seed, first + k) for k in range(catalog.add)]
        cut = start + catalog.add * (version - 1)
        members = members[:cut] + new + members[cut:]
        when_wall = bench.wall()
        serial, served = bench.put_catalog(members)
        cpu = {h: bench.usage(h).cpu_s or 0.0 for h in hosts}
        published.append(_Published(phase, serial, served, when_wall, [m.zone for m in new], cpu))
        last = version == catalog.versions
        until = bench.clock() + run.ctx.plan.timeout  # the last version's: a timeout
        if not last:
            until = min(until, began + catalog.interval * version)
        pending = [z for p in published for z in p.zones if any(z not in seen[h] for h in hosts)]
        with bench.spent.phase("transfer"):
            for host, times in bench.wait_members(hosts, pending, until).items():
                for zone, at in times.items():
                    seen[host].setdefault(zone, at)
        if not last:
            _sleep_until(bench, until)
    end_cpu = {h: bench.usage(h).cpu_s or 0.0 for h in hosts}
    for k, version in enumerate(published):
        after = published[k + 1].cpu_at if k + 1 < len(published) else end_cpu
        phase = PhaseSeen(version.phase, version.serial, version.served, "primary served")
        spent = {h: after[h] - version.cpu_at[h] for h in hosts}
        run.record(hosts, phase, version.zones, version.wall, seen, cpu_spent=spent)
    return members


def _coo(
    run: _Run, hosts: list[str], members: list[Member], moved: list[Member]
) -> tuple[list[Member], list[Member]]:
    """A change of ownership (RFC 9432 §5.1) of the first `coo` members, each version
    `interval` after the one before: the old catalog with their `coo` PTRs naming the new
    one, the new catalog naming them (same ids), the old one without them. Per member: from
    the primary serving the new catalog until the consumer logged the move (a dialect that
    logs one), else until the old catalog's removal was `interval` behind it with the
    member served throughout; a member it stopped answering for in that time is not
    reached. Also: its transfers of the moved members since the first version (a consumer
    that keeps them transfers none). (the old catalog's members, the new one's)"""
    bench, catalog = run.bench, run.catalog
    to = catalog.coo_zone
    marked, moved, kept = coo_versions(members, moved, catalog.coo, to)
    zones = [m.zone for m in members[: catalog.coo]]
    _interval(bench, catalog)
    since_wall = bench.wall()
    before = {h: bench.usage(h).cpu_s or 0.0 for h in hosts}
    bench.put_catalog(marked)
    _interval(bench, catalog)
    serial, served = bench.put_catalog(moved, to)
    offset = bench.wall() - bench.clock()  # unix = bench clock + offset
    _interval(bench, catalog)
    bench.put_catalog(kept)
    # Polled for `interval` after the removal: a consumer that drops a member then is seen.
    with bench.spent.phase("transfer"):
        dropped = bench.wait_gone(hosts, zones, bench.clock() + catalog.interval)
    deadline, checked = bench.clock() + run.ctx.plan.timeout, bench.clock()
    seen: dict[str, dict[str, float]] = {}
    facts: dict[str, dict[str, Any]] = {}
    for host in hosts:
        logged = bench.ownership_changes(host, to, since_wall - 1.0)
        while logged is not None and len(set(zones) & logged.keys()) < len(zones):
            if bench.clock() >= deadline:
                break
            bench.sleep(0.2)
            logged = bench.ownership_changes(host, to, since_wall - 1.0)
        gone = dropped.get(host, {})
        if logged is None:
            seen[host] = {z: checked for z in zones if z not in gone}
        else:
            seen[host] = {
                z: at - offset for z, at in logged.items() if z in zones and z not in gone
            }
        facts[host] = {
            "coo_from": catalog.zone,
            "coo_to": to,
            "moved_by": "its log" if logged is not None else "served after the removal",
            "still_served": len(zones) - len(gone),
            "dropped": sorted(gone)[:FAILURES_KEPT],
            "retransfers": bench.member_transfers(host, since_wall - 1.0, zones),
        }
    spent = {h: (bench.usage(h).cpu_s or 0.0) - before[h] for h in hosts}
    phase = PhaseSeen("coo", serial, served, "primary served")
    run.record(hosts, phase, zones, since_wall, seen, cpu_spent=spent, more=facts)
    return kept, moved


def _sleep_until(bench: CatalogBench, moment: float) -> None:
    while bench.clock() < moment:
        bench.sleep(min(0.5, moment - bench.clock()))


def _interval(bench: CatalogBench, catalog: CatalogPlan) -> None:
    """The gap between two catalog versions (a consumer may batch catalog updates: BIND's
    min-update-interval, 5 s by default)."""
    _sleep_until(bench, bench.clock() + catalog.interval)


@dataclass
class _Run:
    """One repeat's measuring: waits on the consumers and writes one record per consumer
    and phase."""

    bench: CatalogBench
    ctx: RecordContext
    repeat: int
    emit: Emit
    extra: dict[str, Any]
    problems: list[str]
    unsampled: set[str] = field(default_factory=set)  # zones never read back whole

    @property
    def catalog(self) -> CatalogPlan:
        assert self.ctx.plan.catalog is not None
        return self.ctx.plan.catalog

    def wait(
        self, hosts: list[str], zones: list[str], *, removed: bool, serial: int | None
    ) -> dict[str, dict[str, float]]:
        """Per host, when each of `zones` was served (at `serial`, else the pool's), or
        gone when `removed`: within the case's timeout from now."""
        deadline = self.bench.clock() + self.ctx.plan.timeout
        with self.bench.spent.phase("transfer"):
            if removed:
                return self.bench.wait_gone(hosts, zones, deadline)
            return self.bench.wait_members(hosts, zones, deadline, serial)

    def measure(
        self,
        hosts: list[str],
        phase: PhaseSeen,
        zones: list[str],
        since_wall: float,
        *,
        removed: bool = False,
        restarted: bool = False,
        serial: int | None = None,
        renamed_from: str | None = None,
    ) -> None:
        """Wait for `zones` at every host in `hosts` (served, or gone when `removed`), then
        record each host's phase. `serial`: the members' serial to wait for (a changed
        member's), else the pool's. `renamed_from`: a renamed member's old zone, then
        waited for until gone (`old_gone_s`, from the same origin)."""
        # CPU is the phase's (a restarted or fresh consumer's from its start); the memory
        # peak is the highest since the consumer started.
        fresh = phase.origin_is == "consumer started"
        before = {h: 0.0 if fresh else (self.bench.usage(h).cpu_s or 0.0) for h in hosts}
        seen = self.wait(hosts, zones, removed=removed, serial=serial)
        gone: dict[str, dict[str, float]] = {}
        if renamed_from is not None:
            gone = self.wait(hosts, [renamed_from], removed=True, serial=None)
        after = {h: self.bench.usage(h).cpu_s for h in hosts}
        spent = {h: None if (a := after[h]) is None else a - before[h] for h in hosts}
        facts: dict[str, dict[str, Any]] = {h: {} for h in hosts}
        if serial is not None:
            for host in hosts:
                facts[host]["member_serial"] = serial
        if renamed_from is not None:
            for host in hosts:
                at = gone.get(host, {}).get(renamed_from)
                facts[host] |= {
                    "renamed_from": renamed_from,
                    "old_gone_s": None if at is None else _round(max(0.0, at - phase.origin)),
                }
        self.record(hosts, phase, zones, since_wall, seen, removed=removed,
                    restarted=restarted, cpu_spent=spent, more=facts,
                    verify=serial is None)  # fmt: skip

    def record(
        self,
        hosts: list[str],
        phase: PhaseSeen,
        zones: list[str],
        since_wall: float,
        seen: dict[str, dict[str, float]],
        *,
        cpu_spent: dict[str, float | None],
        removed: bool = False,
        restarted: bool = False,
        more: dict[str, dict[str, Any]] | None = None,
        verify: bool = True,
    ) -> None:
        """One record per host of `phase`: `seen` its members' times, `cpu_spent` the
        consumer's CPU seconds in the phase, `more` facts of its own."""
        bench, plan, catalog = self.bench, self.ctx.plan, self.catalog
        for host in hosts:
            mine = PhaseSeen(phase.phase, phase.serial, phase.origin, phase.origin_is)
            mine.latencies = _latencies(zones, seen.get(host, {}), phase.origin)
            figures = mine.figures()
            all_served = figures["served"] == figures["members"]
            errors: list[str] = []
            records = 0
            sample: list[str] = []
            if all_served and not removed and verify and catalog.sample:
                sample = _sample([z for z in zones if z not in self.unsampled], catalog.sample)
                with bench.spent.phase("verify"):
                    checks = bench.verify_zones(host, sample, bench.base_serial) if sample else {}
                for zone, check in checks.items():
                    records += check.records or 0
                    if not check.ok:
                        errors.append(f"{zone}: {check.problem}")
            usage = bench.usage(host)
            failures = bench.member_failures(host, since_wall - 1.0)
            cpu = cpu_spent.get(host)
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
                "consumer_cpu_s": None if cpu is None else round(cpu, 3),
                "consumer_peak_bytes": usage.peak_bytes,
                "failures": failures[:FAILURES_KEPT],
                **(more or {}).get(host, {}),
            }
            if restarted:
                facts["transfers_after_restart"] = bench.member_transfers(host, since_wall - 1.0)
            if self.problems:
                facts["catalog_problems"] = self.problems
            error, failed = _verdict(plan.timeout, host, phase.phase, figures, removed,
                                     failures, errors, self.problems)  # fmt: skip
            observed = Observed(
                serial=facts.get("member_serial", phase.serial),
                duration_s=figures["last_s"] if all_served else None,
                started_at=since_wall,
                ok=failed is None,
                error=error,
                verified=failed is None,
                failure=failed,
                records=records or None,
                phases={k: v for k in ("p50_s", "p95_s") if (v := figures[k]) is not None},
                extra={"catalog": facts} | self.extra,
            )
            self.emit(transfer_record(self.ctx, host=host, repeat=self.repeat,
                                      zone=catalog.zone, observed=observed))  # fmt: skip


def _verdict(
    timeout: float,
    host: str,
    phase: str,
    figures: dict[str, Any],
    removed: bool,
    failures: list[str],
    errors: list[str],
    problems: list[str],
) -> tuple[str | None, Any]:
    """(error, failure kind) of one record: not all served (a timeout), a sample that did
    not verify, a catalog with problems; (None, None) when it counts."""
    if figures["served"] < figures["members"]:
        what = "stopped answering for" if removed else "served"
        error = (
            f"timeout after {timeout:g} s: {host} {what} {figures['served']} of "
            f"{figures['members']} members ({phase})"
        )
        if failures:
            error += f"; it said: {failures[0]}"
        return error, "timeout"
    if errors:
        return "; ".join(errors[:5]), "verification"
    if problems:
        return "catalog: " + "; ".join(problems[:5]), "verification"
    return None, None


def _sample(zones: list[str], count: int) -> list[str]:
    """`count` zones spread evenly over the sorted list (the first and last among them)."""
    if count >= len(zones):
        return list(zones)
    if count == 1:
        return [zones[-1]]
    step = (len(zones) - 1) / (count - 1)
    return list(dict.fromkeys(zones[round(k * step)] for k in range(count)))
