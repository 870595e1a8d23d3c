"""The live case: the measurement protocol's operations carried out on real servers.

`LiveCase` implements `protocol.Bench` over a testbed: it starts the servers of the plan
(one dialect each), polls SOA serials in the servers' own namespaces, puts new serials on the
primary, verifies copies, reads the servers' logs and samples them. It decides nothing about
what is measured: that is protocol.py.
"""

from __future__ import annotations

import contextlib
import threading
import time
from pathlib import Path
from typing import Any

from harness import zonegen
from harness.measure import servers as srv
from harness.measure.protocol import (
    START_TIMEOUT,
    ColdStartLog,
    Control,
    Logged,
    Publication,
    Pulled,
    Verification,
)
from harness.measure.servers import RunningServer
from harness.metrics.procfs import parse_port_range
from harness.metrics.sampler import Sampler, Target
from harness.plan import CasePlan
from harness.secrets import TlsFiles
from harness.servers import count_failures
from harness.servers.base import last_incoming, last_outgoing
from harness.servers.binaries import ServerBinary
from harness.testbed import Testbed
from harness.xfr import PullResult, TsigKey, XfrTimeout, compare_zones
from harness.xfr.kdig import kdig_pull
from harness.xfr.notify_watch import NotifyWatch
from harness.xfr.poll import query_soa_serial, wait_for_serial
from harness.xfr.pull import digest_of_wire, pull, pull_verified_copy, xot_context
from harness.zonegen.cache import link_or_copy

POLL_INTERVAL = 0.005  # seconds between SOA polls: the resolution of every duration
TLS_HOSTNAME = "primary.xfrbench.test"
KERNEL_PORT_RANGE = "32768 60999"  # ip_local_port_range when a host's was not read back


class LiveCase:
    """One case's servers on a testbed (a context manager that stops them all)."""

    def __init__(
        self,
        plan: CasePlan,
        case_dir: Path,
        testbed: Testbed,
        binaries: dict[str, ServerBinary],
        zones: zonegen.GeneratedZones,
        tsig: TsigKey | None,
        tls: TlsFiles | None,
        sampler: Sampler | None = None,
    ) -> None:
        self.plan = plan
        self.case_dir = case_dir
        self.testbed = testbed
        self.binaries = binaries
        self.generated = zones
        self.tsig = tsig
        self.tls = tls
        self.sampler = sampler
        self.zones = [z.origin for z in zones.files]
        self.first_zone = self.zones[0]
        self.base_serial = zones.files[0].serial
        self.primary: RunningServer | None = None
        self.secondaries: dict[str, RunningServer] = {}

    # --- Bench: clocks -------------------------------------------------------------------

    def clock(self) -> float:
        return time.monotonic()

    def wall(self) -> float:
        return time.time()

    # --- servers -------------------------------------------------------------------------

    def _server(self, name: str, zones: list[srv.ZoneEntry], workdir: Path) -> RunningServer:
        host_plan = next(h for h in self.plan.hosts if h.name == name)
        setup = srv.server_setup(
            host_plan,
            self.testbed,
            workdir,
            zones,
            tsig=self.tsig,
            tls=self.tls,
            ixfr=self.plan.ixfr,
            notify=self.plan.notify,
        )
        server = srv.make(host_plan, self.binaries[name], setup)
        return RunningServer(host_plan, self.testbed.hosts[name], server)

    def start_primary(self) -> None:
        name = self.plan.primary.name
        workdir = self.case_dir / name
        self.primary = self._server(name, srv.primary_zones(self.generated.files, workdir), workdir)
        srv.spawn(self.testbed, self.primary)
        self._watch()
        # Ready = it serves the first and the last zone (it loads them in order).
        for origin in dict.fromkeys((self.zones[0], self.zones[-1])):
            deadline = self.clock() + START_TIMEOUT
            if not self._poll(self.primary, origin, self.base_serial, deadline):
                raise XfrTimeout(
                    f"timeout after {START_TIMEOUT:g} s: the primary never served {origin} "
                    f"serial {self.base_serial}"
                )
        if self.tls:
            srv.wait_listening(self.primary, 853)

    def prepare_secondaries(self) -> None:
        self.stop_secondaries()
        for host in self.plan.secondaries:
            workdir = self.case_dir / host.name
            zones = srv.fresh_secondary_zones(self.zones, workdir)
            running = self._server(host.name, zones, workdir)
            running.server.render()
            self.secondaries[host.name] = running

    def start_secondaries(self) -> None:
        for running in self.secondaries.values():
            srv.spawn(self.testbed, running, render=False)
        self._watch()

    def stop_secondaries(self) -> None:
        self._watch(without_secondaries=True)
        for running in self.secondaries.values():
            srv.stop(self.testbed, running)
        self.secondaries.clear()

    def close(self) -> None:
        self.stop_secondaries()
        if self.primary is not None:
            self._watch(without_secondaries=True, without_primary=True)
            srv.stop(self.testbed, self.primary)
            self.primary = None

    def __enter__(self) -> LiveCase:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _alive(self) -> None:
        for running in (self.primary, *self.secondaries.values()):
            if running is not None:
                running.alive()

    # --- Bench: waiting for serials ----------------------------------------------------------

    def _poll(
        self, running: RunningServer, zone: str, serial: int, deadline: float
    ) -> float | None:
        """When `running` first served `serial` of `zone` (polled in its own namespace),
        or None at the deadline. Checks every second that the servers are alive."""
        while True:
            self._alive()
            remaining = deadline - self.clock()
            if remaining <= 0:
                return None
            try:
                return wait_for_serial(
                    running.host.address,
                    zone,
                    serial,
                    netns=running.host.netns,
                    interval=POLL_INTERVAL,
                    timeout=min(remaining, 1.0),
                    since=self.clock(),
                )
            except XfrTimeout:
                continue

    def wait_served(
        self, hosts: list[str], zone: str, serial: int, deadline: float
    ) -> dict[str, float]:
        if len(hosts) == 1:
            got = self._poll(self.secondaries[hosts[0]], zone, serial, deadline)
            return {} if got is None else {hosts[0]: got}
        found: dict[str, float] = {}
        failure: list[BaseException] = []

        def watch(name: str) -> None:
            try:
                got = self._poll(self.secondaries[name], zone, serial, deadline)
            except BaseException as exc:  # re-raised in the caller's thread
                failure.append(exc)
                return
            if got is not None:
                found[name] = got

        threads = [threading.Thread(target=watch, args=(name,), daemon=True) for name in hosts]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        if failure:
            raise failure[0]
        return found

    def wait_all_zones(
        self, hosts: list[str], zones: list[str], serial: int, deadline: float
    ) -> tuple[dict[str, dict[str, float]], dict[str, str]]:
        served: dict[str, dict[str, float]] = {}
        errors: dict[str, str] = {}
        for name in hosts:
            try:
                served[name] = self._wait_zones(self.secondaries[name], zones, serial, deadline)
            except XfrTimeout as exc:
                errors[name] = str(exc)
        return served, errors

    def _wait_zones(
        self, running: RunningServer, zones: list[str], serial: int, deadline: float
    ) -> dict[str, float]:
        """Poll every pending zone in turn until all serve `serial`."""
        pending = list(zones)
        first: dict[str, float] = {}
        address, netns = running.host.address, running.host.netns
        while pending:
            running.alive()
            if self.clock() > deadline:
                raise XfrTimeout(
                    f"timeout after {self.plan.timeout:g} s: {len(pending)} of {len(zones)}"
                    f" zones not served (first: {pending[0]})"
                )
            still = []
            for origin in pending:
                got = query_soa_serial(address, origin, netns=netns, timeout=0.2)
                if got is not None and got >= serial:
                    first[origin] = self.clock()
                else:
                    still.append(origin)
            if len(still) == len(pending):
                time.sleep(POLL_INTERVAL)
            pending = still
        return first

    # --- Bench: new serials and triggers -----------------------------------------------------

    def publish(self, serial: int) -> Publication:
        """Put version `serial` of the first zone on the primary and reload it."""
        primary = self.primary
        assert primary is not None
        change = zonegen.change_set(
            self.plan.zone_spec, serial_to=serial, changes=self.plan.changes
        )
        link_or_copy(change.zone_path, primary.server.setup.zones[0].file)
        watch: Any = contextlib.nullcontext()
        if self.plan.notify:
            targets = [self.testbed.hosts[h.name].address for h in self.plan.secondaries]
            watch = NotifyWatch(primary.host.netns, targets)
        with watch as notifies:
            issued = self.clock()
            primary.host.run_tool(
                primary.server.reload_argv(self.first_zone), timeout=self.plan.timeout
            )
            served = self._poll(primary, self.first_zone, serial, issued + self.plan.timeout)
            if served is None:
                raise XfrTimeout(
                    f"timeout after {self.plan.timeout:g} s: the primary never served "
                    f"{self.first_zone} serial {serial}"
                )
            notified: dict[str, float] = {}
            if notifies is not None:
                for host in self.plan.secondaries:
                    address = self.testbed.hosts[host.name].address
                    sent = notifies.wait(serial, self.plan.timeout, address)
                    if sent is not None:
                        notified[host.name] = sent
        return Publication(issued, served, notified)

    def control(self, host: str, action: Control, zone: str) -> None:
        running = self.secondaries[host]
        argv = (
            running.server.retransfer_argv(zone)
            if action == "retransfer"
            else running.server.refresh_argv(zone)
        )
        running.host.run_tool(argv, timeout=self.plan.timeout)

    # --- Bench: verification and the servers' own view ---------------------------------------

    def _copy(self, running: RunningServer, zone: str) -> PullResult:
        return pull_verified_copy(
            "127.0.0.1", zone, netns=running.host.netns, timeout=self.plan.timeout
        )

    def reference(self, zone: str) -> PullResult:
        """The primary's current copy, pulled locally (no link in the way)."""
        assert self.primary is not None
        return self._copy(self.primary, zone)

    def verify(self, host: str, zone: str, serial: int) -> Verification:
        """The secondary's copy equals the primary's: same serial, records and digest."""
        copy = self._copy(self.secondaries[host], zone)
        if not copy.ok:
            return Verification(False, f"could not read the secondary's copy: {copy.error}", None)
        reference = self.reference(zone)
        if not reference.ok:
            problem = f"could not read the primary's copy: {reference.error}"
            return Verification(False, problem, copy.records)
        problem = compare_zones(reference, copy)
        return Verification(problem is None, problem, copy.records)

    def logged(self, host: str, zone: str, serial: int, since: float) -> Logged:
        """The secondary's logged incoming transfer and failures since `since`, and the
        primary's logged outgoing transfer."""
        assert self.primary is not None
        running = self.secondaries[host]
        dialect = type(running.server)
        text = srv.read_text(running.server.log_path)
        incoming = last_incoming(dialect, text, zone, serial)
        primary = type(self.primary.server)
        outgoing = last_outgoing(
            primary, srv.read_text(self.primary.server.log_path), zone, serial, running.host.address
        )
        failures = count_failures(dialect.kind, text, since)
        return Logged(
            incoming.to_json() if incoming else {},
            outgoing.to_json() if outgoing else {},
            failures.to_json() if failures.failing_lines else {},
        )

    def cold_start_log(self, host: str) -> ColdStartLog:
        running = self.secondaries[host]
        dialect = type(running.server)
        text = srv.read_text(running.server.log_path)
        incoming = [e for e in dialect.parse_log(text) if e.direction == "in"]
        return ColdStartLog(
            transfers=len(incoming),
            bytes=sum(e.bytes or 0 for e in incoming),
            messages=sum(e.messages or 0 for e in incoming),
            failures=count_failures(dialect.kind, text, running.started_at).to_json(),
        )

    def pull(self, method: str, host: str) -> Pulled:
        """A client on `host` pulls the first zone from the primary across the link."""
        assert self.primary is not None
        reference = self.reference(self.first_zone)
        me = self.testbed.hosts[host]
        port = 853 if self.tls else 53
        options: dict[str, Any] = {
            "xfr": "axfr",
            "port": port,
            "netns": me.netns,
            "tsig": self.tsig,
            "tls_hostname": TLS_HOSTNAME if self.tls else None,
            "timeout": self.plan.timeout,
        }
        address = self.primary.host.address
        if method == "own":
            tls = xot_context(self.tls.ca_cert) if self.tls else None
            result = pull(address, self.first_zone, tls=tls, keep_records=True, **options)
            digest = digest_of_wire(result, self.first_zone) if result.ok else None
            result.wire = None  # verified; do not hold a whole zone in memory
        else:
            ca = self.tls.ca_cert if self.tls else None
            result = kdig_pull(address, self.first_zone, tls_ca=ca, digest=True, **options)
            digest = result.digest
        phases = {
            k: v
            for k, v in (
                ("connect", result.connect_s),
                ("tls", result.tls_s),
                ("first_byte", result.first_byte_s),
            )
            if v is not None
        }
        return Pulled(
            ok=result.ok,
            error=result.error,
            serial=result.serial or reference.serial or 0,
            records=result.records,
            bytes=result.bytes,
            messages=result.messages,
            duration_s=result.duration_s,
            started_at=result.started_at or self.wall(),
            phases=phases,
            digest_matches=result.ok and digest == reference.digest,
        )

    # --- Bench: observation ------------------------------------------------------------------

    def mark(self, event: str, repeat: int) -> None:
        if self.sampler is not None:
            self.sampler.mark(event, repeat)

    def between_repeats(self) -> None:
        self.testbed.flush_route_metrics()

    def link_counters(self) -> dict[str, Any]:
        return self.testbed.link_counters()

    def _watch(self, *, without_secondaries: bool = False, without_primary: bool = False) -> None:
        """Point the sampler at the servers running now (a cold start restarts them)."""
        if self.sampler is None:
            return
        running = [] if without_primary or self.primary is None else [self.primary]
        if not without_secondaries:
            running += list(self.secondaries.values())
        targets = [
            Target(
                role=r.name,
                server=r.server.kind,
                pid=r.proc.pid,
                cgroup=self.testbed.cgroup_of(r.proc),
            )
            for r in running
            if r.proc is not None
        ]
        hosts = self.testbed.describe()["hosts"]
        ranges = {
            t.role: parse_port_range(
                hosts[t.role]["sysctls"].get("net.ipv4.ip_local_port_range", KERNEL_PORT_RANGE)
            )
            for t in targets
        }
        self.sampler.watch(self.plan.name, targets, self.testbed.link_counters, ranges)
