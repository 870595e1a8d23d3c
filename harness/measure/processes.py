"""Servers of a case as processes on the testbed: render, start, check, stop.

A `RunningServer` is one dialect instance (servers/<kind>.py) started on its host, in a
cgroup of its own, with its stdout and stderr kept in its working folder.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import os
import shutil
import signal
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.core.errors import XfrbenchError
from harness.core.netns import socket_in
from harness.core.transport import Transport
from harness.observe.procfs import ProcessGone, descendants, netns_inode, parse_port_range
from harness.observe.sampler import Target
from harness.observe.tcp_states import PortRange
from harness.plan.case import HostPlan
from harness.servers import Server, ServerSetup, ZoneEntry, make_server, server_class
from harness.servers.binaries import ServerBinary
from harness.testbed import Host, Testbed
from harness.xfr import TsigKey
from harness.xfr.secrets import TlsFiles
from harness.zonegen.cache import link_or_copy

CONTROL_DIR = Path("/run/xfrbench/ctl")  # short paths for control sockets (108-byte limit)
TLS_LISTEN_TIMEOUT = 20.0  # after it serves: no port 853 by then means no XoT configured
ENTER_LIMIT = 2.0


class CaseFailed(XfrbenchError):
    """A case could not go on (a server did not start or exited); its transfers fail."""


@dataclass
class RunningServer:
    plan: HostPlan
    host: Host
    server: Server
    proc: subprocess.Popen[Any] | None = None
    started_at: float | None = None  # unix time it was spawned (its log's "since")
    started_with: ServerSetup | None = None  # the setup it was last started with

    @property
    def name(self) -> str:
        return self.plan.name

    def alive(self) -> None:
        """Raise CaseFailed, with the tail of its log, when the server has exited."""
        if self.proc is not None and self.proc.poll() is not None:
            tail = tail_of(self.server.log_path) or tail_of(
                self.server.setup.workdir / "stderr.log"
            )
            raise CaseFailed(f"the {self.name} exited with status {self.proc.returncode}: {tail}")


def server_setup(
    host_plan: HostPlan,
    testbed: Testbed,
    workdir: Path,
    zones: list[ZoneEntry],
    *,
    transport: Transport | None,
    tsig: TsigKey | None,
    tls: TlsFiles | None,
    ixfr: bool,
    notify: bool,
    update_key: TsigKey | None = None,
) -> ServerSetup:
    """What a dialect renders for one host: its address, its peers (a primary's secondaries,
    a secondary's primary), zones, secrets, and the per-run control socket. A secondary
    transfers over `transport` with the secrets of the group it needs; a primary (None)
    serves with all of them."""
    me = testbed.hosts[host_plan.name]
    if host_plan.role == "primary":
        peers = tuple(h.address for h in testbed.secondaries)
    else:
        peers = (testbed.primary.address,)
    if transport is not None:
        tsig, tls = transport.secrets(tsig, tls)
    return ServerSetup(
        role=host_plan.role,
        address=me.address,
        peers=peers,
        zones=zones,
        workdir=workdir,
        transport=transport,
        tsig=tsig,
        tls=tls,
        ixfr=ixfr,
        notify=notify and host_plan.role == "primary",
        options=dict(host_plan.server.options),
        config=host_plan.server.config.text if host_plan.server.config else "",
        update_key=update_key if host_plan.role == "primary" else None,
        control_socket=CONTROL_DIR / f"{testbed.testbed_id}-{me.netns.rsplit('-', 1)[-1]}.sock",
    )


def primary_zones(
    files: list[Any], workdir: Path, binary: ServerBinary | None = None
) -> list[ZoneEntry]:
    """The primary serves its own copy of each generated file (linked, never edited), in
    the format its dialect loads fastest (Server.primary_file: BIND's raw for a large zone)
    when its binary runs on this host."""
    zone_dir = workdir / "zones"
    zone_dir.mkdir(parents=True, exist_ok=True)
    entries = []
    for zone in files:
        source = ZoneEntry(zone.origin, zone.path)
        if binary is not None and binary.image is None:
            dialect = server_class(binary.kind)
            source = dialect.primary_file(zone.path, zone.origin, binary.path, binary.version)
        target = zone_dir / f"{zone.origin}zone"
        link_or_copy(source.file, target)
        entries.append(ZoneEntry(zone.origin, target, source.format))
    return entries


def fresh_secondary_zones(origins: list[str], workdir: Path) -> list[ZoneEntry]:
    """A secondary starts with every zone configured and none on disk."""
    if workdir.exists():
        shutil.rmtree(workdir)
    (workdir / "zones").mkdir(parents=True)
    return [ZoneEntry(origin, workdir / "zones" / f"{origin}zone") for origin in origins]


def make(host_plan: HostPlan, binary: ServerBinary, setup: ServerSetup) -> Server:
    return make_server(binary.kind, setup, binary.path, in_container=binary.image is not None)


def spawn(testbed: Testbed, running: RunningServer, *, render: bool = True) -> None:
    """Render (unless done already) and start the server in its own cgroup, and wait until it
    lives in its host's namespace (until then /proc/<pid>/net shows the driver's sockets)."""
    server = running.server
    if render:
        server.render()
    workdir = server.setup.workdir
    running.started_at = time.time()
    running.started_with = server.setup
    with (workdir / "stdout.log").open("ab") as out, (workdir / "stderr.log").open("ab") as err:
        running.proc = testbed.spawn(
            running.host,
            server.argv(),
            stdout=out,
            stderr=err,
            cwd=workdir,
            cgroup=running.host.netns.rsplit("-", 1)[-1],
            tool=True,
        )
    wait_entered(running.proc, running.host.netns)


def restart(testbed: Testbed, running: RunningServer) -> None:
    """Stop the server, remove the state its dialect says would keep it from transferring
    at once (Server.restart_forgets) and start it with its config as rendered now."""
    stop(testbed, running)
    server = running.server
    for name in type(server).restart_forgets:
        (server.setup.workdir / name).unlink(missing_ok=True)
    spawn(testbed, running, render=False)


def switch_fields(setup: ServerSetup) -> tuple[object, ...]:
    """What a switch between the cases of a group may change in a server's setup (a
    secondary's transport brings its secrets; a primary's stay the group's)."""
    return (setup.transport, setup.ixfr, setup.provide_ixfr, setup.options, setup.config)


def reconfigure_all(servers: list[RunningServer], timeout: float) -> None:
    """Each server's own reconfiguration (rendered already), all at once: a control
    command is a process each, and a switch often reconfigures a primary and secondaries."""
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, len(servers))) as pool:
        runs = [pool.submit(r.host.run_tool, r.server.reconfig_argv(), timeout=timeout)
                for r in servers]  # fmt: skip
        for done in runs:
            done.result()


def stop(testbed: Testbed, running: RunningServer, *, signalled: bool = False) -> None:
    if running.proc is not None:
        testbed.stop(running.proc, signalled=signalled)
        running.proc = None
    running.server.remove_control_socket()


def kill(testbed: Testbed, running: RunningServer) -> list[int]:
    """A crash: SIGKILL to every process of the server (its cgroup's, else its process
    tree: NSD's children would keep its ports), then the same bookkeeping as stop().
    Returns the pids killed."""
    proc = running.proc
    if proc is None:
        return []
    group = testbed.cgroup_of(proc)
    pids = group.pids() if group is not None else descendants(proc.pid)
    for pid in dict.fromkeys([proc.pid, *pids]):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    proc.wait(10)
    deadline = time.monotonic() + 5.0
    while group is not None and group.pids() and time.monotonic() < deadline:
        time.sleep(0.01)  # the children die after their parent
    stop(testbed, running)
    return sorted(set([proc.pid, *pids]))


def stop_all(testbed: Testbed, servers: list[RunningServer]) -> None:
    """Stop several servers together: all are told to stop first, then each is waited for
    (a server holding 14 M records takes seconds to exit; one after the other, they add up)."""
    for running in servers:
        if running.proc is not None and running.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                running.proc.terminate()
    for running in servers:
        stop(testbed, running, signalled=True)


def wait_entered(proc: subprocess.Popen[Any], netns: str, limit: float = ENTER_LIMIT) -> None:
    """Wait until `proc` (started through cgroup and netns wrappers that exec in place) lives
    in `netns`."""
    want = os.stat(Path("/run/netns", netns)).st_ino
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            if netns_inode(proc.pid) == want:
                return
        except ProcessGone:
            return
        time.sleep(0.002)


def wait_listening(running: RunningServer, port: int) -> None:
    """Called once the primary serves its zones: a TLS listener it has comes up with them."""
    deadline = time.monotonic() + TLS_LISTEN_TIMEOUT
    while time.monotonic() < deadline:
        running.alive()
        sock = socket_in(running.host.netns, socket.AF_INET, socket.SOCK_STREAM)
        sock.settimeout(1.0)
        try:
            sock.connect((running.host.address, port))
            return
        except OSError:
            time.sleep(0.05)
        finally:
            sock.close()
    raise CaseFailed(f"the {running.name} never listened on {running.host.address} port {port}")


def tail_of(path: Path, lines: int = 5) -> str:
    try:
        return " | ".join(path.read_text(errors="replace").strip().splitlines()[-lines:])
    except OSError:
        return ""


def read_text(path: Path) -> str:
    try:
        return path.read_text(errors="replace")
    except OSError:
        return ""


KERNEL_PORT_RANGE = "32768 60999"  # ip_local_port_range when a host's was not read back


def sampler_targets(
    running: list[RunningServer], testbed: Testbed, fleet: bool
) -> tuple[list[Target], dict[str, PortRange]]:
    """What the sampler watches of the servers running now: each one's pid, cgroup, role,
    host and (in a fleet) site, and its host's ephemeral port range."""
    targets = [
        Target(
            role=r.plan.role,
            server=r.server.kind,
            pid=r.proc.pid,
            cgroup=testbed.cgroup_of(r.proc),
            host=r.name,
            site=r.plan.site if fleet else "",
        )
        for r in running
        if r.proc is not None
    ]
    hosts = testbed.describe()["hosts"]
    ranges = {
        t.name: parse_port_range(
            hosts[t.name]["sysctls"].get("net.ipv4.ip_local_port_range", KERNEL_PORT_RANGE)
        )
        for t in targets
    }
    return targets, ranges
