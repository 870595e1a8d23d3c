"""The testbed's hosts as places (harness/place/): a namespace of the testbed's own, or a
compose container attached by name (its `ContainerHost` runs tools from the container's
file system). Every primitive is the testbed's: processes recorded in its registry, in
cgroups of their own; probes from sockets opened in the host's namespace.

    places = TestbedPlaces(testbed)
    proc = places.place("primary").start(argv, workdir=folder, cgroup="primary")
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Collection, Iterable, Sequence
from pathlib import Path
from typing import Any

import dns.rrset

from harness.core.netns import socket_in
from harness.core.transport import Transport
from harness.link.linkem import LinkemControl
from harness.observe.cgroup import Cgroup
from harness.observe.procfs import ProcessGone, descendants, netns_inode, parse_port_range
from harness.observe.sockdiag import ConnectionCount, ConnectionWatch, tcp_sockets
from harness.observe.sockdiag_wire import DiagSocket
from harness.observe.tcp_states import PortRange
from harness.place import Place, Proc, Sampling
from harness.servers.setup import Reach
from harness.testbed.core import Testbed
from harness.testbed.hosts import Host
from harness.xfr import PullResult, TsigKey
from harness.xfr.client import pull_zone
from harness.xfr.follow import SerialFollower
from harness.xfr.name_sample import Held, Key, served
from harness.xfr.poll import SerialsSeen, wait_for_serials
from harness.xfr.poll_zones import ZonesServed, wait_for_zones
from harness.xfr.primary_check import check_primary_serves
from harness.xfr.secrets import write_private_text
from harness.xfr.update import query_soa
from harness.xfr.verify import verify_copy, verify_many
from harness.xfr.wire_watch import WireWatch
from harness.zonegen.cache import link_or_copy

CONTROL_DIR = Path("/run/xfrbench/ctl")  # short paths for control sockets (108-byte limit)
ENTER_LIMIT = 2.0  # seconds a started server may take to enter its namespace
KERNEL_PORT_RANGE = "32768 60999"  # ip_local_port_range when a host's was not read back


def wait_entered(proc: Proc, netns: str, limit: float = ENTER_LIMIT) -> None:
    """Wait until `proc` (started through cgroup and netns wrappers that exec in place) lives
    in `netns` (until then /proc/<pid>/net shows the driver's sockets)."""
    want = os.stat(Path("/run/netns", netns)).st_ino
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            if netns_inode(proc.pid) == want:
                return
        except ProcessGone:
            return
        time.sleep(0.002)


class TestbedPlace:
    """One host of a testbed (a namespace, or a container's)."""

    shares_files = True  # the driver's own file system (compose shares the run folder)

    def __init__(self, testbed: Testbed, host: Host) -> None:
        self.testbed = testbed
        self.host = host
        self.name = host.name
        self.address = host.address
        self.netns = host.netns
        self._suffix = host.netns.rsplit("-", 1)[-1]  # the host's part of its namespace name

    # --- commands and processes ---------------------------------------------------------

    def run(
        self,
        argv: list[str],
        *,
        check: bool = True,
        timeout: float = 60.0,
        output: Path | None = None,
    ) -> subprocess.CompletedProcess[str]:
        if output is None:
            return self.host.run_tool(argv, check=check, timeout=timeout)
        with open(output, "wb") as out:
            return self.host.run_tool(
                argv, check=check, timeout=timeout, stdout=out, stderr=subprocess.PIPE
            )

    def control_socket(self) -> Path:
        """Short, per testbed and host: a unix socket's path has 108 bytes at most."""
        return CONTROL_DIR / f"{self.testbed.testbed_id}-{self._suffix}.sock"

    def start(self, argv: list[str], *, workdir: Path) -> Proc:
        with (workdir / "stdout.log").open("ab") as out, (workdir / "stderr.log").open("ab") as err:
            proc = self.testbed.spawn(
                self.host, argv, stdout=out, stderr=err, cwd=workdir, cgroup=self._suffix, tool=True
            )
        wait_entered(proc, self.netns)
        return proc

    def stop(self, proc: Proc, *, signalled: bool = False) -> int:
        assert isinstance(proc, subprocess.Popen)
        return self.testbed.stop(proc, signalled=signalled)

    def kill(self, proc: Proc) -> list[int]:
        """SIGKILL to its cgroup's processes, else its process tree (NSD's children would
        keep its ports); waits until the cgroup is empty (children die after their parent)."""
        group = self.cgroup_of(proc)
        pids = group.pids() if group is not None else descendants(proc.pid)
        for pid in dict.fromkeys([proc.pid, *pids]):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        assert isinstance(proc, subprocess.Popen)
        proc.wait(10)
        deadline = time.monotonic() + 5.0
        while group is not None and group.pids() and time.monotonic() < deadline:
            time.sleep(0.01)
        self.stop(proc)
        return sorted({proc.pid, *pids})

    def host_time(self, wall: float) -> float:
        return wall  # this machine's clock (a container shares its kernel's)

    def cgroup_of(self, proc: Proc) -> Cgroup | None:
        assert isinstance(proc, subprocess.Popen)
        return self.testbed.cgroup_of(proc)

    # --- files: the driver's own file system (compose shares the run folder) -----------

    def here(self, local: Path) -> Path:
        return local

    def copy_in(self, files: dict[Path, Path]) -> None:
        for target, source in files.items():
            target.parent.mkdir(parents=True, exist_ok=True)
            link_or_copy(source, target)

    def fresh(self, folder: Path) -> None:
        if folder.exists():
            shutil.rmtree(folder)
        (folder / "zones").mkdir(parents=True)

    def read(self, path: Path) -> str:
        try:
            return path.read_text(errors="replace")
        except OSError:
            return ""

    def put(self, path: Path, data: bytes, mode: int = 0o644) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        path.chmod(mode)

    def write(self, path: Path, chunks: Iterable[str], mode: int = 0o600) -> None:
        write_private_text(path, chunks)
        path.chmod(mode)

    def mkdir(self, path: Path, mode: int = 0o755) -> None:
        path.mkdir(mode=mode, parents=True, exist_ok=True)

    def remove(self, path: Path) -> None:
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path, ignore_errors=True)
        else:
            path.unlink(missing_ok=True)

    # --- TCP settings and sampling -------------------------------------------------------

    def port_range(self) -> PortRange:
        sysctls = self.testbed.describe()["hosts"][self.name]["sysctls"]
        return parse_port_range(sysctls.get("net.ipv4.ip_local_port_range", KERNEL_PORT_RANGE))

    def flush_route_metrics(self) -> None:
        self.host.run(["ip", "tcp_metrics", "flush"], check=False)

    def connection_count(self, ports: Collection[int]) -> ConnectionCount:
        return ConnectionCount(ports, netns=self.netns)

    def tcp_sockets(self) -> list[DiagSocket]:
        return tcp_sockets(netns=self.netns)

    def connection_watch(
        self,
        peer: tuple[str, int | None],
        candidates: Callable[[], Iterable[tuple[str, int]]] | None,
    ) -> ConnectionWatch:
        return ConnectionWatch(peer, netns=self.netns, candidates=candidates)

    # --- probes next to the server ------------------------------------------------------

    def reach(self, timeout: float) -> Reach:
        return Reach(
            self.address, self.netns, timeout, lambda argv: self.run(argv, timeout=timeout)
        )

    def soa(self, zone: str, timeout: float) -> dns.rrset.RRset:
        return query_soa(self.address, zone, netns=self.netns, timeout=timeout)

    def wait_listening(self, port: int, timeout: float, alive: Callable[[], None]) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            alive()
            sock = socket_in(self.netns, socket.AF_INET, socket.SOCK_STREAM)
            sock.settimeout(1.0)
            try:
                sock.connect((self.address, port))
                return True
            except OSError:
                time.sleep(0.05)
            finally:
                sock.close()
        return False

    def read_copy(self, zone: str, timeout: float) -> PullResult:
        return verify_copy("127.0.0.1", zone, netns=self.netns, timeout=timeout)

    def read_copies(self, zones: list[str], timeout: float) -> dict[str, PullResult]:
        return verify_many("127.0.0.1", zones, netns=self.netns, timeout=timeout)

    def served_names(self, keys: Iterable[Key], timeout: float) -> dict[Key, Held | None]:
        return served("127.0.0.1", keys, netns=self.netns, timeout=timeout)  # as read_copy

    def check_serves(
        self, zone: str, reference: Any, serial: int, changed: Any, timeout: float
    ) -> str | None:
        return check_primary_serves(
            self.address, zone, reference, serial, changed, netns=self.netns, timeout=timeout
        )

    def pull_from(
        self,
        method: str,
        zone: str,
        address: str,
        transport: Transport,
        *,
        tls_ca: Path | None,
        tsig: TsigKey | None,
        timeout: float,
    ) -> PullResult:
        return pull_zone(method, zone, address, self.netns, transport, tls_ca=tls_ca,
                         tsig=tsig, timeout=timeout)  # fmt: skip

    def wait_zones(
        self,
        zones: Sequence[str],
        serial: int,
        *,
        timeout: float,
        since: float,
        max_rate: float,
        between_rounds: Callable[[int, int], None],
    ) -> ZonesServed:
        return wait_for_zones(
            self.address, zones, serial, netns=self.netns, timeout=timeout, since=since,
            max_rate=max_rate, between_rounds=between_rounds,
        )  # fmt: skip

    def wire(self, peers: list[str]) -> contextlib.AbstractContextManager[WireWatch]:
        return WireWatch(self.netns, peers)


class TestbedPlaces:
    """A testbed's hosts as places, and its link."""

    def __init__(self, testbed: Testbed) -> None:
        self.testbed = testbed
        self.backend = testbed.backend
        self._places: dict[str, TestbedPlace] = {}

    def place(self, name: str) -> TestbedPlace:
        if name not in self._places:
            self._places[name] = TestbedPlace(self.testbed, self.testbed.hosts[name])
        return self._places[name]

    def sampling(self, sampler: Sampling | None) -> Sampling | None:
        return sampler  # the servers' cgroups and /proc are this machine's

    def path_counts(
        self, primary: str, secondaries: list[str], port: int
    ) -> contextlib.AbstractContextManager[dict[str, Any]]:
        # The emulated link counts its own drops (link_counters): no TCP counts here.
        return contextlib.nullcontext({})

    def wait_serials(
        self,
        places: Sequence[Place],
        zone: str,
        serial: int,
        *,
        deadline: float,
        interval: float,
        between: Callable[[], None] | None = None,
        straggle: float | None = None,
    ) -> SerialsSeen:
        targets = {p.name: (p.address, self.place(p.name).netns) for p in places}
        return wait_for_serials(targets, zone, serial, deadline=deadline, interval=interval,
                                between=between, straggle=straggle)  # fmt: skip

    def follow_serials(
        self, places: dict[str, Place], zone: str, interval: float
    ) -> contextlib.AbstractContextManager[SerialFollower]:
        targets = {name: (p.address, self.place(p.name).netns) for name, p in places.items()}
        return SerialFollower(targets, zone, interval=interval)

    def flush_route_metrics(self) -> None:
        """Every host at once: a flush is a process each, milliseconds that add up."""
        self.testbed.flush_route_metrics()

    def link_counters(self) -> dict[str, Any]:
        return self.testbed.link_counters()

    def link_queued(self) -> tuple[int, float] | None:
        return self.testbed.link_queued()

    def link_control(self) -> LinkemControl | None:
        return self.testbed.link_control()

    def link_directions(self) -> list[Any]:
        emulation = self.testbed.emulation
        return list(emulation.directions) if emulation is not None else []
