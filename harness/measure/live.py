"""The live case: the measurement protocol's operations carried out on real servers.

`LiveCase` implements `protocol.Bench` over the places where the servers run (harness/
place/: a testbed's namespaces or containers): it starts the servers of the plan (one
dialect each), polls SOA serials next to the servers, puts new serials on the primary,
verifies copies, reads the servers' logs and samples them, through place operations only.
It decides nothing about what is measured: that is protocol.py.
"""

from __future__ import annotations

import contextlib
import time
from pathlib import Path
from typing import Any, Literal

from harness import zonegen
from harness.core.transport import XOT_PORT
from harness.measure import processes as srv
from harness.measure.client_pull import pulled
from harness.measure.cold_start import (
    add_references,
    check_copies,
    polling_summary,
    read_cold_start_log,
)
from harness.measure.copies import read_back
from harness.measure.disk_copy import from_disk
from harness.measure.logged import transfer_logged
from harness.measure.primary_ixfr import provides_ixfr
from harness.measure.processes import RunningServer
from harness.measure.protocol import (
    START_TIMEOUT,
    ColdStartLog,
    Control,
    Logged,
    Publication,
    PublishFailed,
    Pulled,
    Verification,
)
from harness.measure.quiet import looker
from harness.measure.settle import settle
from harness.measure.wall import WallClock
from harness.measure.watch import TransferObserver
from harness.measure.zone_waits import wait_all_zones
from harness.observe.sampler import Sampler
from harness.place import Place, Places
from harness.plan.case import CasePlan, GroupPlan
from harness.servers import server_class
from harness.servers.binaries import ServerBinary
from harness.servers.setup import NewVersion
from harness.xfr import TsigKey, XfrError, XfrTimeout
from harness.xfr.poll_zones import ZonesServed
from harness.xfr.rrsum import ZoneSum
from harness.xfr.rrsum_text import soa_bump
from harness.xfr.secrets import TlsFiles, new_tsig
from harness.xfr.update import with_serial
from harness.xfr.wire_watch import WireWatch
from harness.xfr.zonefile_sum import apply_diff_file, zone_file_sum
from harness.zonegen import read_diff
from harness.zonegen.model import ChangeSet

Switched = Literal["reconfig", "restart"]  # how a running secondary was switched
POLL_INTERVAL = 0.005  # seconds between SOA polls: the resolution of every duration
FLEET_POLL_INTERVAL = 0.010  # a large fleet's: every secondary still polled this often


def change_facts(change: ChangeSet | None) -> dict[str, Any] | None:
    """What a record keeps of the change set its serial carried: an own zone's version
    (file, records removed and added, their bytes); a generated set's counts."""
    if change is None:
        return None
    facts: dict[str, Any] = {"removed": change.deleted, "added": change.added}
    if change.changed_bytes is not None:
        facts["bytes"] = change.changed_bytes
    if change.version is not None:
        facts["version"] = change.version
    return facts


def poll_interval(secondaries: int) -> float:
    """5 ms for up to 16 secondaries, 10 ms beyond (one select loop polls them all)."""
    return POLL_INTERVAL if secondaries <= 16 else FLEET_POLL_INTERVAL


class LiveCase:
    """The servers of a group of cases on their places (a context manager that stops them
    all). `plan` is the case selected now: the primary serves what any case of the group
    needs; the secondaries are configured for the selected case (select() switches them)."""

    def __init__(
        self,
        plan: CasePlan | GroupPlan,
        case_dir: Path,
        places: Places,
        binaries: dict[str, ServerBinary],
        zones: zonegen.GeneratedZones,
        tsig: TsigKey | None,
        tls: TlsFiles | None,
        sampler: Sampler | None = None,
        spent: WallClock | None = None,
        binaries_by_case: dict[str, dict[str, ServerBinary]] | None = None,
    ) -> None:
        self.group = plan if isinstance(plan, GroupPlan) else GroupPlan((plan,))
        self.plan = self.group.first
        self.case_dir = case_dir
        self.places = places
        self.binaries = binaries  # the selected case's, per host
        # Every case's of the group: an A/B axis over builds runs one binary or the other.
        self.binaries_by_case = binaries_by_case or {}
        self.generated = zones
        self.tsig = tsig
        self.tls = tls
        self.sampler = places.sampling(sampler)  # the run's, or one relaying hosts' samples
        self.spent = spent or WallClock()
        self.zones = [z.origin for z in zones.files]
        self.first_zone = self.zones[0]
        self.base_serial = zones.files[0].serial
        self.serving = self.base_serial  # the first zone's serial the primary took last
        self.primary: RunningServer | None = None
        self.secondaries: dict[str, RunningServer] = {}
        self.wire: WireWatch | None = None  # the primary's wire, while it runs
        self.observer: TransferObserver | None = None
        self.poll_gaps: dict[str, float] = {}  # host -> longest wait between two SOA polls
        self.unserved: dict[str, float] = {}  # host -> last query answered without the serial
        self.zones_seen: dict[str, ZonesServed] = {}  # host -> its cold start's polling
        self._quiet_from = 0.0  # when the last transfer ended (see between_repeats)
        # (host, "served" | "reconfig") -> when it last served a new serial, or was last
        # reconfigured: events its rate limiters may still be pacing (measure/settle.py).
        self.moments: dict[tuple[str, str], float] = {}
        self.references: dict[str, ZoneSum] = {}  # zone -> what the primary serves now
        self.change: ChangeSet | None = None  # the change set of the last publish
        # Signs the dynamic updates that publish new serials (a secret of this case only).
        self.update_key = new_tsig(name="xfrbench-update.")
        self._tls_on: dict[str, TlsFiles | None] = {}  # host -> the TLS files as it has them

    # --- Bench: clocks -------------------------------------------------------------------

    def clock(self) -> float:
        return time.monotonic()

    def wall(self) -> float:
        return time.time()

    # --- servers -------------------------------------------------------------------------

    def _setup(self, name: str, zones: list[srv.ZoneEntry], workdir: Path) -> srv.ServerSetup:
        """The primary serves the group (TLS, the key and IXFR if any case needs them); a
        secondary is set for the selected case."""
        host_plan = next(h for h in self.plan.hosts if h.name == name)
        group, case = self.group, self.plan
        update_key, primary = None, host_plan.role == "primary"
        if primary:
            transport, ixfr, tsig_only = None, group.ixfr, group.signed_only
            # A primary that takes new versions as files gets no update key: a zone open
            # to updates is a dynamic zone, which BIND will not reload from its file.
            by_file = server_class(host_plan.server.kind).publishes_zone_files(
                group.ixfr, case.zone_spec.signed
            )
            update_key = None if by_file else self.update_key
        else:
            transport, ixfr, tsig_only = case.transport, case.ixfr, True
        peers = [h.name for h in case.secondaries] if primary else [case.primary.name]
        setup = srv.server_setup(
            host_plan, self.places, peers, workdir, zones, transport=transport, tsig=self.tsig,
            tls=self._tls(name), ixfr=ixfr, notify=case.notify, update_key=update_key,
        )  # fmt: skip
        setup.tsig_known, setup.tsig_only = self.tsig, tsig_only
        setup.provide_ixfr = provides_ixfr(case, self.binaries)  # a primary's (primary_ixfr.py)
        setup.tls_known = self._tls(name)  # set only when some case of the group uses XoT
        setup.signed = case.zone_spec.signed
        return setup

    def _tls(self, name: str) -> TlsFiles | None:
        if name not in self._tls_on:  # put on its host once
            primary = name == self.plan.primary.name
            self._tls_on[name] = srv.tls_on(self._place(name), self.tls, primary)
        return self._tls_on[name]

    def _workdir(self, name: str) -> Path:
        return self._place(name).here(self.case_dir / name)  # where the visit's folder has it

    def _server(self, name: str, zones: list[srv.ZoneEntry], workdir: Path) -> RunningServer:
        host_plan = next(h for h in self.plan.hosts if h.name == name)
        setup = self._setup(name, zones, workdir)
        server = srv.make(host_plan, self.binaries[name], setup)
        return RunningServer(host_plan, self.places.place(name), server)

    def select(self, case: CasePlan) -> dict[str, Switched]:
        """Make `case` the selected one. Each running server whose settings differ (TLS,
        TSIG, IXFR, the primary providing IXFR, options of an A/B axis) gets a new config
        and its own reconfiguration where its dialect declares that this makes the switch
        (Server.switches_by_reconfig), else a restart; one whose binary differs (an A/B
        axis over builds) is restarted with the other binary. The reconfigurations run at
        once. Returns how each running server was switched (none: nothing to switch)."""
        if case is self.plan:
            return {}
        self.plan = case
        self.binaries = self.binaries_by_case.get(case.name, self.binaries)
        moves = {}
        for running in (self.primary, *self.secondaries.values()):
            if running is not None:
                how = self._resetup(running)
                if how is not None:
                    moves[running.name] = (running, how)
        reconfig = [r for r, how in moves.values() if how == "reconfig"]
        self.moments |= {(r.name, "reconfig"): self.clock() for r in reconfig}
        srv.reconfigure_all(reconfig, case.timeout)
        for running, how in moves.values():
            if how == "restart":
                srv.restart(running)
                if running is self.primary:
                    self._wait_primary_serves(self.serving)
        self._watch()
        return {name: how for name, (_, how) in moves.items()}

    def _resetup(self, running: RunningServer) -> Switched | None:
        """Render `running` for the selected case; how it must be switched to it (None:
        nothing changed, or it is not started and starts with this config)."""
        old = running.server.setup
        setup = self._setup(running.name, old.zones, old.workdir)
        setup.control_socket = old.control_socket
        binary = self.binaries[running.name]
        if binary.path != running.server.binary:
            running.server = srv.make(running.plan, binary, setup)
            srv.put_config(running)
            return "restart" if running.proc is not None else None
        if srv.switch_fields(setup) == srv.switch_fields(old):
            return None
        running.server.setup = setup
        srv.put_config(running)
        if running.proc is None:
            return None
        started = running.started_with or old
        dialect = type(running.server)
        if running is self.primary:
            same_options = (old.options, old.config) == (setup.options, setup.config)
            return "reconfig" if same_options or dialect.reconfig_applies_options else "restart"
        return "reconfig" if dialect.switches_by_reconfig(started, old, setup) else "restart"

    def start_primary(self) -> None:
        name = self.plan.primary.name
        workdir, place = self._workdir(name), self._place(name)
        zones = srv.primary_zones(self.generated.files, place, workdir, self.binaries.get(name))
        self.primary = self._server(name, zones, workdir)
        peers = [self._place(h.name).address for h in self.plan.secondaries]
        self.wire = self.primary.place.wire(peers).__enter__()
        srv.spawn(self.primary)
        self._watch()
        self._wait_primary_serves(self.base_serial)

    def _wait_primary_serves(self, serial: int) -> None:
        """Ready = the primary serves the first zone at `serial` and the last zone (it loads
        them in order; only the first gets new versions), with the scenario's timeout added:
        14 M records took BIND over 120 s on a busy machine; and it listens for XoT when a
        case of the group needs it."""
        assert self.primary is not None
        limit = START_TIMEOUT + self.plan.timeout
        wanted = {self.zones[-1]: self.base_serial, self.zones[0]: serial}
        for origin in dict.fromkeys((self.zones[0], self.zones[-1])):
            deadline = self.clock() + limit
            if not self._poll(self.primary, origin, wanted[origin], deadline):
                raise XfrTimeout(
                    f"timeout after {limit:g} s: the primary never served {origin} "
                    f"serial {wanted[origin]}"
                )
        if self.group.tls:
            srv.wait_listening(self.primary, XOT_PORT)

    def prepare_secondaries(self) -> None:
        self.stop_secondaries()
        for host in self.plan.secondaries:
            workdir = self._workdir(host.name)
            zones = srv.fresh_secondary_zones(self._place(host.name), self.zones, workdir)
            running = self._server(host.name, zones, workdir)
            srv.put_config(running)
            self.secondaries[host.name] = running

    def start_secondaries(self) -> None:
        for running in self.secondaries.values():
            srv.spawn(running, render=False)
        self._watch()

    def stop_secondaries(self) -> None:
        self._watch(without_secondaries=True)
        srv.stop_all(list(self.secondaries.values()))
        self.secondaries.clear()

    def close(self) -> None:
        """Stop every server at once (each takes seconds to free a large zone)."""
        if self.wire is not None:
            self.wire.__exit__(None, None, None)
            self.wire = None
        self._watch(without_secondaries=True, without_primary=True)
        primary = [self.primary] if self.primary is not None else []
        srv.stop_all([*self.secondaries.values(), *primary])
        self.secondaries.clear()
        self.primary = None

    def __enter__(self) -> LiveCase:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _place(self, name: str) -> Place:
        return self.places.place(name)

    def _alive(self) -> None:
        for running in (self.primary, *self.secondaries.values()):
            if running is not None:
                running.alive()

    # --- Bench: waiting for serials ----------------------------------------------------------

    def _poll(
        self, running: RunningServer, zone: str, serial: int, deadline: float
    ) -> float | None:
        """When `running` first served `serial` of `zone` (polled next to it), or None at
        the deadline. Checks every second that the servers are alive."""
        seen = self.places.wait_serials(
            [running.place], zone, serial, deadline=deadline, interval=POLL_INTERVAL,
            between=self._alive,
        )  # fmt: skip
        return seen.served.get(running.place.name)

    def wait_served(
        self,
        hosts: list[str],
        zone: str,
        serial: int,
        deadline: float,
        straggle: float | None = None,
    ) -> dict[str, float]:
        seen = self.places.wait_serials(
            [self.secondaries[name].place for name in hosts],
            zone,
            serial,
            deadline=deadline,
            interval=poll_interval(len(hosts)),
            between=self._alive,
            straggle=straggle,
        )
        self.poll_gaps = seen.max_gap_s
        self.unserved = seen.unserved
        self.moments |= {(host, "served"): at for host, at in seen.served.items()}
        # Transfers end here, the unrecorded ones (first copies, warm-up) too: the next
        # repeat's settle counts from now (between_repeats).
        self._quiet_from = self.clock()
        return seen.served

    def last_unserved(self, host: str) -> float | None:
        return self.unserved.get(host)

    def wait_all_zones(
        self, hosts: list[str], zones: list[str], serial: int, deadline: float
    ) -> tuple[dict[str, dict[str, float]], dict[str, str]]:
        """Every secondary's zones polled concurrently (measure/zone_waits.py)."""
        running = {name: self.secondaries[name] for name in hosts}
        served, errors, self.zones_seen = wait_all_zones(
            running, zones, serial, deadline, self.plan.cold_start_poll, self.clock
        )
        return served, errors

    def zones_last_unserved(self, host: str) -> dict[str, float]:
        seen = self.zones_seen.get(host)
        return seen.unserved if seen is not None else {}

    def cold_start_polling(self, host: str) -> dict[str, Any]:
        """How a host's cold start was polled: rounds, queries (and those asked again within
        a round), the slowest round."""
        seen = self.zones_seen.get(host)
        if seen is None:
            return {}
        # "off": the secondary's log was the clock
        return {"max_rate": self.plan.cold_start_poll} | polling_summary(seen)

    # --- Bench: new serials and triggers -----------------------------------------------------

    def publish(self, serial: int) -> Publication:
        """put_version(), then wait until the primary serves it."""
        assert self.primary is not None
        issued, method = self.put_version(serial)
        served = self._poll(self.primary, self.first_zone, serial, issued + self.plan.timeout)
        if served is None:
            raise XfrTimeout(
                f"timeout after {self.plan.timeout:g} s: the primary never served "
                f"{self.first_zone} serial {serial} ({method})"
            )
        return Publication(issued, served, method, change_facts(self.change))

    def change_set(self, serial: int) -> ChangeSet | None:
        """The change set to `serial` when the group publishes change sets (a group with an
        IXFR case applies the chain on every serial, so that a set always starts from the
        zone it was made for), whole only for a primary that takes zone files."""
        assert self.primary is not None
        whole = type(self.primary.server).publishes_zone_files(
            self.group.ixfr, self.plan.zone_spec.signed
        )
        if not (self.group.ixfr or whole):
            return None
        return zonegen.change_set(
            self.plan.zone_spec, serial_to=serial, changes=self.plan.changes, whole_zone=whole
        )

    def put_version(self, serial: int) -> tuple[float, str]:
        """Put version `serial` of the first zone on the primary, the way its dialect
        chooses (Server.publish): an AXFR workload changes only the serial, an IXFR one
        applies the next change set. Returns when the primary took it (bench clock) and
        how. The harness's belief of what the primary serves follows; check_primary()
        holds the primary to it after the transfers."""
        primary = self.primary
        assert primary is not None and self.wire is not None
        server, place = primary.server, primary.place
        self.change = change = self.change_set(serial)
        reference = self._reference(self.first_zone)
        soa = place.soa(self.first_zone, timeout=self.plan.timeout)
        version = NewVersion(self.first_zone, with_serial(soa, serial), change)
        reach = place.reach(self.plan.timeout)
        issued = self.clock()
        self.wire.forget_before(issued - 1.0)  # older events are no repeat's any more
        try:
            method = server.publish(version, reach)
        except XfrError as exc:
            raise PublishFailed(f"the primary did not take serial {serial}: {exc}") from None
        self.serving = serial
        if change is None:  # the serial alone changed
            old, new = soa.to_text(), version.soa.to_text()
            self.references[self.first_zone] = soa_bump(reference, old, new, self.first_zone)
        else:
            self.references[self.first_zone] = apply_diff_file(
                reference, change.diff_path, self.first_zone
            )
        return issued, method

    def check_primary(self, serial: int) -> str | None:
        """None when the primary serves what the harness believes it published at `serial`
        (xfr/primary_check.py): a small zone whole, a large one at the changed names."""
        primary = self.primary
        assert primary is not None
        zone = self.first_zone
        changed = read_diff(self.change.diff_path, zone) if self.change is not None else None
        return primary.place.check_serves(
            zone, self._reference(zone), serial, changed, timeout=self.plan.timeout
        )

    def notifications(self, serial: int, since: float, wait: float) -> dict[str, float]:
        assert self.wire is not None
        deadline = self.clock() + wait
        notified: dict[str, float] = {}
        for host in self.plan.secondaries:
            address = self._place(host.name).address
            sent = self.wire.wait_notify(
                serial, max(0.0, deadline - self.clock()), address, since=since
            )
            if sent is not None:
                notified[host.name] = sent
        return notified

    def connect_ports(self, host: str, since: float) -> list[int]:
        assert self.wire is not None
        return self.wire.connect_ports(self._place(host).address, since)

    def control(self, host: str, action: Control, zone: str) -> None:
        running = self.secondaries[host]
        argv = (
            running.server.retransfer_argv(zone)
            if action == "retransfer"
            else running.server.refresh_argv(zone)
        )
        running.place.run(argv, timeout=self.plan.timeout)

    # --- Bench: verification and the servers' own view ---------------------------------------

    def _reference(self, zone: str) -> ZoneSum:
        """What the primary serves for `zone` now, as an RRSUM: the zone file's (cached
        beside it), kept up to date by publish() with each change set or new SOA, so the
        primary is never pulled again (verifying a 14 M-record copy costs a pull)."""
        if zone not in self.references:
            file = next(f for f in self.generated.files if f.origin == zone)
            self.references[zone] = zone_file_sum(file.path, zone)
        return self.references[zone]

    def verify(self, host: str, zone: str, serial: int) -> Verification:
        """The secondary's copy holds exactly the primary's records (RRSUM), at `serial`:
        its server's file and what it serves at a sample of names (measure/disk_copy.py),
        or read back (verify = "served"; once more when the first read met the server
        between versions: measure/copies.py)."""
        running, timeout = self.secondaries[host], self.plan.timeout
        by_file = self.plan.verify != "served" and running.place.shares_files
        if by_file and (copy := running.server.disk_copy(zone)):
            change, ref = self.change if zone == self.first_zone else None, self._reference(zone)
            return from_disk(running, copy, zone, serial, ref, change, self.plan, self.spent)
        return read_back(
            lambda: running.place.read_copy(zone, timeout=timeout),
            self._reference(zone),
            serial,
            time.sleep,
        )

    def verify_zones(self, host: str, zones: list[str], serial: int) -> dict[str, Verification]:
        """Many small zones (a cold start): the secondary's copies read over a few
        connections, against the sums of the zone files (kept beside the generated set)."""
        add_references(self.references, self.generated, zones)
        running = self.secondaries[host]
        copies = running.place.read_copies(zones, timeout=self.plan.timeout)
        return check_copies(self.references, copies, zones, serial)

    def logged(self, host: str, zone: str, serial: int, since: float) -> Logged:
        """What the servers logged of the transfer to `host` (measure/logged.py)."""
        assert self.primary is not None
        running, primary = self.secondaries[host], self.primary
        return transfer_logged(
            type(running.server),
            srv.log_of(running),
            type(primary.server),
            srv.log_of(primary),
            (zone, serial, running.place.address),
            since,
            self.wall(),
            (running.place.host_time, primary.place.host_time),
        )

    def cold_start_log(self, host: str) -> ColdStartLog:
        running = self.secondaries[host]
        text = srv.log_of(running)
        # Its log stamps the host's clock: its start (the engine's) put on that clock.
        started = running.started_at
        started = None if started is None else running.place.host_time(started)
        return read_cold_start_log(type(running.server), text, started)

    def pull(self, method: str, host: str) -> Pulled:
        """A client on `host` pulls the first zone from the primary across the link, over
        the selected case's transport (measure/client_pull.py)."""
        assert self.primary is not None
        tls = self._tls(host)
        result = self._place(host).pull_from(
            method,
            self.first_zone,
            self.primary.place.address,
            self.plan.transport,
            tls_ca=tls.ca_cert if tls else None,
            tsig=self.tsig,
            timeout=self.plan.timeout,
        )
        return pulled(result, self._reference(self.first_zone), result.started_at or self.wall())

    # --- Bench: observation ------------------------------------------------------------------

    def mark(self, event: str, repeat: int) -> None:
        if event == "transfer-end":
            self._quiet_from = self.clock()
        if self.sampler is not None:
            self.sampler.mark(event, repeat)

    def between_repeats(self) -> dict[str, Any]:
        """Wait until the last transfer left nothing behind that could bias the next
        (measure/settle.py: the servers' rate limiters, connections, the link's queues, the
        servers' CPU), at most the plan's `settle` after its end; then forget cached route
        metrics. Back to back, BIND's NOTIFY and SOA-query limiters (20 a second, in 0.5 s
        ticks) held every other NOTIFY by ~0.3 s and the SOA query after it by ~0.15 s.
        Returns what the wait was (the record's extra.settle)."""
        deadline = self._quiet_from + self.plan.settle
        running = [r for r in (self.primary, *self.secondaries.values()) if r and r.proc]
        with contextlib.ExitStack() as stack:
            look = looker(self.places, running, self.wire, self.moments, stack)
            settled = settle(look, deadline, self.clock, time.sleep, fixed=self.plan.settle_fixed)
        self.places.flush_route_metrics()
        return settled.to_json()

    def begin_observation(self) -> None:
        self.observer = TransferObserver(self.places, self.plan, self.wire)
        self.observer.begin()

    def finish_observation(self) -> None:
        if self.observer is not None:
            self.observer.finish()

    def observation(self, host: str, t0: float, served: float) -> dict[str, Any]:
        facts = self.observer.end(host, t0, served) if self.observer is not None else {}
        if host in self.poll_gaps:
            facts["poll_max_gap_s"] = round(self.poll_gaps[host], 6)
        return facts

    def link_counters(self) -> dict[str, Any]:
        return self.places.link_counters()

    def _watch(self, *, without_secondaries: bool = False, without_primary: bool = False) -> None:
        """Point the sampler at the servers running now (a cold start restarts them)."""
        if self.sampler is None:
            return
        running = [] if without_primary or self.primary is None else [self.primary]
        if not without_secondaries:
            running += list(self.secondaries.values())
        targets, ranges = srv.sampler_targets(running, self.plan.is_fleet)
        self.sampler.watch(self.plan.name, targets, self.places.link_counters, ranges)
