"""A case's plan: everything about it that can be decided before anything runs (pure).

    plan = plan_case(case)
    plan.hosts          # the primary first, then its secondaries, each with its server,
                        # its per-host TCP settings and (a secondary) its link
    plan.zone_spec      # what zonegen writes
    plan.endpoints()    # the testbed's topology

The runner turns a plan into hosts (a Testbed), servers (a dialect per host) and a
measurement flow; nothing in here touches the machine, so every decision is unit-tested.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from typing import Any

from harness import zonegen
from harness.core.terms import Method, Role, Trigger, XfrKind
from harness.core.transport import Transport
from harness.plan.catalog import CatalogPlan
from harness.plan.endpoint import Endpoint
from harness.plan.stream import StreamPlan
from harness.servers.capabilities import Capabilities, Support
from harness.spec import Case, FaultSpec, HostSpec, LinkSpec, ServerSpec
from harness.spec.catalog import pool_size
from harness.spec.scenario import DEFAULT_COLD_START_POLL

# A tiny zone has one NS to replace: 2 changes at most.
TINY_CHANGES = 2


@dataclass(frozen=True)
class HostPlan:
    """One server's host: its name, role, server, TCP settings and link to the router."""

    name: str  # "primary", "secondary", or "<site>-<n>" in a fleet
    role: Role
    server: ServerSpec
    settings: HostSpec
    link: LinkSpec  # a secondary's path from the primary; the primary's own access link
    site: str = ""  # the site a secondary belongs to ("secondary" without declared sites)

    def endpoint(self) -> Endpoint:
        return Endpoint(self.name, self.role, self.settings, self.link, self.site)


@dataclass(frozen=True)
class CasePlan:
    case: Case
    zone_spec: zonegen.ZoneSpec
    hosts: tuple[HostPlan, ...]  # the primary first
    transport: Transport  # its case's (TLS, TSIG algorithm, port)
    xfr: XfrKind
    trigger: Trigger
    repeats: int
    timeout: float
    changes: int  # records per IXFR change set
    client_pulls: tuple[str, ...]
    settle: float = 1.0  # most seconds from one transfer's end to the next trigger
    settle_fixed: bool = False  # wait all of `settle`, whatever the evidence says
    prove: str = "once"  # prove a switch to a configuration once per visit, or every one
    # A cold start's SOA queries per second to each secondary at most, or "off" (its log)
    cold_start_poll: int | str = DEFAULT_COLD_START_POLL
    fault: FaultSpec | None = None  # what breaks in each repeat (harness/measure/faults.py)
    stream: StreamPlan | None = None  # trigger "stream": its schedule and target
    catalog: CatalogPlan | None = None  # trigger "catalog": its members and versions
    # How copies are verified: "disk" or "served"; None: disk where the secondary's dialect
    # keeps a copy on disk, served otherwise (measure/disk_copy.py)
    verify: str | None = None

    @property
    def name(self) -> str:
        return self.case.name

    @property
    def primary(self) -> HostPlan:
        return self.hosts[0]

    @property
    def secondaries(self) -> tuple[HostPlan, ...]:
        return self.hosts[1:]

    @property
    def sites(self) -> dict[str, list[str]]:
        """Each site's name -> the names of its secondaries in this plan (an inventory's
        hosts on inventory hosts, run/remote.py `on_inventory`; the scenario's elsewhere)."""
        out: dict[str, list[str]] = {}
        for host in self.secondaries:
            out.setdefault(host.site, []).append(host.name)
        return out

    @property
    def is_fleet(self) -> bool:
        """Declared sites, or more than one secondary: records name their secondary."""
        return self.case.scenario.secondaries is not None or len(self.secondaries) > 1

    @property
    def notify(self) -> bool:
        """The primary NOTIFYs its secondaries (when that is the trigger, or in a stream)."""
        return self.trigger in ("notify", "stream", "catalog")

    @property
    def ixfr(self) -> bool:
        return self.xfr == "ixfr"

    @property
    def cold_start(self) -> bool:
        return self.trigger == "cold-start"

    @property
    def methods(self) -> tuple[Method, ...]:
        pulls: tuple[Method, ...] = tuple(f"client-pull-{m}" for m in self.client_pulls)  # type: ignore[misc]
        return ("server-to-server", *pulls)

    def transfers(self) -> int:
        """Transfer records the case writes when all goes well: one per secondary and
        repeat (in a stream: per secondary and serial, as the first repeat's schedule
        has them), plus the client pulls (from the first secondary's host)."""
        per_repeat = len(self.secondaries)
        if self.stream is not None:
            per_repeat *= len(self.stream.offsets(self.name, 1))
        if self.catalog is not None:
            per_repeat *= len(self.catalog.phases())
        return self.repeats * (per_repeat + len(self.client_pulls))

    def endpoints(self) -> tuple[Endpoint, ...]:
        return tuple(host.endpoint() for host in self.hosts)

    @property
    def servers_key(self) -> str:
        """Its servers' settings (kind, binary, suite, options per host): cases of one group
        that differ here are an A/B axis over server variants."""
        return json.dumps(
            {host.name: host.server.model_dump(mode="json") for host in self.hosts},
            sort_keys=True,
        )

    @property
    def switch_key(self) -> tuple[str, str, str, str]:
        """What the running servers of its group are switched for, the costliest first: the
        servers' settings, the transport, the transfer kind, then its fault (a case of its
        own beside them). plan/schedule.py clustered_pass keeps shared prefixes together."""
        fault = self.fault.label if self.fault is not None else ""
        return (self.servers_key, self.transport.name, self.xfr, fault)


def zone_spec(case: Case) -> zonegen.ZoneSpec:
    z = case.scenario.zones
    return zonegen.ZoneSpec(
        preset=z.preset,
        records=z.record_count,
        origin=z.origin,
        seed=z.seed,
        zones=pool_size(c, case.scenario.max_repeats) if (c := case.scenario.catalog) else z.zones,
        signed=z.signed,
        serial=z.serial,
        file=z.file,
        versions=tuple(z.versions or ()),
    )


def plan_case(case: Case) -> CasePlan:
    """The plan of one case of a scenario: its primary (behind its uplink) and every
    secondary of every site (a scenario without sites has one, named "secondary")."""
    scenario = case.scenario
    changes = scenario.zones.ixfr_changes
    stream = None
    if scenario.stream is not None:
        given = scenario.stream
        changes = given.changes or changes
        stream = StreamPlan(
            given.interval,
            given.updates,
            given.duration,
            given.arrival,
            given.sla,
            scenario.schedule_seed,
        )
    catalog = None
    if (given_catalog := scenario.catalog) is not None:
        catalog = CatalogPlan(
            given_catalog.zone,
            given_catalog.members,
            given_catalog.add,
            given_catalog.remove,
            given_catalog.interval,
            given_catalog.restart_secondary,
            given_catalog.sample,
            given_catalog.group,
            tuple(given_catalog.names),
            given_catalog.version or None,
            given_catalog.second_target,
            given_catalog.versions,
            given_catalog.change,
            given_catalog.coo or 0,
            given_catalog.coo_zone,
        )
    if scenario.zones.preset == "tiny":
        changes = min(changes, TINY_CHANGES)
    primary = HostPlan(
        "primary", "primary", scenario.servers.primary, scenario.hosts.primary, scenario.uplink
    )
    secondaries = tuple(
        HostPlan(name, "secondary", site.server, site.host, site.link, site.name)
        for site in scenario.fleet
        for name in site.host_names()
    )
    return CasePlan(
        case=case,
        zone_spec=zone_spec(case),
        hosts=(primary, *secondaries),
        transport=case.transport,
        xfr=case.xfr,
        trigger=scenario.trigger,
        repeats=scenario.repeats,
        timeout=scenario.timeout,
        changes=changes,
        client_pulls=tuple(scenario.client_pulls),
        settle=scenario.settle,
        settle_fixed=scenario.settle_fixed,
        prove=scenario.prove,
        cold_start_poll=scenario.cold_start_poll,
        fault=case.fault,
        stream=stream,
        catalog=catalog,
        verify=scenario.verify,
    )


def support_problem(plan: CasePlan, servers: dict[str, tuple[str, Capabilities]]) -> str | None:
    """Why the installed versions cannot run this case, or None. Never a silent fallback.

    `servers`: host name -> ("<kind> <version>", its capabilities).
    """
    needs = (  # (the case needs it, the primary's capability, each secondary's)
        (plan.transport.tls, "xot_primary", "xot_secondary"),
        (plan.transport.signed, "tsig", "tsig"),
        (plan.ixfr, "ixfr_primary", "ixfr_secondary"),
        (plan.ixfr and plan.zone_spec.signed, "ixfr_primary", "ixfr_signed_secondary"),
    )
    primary, caps = servers[plan.primary.name]
    if plan.zone_spec.signed and not caps.signed_primary.ok:
        return f"primary {primary}: {caps.signed_primary.reason}"
    for needed, as_primary, as_secondary in needs:
        if not needed:
            continue
        support: Support = getattr(caps, as_primary)
        if not support.ok:
            return f"primary {primary}: {support.reason}"
        for host in plan.secondaries:
            secondary, theirs = servers[host.name]
            support = getattr(theirs, as_secondary)
            if not support.ok:
                return f"secondary {secondary}: {support.reason}"
    return axfr_problem(plan, servers)


def axfr_problem(plan: CasePlan, servers: dict[str, tuple[str, Capabilities]]) -> str | None:
    """Why an AXFR case sharing its primary with IXFR cases (which keeps it providing IXFR)
    cannot get AXFRs: a secondary that asks IXFR anyway, and a primary that cannot stop
    providing it (measure/primary_ixfr.py). None when it can."""
    primary, caps = servers[plan.primary.name]
    if plan.ixfr or "ixfr" not in plan.case.scenario.xfr or not caps.ixfr_primary.ok:
        return None
    if caps.withholds_ixfr_primary.ok:
        return None
    for host in plan.secondaries:
        secondary, theirs = servers[host.name]
        if not theirs.axfr_only_secondary.ok:
            return (
                f"secondary {secondary}: {theirs.axfr_only_secondary.reason}, and primary "
                f"{primary}: {caps.withholds_ixfr_primary.reason} (AXFR beside IXFR cases)"
            )
    return None


def supported_part(
    plan: CasePlan, servers: dict[str, tuple[str, Capabilities]]
) -> tuple[CasePlan | None, dict[str, str]]:
    """A fleet case some secondaries cannot take (Knot 3.2 beside BIND over XoT): the case
    for the others, and why each of those cannot. (None, {}) when the primary (or every
    secondary) cannot: the whole case is unsupported (support_problem says why)."""
    if support_problem(plan, servers) is None:
        return plan, {}
    alone = {
        host.name: support_problem(dataclasses.replace(plan, hosts=(plan.primary, host)), servers)
        for host in plan.secondaries
    }
    able = [host for host in plan.secondaries if alone[host.name] is None]
    if not able or not plan.is_fleet:
        return None, {}
    reasons = {name: why for name, why in alone.items() if why is not None}
    return dataclasses.replace(plan, hosts=(plan.primary, *able)), reasons


@dataclass(frozen=True)
class GroupPlan:
    """Cases that share one testbed and one set of servers: those of one matrix cell, which
    differ only in transport and transfer kind. The primary serves what any of them needs
    (TLS, the TSIG key, IXFR); each secondary is switched between the cases' settings by its
    server's own reconfiguration (harness/run/session.py)."""

    cases: tuple[CasePlan, ...]

    @property
    def first(self) -> CasePlan:
        return self.cases[0]

    @property
    def name(self) -> str:
        return (
            self.first.name
            if len(self.cases) == 1
            else f"{self.first.name} (+{len(self.cases) - 1})"
        )

    @property
    def tls(self) -> bool:
        """A case of the group is over TLS: the primary listens for XoT."""
        return any(case.transport.tls for case in self.cases)

    @property
    def tsig_algorithm(self) -> str | None:
        """The algorithm of the group's TSIG key, None when no case is signed."""
        return next((c.transport.tsig_algorithm for c in self.cases if c.transport.signed), None)

    @property
    def signed_only(self) -> bool:
        """Every case of the group is signed: the primary refuses unsigned transfers."""
        return all(case.transport.signed for case in self.cases)

    @property
    def ixfr(self) -> bool:
        """An IXFR case is in the group: every new serial applies the change-set chain."""
        return any(case.ixfr for case in self.cases)

    @property
    def timeout(self) -> float:
        return max(case.timeout for case in self.cases)

    @property
    def faults(self) -> bool:
        """A case of the group breaks something: its testbed runs linkem with control."""
        return any(case.fault is not None for case in self.cases)

    def transfers(self) -> int:
        return sum(case.transfers() for case in self.cases)


# What may differ between the cases of one group, per host provider: a running server's
# options and configuration snippet (its reconfiguration or a restart) and, where the
# driver starts the binaries itself, its binary (a restart). A compose image (suite) is a
# container of its own; an inventory's hosts are deployed once per group.
NETNS_VARIANTS = frozenset({"options", "config", "binary"})
COMPOSE_VARIANTS = frozenset({"options", "config"})


def _without(scenario: dict[str, Any], keys: frozenset[str]) -> dict[str, Any]:
    """The scenario with `keys` taken out of every server (the primary's, [servers.*] and
    each site's)."""
    for server in scenario.get("servers", {}).values():
        for key in keys:
            server.pop(key, None)
    for site in scenario.get("secondaries") or []:
        for key in keys:
            site.pop(key, None)
    return scenario


def group_cases(plans: list[CasePlan], variants: frozenset[str] = frozenset()) -> list[GroupPlan]:
    """Group the cases that can share one testbed and one set of running servers, in run
    order: those of one matrix cell (the same resolved scenario and hosts: a case some
    secondaries cannot take runs on a testbed without them), and cells that differ only in
    the servers' `variants` (e.g. options and binary: an A/B axis over server settings,
    interleaved on one testbed like transports; measure/live.py switches them)."""
    groups: dict[str, list[CasePlan]] = {}
    for plan in plans:
        hosts = ",".join(host.name for host in plan.hosts)
        scenario = _without(plan.case.scenario.model_dump(mode="json"), variants)
        key = f"{json.dumps(scenario, sort_keys=True)} {hosts}"
        groups.setdefault(key, []).append(plan)
    return [GroupPlan(tuple(cases)) for cases in groups.values()]
