"""One scenario end to end: zones, testbed, servers, triggers, measurement, verification.

Each case gets its own testbed (namespaces, link, TCP settings) and its own pair of servers,
rendered from the case's scenario; every repeat appends one line to transfers.jsonl as soon
as it ends, so an interrupted run keeps every finished measurement.

What a server-to-server duration means (DESIGN.md, "Measuring a transfer"):
- trigger "notify": from the moment the primary's own NOTIFY leaves its host (seen on the
  wire, see xfr/notify_watch.py) until the secondary first serves the new serial. The
  primary's reload time and its NOTIFY delay are stored as phases beside it.
- trigger "retransfer": from the control command (rndc retransfer / knotc zone-retransfer /
  nsd-control force_transfer for AXFR; refresh / zone-refresh / transfer for IXFR) until the
  secondary serves the new serial. The primary is told not to NOTIFY in this mode.
- trigger "cold-start": from spawning a secondary with every zone configured and none on disk
  until it serves the last of them.
Both ends are observed by polling SOA serials every `POLL_INTERVAL` seconds, so a duration is
at most one interval late and never negative.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness import ui, zonegen
from harness.compose.backend import Backend, binary_in_image, image_version
from harness.errors import EnvironmentProblem, XfrbenchError
from harness.metrics.procfs import ProcessGone, netns_inode, parse_port_range
from harness.metrics.sampler import Sampler, Target
from harness.results.model import TransferRecord
from harness.results.store import SAMPLES, RunStore, write_json_atomic
from harness.secrets import TlsFiles, new_tls, new_tsig
from harness.servers import logs
from harness.servers.adapters import Server, ServerSetup, ZoneEntry, make_server
from harness.servers.catalog import ServerKind, capabilities, find_binary, probe_version
from harness.spec import Case, LoadedScenario, Scenario, ServerSpec
from harness.testbed import Testbed

if TYPE_CHECKING:
    from harness.compose.testbed import ComposeSetup
from harness.xfr import PullResult, TsigKey, XfrTimeout, compare_zones
from harness.xfr.notify_watch import NotifyWatch
from harness.xfr.poll import query_soa_serial, wait_for_serial
from harness.xfr.pull import digest_of_wire, pull, pull_verified_copy, xot_context
from harness.zonegen.cache import link_or_copy

POLL_INTERVAL = 0.005  # seconds between SOA polls: the resolution of every duration
TLS_HOSTNAME = "primary.xfrbench.test"
START_TIMEOUT = 120.0  # a server that does not answer by then has failed to start
TLS_LISTEN_TIMEOUT = 20.0  # after it serves: no port 853 by then means no XoT configured
KERNEL_PORT_RANGE = "32768 60999"  # ip_local_port_range when a host's was not read back
CONTROL_DIR = Path("/run/xfrbench/ctl")  # short paths for control sockets (108-byte limit)


class CaseFailed(XfrbenchError):
    """A case could not be set up (a server did not start); its repeats are recorded failed."""


@dataclass(frozen=True)
class ServerBinary:
    kind: ServerKind
    path: Path  # in the image's file system when `image` is set
    version: str
    image: str | None = None  # compose backend: the image the server runs from
    image_id: str | None = None

    def describe(self) -> dict[str, Any]:
        out: dict[str, Any] = {"kind": self.kind, "version": self.version}
        if self.image:
            out |= {"image": self.image, "image_id": self.image_id}
        return out


# (kind, binary as configured, image): one binary per distinct key.
BinaryKey = tuple[ServerKind, str | None, str | None]
NETNS = Backend()


def binary_key(role: str, spec: ServerSpec, backend: Backend = NETNS) -> BinaryKey:
    return (spec.kind, str(spec.binary) if spec.binary else None, backend.image_for(role, spec))


def resolve_binaries(
    loaded: LoadedScenario, backend: Backend = NETNS
) -> dict[BinaryKey, ServerBinary]:
    """Find and version every server binary the cases use, once per run (with the compose
    backend: the binary inside the role's image, versioned there)."""
    found: dict[BinaryKey, ServerBinary] = {}
    for case in loaded.cases:
        for role in ("primary", "secondary"):
            spec = getattr(case.scenario.servers, role)
            key = binary_key(role, spec, backend)
            if key in found:
                continue
            image = key[2]
            if image is not None:
                version, image_id = image_version(spec.kind, spec.binary, image)
                found[key] = ServerBinary(
                    spec.kind, binary_in_image(spec.kind, spec.binary), version, image, image_id
                )
                continue
            path = find_binary(spec.kind, spec.binary)
            if path is None:
                where = f"at {spec.binary}" if spec.binary else "on PATH"
                raise EnvironmentProblem(
                    f"no {spec.kind} server binary {where}; install it (make setup) or set "
                    f"servers.*.binary in {loaded.path}"
                )
            found[key] = ServerBinary(spec.kind, path, probe_version(spec.kind, path))
    return found


def support_problem(case: Case, primary: ServerBinary, secondary: ServerBinary) -> str | None:
    """Why the installed versions cannot run this case, or None. Never a silent fallback."""
    p_caps = capabilities(primary.kind, primary.version)
    s_caps = capabilities(secondary.kind, secondary.version)
    if case.transport.startswith("xot"):
        if not p_caps.xot_primary:
            reason = next((r for r in p_caps.reasons if "XoT" in r or "ALPN" in r), "no XoT")
            return f"primary {primary.kind} {primary.version}: {reason}"
        if not s_caps.xot_secondary:
            reason = next((r for r in s_caps.reasons if "XoT" in r), "no XoT")
            return f"secondary {secondary.kind} {secondary.version}: {reason}"
    if case.xfr == "ixfr" and not p_caps.ixfr_primary:
        reason = next((r for r in p_caps.reasons if "IXFR" in r), "cannot serve IXFR")
        return f"primary {primary.kind} {primary.version}: {reason}"
    return None


def _changes(scenario: Scenario) -> int:
    """Records per change set. A tiny zone has one NS to replace: 2 changes at most."""
    changes = scenario.zones.ixfr_changes
    return min(changes, 2) if scenario.zones.preset == "tiny" else changes


def _zone_spec(scenario: Scenario) -> zonegen.ZoneSpec:
    z = scenario.zones
    return zonegen.ZoneSpec(
        preset=z.preset,
        records=z.record_count,
        origin=z.origin,
        seed=z.seed,
        zones=z.zones,
        signed=z.signed,
        serial=z.serial,
    )


@dataclass
class CaseRun:
    """The live state of one case: its testbed, servers and zone versions."""

    case: Case
    case_dir: Path
    testbed: Testbed
    primary_bin: ServerBinary
    secondary_bin: ServerBinary
    zones: zonegen.GeneratedZones
    tsig: TsigKey | None
    tls: TlsFiles | None
    primary: Server | None = None
    secondary: Server | None = None
    procs: dict[str, Any] = field(default_factory=dict)
    phases: dict[str, float] = field(default_factory=dict)
    sampler: Sampler | None = None
    bound: dict[str, float] = field(default_factory=dict)  # bit/s, see case_bound()

    @property
    def scenario(self) -> Scenario:
        return self.case.scenario

    @property
    def timeout(self) -> float:
        return self.scenario.timeout

    @property
    def first_zone(self) -> str:
        return self.zones.files[0].origin

    # --- servers -------------------------------------------------------------------------

    def _setup(self, role: str, zones: list[ZoneEntry], *, notify: bool) -> ServerSetup:
        tb = self.testbed
        me, peer = (tb.primary, tb.secondary) if role == "primary" else (tb.secondary, tb.primary)
        spec = (
            self.scenario.servers.primary if role == "primary" else self.scenario.servers.secondary
        )
        return ServerSetup(
            role=role,  # type: ignore[arg-type]
            address=me.address,
            peer=peer.address,
            zones=zones,
            workdir=self.case_dir / role,
            tsig=self.tsig,
            tls=self.tls,
            ixfr=self.case.xfr == "ixfr",
            notify=notify,
            options=dict(spec.options),
            control_socket=CONTROL_DIR / f"{self.testbed.testbed_id}-{role[0]}.sock",
        )

    def start_primary(self) -> None:
        zone_dir = self.case_dir / "primary" / "zones"
        zone_dir.mkdir(parents=True, exist_ok=True)
        entries = []
        for zone in self.zones.files:
            target = zone_dir / f"{zone.origin}zone"
            link_or_copy(zone.path, target)
            entries.append(ZoneEntry(zone.origin, target))
        notify = self.scenario.trigger == "notify"
        self.primary = make_server(
            self.primary_bin.kind,
            self._setup("primary", entries, notify=notify),
            self.primary_bin.path,
            in_container=self.primary_bin.image is not None,
        )
        self._spawn("primary", self.primary)
        # Ready = it serves the first and the last zone (it loads them in order).
        for origin in {self.zones.files[0].origin, self.zones.files[-1].origin}:
            self._wait_serving(
                "primary",
                self.testbed.primary.address,
                origin,
                self.zones.files[0].serial,
                START_TIMEOUT,
            )
        if self.tls:
            self._wait_port(self.testbed.primary.netns, self.testbed.primary.address, 853)

    def make_secondary(self) -> Server:
        workdir = self.case_dir / "secondary"
        if workdir.exists():  # a cold start begins with no zone data at all
            shutil.rmtree(workdir)
        entries = [
            ZoneEntry(z.origin, workdir / "zones" / f"{z.origin}zone") for z in self.zones.files
        ]
        (workdir / "zones").mkdir(parents=True)
        self.secondary = make_server(
            self.secondary_bin.kind,
            self._setup("secondary", entries, notify=False),
            self.secondary_bin.path,
            in_container=self.secondary_bin.image is not None,
        )
        self.secondary.render()
        return self.secondary

    def _spawn(self, role: str, server: Server) -> None:
        server.render()
        host = self.testbed.primary if role == "primary" else self.testbed.secondary
        out = open(server.setup.workdir / "stdout.log", "ab")  # noqa: SIM115 - owned by proc
        err = open(server.setup.workdir / "stderr.log", "ab")  # noqa: SIM115
        proc = self.testbed.spawn(
            host,
            server.argv(),
            stdout=out,
            stderr=err,
            cwd=server.setup.workdir,
            cgroup=role,
            tool=True,
        )
        out.close()
        err.close()
        self.procs[role] = proc
        _wait_entered(proc, host.netns)
        self._watch()

    def stop(self, role: str) -> None:
        proc = self.procs.pop(role, None)
        if proc is not None:
            self._watch()  # stop sampling it before it goes
            self.testbed.stop(proc)
        server = self.primary if role == "primary" else self.secondary
        if server is not None:
            with contextlib.suppress(FileNotFoundError):
                server.setup.socket_path.unlink()

    # --- sampling --------------------------------------------------------------------------

    def _watch(self) -> None:
        """Point the sampler at the servers running now (a cold start restarts one)."""
        if self.sampler is None:
            return
        servers = {"primary": self.primary, "secondary": self.secondary}
        targets = [
            Target(
                role=role,
                server=servers[role].kind if servers[role] else "",
                pid=proc.pid,
                cgroup=self.testbed.cgroup_of(proc),
            )
            for role, proc in self.procs.items()
        ]
        hosts = self.testbed.describe()["hosts"]
        ranges = {
            role: parse_port_range(
                hosts[role]["sysctls"].get("net.ipv4.ip_local_port_range", KERNEL_PORT_RANGE)
            )
            for role in ("primary", "secondary")
        }
        self.sampler.watch(self.case.name, targets, self.testbed.link_counters, ranges)

    def mark(self, event: str, repeat: int) -> None:
        """A sample of every server right at a transfer's start or end."""
        if self.sampler is not None:
            self.sampler.mark(event, repeat)  # type: ignore[arg-type]

    def _alive(self, role: str) -> None:
        proc = self.procs.get(role)
        if proc is not None and proc.poll() is not None:
            server = self.primary if role == "primary" else self.secondary
            tail = ""
            if server is not None:  # its log says why, or else its stderr
                tail = _tail(server.log_path) or _tail(server.setup.workdir / "stderr.log")
            raise CaseFailed(f"the {role} exited with status {proc.returncode}: {tail}")

    def _wait_serving(
        self, role: str, address: str, zone: str, serial: int, timeout: float
    ) -> float:
        netns = self.testbed.primary.netns if role == "primary" else self.testbed.secondary.netns
        deadline = time.monotonic() + timeout
        while True:
            self._alive(role)
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise XfrTimeout(
                    f"timeout after {timeout:g} s: the {role} never served {zone} serial {serial}"
                )
            try:
                return wait_for_serial(
                    address,
                    zone,
                    serial,
                    netns=netns,
                    interval=POLL_INTERVAL,
                    timeout=min(remaining, 1.0),
                    since=time.monotonic(),
                )
            except XfrTimeout:
                continue

    def _wait_port(self, netns: str, address: str, port: int) -> None:
        from harness.netns import socket_in

        # Called once the primary serves its zones: a TLS listener it has comes up with them.
        deadline = time.monotonic() + TLS_LISTEN_TIMEOUT
        while time.monotonic() < deadline:
            self._alive("primary")
            sock = socket_in(netns, socket.AF_INET, socket.SOCK_STREAM)
            sock.settimeout(1.0)
            try:
                sock.connect((address, port))
                return
            except OSError:
                time.sleep(0.05)
            finally:
                sock.close()
        raise CaseFailed(f"the primary never listened on {address} port {port}")

    # --- zone versions ----------------------------------------------------------------------

    def publish(self, serial: int) -> float:
        """Put version `serial` of the first zone on the primary and reload it. Returns the
        trigger time: when the primary's NOTIFY left its host (trigger notify), or when it
        first served the serial (retransfer: it sends no NOTIFY then)."""
        assert self.primary is not None
        base = self.zones.files[0]
        change = zonegen.change_set(
            _zone_spec(self.scenario), serial_to=serial, changes=_changes(self.scenario)
        )
        link_or_copy(change.zone_path, self.primary.setup.zones[0].file)
        notify = self.scenario.trigger == "notify"
        watch = (
            NotifyWatch(self.testbed.primary.netns, self.testbed.secondary.address)
            if notify
            else contextlib.nullcontext()
        )
        with watch as notifies:
            issued = time.monotonic()
            self.testbed.primary.run_tool(
                self.primary.reload_argv(base.origin), timeout=self.timeout
            )
            served = self._wait_serving(
                "primary", self.testbed.primary.address, base.origin, serial, self.timeout
            )
            self.phases = {"primary_reload": served - issued}
            if notifies is None:
                return served
            sent = notifies.wait(serial, self.timeout)
        if sent is None:
            raise XfrTimeout(
                f"timeout after {self.timeout:g} s: the primary sent no NOTIFY for serial {serial}"
            )
        # Both relative to the reload command: what an operator's change waits for in all.
        self.phases["notify_sent"] = sent - issued
        return sent

    def expected(self) -> PullResult:
        """The primary's current copy, pulled locally (no link in the way): the reference."""
        return pull_verified_copy(
            "127.0.0.1", self.first_zone, netns=self.testbed.primary.netns, timeout=self.timeout
        )

    def verify(self, zone: str, serial: int) -> tuple[bool, str | None, PullResult]:
        """The secondary's copy equals the primary's: same serial, records and digest."""
        copy = pull_verified_copy(
            "127.0.0.1", zone, netns=self.testbed.secondary.netns, timeout=self.timeout
        )
        if not copy.ok:
            return False, f"could not read the secondary's copy: {copy.error}", copy
        reference = (
            self.expected()
            if zone == self.first_zone
            else pull_verified_copy(
                "127.0.0.1", zone, netns=self.testbed.primary.netns, timeout=self.timeout
            )
        )
        if not reference.ok:
            return False, f"could not read the primary's copy: {reference.error}", copy
        problem = compare_zones(reference, copy)
        return problem is None, problem, copy


def _wait_entered(proc: Any, netns: str, limit: float = 2.0) -> None:
    """Wait until `proc` (started through cgroup and netns wrappers that exec in place) lives
    in `netns`: until then /proc/<pid>/net shows the host's sockets, not the server's."""
    want = os.stat(Path("/run/netns", netns)).st_ino
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            if netns_inode(proc.pid) == want:
                return
        except ProcessGone:
            return
        time.sleep(0.002)


def case_bound(case: Case, describe: dict[str, Any]) -> dict[str, float]:
    """The model bounds (bit/s) a transfer's throughput is read against: primary -> secondary
    data over the configured link with the hosts' effective buffers (DESIGN.md)."""
    from harness.link.linktest import compute_bound

    bounds = compute_bound(case.scenario.link, describe)
    named = {
        "model": bounds.model_bps,
        "rate": bounds.rate_goodput_bps,
        "receive_window": bounds.receive_window_bps,
        "send_window": bounds.send_window_bps,
        "mathis": bounds.mathis_bps,
        "pftk": bounds.pftk_bps,
    }
    return {
        key: float(value)
        for key, value in named.items()
        if value is not None and value > 0 and value != float("inf")
    }


def _tail(path: Path, lines: int = 5) -> str:
    try:
        return " | ".join(path.read_text(errors="replace").strip().splitlines()[-lines:])
    except OSError:
        return ""


# --- records -------------------------------------------------------------------------------


def _base_record(
    store: RunStore,
    case: Case,
    repeat: int,
    zone: str,
    serial: int,
    method: str = "server-to-server",
) -> dict[str, Any]:
    servers = case.scenario.servers
    return {
        "run_id": store.run_id,
        "case": case.name,
        "repeat": repeat,
        "primary": servers.primary.kind,
        "secondary": servers.secondary.kind,
        "transport": case.transport,
        "xfr": case.xfr,
        "zone": zone,
        "serial": serial,
        "trigger": case.scenario.trigger,
        "method": method,
    }


def _failed(
    store: RunStore,
    case: Case,
    repeat: int,
    zone: str,
    serial: int,
    error: str,
    *,
    unsupported: bool = False,
    method: str = "server-to-server",
) -> TransferRecord:
    record = TransferRecord(
        **_base_record(store, case, repeat, zone, serial, method),
        records=0,
        bytes=0,
        messages=0,
        duration_s=None,
        started_at=time.time(),
        ok=False,
        error=error,
        verified=False,
        unsupported=unsupported,
    )
    store.append(record)
    return record


def _logged(run: CaseRun, zone: str, serial: int) -> tuple[dict[str, Any], dict[str, Any]]:
    """The secondary's logged incoming transfer, and the primary's logged outgoing one."""
    assert run.primary and run.secondary
    incoming = logs.last_incoming(run.secondary.kind, _read(run.secondary.log_path), zone, serial)
    # The secondary's transfer, not the harness's own verification pull from 127.0.0.1.
    secondary = run.testbed.secondary.address
    outgoing = [
        e
        for e in logs.PARSERS[run.primary.kind](_read(run.primary.log_path))
        if e.direction == "out"
        and e.zone == zone
        and e.serial in (serial, None)
        and (e.peer or "").startswith((f"{secondary}#", f"{secondary}@"))
    ]
    return (incoming.to_json() if incoming else {}, outgoing[-1].to_json() if outgoing else {})


def _read(path: Path) -> str:
    try:
        return path.read_text(errors="replace")
    except OSError:
        return ""


def _sizes(
    logged_in: dict[str, Any], logged_out: dict[str, Any], copy: PullResult | None, xfr: str
) -> tuple[int | None, int | None, int | None]:
    """Bytes, messages and records of the transfer, from whichever server logged them; None
    where neither did (Knot logs no record count, NSD 4.6 no sizes at all)."""

    def pick(key: str) -> int | None:
        for source in (logged_in, logged_out):
            if source.get(key) is not None:
                return int(source[key])
        return None

    records = pick("records")
    if records is None and xfr == "axfr" and copy is not None and copy.ok:
        records = copy.records  # an AXFR carries the whole zone
    return pick("bytes"), pick("messages"), records


# --- the flows -----------------------------------------------------------------------------


def run_update_repeats(run: CaseRun, store: RunStore, progress: Callable[[], None]) -> None:
    """notify and retransfer triggers: one new serial of the first zone per repeat."""
    case, scenario = run.case, run.scenario
    zone = run.first_zone
    base_serial = run.zones.files[0].serial
    secondary = run.make_secondary()
    run._spawn("secondary", secondary)
    # The first copy and one update are a warm-up, not measurements: right after its first
    # transfer a secondary answers the next NOTIFY late (BIND: ~0.45 s here), which would
    # make repeat 1 an outlier of start-up rather than of transfer.
    run._wait_serving(
        "secondary", run.testbed.secondary.address, zone, base_serial, START_TIMEOUT + run.timeout
    )
    warmup = base_serial + 1
    run.publish(warmup)
    if scenario.trigger == "retransfer":
        run.testbed.secondary.run_tool(secondary.refresh_argv(zone), timeout=run.timeout)
    run._wait_serving("secondary", run.testbed.secondary.address, zone, warmup, run.timeout)
    for repeat in range(1, scenario.repeats + 1):
        serial = warmup + repeat
        run.testbed.flush_route_metrics()
        started_at = time.time()
        run.mark("transfer-start", repeat)
        try:
            trigger_time = run.publish(serial)
            phases = dict(run.phases)
            if scenario.trigger == "notify":
                t0 = trigger_time
            else:
                t0 = time.monotonic()
                argv = (
                    secondary.retransfer_argv(zone)
                    if case.xfr == "axfr"
                    else secondary.refresh_argv(zone)
                )
                run.testbed.secondary.run_tool(argv, timeout=run.timeout)
                phases["control_returned"] = time.monotonic() - t0
            done = run._wait_serving(
                "secondary", run.testbed.secondary.address, zone, serial, run.timeout
            )
        except XfrTimeout as exc:
            run.mark("transfer-end", repeat)
            _failed(store, case, repeat, zone, serial, str(exc))
            progress()
            continue
        run.mark("transfer-end", repeat)  # before verification, which costs CPU of its own
        duration = done - t0
        phases["served"] = duration
        ok, problem, copy = run.verify(zone, serial)
        logged_in, logged_out = _logged(run, zone, serial)
        size, messages, records = _sizes(logged_in, logged_out, copy, case.xfr)
        store.append(
            TransferRecord(
                **_base_record(store, case, repeat, zone, serial),
                records=records,
                bytes=size,
                messages=messages,
                duration_s=duration,
                started_at=started_at,
                ok=ok,
                error=problem,
                verified=ok,
                phases=phases,
                bound=run.bound,
                server_logged={"secondary": logged_in, "primary": logged_out},
                extra={
                    "zone_records": copy.records if copy.ok else None,
                    "link_counters": run.testbed.link_counters(),
                },
            )
        )
        progress()


def run_cold_start_repeats(run: CaseRun, store: RunStore, progress: Callable[[], None]) -> None:
    """A secondary with every zone configured and none on disk, started from nothing."""
    scenario, case = run.scenario, run.case
    serial = run.zones.files[0].serial
    origins = [z.origin for z in run.zones.files]
    label = f"{len(origins)} zones" if len(origins) > 1 else origins[0]
    for repeat in range(1, scenario.repeats + 1):
        run.testbed.flush_route_metrics()
        secondary = run.make_secondary()
        started_at = time.time()
        t0 = time.monotonic()
        run._spawn("secondary", secondary)
        run.mark("transfer-start", repeat)
        try:
            done = _wait_all_zones(run, origins, serial, t0 + run.timeout)
        except XfrTimeout as exc:
            run.mark("transfer-end", repeat)
            _failed(store, case, repeat, label, serial, str(exc))
            run.stop("secondary")
            progress()
            continue
        run.mark("transfer-end", repeat)
        duration = done - t0
        problems = []
        records = 0
        for origin in origins:
            ok, problem, copy = run.verify(origin, serial)
            records += copy.records if copy.ok else 0
            if not ok:
                problems.append(f"{origin}: {problem}")
        logged = logs.PARSERS[secondary.kind](_read(secondary.log_path))
        store.append(
            TransferRecord(
                **_base_record(store, case, repeat, label, serial),
                records=records,
                bytes=sum(e.bytes or 0 for e in logged if e.direction == "in"),
                messages=sum(e.messages or 0 for e in logged if e.direction == "in"),
                duration_s=duration,
                started_at=started_at,
                ok=not problems,
                error="; ".join(problems[:5]) or None,
                verified=not problems,
                phases={"served": duration},
                bound=run.bound,
                server_logged={
                    "secondary_transfers": len([e for e in logged if e.direction == "in"])
                },
                extra={"zones": len(origins), "errors_in_log": _count_errors(secondary)},
            )
        )
        run.stop("secondary")
        progress()


def _count_errors(server: Server) -> dict[str, int]:
    """Failure lines worth a figure, such as the CZ.NIC talk's 'address not available'."""
    text = _read(server.log_path)
    return {
        "address_not_available": text.count("address not available"),
        "connection_refused": text.count("connection refused"),
        "timed_out": text.count("timed out"),
    }


def _wait_all_zones(run: CaseRun, origins: list[str], serial: int, deadline: float) -> float:
    """Poll every pending zone in turn until all serve `serial`; returns the last one's time."""
    pending = list(origins)
    last = time.monotonic()
    address, netns = run.testbed.secondary.address, run.testbed.secondary.netns
    while pending:
        run._alive("secondary")
        if time.monotonic() > deadline:
            raise XfrTimeout(
                f"timeout after {run.timeout:g} s: {len(pending)} of {len(origins)}"
                f" zones not served (first: {pending[0]})"
            )
        still = []
        for origin in pending:
            got = query_soa_serial(address, origin, netns=netns, timeout=0.2)
            if got is not None and got >= serial:
                last = time.monotonic()
            else:
                still.append(origin)
        if len(still) == len(pending):
            time.sleep(POLL_INTERVAL)
        pending = still
    return last


def run_client_pulls(run: CaseRun, store: RunStore, progress: Callable[[], None]) -> None:
    """Pulls from the primary by a client on the secondary's host, across the link."""
    from harness.xfr.kdig import kdig_pull

    case = run.case
    zone = run.first_zone
    tb = run.testbed
    reference = run.expected()
    serial = reference.serial or 0
    for method in run.scenario.client_pulls:
        for repeat in range(1, run.scenario.repeats + 1):
            tb.flush_route_metrics()
            port = 853 if run.tls else 53
            run.mark("transfer-start", repeat)
            if method == "own":
                result = pull(
                    tb.primary.address,
                    zone,
                    xfr="axfr",
                    port=port,
                    netns=tb.secondary.netns,
                    tsig=run.tsig,
                    tls=xot_context(run.tls.ca_cert) if run.tls else None,
                    tls_hostname=TLS_HOSTNAME if run.tls else None,
                    timeout=run.timeout,
                    keep_records=True,
                )
                got = digest_of_wire(result, zone) if result.ok else None
                result.wire = None  # verified; do not hold a whole zone in memory
            else:
                result = kdig_pull(
                    tb.primary.address,
                    zone,
                    xfr="axfr",
                    port=port,
                    netns=tb.secondary.netns,
                    tsig=run.tsig,
                    tls_ca=run.tls.ca_cert if run.tls else None,
                    tls_hostname=TLS_HOSTNAME if run.tls else None,
                    timeout=run.timeout,
                    digest=True,
                )
                got = result.digest
            run.mark("transfer-end", repeat)
            verified = result.ok and got == reference.digest
            error = result.error
            if result.ok and not verified:
                error = "the pulled zone's digest differs from the primary's"
            store.append(
                TransferRecord(
                    **_base_record(
                        store,
                        case,
                        repeat,
                        zone,
                        result.serial or serial,
                        method=f"client-pull-{method}",
                    ),
                    records=result.records,
                    bytes=result.bytes,
                    messages=result.messages,
                    duration_s=result.duration_s if result.ok else None,
                    started_at=result.started_at,
                    ok=result.ok and verified,
                    error=error,
                    verified=verified,
                    bound=run.bound,
                    phases={
                        k: v
                        for k, v in (
                            ("connect", result.connect_s),
                            ("tls", result.tls_s),
                            ("first_byte", result.first_byte_s),
                        )
                        if v is not None
                    },
                )
            )
            progress()


def transfers_per_case(scenario: Scenario) -> int:
    return scenario.repeats * (1 + len(scenario.client_pulls))


def compose_setup(
    case: Case, case_dir: Path, binaries: tuple[ServerBinary, ServerBinary], backend: Backend
) -> ComposeSetup | None:
    """The compose side of a case's testbed (None: the netns backend)."""
    if not backend.compose:
        return None
    from harness.compose.testbed import ComposeSetup

    # The servers read their configs and write logs under the case folder, and share
    # control sockets with the driver: both are bind-mounted at the same path.
    shared = (case_dir, CONTROL_DIR)
    if backend.project is not None:
        return ComposeSetup(project=backend.project, shared=shared)
    primary, secondary = binaries
    assert primary.image and secondary.image
    images = {
        "primary": primary.image,
        "secondary": secondary.image,
        "link": backend.link_image(case.scenario.servers.secondary),
    }
    return ComposeSetup(images=images, shared=shared)


@contextlib.contextmanager
def case_testbed(
    case: Case, case_dir: Path, compose: ComposeSetup | None = None
) -> Iterator[Testbed]:
    with Testbed(
        case.scenario.link,
        case.scenario.hosts,
        case_dir / "testbed",
        label=case.name,
        compose=compose,
    ) as testbed:
        yield testbed


def run_case(
    case: Case,
    case_dir: Path,
    store: RunStore,
    binaries: dict[BinaryKey, ServerBinary],
    progress: Callable[[], None],
    sampler: Sampler | None = None,
    backend: Backend = NETNS,
) -> None:
    scenario = case.scenario
    servers = scenario.servers
    # Absolute: the paths rendered into configs must mean the same inside a container.
    case_dir = case_dir.resolve()
    primary_bin = binaries[binary_key("primary", servers.primary, backend)]
    secondary_bin = binaries[binary_key("secondary", servers.secondary, backend)]
    zone_label = scenario.zones.origin
    problem = support_problem(case, primary_bin, secondary_bin)
    if problem:
        _failed(store, case, 0, zone_label, 0, f"unsupported: {problem}", unsupported=True)
        for _ in range(transfers_per_case(scenario)):
            progress()
        return
    zones = zonegen.generate(_zone_spec(scenario))
    case_dir.mkdir(parents=True, exist_ok=True)
    CONTROL_DIR.mkdir(mode=0o700, parents=True, exist_ok=True)
    tsig = new_tsig(algorithm=scenario.tsig_algorithm) if "tsig" in case.transport else None
    compose = compose_setup(case, case_dir, (primary_bin, secondary_bin), backend)
    with case_testbed(case, case_dir, compose) as testbed:
        tls = (
            new_tls(case_dir / "tls", TLS_HOSTNAME, testbed.primary.address)
            if case.transport.startswith("xot")
            else None
        )
        run = CaseRun(
            case,
            case_dir,
            testbed,
            primary_bin,
            secondary_bin,
            zones,
            tsig,
            tls,
            sampler=sampler,
            bound=case_bound(case, testbed.describe()),
        )
        try:
            run.start_primary()
            if scenario.trigger == "cold-start":
                run_cold_start_repeats(run, store, progress)
            else:
                run_update_repeats(run, store, progress)
            if scenario.client_pulls:
                run_client_pulls(run, store, progress)
        except (CaseFailed, XfrTimeout) as exc:
            _failed(store, case, 0, zone_label, 0, str(exc))
        finally:
            for role in ("secondary", "primary"):
                run.stop(role)
            if sampler is not None:
                sampler.unwatch()
        write_json_atomic(
            case_dir / "case.json",
            {
                "case": case.name,
                "axes": case.axes,
                "transport": case.transport,
                "xfr": case.xfr,
                "scenario": case.scenario.model_dump(mode="json"),
                "testbed": testbed.describe(),
                "bound_bps": run.bound,
                "backend": backend.name,
                "primary": primary_bin.describe(),
                "secondary": secondary_bin.describe(),
            },
        )


def _case_slug(index: int, case: Case) -> str:
    safe = "".join(ch if ch.isalnum() or ch in "-_=." else "_" for ch in case.name)
    return f"{index:03d}-{safe}"[:120]


def run_meta(
    loaded: LoadedScenario,
    binaries: dict[BinaryKey, ServerBinary],
    backend: Backend = NETNS,
) -> dict[str, Any]:
    from harness.link.probe import probe_kernel
    from harness.results.provenance import collect

    kernel = probe_kernel()
    return {
        "scenario": loaded.raw,
        "scenario_path": str(loaded.path),
        "spec_hash": loaded.spec_hash,
        "scenario_name": loaded.scenario.name,
        "cases": [case.name for case in loaded.cases],
        "backend": backend.name,
        "compose_project": backend.project,
        "servers": {
            f"{b.kind}@{b.image + ':' if b.image else ''}{b.path}": {"path": str(b.path)}
            | b.describe()
            for b in binaries.values()
        },
        "kernel_features": kernel.to_json(),
        "link_backend": kernel.link_backend,
        "host": collect(),
    }


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
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    if os.geteuid() != 0:
        raise EnvironmentProblem(
            "xfrbench run needs root (network namespaces, iptables, "
            "sysctls); run it with sudo, or use --dry-run"
        )
    from harness.compose.backend import prepare

    backend = prepare(loaded, backend)
    binaries = resolve_binaries(loaded, backend)
    console = ui.console()
    interrupted = False
    with contextlib.ExitStack() as stack:
        store = stack.enter_context(
            RunStore.create(results_root, run_id, out, run_meta(loaded, binaries, backend))
        )
        console.print(f"run [bold]{store.run_id}[/] -> {store.folder}")
        exporter = None
        if prometheus_port is not None:
            from harness.metrics.exporter import Exporter

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
            for case in loaded.cases:
                servers = case.scenario.servers
                exporter.expect_transfers(
                    case.name,
                    servers.primary.kind,
                    servers.secondary.kind,
                    case.transport,
                    case.xfr,
                    methods=(
                        "server-to-server",
                        *(f"client-pull-{m}" for m in case.scenario.client_pulls),
                    ),
                )
            console.print(
                f"metrics for Prometheus on http://{prometheus_address}:{exporter.port}/metrics"
            )
        sampler = stack.enter_context(
            Sampler(
                store.folder / SAMPLES,
                sample_interval,
                on_sample=exporter.observe_sample if exporter else None,
            )
        )
        columns = (
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
        )
        try:
            with Progress(*columns, console=console, transient=False) as bar:
                for index, case in enumerate(loaded.cases):
                    task = bar.add_task(case.name, total=transfers_per_case(case.scenario))
                    run_case(
                        case,
                        store.folder / "cases" / _case_slug(index, case),
                        store,
                        binaries,
                        lambda task=task: bar.advance(task),
                        sampler,
                        backend,
                    )
                    bar.update(task, completed=transfers_per_case(case.scenario))
        except KeyboardInterrupt:
            interrupted = True
            console.print("[yellow]interrupted: finished transfers are kept[/]")
        finally:
            sampler.close()  # its last lines go into the summary
            store.meta["sampler"] = {
                "interval_s": sample_interval,
                "sample_cost_s": sampler.sample_cost_s,
                "errors": sampler.errors,
            }
            store.finish(interrupted=interrupted)
    from harness.metrics.openmetrics import write_openmetrics

    write_openmetrics(store.folder)
    print_summary(store.folder, console)
    if interrupted:
        raise KeyboardInterrupt
    return store.folder


def print_summary(run_dir: Path, console: Any) -> None:
    import json

    from rich.table import Table

    from harness.units import format_rate

    summary = json.loads((run_dir / "summary.json").read_text())
    table = Table(title=f"results in {run_dir}")
    for column in ("case", "method", "n", "ok", "median s", "p10 s", "p90 s", "throughput", "note"):
        right = column.endswith((" s", "n", "ok"))
        table.add_column(
            column, justify="right" if right else "left", no_wrap=column in ("case", "method")
        )

    def num(row: dict[str, Any], key: str) -> str:
        value = row.get(key)
        return f"{value:.3f}" if isinstance(value, int | float) else "-"

    for row in summary["cases"]:
        throughput = row.get("throughput_bps")
        notes = []
        if row.get("unsupported"):
            notes.append("unsupported (reason in transfers.jsonl)")
        if row.get("failed"):
            notes.append(f"{row['failed']} failed")
        if row.get("unstable") and row.get("ok"):
            notes.append("unstable: few repeats or cv > 10 %")
        note = "; ".join(notes)
        method = (row.get("method") or "").replace("server-to-server", "server")
        table.add_row(
            row["case"],
            method.replace("client-pull-", "pull "),
            str(row["n"]),
            str(row["ok"]),
            num(row, "median_s"),
            num(row, "p10_s"),
            num(row, "p90_s"),
            format_rate(throughput) if throughput else "-",
            note,
        )
    console.print(table)
