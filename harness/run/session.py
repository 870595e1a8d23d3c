"""One visit of a group of cases: its zones, its testbed, its servers, and its slots run one
repeat at a time (harness/run/campaign.py decides which).

    with GroupSession(group, visit_dir, context) as session:
        session.run(case_index, repeat, position, pass_index)   # records go to context.emit

A case whose servers fail (or time out starting) gets a failed record per secondary for each
of its slots with the reason, and the visit goes on failing its remaining slots: a finished
measurement is never lost, and the run goes on with the next group.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

from harness import zonegen
from harness.compose.backend import Backend
from harness.core.errors import ToolFailed
from harness.core.transport import Transport
from harness.link.path import compute_bound, configured_rtt, through
from harness.measure.catalog import catalog_repeat
from harness.measure.client_pull import TLS_HOSTNAME
from harness.measure.cold_start_flow import cold_start_repeat
from harness.measure.faults import fault_repeat
from harness.measure.first_copies import prepare_updates
from harness.measure.live import LiveCase, Switched
from harness.measure.live_catalog import LiveCatalogCase
from harness.measure.live_faults import LiveFaults
from harness.measure.live_stream import LiveStreamCase
from harness.measure.measured import Missing, NoneServed
from harness.measure.processes import CaseFailed
from harness.measure.protocol import PublishFailed, client_pulls, update_repeat
from harness.measure.records import RecordContext, failure, transfer_record
from harness.measure.stream import stream_repeat
from harness.measure.switch_proof import prove_switch
from harness.measure.wall import WallClock
from harness.observe.sampler import Sampler
from harness.plan.case import CasePlan, GroupPlan
from harness.results.meta import case_meta
from harness.results.model import Failure, TransferRecord
from harness.results.store import write_case_files
from harness.servers import server_class
from harness.servers.binaries import ServerBinary
from harness.testbed import Testbed
from harness.testbed.place import CONTROL_DIR, TestbedPlaces
from harness.xfr import TsigKey, XfrTimeout
from harness.xfr.secrets import new_tls, new_tsig
from harness.xfr.zonefile_sum import zone_file_sum
from harness.zonegen.model import GeneratedZones

Binaries = dict[str, ServerBinary]  # host name -> its server binary


@dataclass
class RunContext:
    """What every session of a run shares."""

    run_id: str
    emit: Callable[[TransferRecord], None]
    binaries: dict[str, Binaries]  # case name -> host -> binary
    backend: Backend
    sampler: Sampler | None = None
    status: Callable[[str], None] = lambda text: None
    spent: WallClock = field(default_factory=WallClock)  # where the run's wall time goes
    server_cpus: str | None = None  # the servers' CPUs when held apart (observe/cpuset.py)
    servers_cpu_s: float = 0.0  # CPU seconds of the servers stopped so far (their cgroups)
    remote: Any = None  # run --inventory: the hosts' RemoteFleet (harness/remote/fleet.py)


class SwitchFailed(Exception):
    """A running secondary could not be switched to the selected case: the harness's error;
    the case's remaining slots of the visit are not measured."""


def fail_record(
    ctx: RecordContext,
    host: str,
    repeat: int,
    zone: str,
    error: str,
    kind: Failure,
    extra: dict[str, Any] | None = None,
    server_logged: dict[str, Any] | None = None,
) -> TransferRecord:
    observed = failure(0, error, time.time(), kind=kind, unsupported=kind == "unsupported")
    observed.extra = dict(extra or {})
    observed.server_logged = dict(server_logged or {})
    return transfer_record(ctx, host=host, repeat=repeat, zone=zone, observed=observed)


class GroupSession:
    """A group's testbed and servers for one visit (a context manager)."""

    def __init__(self, group: GroupPlan, visit_dir: Path, run: RunContext) -> None:
        self.group = group
        self.dir = visit_dir.resolve()  # rendered into configs: must hold inside containers
        self.run_ctx = run
        self.contexts = {case.name: RecordContext(run.run_id, case) for case in group.cases}
        self.binaries = run.binaries[group.first.name]
        self.live: LiveCase | None = None
        self.bed: Testbed | None = None
        self.broken: str | None = None  # why the visit cannot run its slots any more
        self.broken_kind: Failure = "server"
        self.serial: int | None = None  # the last serial published (update triggers)
        self.missing: dict[str, Missing] = {}  # secondaries this visit does not measure
        self.unswitched: dict[str, str] = {}  # case -> why switching to it failed this visit
        # Configurations (servers' settings, transport) a transfer over them proved this
        # visit, and its serial: a switch back to one needs no new proof (prove = "once").
        self.proven: dict[tuple[str, Transport], int] = {}
        self.switched_at: float | None = None  # when the last switch began (bench clock)
        self._stack: Any = None

    def _generate(self) -> tuple[GeneratedZones, TsigKey | None]:
        """The group's zones, their reference sum, its folder and its TSIG key (0600, per
        run): what every backend prepares before it has hosts."""
        group, run = self.group, self.run_ctx
        run.status(f"{group.name}: generating zones")
        with run.spent.phase("generate"):
            zones = zonegen.generate(group.first.zone_spec)
            if len(zones.files) == 1:
                # The reference sum is the harness's work (cached beside the file): here,
                # not inside the first publish, which the wall split gives the servers.
                zone_file_sum(zones.files[0].path, zones.files[0].origin)
            primary = self.binaries.get(group.first.primary.name)
            if primary is not None and primary.image is None and run.remote is None:
                # A dialect serving large zones from a format of its own (BIND's raw)
                # converts them here, once, cached: the harness's work, not the load's.
                dialect = server_class(primary.kind)
                for file in zones.files:
                    dialect.primary_file(file.path, file.origin, primary.path, primary.version)
        self.dir.mkdir(parents=True, exist_ok=True)
        algorithm = group.tsig_algorithm
        return zones, new_tsig(algorithm=algorithm) if algorithm else None

    def __enter__(self) -> GroupSession:
        group, run = self.group, self.run_ctx
        spent = run.spent
        self._stack = contextlib.ExitStack()
        try:
            zones, tsig = self._generate()
            CONTROL_DIR.mkdir(mode=0o700, parents=True, exist_ok=True)
            servers = {host.name: (host.role, host.server) for host in group.first.hosts}
            provider = run.backend.provider(servers, (self.dir, CONTROL_DIR))
            run.status(f"{group.name}: building the testbed")
            with spent.phase("testbed"):
                self.bed = self._stack.enter_context(
                    Testbed.of(
                        group.first.endpoints(),
                        self.dir / "testbed",
                        label=group.first.name,
                        provider=provider,
                        server_cpus=run.server_cpus,
                        faults=group.faults,
                    )
                )
                tls = None
                if group.tls:
                    tls = new_tls(self.dir / "tls", TLS_HOSTNAME, self.bed.primary.address)
                self._bounds()
            live: type[LiveCase] = LiveCase
            if group.first.stream is not None:
                live = LiveStreamCase
            elif group.first.catalog is not None:
                live = LiveCatalogCase
            by_case = {case.name: run.binaries[case.name] for case in group.cases}
            places = TestbedPlaces(self.bed)
            self.live = live(
                group, self.dir, places, self.binaries, zones, tsig, tls, run.sampler, spent,
                by_case,
            )  # fmt: skip
            self._stack.callback(self._close_live)
            run.status(f"{group.name}: primary loading {group.first.zone_spec.records:,} records")
            with spent.phase("primary_load"):
                self.live.start_primary()
        except (CaseFailed, XfrTimeout) as exc:
            self.broken, self.broken_kind = str(exc), "server"  # the primary did not start
        except BaseException:
            self._teardown()
            raise
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        try:
            if self.bed is not None:
                self._write_case_files()  # while the testbed still describes itself
        finally:
            self._teardown()

    def _teardown(self) -> None:
        with self.run_ctx.spent.phase("teardown"):
            try:
                self._stack.close()
            finally:
                if self.bed is not None:
                    self.run_ctx.servers_cpu_s += self.bed.cgroup_cpu_s

    def _close_live(self) -> None:
        assert self.live is not None
        self.live.close()
        if self.run_ctx.sampler is not None:
            self.run_ctx.sampler.unwatch()

    def _bounds(self) -> None:
        assert self.bed is not None
        described = self.bed.describe()
        uplink = self.group.first.primary.link
        for ctx in self.contexts.values():
            for h in ctx.plan.secondaries:
                path = through(h.link, uplink)
                ctx.bound[h.name] = compute_bound(path, described, h.name).named_bps()
                ctx.rtt[h.name] = configured_rtt(path)

    # --- the slots --------------------------------------------------------------------------

    def run(self, case: int, repeat: int, position: int, pass_index: int) -> None:
        plan = self.group.cases[case]
        ctx = self.contexts[plan.name]
        extra = {"schedule": {"position": position, "pass": pass_index, "visit_dir": self.dir.name}}
        if self.broken is not None:
            self._fail(ctx, repeat, self.broken, extra)
            return
        if plan.name in self.unswitched:
            why = f"not measured: {self.unswitched[plan.name]} (earlier in this visit)"
            self._fail(ctx, repeat, why, extra, "harness")
            return
        assert self.live is not None
        try:
            switched, per_host = self._switch(plan)
            extra["schedule"]["switched"] = bool(switched)
            emit = self._emitter(per_host)
            status = self.run_ctx.status
            if isinstance(self.live, LiveCatalogCase):
                status(f"{plan.name}: repeat {repeat}: consumers provisioning the catalog")
                catalog_repeat(self.live, ctx, repeat, emit, extra)
            elif plan.cold_start:
                status(f"{plan.name}: repeat {repeat}: cold start")
                cold_start_repeat(self.live, ctx, repeat, emit, extra)
            else:
                if self.serial is None:
                    status(f"{plan.name}: first copies and the warm-up update")
                    prepared = prepare_updates(self.live)
                    self.serial, self.missing = prepared.serial, prepared.missing
                    self.proven[_configuration(plan)] = self.serial
                elif switched and self._needs_proof(plan, switched, per_host):
                    status(f"{plan.name}: proving the switch to {plan.transport}")
                    if not self._prove(plan, switched, per_host):
                        self._fail(ctx, repeat, self.unswitched[plan.name], extra, "harness", emit)
                        return
                    self.proven[_configuration(plan)] = self.serial
                self.serial += 1
                if isinstance(self.live, LiveStreamCase):
                    status(f"{plan.name}: repeat {repeat}: a stream from serial {self.serial}")
                    self.serial = stream_repeat(self.live, ctx, repeat, self.serial, emit, extra)
                elif plan.fault is not None:
                    status(f"{plan.name}: repeat {repeat}: {plan.fault.kind} and healing")
                    faults = LiveFaults(self.live)
                    fault_repeat(self.live, faults, ctx, repeat, self.serial, emit, extra)
                else:
                    status(f"{plan.name}: repeat {repeat}: transfer and verification")
                    update_repeat(self.live, ctx, repeat, self.serial, emit, extra, self.missing)
            client_pulls(self.live, ctx, repeat, emit)
        except SwitchFailed as exc:
            self.unswitched[plan.name] = str(exc)
            self._fail(ctx, repeat, str(exc), extra, "harness")
        except PublishFailed as exc:
            self.broken, self.broken_kind = str(exc), "publish"
            if not exc.recorded:
                self._fail(ctx, repeat, self.broken, extra)
        except (CaseFailed, XfrTimeout) as exc:
            self.broken = str(exc)
            self.broken_kind = "server" if isinstance(exc, CaseFailed) else "timeout"
            # Each secondary's words, in this slot's records only (sums count them once).
            said = exc.said if isinstance(exc, NoneServed) else None
            self._fail(ctx, repeat, self.broken, extra, said=said)

    def _switch(self, plan: CasePlan) -> tuple[dict[str, Switched], dict[str, dict[str, Any]]]:
        """Select `plan` on the running servers: how each secondary was switched, and what
        each one's records keep of it (extra.schedule)."""
        assert self.live is not None
        self.switched_at = self.live.clock()  # a restarted server's connections count from here
        with self.run_ctx.spent.phase("switch") as switching:
            try:
                switched = self.live.select(plan)
            except ToolFailed as exc:  # its reconfiguration command failed
                raise SwitchFailed(f"the switch to {plan.transport} failed: {exc}") from None
        per_host = {
            host: {"switched_by": how, "switch_s": round(switching.seconds, 3)}
            for host, how in switched.items()
        }
        return switched, per_host

    def _needs_proof(
        self, plan: CasePlan, switched: dict[str, Switched], per_host: dict[str, dict[str, Any]]
    ) -> bool:
        """A switch is proven by an unrecorded transfer when the plan says every one is,
        when a server was restarted (its first transfer after a start is a warm-up too), or
        when its configuration was not proven yet this visit. A switch back to a proven
        one relies on the measured transfer's own evidence (its transport and kind, as the
        wire and the logs show them: measure/evidence.py), and its records say which
        serial proved it."""
        if plan.prove == "every-switch" or "restart" in switched.values():
            return True
        earlier = self.proven.get(_configuration(plan))
        if earlier is None:
            return True
        for host in per_host:
            per_host[host]["proof"] = {"serial": earlier, "earlier": True}
        return False

    def _prove(
        self, plan: CasePlan, switched: dict[str, Switched], per_host: dict[str, dict[str, Any]]
    ) -> bool:
        """The switch's unrecorded update over the new transport (measure/switch_proof.py);
        False, with the reason in self.unswitched, when it was not proven."""
        assert self.live is not None and self.serial is not None
        restarted = [host for host, how in switched.items() if how == "restart"]
        with self.run_ctx.spent.phase("switch"):
            proof = prove_switch(
                self.live, self.serial + 1, self.serial, restarted, self.missing, self.switched_at
            )
        self.serial = proof.serial
        for host in per_host:
            per_host[host]["proof"] = proof.for_host(host)
        if not proof.ok:
            self.unswitched[plan.name] = proof.reason(plan.transport)
        return proof.ok

    def _emitter(self, per_host: dict[str, dict[str, Any]]) -> Callable[[TransferRecord], None]:
        """Each record says how its own secondary was switched before this slot (how, what
        it cost, the proof), in extra.schedule."""

        def emit(record: TransferRecord) -> None:
            if record.host in per_host:
                schedule = record.extra.get("schedule", {}) | per_host[record.host]
                record.extra = record.extra | {"schedule": schedule}
            self.run_ctx.emit(record)

        return emit

    def _fail(
        self,
        ctx: RecordContext,
        repeat: int,
        error: str,
        extra: dict[str, Any],
        kind: Failure | None = None,
        emit: Callable[[TransferRecord], None] | None = None,
        said: dict[str, dict[str, Any]] | None = None,
    ) -> None:
        """A failed record per secondary; `said`: per host, its server_logged."""
        zone, kind = ctx.plan.zone_spec.origin, kind or self.broken_kind
        for host in ctx.plan.secondaries:
            logged = (said or {}).get(host.name)
            record = fail_record(ctx, host.name, repeat, zone, error, kind, extra, logged)
            (emit or self.run_ctx.emit)(record)

    # --- what the visit leaves ---------------------------------------------------------------

    def _write_case_files(self) -> None:
        """A case.json per case, while the testbed still describes itself."""
        assert self.bed is not None
        testbed, backend = self.bed.describe(), self.run_ctx.backend.name
        metas = [
            case_meta(plan, testbed=testbed, bound=self.contexts[plan.name].bound,
                      binaries=self.run_ctx.binaries[plan.name], backend=backend)
            for plan in self.group.cases
        ]  # fmt: skip
        write_case_files(self.dir, metas)


def _configuration(plan: CasePlan) -> tuple[str, Transport]:
    """What a switch proof proves: the servers' settings and the transport (a change of
    transfer kind alone is shown by each record's evidence of the kind)."""
    return plan.servers_key, plan.transport
