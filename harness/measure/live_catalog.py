"""The live case of a catalog run: `LiveCase` plus what `catalog.CatalogBench` needs.

The primary serves the catalog zone first (so it is `first_zone`, whose versions the
dialect publishes: a signed update adding and removing member PTRs, or a new file and a
reload) and every hosting zone of the pool after it, all loaded before the catalog names
any of them. Each secondary is configured with the catalog zone alone, as a consumer
(`ServerSetup.catalog`: its dialect renders what it needs, BIND's catalog-zones with
allow-new-zones, Knot's catalog-role and member template).
"""

from __future__ import annotations

import dataclasses
import io
import threading
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from harness import zonegen
from harness.measure import processes as srv
from harness.measure.bench import PublishFailed, Verification
from harness.measure.catalog import Usage
from harness.measure.cold_start import check_copies
from harness.measure.live import LiveCase
from harness.measure.zone_waits import wait_all_zones
from harness.servers.failures import classify
from harness.servers.setup import CatalogConsumer, NewVersion
from harness.xfr import XfrError, XfrTimeout
from harness.xfr.update import with_serial
from harness.xfr.zonefile_sum import zone_set_sums
from harness.zonegen.catalog import Member, catalog_change, member_version, write_catalog
from harness.zonegen.model import ChangeSet, ZoneFiles

GONE_POLL_S = 0.05  # between two rounds of asking whether removed members are gone
PROGRESS_EVERY_S = 0.5  # a consumer's members written to samples.jsonl at most this often


def with_catalog(
    zones: zonegen.GeneratedZones,
    folder: Path,
    zone: str,
    members: list[Member],
    version: str | None,
    others: tuple[str, ...] = (),
) -> zonegen.GeneratedZones:
    """The hosting pool with the catalog naming `members` first, at the pool's serial, then
    each of `others` (a change of ownership's catalogs), naming no member yet."""
    folder.mkdir(parents=True, exist_ok=True)
    serial = zones.files[0].serial
    files = zones.files
    for name, named in [*((o, []) for o in reversed(others)), (zone, members)]:
        catalog = write_catalog(folder / f"{name}zone", name, serial, named, version)
        files = files.with_first(catalog) if isinstance(files, ZoneFiles) else (catalog, *files)
    return dataclasses.replace(zones, files=files)


class LiveCatalogCase(LiveCase):
    """A LiveCase whose secondaries consume the catalog its primary serves."""

    def __init__(self, plan: Any, case_dir: Path, places: Any, binaries: Any, zones: Any,
                 *args: Any, **kwargs: Any) -> None:  # fmt: skip
        first = plan.first if hasattr(plan, "first") else plan
        catalog = first.catalog
        assert catalog is not None, "a catalog case has a catalog plan"
        spec = first.zone_spec
        pool = [f.origin for f in zones.files]  # in index order (zonegen/generate.py)
        self.members = catalog.first_members(spec.origin, spec.seed, pool)
        del pool
        self.catalog_dir = case_dir / "catalog"
        self.pool = zones  # the hosting zones alone: their sums are cached beside them
        self.version = catalog.version
        self.others = catalog.catalogs[1:]  # a change of ownership's catalog, if any
        zones = with_catalog(
            zones, self.catalog_dir, catalog.zone, self.members, self.version, self.others
        )
        self.base = zones.files[0].serial
        self.other_members: dict[str, list[Member]] = {o: [] for o in self.others}
        self.other_serving: dict[str, int] = dict.fromkeys(self.others, self.base)
        super().__init__(plan, case_dir, places, binaries, zones, *args, **kwargs)
        self.cpu_before: dict[str, float] = {}  # host -> its cgroup's CPU at its last start
        self.peak_reset: dict[str, bool] = {}  # host -> its peak was reset at that start
        self._progress_at: dict[str, float] = {}  # host -> when its members were last noted
        self._progress_was: dict[str, tuple[int, int]] = {}  # host -> (done, total) noted
        self._progress_lock = threading.Lock()  # (wait_members calls it from many threads)

    # --- the consumers ------------------------------------------------------------------

    def _setup(self, name: str, zones: list[srv.ZoneEntry], workdir: Path) -> srv.ServerSetup:
        setup = super()._setup(name, zones, workdir)
        if setup.role == "secondary":
            setup.catalog = CatalogConsumer(self.first_zone, workdir / "members", self.others)
        return setup

    def prepare_secondaries(self) -> None:
        """Every consumer with the catalog zone alone, nothing on disk."""
        self.stop_secondaries()
        for host in self.plan.secondaries:
            workdir = self._workdir(host.name)
            catalogs = [self.first_zone, *self.others]
            zones = srv.fresh_secondary_zones(self._place(host.name), catalogs, workdir)
            running = self._server(host.name, zones, workdir)
            srv.put_config(running)
            self.secondaries[host.name] = running

    def start_consumers(self) -> float:
        self.prepare_secondaries()
        started = self.clock()
        self.start_secondaries()
        for host in self.secondaries:
            self._baseline(host)
        return started

    def _baseline(self, host: str) -> None:
        """A server's cgroup outlives its restarts (testbed/core.py reuses it): its CPU so
        far and its memory peak are set aside at each start, so usage() is this start's."""
        running = self.secondaries[host]
        group = running.place.cgroup_of(running.proc) if running.proc is not None else None
        if group is None:
            return
        read = group.read()
        self.cpu_before[host] = read.cpu_user_s + read.cpu_system_s
        self.peak_reset[host] = group.reset_peak()

    def restart_consumer(self, host: str) -> float:
        running = self.secondaries[host]
        srv.stop(running)
        started = self.clock()
        srv.spawn(running, render=False)
        self._watch()
        self._baseline(host)
        return started

    def sleep(self, seconds: float) -> None:
        time.sleep(max(0.0, seconds))

    # --- the catalog on the primary -----------------------------------------------------

    def catalog_members(self, zone: str | None = None) -> list[Member]:
        if zone is None or zone == self.first_zone:
            return list(self.members)
        return list(self.other_members[zone])

    def catalog_serial(self) -> int:
        return self.serving

    def put_catalog(self, members: list[Member], zone: str | None = None) -> tuple[int, float]:
        """A version of the catalog (`zone`: one of the others, a change of ownership's)."""
        if zone is not None and zone != self.first_zone:
            old, serial = self.other_members[zone], self.other_serving[zone] + 1
            _, issued = self._publish_catalog(zone, old, members, serial)
            served = self._poll_catalog(zone, serial, issued)
            self.other_members[zone], self.other_serving[zone] = list(members), serial
            return serial, served
        zone, serial = self.first_zone, self.serving + 1
        change, issued = self._publish_catalog(zone, self.members, members, serial)
        served = self._poll_catalog(zone, serial, issued)
        self.serving, self.members, self.change = serial, list(members), change
        self.references.pop(zone, None)
        return serial, served

    def catalog_serial_of(self, zone: str) -> int:
        return self.serving if zone == self.first_zone else self.other_serving[zone]

    def _publish_catalog(
        self, zone: str, old: list[Member], new: list[Member], serial: int
    ) -> tuple[ChangeSet, float]:
        """The version from `old` to `new` members put on the primary: its change set, and
        when it was issued."""
        primary = self.primary
        assert primary is not None and self.wire is not None
        folder = self.catalog_dir / "versions"
        change = catalog_change(folder, zone, serial - 1, serial, old, new, self.version)
        place = primary.place
        soa = place.soa(zone, timeout=self.plan.timeout)
        issued = self.clock()
        self.wire.forget_before(issued - 1.0)  # older events are no version's any more
        try:
            primary.server.publish(
                NewVersion(zone, with_serial(soa, serial), change), place.reach(self.plan.timeout)
            )
        except XfrError as exc:
            raise PublishFailed(
                f"the primary did not take catalog {zone} serial {serial}: {exc}"
            ) from None
        return change, issued

    def _poll_catalog(self, zone: str, serial: int, issued: float) -> float:
        """When the primary first served the catalog `zone` at `serial`."""
        assert self.primary is not None
        served = self._poll(self.primary, zone, serial, issued + self.plan.timeout)
        if served is None:
            raise XfrTimeout(
                f"timeout after {self.plan.timeout:g} s: the primary never served catalog "
                f"{zone} serial {serial}"
            )
        return served

    # --- what the consumers serve -------------------------------------------------------

    def verify_zones(self, host: str, zones: list[str], serial: int) -> dict[str, Verification]:
        """Members read back whole against the sums of the pool's files (never the
        catalog's, which changes within a run)."""
        # Only the sample's sums: the whole pool's (100 k zones) would hold some 200 MB.
        wanted = [zone for zone in zones if zone not in self.references]
        if wanted:
            asked = set(wanted)  # (a dict of all 100 k files' paths: 5 MB more each time)
            files = {f.origin: f.path for f in self.pool.files if f.origin in asked}
            self.references.update(zone_set_sums([(files[zone], zone) for zone in wanted]))
        copies = self.secondaries[host].place.read_copies(zones, timeout=self.plan.timeout)
        return check_copies(self.references, copies, zones, serial)

    def put_member(self, zone: str) -> tuple[int, float]:
        """The member's next serial, published as its primary takes versions: a dynamic
        update of the SOA alone, or the pool's file at the new serial and a reload."""
        primary = self.primary
        assert primary is not None
        place = primary.place
        soa = place.soa(zone, timeout=self.plan.timeout)
        (rdata,) = list(soa)
        serial = int(rdata.serial) + 1
        change = None
        if type(primary.server).publishes_zone_files(False, self.plan.zone_spec.signed):
            source = next(f.path for f in self.pool.files if f.origin == zone)
            change = member_version(self.catalog_dir / "members", source, zone, serial - 1, serial)
        issued = self.clock()
        try:
            primary.server.publish(
                NewVersion(zone, with_serial(soa, serial), change), place.reach(self.plan.timeout)
            )
        except XfrError as exc:
            raise PublishFailed(f"the primary did not take {zone} serial {serial}: {exc}") from None
        served = self._poll(primary, zone, serial, issued + self.plan.timeout)
        if served is None:
            raise XfrTimeout(
                f"timeout after {self.plan.timeout:g} s: the primary never served {zone} "
                f"serial {serial}"
            )
        return serial, served

    def wait_members(
        self, hosts: list[str], zones: list[str], deadline: float, serial: int | None = None
    ) -> dict[str, dict[str, float]]:
        """Every host's members polled concurrently at `serial`, else the pool's
        (zone_waits.py)."""
        running = {name: self.secondaries[name] for name in hosts}
        rate = self.plan.cold_start_poll
        self._progress_at.clear()
        self._progress_was.clear()

        def between(host: str, done: int, total: int) -> None:
            self._forget_wire()
            self.note_members(host, done, total)

        served, errors, seen = wait_all_zones(
            running, zones, serial or self.base_serial, deadline, rate, self.clock, between
        )
        out = dict(served)
        for host, result in seen.items():  # a timeout keeps what it did see
            out.setdefault(host, dict(result.served))
        for host in hosts:  # where it ended, whatever the last round said
            self.note_members(host, len(out.get(host, {})), len(zones), last=True)
        return out

    def _forget_wire(self) -> None:
        """Drop the primary's wire events of the last rounds: a catalog case asks only when
        the last one came (settling, which the watch keeps apart), and a 100 k-member start
        sees some 300 k of them (NOTIFYs, SOA queries, connects): about 65 MB kept."""
        if self.wire is not None:
            self.wire.forget_before(self.clock() - 1.0)

    def note_members(
        self, host: str, done: int, total: int, *, removed: bool = False, last: bool = False
    ) -> None:
        """A consumer's members as a line of samples.jsonl (role "catalog": the exporter's
        xfrbench_catalog_members_served and _behind), at most every PROGRESS_EVERY_S but
        always the last and a consumer's finishing at once (the gauge of one done early must
        not wait for the others); `removed`: `done` are gone, so only what is behind is
        written."""
        if self.sampler is None:
            return
        now = self.clock()
        with self._progress_lock:
            finished = done == total and self._progress_was.get(host) != (done, total)
            recent = now - self._progress_at.get(host, -PROGRESS_EVERY_S) < PROGRESS_EVERY_S
            if recent and not (last or finished):
                return
            self._progress_at[host], self._progress_was[host] = now, (done, total)
        plan = next(h for h in self.plan.secondaries if h.name == host)
        line: dict[str, Any] = {
            "role": "catalog",
            "host": host,
            "site": plan.site if self.plan.is_fleet else "",
            "behind": total - done,
        }
        if not removed:
            line["served"] = done
        self.sampler.note(self.plan.name, [line])

    def wait_gone(
        self, hosts: list[str], zones: list[str], deadline: float
    ) -> dict[str, dict[str, float]]:
        gone: dict[str, dict[str, float]] = {host: {} for host in hosts}
        self._progress_at.clear()
        self._progress_was.clear()
        while self.clock() < deadline:
            self._alive()
            self._forget_wire()
            for host in hosts:
                self.note_members(host, len(gone[host]), len(zones), removed=True)
                place = self.secondaries[host].place
                for zone in zones:
                    if zone in gone[host]:
                        continue
                    try:
                        place.soa(zone, timeout=1.0)
                    except XfrError:  # REFUSED, NOTAUTH, SERVFAIL: it no longer serves it
                        gone[host][zone] = self.clock()
            if all(len(gone[host]) == len(zones) for host in hosts):
                break
            time.sleep(GONE_POLL_S)
        for host in hosts:
            self.note_members(host, len(gone[host]), len(zones), removed=True, last=True)
        return gone

    def usage(self, host: str) -> Usage:
        running = self.secondaries[host]
        group = running.place.cgroup_of(running.proc) if running.proc is not None else None
        if group is None:
            return Usage(None, None)
        read = group.read()
        cpu = read.cpu_user_s + read.cpu_system_s - self.cpu_before.get(host, 0.0)
        # The peak since this start where the kernel resets one, else since the first.
        peak = read.peak_since_reset_bytes if self.peak_reset.get(host) else None
        return Usage(round(cpu, 3), peak if peak is not None else read.charged_peak_bytes)

    def _log_since(self, host: str, since: float) -> Iterator[str]:
        """`host`'s log lines from the first stamped at or after `since` (unix), read a line
        at a time where the log is a file here (a consumer of 100 k members writes over
        100 MB; read whole, it held some 400 MB of the driver), else through its place."""
        running = self.secondaries[host]
        wording = type(running.server).failures
        path = running.server.log_path
        if path.is_file():
            lines: Iterable[str] = path.open(encoding="utf-8", errors="replace")
        else:
            lines = srv.log_of(running).splitlines(keepends=True)
        started = False
        try:
            for line in lines:
                if not started:
                    stamp = wording.timestamp(line, None, since)
                    if stamp is None or stamp < since - wording.resolution_s:
                        continue
                    started = True
                yield line
        finally:
            if isinstance(lines, io.IOBase):
                lines.close()

    def ownership_changes(self, host: str, to: str, since: float) -> dict[str, float] | None:
        """Members `host` logged as moved to the catalog `to` since `since` (unix): zone ->
        when (unix); None when its dialect logs no such line."""
        dialect = type(self.secondaries[host].server)
        if (pattern := dialect.coo_log) is None:
            return None
        wording, target = dialect.failures, _bare(to)
        out: dict[str, float] = {}
        for line in self._log_since(host, since):
            found = pattern.search(line)
            if found is None or _bare(found["new"]) != target:
                continue
            stamp = wording.timestamp(line, None, since)
            if stamp is not None:
                out.setdefault(_bare(found["zone"]) + ".", stamp)
        return out

    def member_transfers(
        self, host: str, since: float, zones: list[str] | None = None
    ) -> int | None:
        """Incoming transfers of members (of `zones` alone, when given) logged since
        `since` (unix; None: not stamped)."""
        dialect = type(self.secondaries[host].server)
        only = None if zones is None else {_bare(z) for z in zones}
        lines: Iterable[str] = self._log_since(host, since)
        if (words := dialect.transfer_log_words) is not None:
            # A 100 k-member consumer's log since its restart is 30 MB of "loaded" lines:
            # joined and split whole, it was the driver's peak (+51 MiB).
            lines = (line for line in lines if any(word in line for word in words))
        logged = dialect.parse_log("".join(lines))
        catalogs = {_bare(z) for z in (self.first_zone, *self.others)}
        stamped = [
            t
            for t in logged
            if t.direction == "in"
            and _bare(t.zone) not in catalogs
            and (only is None or _bare(t.zone) in only)
        ]
        if any(t.at_unix is None for t in stamped):
            return None
        return sum(1 for t in stamped if t.at_unix is not None and t.at_unix >= since)

    def member_failures(self, host: str, since: float) -> list[str]:
        """Its failed attempts (servers/failures.py) and its catalog complaints, since
        `since`, each line as it wrote it."""
        dialect = type(self.secondaries[host].server)
        wording = dialect.failures
        said = []
        for line in self._log_since(host, since):
            category = classify(wording, line)
            if (category not in (None, "follow-up")) or dialect.catalog_wording.search(line):
                said.append(line.strip())
        return said


def _bare(zone: str) -> str:
    """A zone's name as logs compare: lower case, without the final dot."""
    return zone.rstrip(".").lower()
