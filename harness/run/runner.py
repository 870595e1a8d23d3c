"""One scenario end to end: for each case, plan -> hosts -> servers -> flow -> store.

Each case gets its own testbed (namespaces or containers, links, TCP settings) and its own
servers; every transfer appends one line to transfers.jsonl as soon as it ends, so an
interrupted run keeps every finished measurement. What the figures mean is written down in
harness/measure/protocol.py; what a case consists of in harness/plan/case.py; the whole
pipeline in docs/architecture.md.
"""

from __future__ import annotations

import contextlib
import os
import resource
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape

from harness.compose.backend import Backend, prepare
from harness.core import ui
from harness.core.errors import ScenarioError, UserInputError
from harness.core.terms import SERVER_TO_SERVER
from harness.link.probe import probe_kernel
from harness.measure import wall
from harness.measure.records import RecordContext
from harness.measure.wall import WallClock
from harness.metrics.exporter import Exporter
from harness.metrics.openmetrics import write_openmetrics
from harness.observe import cgroup as cgroups
from harness.observe.cpuset import (
    CpuPlacement,
    apply_placement,
    online_cpus,
    plan_placement,
)
from harness.observe.sampler import Sampler
from harness.plan.capacity import check_memory, host_memory_bytes
from harness.plan.case import (
    COMPOSE_VARIANTS,
    NETNS_VARIANTS,
    CasePlan,
    GroupPlan,
    group_cases,
    plan_case,
    support_problem,
    supported_part,
    zone_spec,
)
from harness.plan.versions import check_versions
from harness.report.data import load_report_data
from harness.report.text import print_summary
from harness.results.fleet import fleet_repeat_values
from harness.results.meta import HostInfo, RunMeta, SamplerInfo, ServerInfo
from harness.results.model import TransferRecord
from harness.results.provenance import collect
from harness.results.store import SAMPLES, RunStore, slug
from harness.run.campaign import Key, Slot, auto_slots, execute, fixed_slots
from harness.run.remote import RemoteSession, finish_fleet, open_fleet, serve_host_metrics
from harness.run.session import Binaries, GroupSession, RunContext, fail_record
from harness.run.snippets import snippet_uses
from harness.servers import server_class
from harness.servers.binaries import ServerBinary
from harness.spec import LoadedScenario
from harness.xfr.rrsum_native import digest_warning
from harness.xfr.rrsum_native import implementation as digest_implementation
from harness.zonegen import ownzone

NETNS = Backend()
# (kind, binary as configured, image): one binary per distinct key.
BinaryKey = tuple[str, str | None, str | None]


def resolve_binaries(
    plans: list[CasePlan], backend: Backend, scenario: Path
) -> tuple[dict[str, Binaries], dict[BinaryKey, ServerBinary]]:
    """Find and version every server binary the cases use, once per run (compose backend:
    the binary inside the role's image, versioned there). Returns them per case and host,
    and per distinct binary."""
    found: dict[BinaryKey, ServerBinary] = {}
    per_case: dict[str, Binaries] = {}
    for plan in plans:
        per_case[plan.name] = {}
        for host in plan.hosts:
            spec = host.server
            key = (spec.kind, str(spec.binary) if spec.binary else None,
                   backend.image_for(host.role, spec))  # fmt: skip
            if key not in found:
                found[key] = backend.binary(host.role, spec, scenario)
            per_case[plan.name][host.name] = found[key]
    return per_case, found


def run_meta(loaded: LoadedScenario, binaries: list[ServerBinary], backend: Backend) -> RunMeta:
    kernel = probe_kernel()
    return RunMeta(
        scenario=loaded.raw,
        scenario_path=str(loaded.path),
        spec_hash=loaded.spec_hash,
        scenario_name=loaded.scenario.name,
        cases=[case.name for case in loaded.cases],
        backend=backend.name,
        compose_project=backend.project,
        servers={
            f"{b.kind}@{b.image + ':' if b.image else ''}{b.path}": ServerInfo(
                path=str(b.path), **b.describe()
            )
            for b in binaries
        },
        kernel_features=kernel.to_json(),
        link_backend=kernel.link_backend,
        host=HostInfo.model_validate(collect()),
        digest=digest_implementation(),
        configs=[use.to_json() for use in snippet_uses(loaded)] or None,
        zone=own_zone_facts(loaded),
    )


def own_zone_facts(loaded: LoadedScenario) -> dict[str, Any] | None:
    """run.json's account of an operator's own zone; None for a generated one."""
    if not loaded.cases or loaded.scenario.zones.preset != "file":
        return None
    return ownzone.facts(zone_spec(loaded.cases[0]))


def cpu_placement(backend: Backend, *, remote: bool = False) -> CpuPlacement:
    """Whether the harness and the servers get CPUs of their own (observe/cpuset.py);
    `remote`: the servers run on an inventory's hosts (run --inventory)."""
    online = online_cpus()
    if remote:
        reason = f"the servers ran on the inventory's hosts, not on this host's {len(online)} CPUs"
        return CpuPlacement("remote", reason, online)
    if backend.compose:
        reason = (
            f"{len(online)} CPUs; the compose backend's containers are not held to CPUs: "
            "the harness shared the servers' cores"
        )
        return CpuPlacement("shared", reason, online)
    layout = cgroups.detect()
    return plan_placement(online, layout.kind, layout.cpuset_root)


@dataclass(frozen=True)
class CpuMark:
    """The driver's CPU and its reaped children's at one instant: a run's CPU figures are
    differences from the mark at its start (the process may have run before: a test
    session, a campaign of runs)."""

    self_s: float
    children_s: float

    @classmethod
    def now(cls) -> CpuMark:
        own = resource.getrusage(resource.RUSAGE_SELF)
        children = resource.getrusage(resource.RUSAGE_CHILDREN)
        return cls(own.ru_utime + own.ru_stime, children.ru_utime + children.ru_stime)


def driver_usage(start: CpuMark, end: CpuMark) -> dict[str, float]:
    """The driver's CPU from `start` to `end` and its peak RSS (the process's, which a
    kernel keeps only since the process began): the harness must not be the bottleneck."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return {
        "peak_rss_mib": round(usage.ru_maxrss / 1024, 1),
        "cpu_s": round(end.self_s - start.self_s, 2),
    }


def cpu_split(
    wall_s: float,
    start: CpuMark,
    end: CpuMark,
    servers_cpu_s: float | None,
    sampler_cpu_s: float,
) -> dict[str, float | None]:
    """Where the run's CPU went from `start` to `end` (run.json `cpu`): the servers (their cgroups,
    read as each stopped; None without cgroups), the driver (of which sampling), and the
    other processes it started and reaped (the link emulator and tools: its children's CPU
    less the servers'), with the driver's share of the wall (issue 22: at most 10 %)."""
    driver = end.self_s - start.self_s
    children = end.children_s - start.children_s
    other = None if servers_cpu_s is None else max(0.0, children - servers_cpu_s)
    return {
        "servers_s": None if servers_cpu_s is None else round(servers_cpu_s, 2),
        "driver_s": round(driver, 2),
        "sampler_s": round(sampler_cpu_s, 2),
        "other_s": None if other is None else round(other, 2),
        "driver_share_of_wall": round(driver / wall_s, 4) if wall_s > 0 else None,
    }


class Tally:
    """What the run has recorded so far, per case: the progress bars, and what
    `repeats = "auto"` decides from: one value per repeat (a lone secondary's verified
    duration; a fleet's convergence time, its last secondary's, never one per secondary)
    and the repeats tried."""

    def __init__(self, store: RunStore, advance: Callable[[str], None]) -> None:
        self.store = store
        self.advance = advance
        self.records: dict[str, list[TransferRecord]] = {}  # server to server, repeats >= 1
        self.repeats: dict[str, set[int]] = {}

    def emit(self, record: TransferRecord) -> None:
        self.store.append(record)
        self.advance(record.case)
        if record.method != SERVER_TO_SERVER or record.repeat < 1:
            return
        self.repeats.setdefault(record.case, set()).add(record.repeat)
        self.records.setdefault(record.case, []).append(record)

    def values(self, case: str) -> list[float]:
        """The case's values so far, one per repeat that has one, in the order they ran."""
        records = self.records.get(case, [])
        if any(r.site is not None for r in records):
            per_repeat = fleet_repeat_values(records)
            return [v for _, v in sorted(per_repeat.items()) if v is not None]
        return [float(r.duration_s) for r in records if r.counts and r.duration_s is not None]


def check_catalog_consumers(
    plans: list[CasePlan], binaries: dict[str, Binaries], scenario_path: object
) -> None:
    """Refuse a catalog scenario whose secondaries cannot consume a catalog (their dialect
    says why: NSD 4.6 has none), before any server starts."""
    for plan in plans:
        if plan.catalog is None:
            continue
        for host in plan.secondaries:
            binary = binaries[plan.name][host.name]
            problem = server_class(binary.kind).catalog_consumer_problem(binary.version)
            if problem is not None:
                raise ScenarioError(
                    f"{scenario_path}: secondaries: {host.name} ({binary.kind} "
                    f"{binary.version}) cannot be a catalog consumer: {problem}",
                    fix="choose a BIND 9.18+, Knot 3.1+, PowerDNS 4.7+ or NSD 4.9+ secondary "
                    'for trigger = "catalog"',
                )
            if plan.catalog.coo and (why := server_class(binary.kind).coo_problem(binary.version)):
                raise ScenarioError(
                    f"{scenario_path}: catalog.coo: {host.name} ({binary.kind} "
                    f"{binary.version}) cannot move members between catalogs: {why}",
                    fix="remove catalog.coo, or give every secondary a consumer that "
                    "implements change of ownership (BIND 9.18+)",
                )


def unsupported_cases(
    plans: list[CasePlan],
    binaries: dict[str, Binaries],
    run_id: str,
    emit: Callable[[TransferRecord], None],
) -> list[CasePlan]:
    """Record every case the installed versions cannot run (one record per secondary with
    the reason, never a silent fallback) and return the others; a fleet case that some
    secondaries cannot take runs with the others, those recorded as unsupported."""
    runnable = []
    for plan in plans:
        found = binaries[plan.name]
        caps = {name: (f"{b.kind} {b.version}", b.capabilities) for name, b in found.items()}
        part, reasons = supported_part(plan, caps)
        if part is None:
            reasons = dict.fromkeys((h.name for h in plan.secondaries), support_problem(plan, caps))
        else:
            runnable.append(part)
        ctx = RecordContext(run_id, plan)
        # A faulted case's record names its fault (the report's faults table shows it).
        fault = {"fault": {"name": plan.fault.label, "kind": plan.fault.kind}} if plan.fault else {}
        for host, problem in reasons.items():
            reason = f"unsupported: {problem}"
            zone = plan.zone_spec.origin
            emit(fail_record(ctx, host, 0, zone, reason, "unsupported", fault))
    return runnable


def run_cases(
    loaded: LoadedScenario, plans: list[CasePlan], run: RunContext, tally: Tally, folder: Path
) -> None:
    """Every runnable case in the scenario's order (harness/run/campaign.py)."""
    groups = group_cases(plans, _variants(run))
    scenario = loaded.scenario
    sizes = [len(group.cases) for group in groups]
    # The case's name last: an A/A run's two variants have the same settings (one label
    # each), and clustered_pass needs every case's key distinct.
    keys = [[(*case.switch_key, case.name) for case in group.cases] for group in groups]
    slots: Iterable[Slot]
    if scenario.auto is None:
        slots = fixed_slots(
            sizes,
            scenario.max_repeats,
            scenario.order,
            scenario.passes,
            scenario.schedule_seed,
            keys,
        )
    else:
        names = {(g, c): case.name for g, group in enumerate(groups)
                 for c, case in enumerate(group.cases)}  # fmt: skip

        def observed() -> tuple[dict[Key, list[float]], dict[Key, int]]:
            durations = {key: tally.values(name) for key, name in names.items()}
            tried = {key: len(tally.repeats.get(name, ())) for key, name in names.items()}
            return durations, tried

        slots = auto_slots(
            sizes, scenario.auto, scenario.order, scenario.schedule_seed, observed, keys
        )

    def open_session(group: int, visit: int) -> GroupSession:
        name = f"{visit:03d}-{slug(groups[group].first.name)}"
        if run.remote is not None:
            return RemoteSession(groups[group], folder / "cases" / name, run)
        return GroupSession(groups[group], folder / "cases" / name, run)

    execute(slots, open_session)


def _variants(run: RunContext) -> frozenset[str]:
    """What cases of one group may differ in, on this run's hosts (plan/case.py)."""
    if run.remote is not None:
        return frozenset()
    return COMPOSE_VARIANTS if run.backend.compose else NETNS_VARIANTS


def run_case(
    plan: CasePlan, folder: Path, store: RunStore, binaries: Binaries, backend: Backend = NETNS
) -> None:
    """One case alone, its repeats in a row, its visit folder `folder` (scripts, tests)."""
    run = RunContext(store.run_id, store.append, {plan.name: binaries}, backend)
    slots = [Slot(0, 0, repeat, 0) for repeat in range(1, plan.repeats + 1)]
    execute(slots, lambda group, visit: GroupSession(GroupPlan((plan,)), folder, run))


def run_scenario(
    loaded: LoadedScenario,
    *,
    results_root: Path,
    out: Path | None = None,
    run_id: str | None = None,
    prometheus_port: int | None = None,
    prometheus_address: str = "127.0.0.1",
    sample_interval: float = 1.0,
    backend: Backend = NETNS,
    inventory: Path | None = None,
    console: Console | None = None,
) -> Path:
    """Run every case; returns the run folder. Ctrl-C stops between polls and keeps results.

    Servers are sampled every `sample_interval` seconds and at each transfer's start and end
    (samples.jsonl); with `prometheus_port` the run is also served live to Prometheus. Either
    way the run folder gets metrics.om, an OpenMetrics file any Prometheus can load later.
    With `inventory` the servers run on its hosts, deployed by Ansible (run/remote.py).
    Progress and the summary go to `console` (stdout's by default).
    """
    if os.geteuid() != 0:  # the CLI says so first; this guards other callers
        raise UserInputError(
            "xfrbench run needs root (network namespaces, iptables, sysctls)",
            fix="run it with sudo, or check the scenario with --dry-run",
        )
    spent = WallClock()  # from here on, the run's wall time is accounted for
    cpu_start = CpuMark.now()  # and its CPU
    with spent.phase("start"):
        plans = [plan_case(case) for case in loaded.cases]
        if inventory is None:
            backend = prepare(loaded, backend)
            check_memory(plans, host_memory_bytes(), loaded.path)
            check_versions(plans, loaded.path)
            per_case, distinct = resolve_binaries(plans, backend, loaded.path)
            check_catalog_consumers(plans, per_case, loaded.path)
        else:
            per_case, distinct = {}, {}
        placement = cpu_placement(backend, remote=inventory is not None)
        apply_placement(placement)  # before the sampler's and the watchers' threads start
    console = console or ui.console()
    interrupted = False
    with contextlib.ExitStack() as stack:
        meta = run_meta(loaded, list(distinct.values()), backend)
        meta.cpus = placement.to_json()
        store = stack.enter_context(RunStore.create(results_root, run_id, out, meta))
        console.print(f"run [bold]{store.run_id}[/] -> {store.folder}")
        if slow_sum := digest_warning(meta.digest):
            console.print(f"[yellow]warning:[/] {escape(slow_sum)}", soft_wrap=True)
        fleet = None
        if inventory is not None:
            with spent.phase("testbed"):
                fleet, plans, per_case = open_fleet(loaded, inventory, store, stack, console.print)
        exporter = None
        if prometheus_port is not None:
            exporter = stack.enter_context(
                Exporter(
                    store.run_id,
                    loaded.scenario.name,
                    loaded.spec_hash,
                    port=prometheus_port,
                    address=prometheus_address,
                )
            )
            store.listeners.append(exporter.observe_transfer)
            for plan in plans:
                exporter.expect_case(plan)
            console.print(
                f"metrics for Prometheus on http://{prometheus_address}:{exporter.port}/metrics"
            )
            if fleet is not None:
                console.print(serve_host_metrics(fleet, store, loaded, exporter, prometheus_port))
        on_sample = exporter.observe_sample if exporter else None
        sampler = stack.enter_context(Sampler(store.folder / SAMPLES, sample_interval, on_sample))
        run: RunContext | None = None
        try:
            with ui.case_progress(console, {p.name: p.transfers() for p in plans}) as progress:
                tally = Tally(store, progress.advance)
                runnable = unsupported_cases(plans, per_case, store.run_id, tally.emit)
                run = RunContext(
                    store.run_id,
                    tally.emit,
                    per_case,
                    backend,
                    sampler,
                    progress.status,
                    spent,
                    server_cpus=placement.server_cpus,
                    remote=fleet,
                )
                run_cases(loaded, runnable, run, tally, store.folder)
        except KeyboardInterrupt:
            interrupted = True
            console.print("[yellow]interrupted: finished transfers are kept[/]")
        finally:
            sampler.close()  # its last lines go into the summary
            store.meta.sampler = SamplerInfo(
                interval_s=sample_interval,
                sample_cost_s=sampler.sample_cost_s,
                longest_interval_s=sampler.longest_interval_s,
                errors=sampler.errors,
            )
            split = spent.split()
            store.meta.wall = split.to_json()
            cpu_end = CpuMark.now()
            store.meta.driver = driver_usage(cpu_start, cpu_end)
            servers_cpu = run.servers_cpu_s if run is not None and run.servers_cpu_s else None
            store.meta.cpu = cpu_split(
                split.total_s, cpu_start, cpu_end, servers_cpu, sampler.cpu_s
            )
            if fleet is not None:
                with spent.phase("teardown"):
                    finish_fleet(fleet, store)
            store.finish(interrupted=interrupted)
    write_openmetrics(store.folder)
    print_summary(load_report_data(store.folder), console)
    usage = store.meta.driver or {}
    console.print(
        f"{wall.describe(split)}; driver peak RSS {usage.get('peak_rss_mib', 0):.0f} MiB, "
        f"CPU {usage.get('cpu_s', 0):.1f} s"
    )
    if interrupted:
        raise KeyboardInterrupt
    return store.folder
