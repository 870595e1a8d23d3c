"""One scenario end to end: for each case, plan -> hosts -> servers -> flow -> store.

Each case gets its own testbed (namespaces or containers, links, TCP settings) and its own
servers; every transfer appends one line to transfers.jsonl as soon as it ends, so an
interrupted run keeps every finished measurement. What the figures mean is written down in
harness/measure/protocol.py; what a case consists of in harness/plan.py.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable
from pathlib import Path

from harness import ui, zonegen
from harness.compose.backend import Backend, prepare
from harness.errors import UserInputError
from harness.link.linktest import compute_bound, configured_rtt, through
from harness.link.probe import probe_kernel
from harness.measure.driver import TLS_HOSTNAME, LiveCase
from harness.measure.protocol import run_flows
from harness.measure.records import RecordContext, failure, transfer_record
from harness.measure.servers import CONTROL_DIR, CaseFailed
from harness.metrics.exporter import Exporter
from harness.metrics.openmetrics import write_openmetrics
from harness.metrics.sampler import Sampler
from harness.plan import CasePlan, plan_case, support_problem
from harness.report.data import load_report_data
from harness.report.text import print_summary
from harness.results.meta import CaseMeta, HostInfo, RunMeta, SamplerInfo, ServerInfo
from harness.results.model import TransferRecord
from harness.results.provenance import collect
from harness.results.store import SAMPLES, RunStore, write_json_atomic
from harness.secrets import new_tls, new_tsig
from harness.servers.binaries import ServerBinary
from harness.spec import LoadedScenario
from harness.testbed import Testbed
from harness.xfr import XfrTimeout

NETNS = Backend()
# (kind, binary as configured, image): one binary per distinct key.
BinaryKey = tuple[str, str | None, str | None]
Binaries = dict[str, ServerBinary]  # host name -> its server binary


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
    )


def case_slug(index: int, name: str) -> str:
    safe = "".join(ch if ch.isalnum() or ch in "-_=." else "_" for ch in name)
    return f"{index:03d}-{safe}"[:120]


def run_case(
    plan: CasePlan,
    case_dir: Path,
    store: RunStore,
    binaries: Binaries,
    progress: Callable[[], None],
    sampler: Sampler | None = None,
    backend: Backend = NETNS,
) -> None:
    """One case: its testbed, its servers, its flow; every transfer goes to the store."""
    case_dir = case_dir.resolve()  # paths rendered into configs must hold inside containers
    ctx = RecordContext(store.run_id, plan)

    def emit(record: TransferRecord) -> None:
        store.append(record)
        progress()

    def fail_all(error: str, unsupported: bool = False) -> None:
        """The case could not run (or go on): one failed record per secondary says why."""
        for host in plan.secondaries:
            observed = failure(0, error, time.time(), unsupported=unsupported)
            emit(transfer_record(ctx, host=host.name, repeat=0, zone=zone, observed=observed))

    zone = plan.zone_spec.origin
    caps = {name: (f"{b.kind} {b.version}", b.capabilities) for name, b in binaries.items()}
    problem = support_problem(plan, caps)
    if problem:
        fail_all(f"unsupported: {problem}", unsupported=True)
        return
    zones = zonegen.generate(plan.zone_spec)
    case_dir.mkdir(parents=True, exist_ok=True)
    CONTROL_DIR.mkdir(mode=0o700, parents=True, exist_ok=True)
    tsig = new_tsig(algorithm=plan.tsig_algorithm) if plan.tsig_algorithm else None
    servers = {host.name: (host.role, host.server) for host in plan.hosts}
    provider = backend.provider(servers, (case_dir, CONTROL_DIR))
    endpoints = plan.endpoints()
    with Testbed.of(endpoints, case_dir / "testbed", label=plan.name, provider=provider) as bed:
        tls = new_tls(case_dir / "tls", TLS_HOSTNAME, bed.primary.address) if plan.tls else None
        described = bed.describe()
        uplink = plan.primary.link
        for h in plan.secondaries:
            path = through(h.link, uplink)
            ctx.bound[h.name] = compute_bound(path, described, h.name).named_bps()
            ctx.rtt[h.name] = configured_rtt(path)
        live = LiveCase(plan, case_dir, bed, binaries, zones, tsig, tls, sampler)
        try:
            live.start_primary()
            run_flows(live, ctx, emit)
        except (CaseFailed, XfrTimeout) as exc:
            fail_all(str(exc))
        finally:
            live.close()
            if sampler is not None:
                sampler.unwatch()
        write_json_atomic(case_dir / "case.json", case_meta(plan, bed, ctx, binaries, backend))


def case_meta(
    plan: CasePlan, bed: Testbed, ctx: RecordContext, binaries: Binaries, backend: Backend
) -> dict[str, object]:
    first = plan.secondaries[0].name
    meta = CaseMeta(
        case=plan.name,
        axes=plan.case.axes,
        transport=plan.transport,
        xfr=plan.xfr,
        scenario=plan.case.scenario.model_dump(mode="json"),
        testbed=bed.describe(),
        bound_bps=ctx.bound.get(first, {}),
        backend=backend.name,
        primary=ServerInfo(**binaries[plan.primary.name].describe()),
        secondary=ServerInfo(**binaries[first].describe()),
        servers={name: ServerInfo(**b.describe()) for name, b in binaries.items()},
        sites={h.name: h.site for h in plan.secondaries if h.site},
    )
    return meta.to_json()


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
) -> Path:
    """Run every case; returns the run folder. Ctrl-C stops between polls and keeps results.

    Servers are sampled every `sample_interval` seconds and at each transfer's start and end
    (samples.jsonl); with `prometheus_port` the run is also served live to Prometheus. Either
    way the run folder gets metrics.om, an OpenMetrics file any Prometheus can load later.
    """
    if os.geteuid() != 0:  # the CLI says so first; this guards other callers
        raise UserInputError(
            "xfrbench run needs root (network namespaces, iptables, sysctls)",
            fix="run it with sudo, or check the scenario with --dry-run",
        )
    backend = prepare(loaded, backend)
    plans = [plan_case(case) for case in loaded.cases]
    per_case, distinct = resolve_binaries(plans, backend, loaded.path)
    console = ui.console()
    interrupted = False
    with contextlib.ExitStack() as stack:
        meta = run_meta(loaded, list(distinct.values()), backend)
        store = stack.enter_context(RunStore.create(results_root, run_id, out, meta))
        console.print(f"run [bold]{store.run_id}[/] -> {store.folder}")
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
                for host in plan.secondaries:
                    exporter.expect_transfers(
                        plan.name,
                        plan.primary.server.kind,
                        host.server.kind,
                        plan.transport,
                        plan.xfr,
                        methods=plan.methods,
                    )
            console.print(
                f"metrics for Prometheus on http://{prometheus_address}:{exporter.port}/metrics"
            )
        on_sample = exporter.observe_sample if exporter else None
        sampler = stack.enter_context(Sampler(store.folder / SAMPLES, sample_interval, on_sample))
        try:
            with ui.case_progress(console) as progress:
                for index, plan in enumerate(plans):
                    advance = progress.case(plan.name, plan.transfers())
                    case_dir = store.folder / "cases" / case_slug(index, plan.name)
                    run_case(plan, case_dir, store, per_case[plan.name], advance, sampler, backend)
                    progress.done(plan.transfers())
        except KeyboardInterrupt:
            interrupted = True
            console.print("[yellow]interrupted: finished transfers are kept[/]")
        finally:
            sampler.close()  # its last lines go into the summary
            store.meta.sampler = SamplerInfo(
                interval_s=sample_interval,
                sample_cost_s=sampler.sample_cost_s,
                errors=sampler.errors,
            )
            store.finish(interrupted=interrupted)
    write_openmetrics(store.folder)
    print_summary(load_report_data(store.folder), console)
    if interrupted:
        raise KeyboardInterrupt
    return store.folder
