"""The measurement protocol's operations on real hosts: `RemoteCase` implements
`protocol.Bench` through each host's agent, as `measure.live.LiveCase` does in namespaces.

Where each thing is seen: a NOTIFY on the primary's host (its wire), a secondary's new
serial on the secondary's host (its own SOA polls), copies read back on each host; every
such time is that host's clock, put on the controller's monotonic clock with the offset
measured over the channel (`to_bench`). A duration from a NOTIFY to a served serial so
spans two clocks: the records say by how much it may be off (run/remote.py).
"""

from __future__ import annotations

import base64
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from harness import zonegen
from harness.core.errors import ToolFailed
from harness.core.transport import XOT_PORT
from harness.measure.client_pull import pulled
from harness.measure.copies import read_back
from harness.measure.live import Switched
from harness.measure.logged import transfer_logged
from harness.measure.primary_ixfr import provides_ixfr
from harness.measure.processes import CaseFailed
from harness.measure.protocol import (
    START_TIMEOUT,
    Control,
    Logged,
    Publication,
    PublishFailed,
    Pulled,
    Verification,
)
from harness.measure.wall import WallClock
from harness.plan.case import CasePlan, GroupPlan
from harness.remote.agent import setup_from
from harness.remote.channel import AgentError
from harness.remote.coldstart import ColdStarting
from harness.remote.fleet import RemoteFleet
from harness.remote.observing import Observing
from harness.servers import server_class
from harness.servers.binaries import ServerBinary
from harness.xfr import PullResult, TsigKey, XfrError, XfrTimeout
from harness.xfr.primary_check import FULL_CHECK_RECORDS
from harness.xfr.rrsum import ZoneSum
from harness.xfr.rrsum_text import soa_bump
from harness.xfr.secrets import TlsFiles, new_tsig
from harness.xfr.verify import check_copy
from harness.xfr.zonefile_sum import apply_diff_file, zone_file_sum

POLL_INTERVAL = 0.005
COPY_ZONES = 20  # a primary's zone files push.yml copies; more go by rsync


def _key(key: TsigKey | None) -> dict[str, str] | None:
    return None if key is None else {"name": key.name, "algorithm": key.algorithm,
                                     "secret": key.secret}  # fmt: skip


class RemoteCase(Observing, ColdStarting):
    """The servers of a group of cases on the hosts of an inventory (see LiveCase)."""

    def __init__(
        self,
        plan: GroupPlan,
        visit: str,
        local_dir: Path,
        fleet: RemoteFleet,
        binaries: dict[str, ServerBinary],
        zones: zonegen.GeneratedZones,
        tsig: TsigKey | None,
        sampler: Any = None,
        spent: WallClock | None = None,
        tls: TlsFiles | None = None,
    ) -> None:
        self.group = plan
        self.plan: CasePlan = plan.first
        self.visit = visit  # the visit folder's name, the same on every host and here
        self.local_dir = local_dir
        self.fleet = fleet
        self.binaries = binaries
        self.generated = zones
        self.tsig = tsig
        self.tls = tls  # the controller's copy; pushed to the hosts (pushes())
        self.sampler = sampler
        self.spent = spent or WallClock()
        self.zones = [z.origin for z in zones.files]
        self.first_zone = self.zones[0]
        self.base_serial = zones.files[0].serial
        self.update_key = new_tsig(name="xfrbench-update.")
        self.running: dict[str, dict[str, Any]] = {}  # host -> what its agent started
        self.setups: dict[str, dict[str, Any]] = {}  # host -> its server's config now
        self.started_with: dict[str, dict[str, Any]] = {}  # host -> the config it started with
        self.poll_gaps: dict[str, float] = {}
        self.unserved: dict[str, float] = {}
        self.references: dict[str, ZoneSum] = {}
        self.zones_seen: dict[str, dict[str, Any]] = {}  # a cold start's polling, per host
        self.change: zonegen.ChangeSet | None = None
        self.logs: dict[str, tuple[int, bytearray]] = {}  # host -> (offset read, text)
        self._quiet_from = 0.0
        self._observing: tuple[float, float] | None = None
        self.paths: dict[str, dict[str, Any]] = {}  # secondary -> its path's counts
        self._link_before: dict[str, dict[str, Any]] = {}  # host -> its linkem's counters
        self._link_after: dict[str, dict[str, Any]] = {}
        self.pool = ThreadPoolExecutor(max_workers=max(4, len(fleet.channels)))

    # --- clocks ----------------------------------------------------------------------------

    def wall(self) -> float:
        return time.time()

    # --- hosts and servers -----------------------------------------------------------------

    def workdir(self, name: str) -> str:
        return f"{self.fleet.run_dir(name)}/cases/{self.visit}/{name}"

    def tls_dir(self, name: str) -> str:
        """Where a host keeps this visit's TLS files (outside what fetch.yml brings back)."""
        return f"{self.fleet.run_dir(name)}/tls/{self.visit}"

    def _tls(self, name: str) -> dict[str, str] | None:
        if self.tls is None:
            return None
        folder = self.tls_dir(name)
        return {"ca_cert": f"{folder}/{self.tls.ca_cert.name}",
                "cert": f"{folder}/{self.tls.cert.name}",
                "key": f"{folder}/{self.tls.key.name}", "hostname": self.tls.hostname}  # fmt: skip

    def _setup(self, name: str) -> dict[str, Any]:
        host, group, case = self._host(name), self.group, self.plan
        workdir = self.workdir(name)
        if host.role == "primary":
            transport, tsig, tls = None, self.tsig, self._tls(name)
            ixfr, tsig_only = group.ixfr, group.signed_only
            peers = [self.address(h.name) for h in self.plan.secondaries]
            zones = [{"origin": z, "file": f"{workdir}/zones/{z}zone"} for z in self.zones]
        else:
            transport = case.transport
            tsig, tls = transport.secrets(self.tsig, self._tls(name))
            ixfr, tsig_only = case.ixfr, True
            peers = [self.address(self.plan.primary.name)]
            zones = [{"origin": z, "file": f"{workdir}/zones/{z}zone"} for z in self.zones]
        return {
            "role": host.role,
            "address": self.address(name),
            "peers": peers,
            "zones": zones,
            "workdir": workdir,
            "transport": transport.to_dict() if transport is not None else None,
            "tsig": _key(tsig),
            "tsig_known": _key(self.tsig),
            "tsig_only": tsig_only,
            "tls": tls,
            "ixfr": ixfr,
            "tls_known": self._tls(name),  # set only when some case of the group uses XoT
            "provide_ixfr": provides_ixfr(case, self.binaries),  # a primary's (primary_ixfr.py)
            "notify": case.notify and host.role == "primary",
            "options": dict(host.server.options),
            "config": host.server.config.text if host.server.config else "",
            "signed": case.zone_spec.signed,
            "update_key": _key(self.update_key) if host.role == "primary" else None,
            "control_socket": f"{self.fleet.run_dir(name)}/ctl/{name}.sock"[:107],
        }

    def pushes(self) -> dict[str, list[dict[str, Any]]]:
        """The files push.yml puts on the hosts before the servers start: the zones, and
        for XoT the CA and the primary's certificate everywhere, its key on the primary
        alone (0600, removed with the run's folder)."""
        primary = self.plan.primary.name
        workdir = self.workdir(primary)
        out: dict[str, list[dict[str, Any]]] = {
            primary: [
                {"src": str(f.path), "dest": f"{workdir}/zones/{f.origin}zone", "mode": "0644"}
                for f in self.generated.files
                if len(self.generated.files) <= COPY_ZONES  # more go by rsync (sync_zones)
            ]
        }
        if self.tls is not None:
            for host in self.plan.hosts:
                files = [self.tls.ca_cert, self.tls.cert]
                files += [self.tls.key] if host.role == "primary" else []
                out.setdefault(host.name, []).extend(
                    {"src": str(f), "dest": f"{self.tls_dir(host.name)}/{f.name}", "mode": "0600"}
                    for f in files
                )
        return out

    def sync_zones(self) -> None:
        """A hosting set of many zones goes to the primary's host by one rsync, not a copy
        task per file (push.yml's takes a few tenths of a second each)."""
        if len(self.generated.files) > COPY_ZONES:
            primary = self.plan.primary.name
            files = {f"{f.origin}zone": f.path for f in self.generated.files}
            self.fleet.sync(primary, files, f"{self.workdir(primary)}/zones", basis=[])

    def sysctls(self) -> dict[str, dict[str, str]]:
        """Each host's TCP settings for this visit ([hosts] of the scenario: the cases of a
        group share them), {} for a host with none."""
        return {host.name: host.settings.sysctls() for host in self.plan.hosts}

    def _start(self, name: str) -> None:
        binary = self.binaries[name]
        self.setups[name] = self.started_with[name] = self._setup(name)
        channel = self.fleet.channel(name)
        self.running[name] = channel.call(
            "start", wait=60, name=name, kind=binary.kind, binary=str(binary.path),
            setup=self.setups[name],
        )  # fmt: skip
        self.logs.pop(name, None)

    def start_primary(self) -> None:
        name = self.plan.primary.name
        self._start(name)
        peers = [self.address(h.name) for h in self.plan.secondaries]
        self.fleet.channel(name).call("wire_start", peers=peers)
        self._watch()
        deadline = self.clock() + START_TIMEOUT
        for origin in dict.fromkeys((self.zones[0], self.zones[-1])):
            served = self._wait({name: self.address(name)}, name, origin, self.base_serial,
                                deadline)  # fmt: skip
            if name not in served:
                raise XfrTimeout(f"timeout after {START_TIMEOUT:g} s: the primary never served "
                                 f"{origin} serial {self.base_serial}")  # fmt: skip
        if self.group.tls:  # its TLS listener comes up with the zones
            self.fleet.channel(name).call(
                "wait_listening", wait=START_TIMEOUT + 5, address=self.address(name), port=XOT_PORT,
                timeout=START_TIMEOUT,
            )  # fmt: skip

    def prepare_secondaries(self) -> None:
        """The secondaries stopped and their folders emptied: they start with every zone
        configured and none on disk (a cold start's repeats start alike)."""
        self.stop_secondaries()
        for host in self.plan.secondaries:
            self.fleet.channel(host.name).call("fresh", workdir=self.workdir(host.name))

    def start_secondaries(self) -> None:
        list(self.pool.map(self._start, [h.name for h in self.plan.secondaries]))
        self._watch()

    def stop_secondaries(self) -> None:
        names = [h.name for h in self.plan.secondaries if h.name in self.running]
        for name in names:
            self.fleet.channel(name).call("stop", wait=30, name=name)
            self.running.pop(name, None)

    def select(self, case: CasePlan) -> dict[str, Switched]:
        """Make `case` the selected one, as LiveCase.select: a running secondary whose
        settings differ (TLS, TSIG, IXFR) is switched by its server's own reconfiguration
        where its dialect declares that this makes the switch, else restarted with the new
        config. Returns how each was switched."""
        if case is self.plan:
            return {}
        self.plan = case
        self._switch_primary()  # first: it answers the secondaries' next transfer
        switched: dict[str, Switched] = {}
        for host in case.secondaries:
            name = host.name
            if name not in self.running:
                continue
            setup, old = self._setup(name), self.setups[name]
            before, after = setup_from(old), setup_from(setup)
            if before.transport == after.transport and before.ixfr == after.ixfr:
                continue
            dialect = server_class(self.binaries[name].kind)
            started = setup_from(self.started_with[name])
            if dialect.switches_by_reconfig(started, before, after):
                try:
                    self.fleet.channel(name).call(
                        "reconfig", wait=case.timeout + 5, name=name, setup=setup,
                        timeout=case.timeout,
                    )  # fmt: skip
                except XfrError as exc:  # its reconfiguration command failed on the host
                    raise ToolFailed([f"reconfig of {name}"], 1, str(exc)) from None
                self.setups[name] = setup
                switched[name] = "reconfig"
            else:
                self.fleet.channel(name).call("stop", wait=30, name=name)
                self._start(name)
                switched[name] = "restart"
        self._watch()  # the samples from now on are this case's
        return switched

    def _switch_primary(self) -> None:
        """The running primary reconfigured when the selected case changes whether it
        provides IXFR (measure/primary_ixfr.py); one without IXFR history has none to
        withhold."""
        name = self.plan.primary.name
        if name not in self.running:
            return
        setup, old = self._setup(name), self.setups[name]
        if not old["ixfr"] or setup["provide_ixfr"] == old["provide_ixfr"]:
            return
        self.fleet.channel(name).call(
            "reconfig", wait=self.plan.timeout + 5, name=name, setup=setup,
            timeout=self.plan.timeout,
        )  # fmt: skip
        self.setups[name] = setup

    def close(self) -> None:
        self.stop_secondaries()
        primary = self.plan.primary.name
        if primary in self.running:
            channel = self.fleet.channel(primary)
            channel.call("wire_stop")
            channel.call("stop", wait=30, name=primary)
            self.running.pop(primary, None)
        if self.sampler is not None:
            self._relay("sample_unwatch")
        self.pool.shutdown(wait=False)

    def _alive(self, names: list[str]) -> None:
        for name in names:
            status = self.fleet.channel(name).call("alive", names=[name]).get(name)
            if status is not None:
                tail = " | ".join(self._log(name).splitlines()[-5:])
                raise CaseFailed(f"the {name} exited with status {status}: {tail}")

    # --- serials ------------------------------------------------------------------------------

    def _wait(
        self, targets: dict[str, str], on: str, zone: str, serial: int, deadline: float
    ) -> dict[str, float]:
        remaining = max(0.0, deadline - self.clock())
        seen = self.fleet.channel(on).call(
            "wait_serials", wait=remaining + 5, targets=targets, zone=zone, serial=serial,
            timeout=remaining, interval=POLL_INTERVAL,
        )  # fmt: skip
        for name, gap in seen["max_gap_s"].items():
            self.poll_gaps[name] = gap
        for name, at in seen["unserved"].items():
            self.unserved[name] = self.to_bench(on, at)
        return {name: self.to_bench(on, at) for name, at in seen["served"].items()}

    def wait_served(
        self,
        hosts: list[str],
        zone: str,
        serial: int,
        deadline: float,
        straggle: float | None = None,
    ) -> dict[str, float]:
        """Each secondary polls itself on its own host, all at once (each to the deadline:
        `straggle` does not shorten an agent's wait)."""
        self.unserved = {}

        def one(name: str) -> dict[str, float]:
            return self._wait({name: self.address(name)}, name, zone, serial, deadline)

        served: dict[str, float] = {}
        for part in self.pool.map(one, hosts):
            served |= part
        self._alive([h for h in hosts if h not in served])
        return served

    def last_unserved(self, host: str) -> float | None:
        return self.unserved.get(host)

    # --- publishing and triggers ----------------------------------------------------------

    def publish(self, serial: int) -> Publication:
        name = self.plan.primary.name
        kind = self.binaries[name].kind
        change = None
        signed = self.plan.zone_spec.signed
        if self.group.ixfr or server_class(kind).publishes_zone_files(self.group.ixfr, signed):
            change = zonegen.change_set(
                self.plan.zone_spec, serial_to=serial, changes=self.plan.changes
            )
        self.change = change
        reference = self._reference(self.first_zone)
        remote_change = None
        if change is not None:
            folder = f"{self.fleet.run_dir(name)}/changes/{self.visit}/{serial}"
            # The new zone file is named as the served one, whose version rsync sends the
            # delta against (a whole file only for the dialects that read one).
            files = {"diff": change.diff_path}
            zone_name = f"{change.origin}zone"
            if server_class(kind).publishes_zone_files(self.group.ixfr, signed):
                files[zone_name] = change.zone_path
            self.fleet.sync(name, files, folder, basis=[f"{self.workdir(name)}/zones"])
            remote_change = {
                "origin": change.origin, "serial_from": change.serial_from,
                "serial_to": change.serial_to, "added": change.added, "deleted": change.deleted,
                "diff_path": f"{folder}/diff",
                "zone_path": f"{folder}/{zone_name}" if zone_name in files else f"{folder}/-",
            }  # fmt: skip
        channel = self.fleet.channel(name)
        channel.call("wire_forget", before=time.time() - 1.0 + self.fleet.clock(name).offset_s)
        try:
            got = channel.call(
                "publish", wait=self.plan.timeout + 5, name=name, zone=self.first_zone,
                serial=serial, change=remote_change, timeout=self.plan.timeout,
            )  # fmt: skip
        except XfrTimeout:
            raise
        except (XfrError, AgentError) as exc:
            raise PublishFailed(f"the primary did not take serial {serial}: {exc}") from None
        if change is None:
            self.references[self.first_zone] = soa_bump(
                reference, got["old_soa"], got["new_soa"], self.first_zone
            )
        else:
            self.references[self.first_zone] = apply_diff_file(
                reference, change.diff_path, self.first_zone
            )
        return Publication(
            self.to_bench(name, got["issued"]), self.to_bench(name, got["served"]), got["method"]
        )

    def check_primary(self, serial: int) -> str | None:
        name = self.plan.primary.name
        reference = self._reference(self.first_zone)
        if reference.records > FULL_CHECK_RECORDS:
            got = self.fleet.channel(name).call(
                "soa_serial", wait=self.plan.timeout + 5, address=self.address(name),
                zone=self.first_zone, timeout=self.plan.timeout,
            )  # fmt: skip
            return None if got == serial else f"the primary serves serial {got}, not {serial}"
        copy = self._copy(name)
        problem = check_copy(reference, copy, serial)
        return None if problem is None else f"the primary's own copy: {problem}"

    def notifications(self, serial: int, since: float, wait: float) -> dict[str, float]:
        name = self.plan.primary.name
        channel = self.fleet.channel(name)
        deadline = self.clock() + wait
        notified: dict[str, float] = {}
        for host in self.plan.secondaries:
            left = max(0.0, deadline - self.clock())
            at = channel.call("wire_notify", wait=left + 5, serial=serial,
                              peer=self.address(host.name), timeout=left,
                              since=self.to_host(name, since))  # fmt: skip
            if at is not None:
                notified[host.name] = self.to_bench(name, at)
        return notified

    def control(self, host: str, action: Control, zone: str) -> None:
        self.fleet.channel(host).call(
            "control", wait=self.plan.timeout + 5, name=host, action=action, zone=zone,
            timeout=self.plan.timeout,
        )  # fmt: skip

    # --- verification and the servers' own view --------------------------------------------

    def _reference(self, zone: str) -> ZoneSum:
        if zone not in self.references:
            file = next(f for f in self.generated.files if f.origin == zone)
            self.references[zone] = zone_file_sum(file.path, zone)
        return self.references[zone]

    def _copy(self, host: str) -> PullResult:
        data = self.fleet.channel(host).call(
            "verify", wait=self.plan.timeout + 5, zone=self.first_zone, timeout=self.plan.timeout
        )
        return PullResult(**data)

    def verify(self, host: str, zone: str, serial: int) -> Verification:
        """The secondary's copy read back on its host, once more when the first read met
        it between versions (measure/copies.py: NSD's handover)."""
        return read_back(lambda: self._copy(host), self._reference(zone), serial, time.sleep)

    def _log(self, host: str) -> str:
        """The server's log so far, read on from where the last read ended; mirrored into
        the local visit folder (fetch.yml brings the final one at the visit's end)."""
        info = self.running.get(host)
        if info is None:
            offset_text = self.logs.get(host)
            return offset_text[1].decode(errors="replace") if offset_text else ""
        offset, text = self.logs.get(host, (0, bytearray()))
        while True:
            got = self.fleet.channel(host).call("read", path=info["log"], offset=offset)
            chunk = base64.b64decode(got["data"])
            if not chunk:
                break
            text += chunk
            offset = got["offset"]
        self.logs[host] = (offset, text)
        local = self.local_dir / host / Path(info["log"]).name
        local.parent.mkdir(parents=True, exist_ok=True)
        local.write_bytes(bytes(text))
        return text.decode(errors="replace")

    def logged(self, host: str, zone: str, serial: int, since: float) -> Logged:
        """What the servers logged of the transfer to `host`, read as on namespaces
        (measure/logged.py)."""
        primary = self.plan.primary.name
        return transfer_logged(
            server_class(self.binaries[host].kind),
            self._log(host),
            server_class(self.binaries[primary].kind),
            self._log(primary),
            (zone, serial, self.address(host)),
            since,
            self.wall(),
        )

    def pull(self, method: str, host: str) -> Pulled:
        """A client on `host` (a secondary's) pulls the first zone from the primary across
        the real path, through that host's agent."""
        tls = self._tls(host)
        data = self.fleet.channel(host).call(
            "pull", wait=self.plan.timeout + 30, method=method,
            address=self.address(self.plan.primary.name), zone=self.first_zone,
            transport=self.plan.transport.to_dict(), tsig=_key(self.tsig),
            tls_ca=tls["ca_cert"] if tls else None, timeout=self.plan.timeout,
        )  # fmt: skip
        result = PullResult(**data)
        started = result.started_at  # the client's host clock, put on the controller's
        at = started - self.fleet.clock(host).offset_s if started else self.wall()
        return pulled(result, self._reference(self.first_zone), at)
