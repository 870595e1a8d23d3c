"""Servers of a case as processes on their places: render, start, check, stop.

A `RunningServer` is one dialect instance (servers/<kind>.py) started on its place
(harness/place/: a namespace, a container, a host), in a cgroup of its own, with its
stdout and stderr kept in its working folder. Only place operations reach the host.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.core.errors import XfrbenchError
from harness.core.transport import Transport
from harness.observe.sampler import Target
from harness.observe.tcp_states import PortRange
from harness.place import Place, Places, Proc
from harness.plan.case import HostPlan
from harness.servers import Server, ServerSetup, ZoneEntry, make_server, server_class
from harness.servers.binaries import ServerBinary
from harness.xfr import TsigKey
from harness.xfr.secrets import TlsFiles

TLS_LISTEN_TIMEOUT = 20.0  # after it serves: no port 853 by then means no XoT configured


class CaseFailed(XfrbenchError):
    """A case could not go on (a server did not start or exited); its transfers fail."""


@dataclass
class RunningServer:
    plan: HostPlan
    place: Place
    server: Server
    proc: Proc | None = None
    started_at: float | None = None  # unix time it was spawned (its log's "since")
    started_with: ServerSetup | None = None  # the setup it was last started with

    @property
    def name(self) -> str:
        return self.plan.name

    def alive(self) -> None:
        """Raise CaseFailed, with the tail of its log, when the server has exited."""
        if self.proc is not None and self.proc.poll() is not None:
            tail = tail_of(self.place, self.server.log_path) or tail_of(
                self.place, self.server.setup.workdir / "stderr.log"
            )
            raise CaseFailed(f"the {self.name} exited with status {self.proc.returncode}: {tail}")


def server_setup(
    host_plan: HostPlan,
    places: Places,
    peer_names: list[str],
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
    a secondary's primary: `peer_names`), zones, secrets, and the per-run control socket.
    A secondary transfers over `transport` with the secrets of the group it needs; a
    primary (None) serves with all of them."""
    me = places.place(host_plan.name)
    peers = tuple(places.place(name).address for name in peer_names)
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
        control_socket=me.control_socket(),
    )


def primary_zones(
    files: list[Any], place: Place, workdir: Path, binary: ServerBinary | None = None
) -> list[ZoneEntry]:
    """The primary serves its own copy of each generated file (linked, never edited, or
    sent to its host), in the format its dialect loads fastest (Server.primary_file:
    BIND's raw for a large zone) when its binary runs on this machine's files."""
    entries, copies = [], {}
    convert = binary is not None and binary.image is None and place.shares_files
    for zone in files:
        source = ZoneEntry(zone.origin, zone.path)
        if convert and binary is not None:
            dialect = server_class(binary.kind)
            source = dialect.primary_file(zone.path, zone.origin, binary.path, binary.version)
        target = workdir / "zones" / f"{zone.origin}zone"
        copies[target] = source.file
        entries.append(ZoneEntry(zone.origin, target, source.format))
    place.copy_in(copies)
    return entries


def tls_on(place: Place, tls: TlsFiles | None, primary: bool) -> TlsFiles | None:
    """The group's TLS files as `place` has them: put there unless files are shared (its
    key on the primary's host alone, owner-only)."""
    if tls is None or place.shares_files:
        return tls
    for file in (tls.ca_cert, tls.cert, *([tls.key] if primary else [])):
        place.put(place.here(file), file.read_bytes(), 0o600)
    here = place.here
    return TlsFiles(here(tls.ca_cert), here(tls.cert), here(tls.key), tls.hostname)


def fresh_secondary_zones(place: Place, origins: list[str], workdir: Path) -> list[ZoneEntry]:
    """A secondary starts with every zone configured and none on disk."""
    place.fresh(workdir)
    return [ZoneEntry(origin, workdir / "zones" / f"{origin}zone") for origin in origins]


def make(host_plan: HostPlan, binary: ServerBinary, setup: ServerSetup) -> Server:
    return make_server(binary.kind, setup, binary.path, in_container=binary.image is not None)


def put_config(running: RunningServer) -> None:
    """The server's config files on its place: its dialect's folders made there, each file
    it renders put whole, owner-only (a config may hold the TSIG secret)."""
    server, place = running.server, running.place
    for folder, mode in server.folders():
        place.mkdir(folder, mode)
    for path, chunks in server.rendered().items():
        place.write(path, chunks, 0o600)


def spawn(running: RunningServer, *, render: bool = True) -> None:
    """Render (unless done already) and start the server on its place (Place.start: in its
    own cgroup, once it lives in its host's namespace)."""
    server = running.server
    if render:
        put_config(running)
    running.started_at = time.time()
    running.started_with = server.setup
    running.proc = running.place.start(server.argv(), workdir=server.setup.workdir)


def restart(running: RunningServer) -> None:
    """Stop the server, remove the state its dialect says would keep it from transferring
    at once (Server.restart_forgets) and start it with its config as rendered now."""
    stop(running)
    server = running.server
    for name in type(server).restart_forgets:
        running.place.remove(server.setup.workdir / name)
    spawn(running, render=False)


def switch_fields(setup: ServerSetup) -> tuple[object, ...]:
    """What a switch between the cases of a group may change in a server's setup (a
    secondary's transport brings its secrets; a primary's stay the group's)."""
    return (setup.transport, setup.ixfr, setup.provide_ixfr, setup.options, setup.config)


def reconfigure_all(servers: list[RunningServer], timeout: float) -> None:
    """Each server's own reconfiguration (rendered already), all at once: a control
    command is a process each, and a switch often reconfigures a primary and secondaries."""
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, len(servers))) as pool:
        runs = [pool.submit(r.place.run, r.server.reconfig_argv(), timeout=timeout)
                for r in servers]  # fmt: skip
        for done in runs:
            done.result()


def stop(running: RunningServer, *, signalled: bool = False) -> None:
    if running.proc is not None:
        running.place.stop(running.proc, signalled=signalled)
        running.proc = None
    running.place.remove(running.server.control_path)


def kill(running: RunningServer) -> list[int]:
    """A crash: SIGKILL to every process of the server (Place.kill), then the same
    bookkeeping as stop(). Returns the pids killed."""
    proc = running.proc
    if proc is None:
        return []
    pids = running.place.kill(proc)
    running.proc = None
    stop(running)
    return pids


def stop_all(servers: list[RunningServer]) -> None:
    """Stop several servers together: all are told to stop first, then each is waited for
    (a server holding 14 M records takes seconds to exit; one after the other, they add up)."""
    for running in servers:
        if running.proc is not None and running.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                running.proc.terminate()
    for running in servers:
        stop(running, signalled=True)


def wait_listening(running: RunningServer, port: int) -> None:
    """Called once the primary serves its zones: a TLS listener it has comes up with them."""
    if not running.place.wait_listening(port, TLS_LISTEN_TIMEOUT, running.alive):
        raise CaseFailed(
            f"the {running.name} never listened on {running.place.address} port {port}"
        )


def tail_of(place: Place, path: Path, lines: int = 5) -> str:
    return " | ".join(place.read(path).strip().splitlines()[-lines:])


def log_of(running: RunningServer) -> str:
    """The server's log so far ("" when there is none yet)."""
    return running.place.read(running.server.log_path)


def sampler_targets(
    running: list[RunningServer], fleet: bool
) -> tuple[list[Target], dict[str, PortRange]]:
    """What the sampler watches of the servers running now: each one's pid, cgroup, role,
    host and (in a fleet) site, and its host's ephemeral port range."""
    targets = [
        Target(
            role=r.plan.role,
            server=r.server.kind,
            pid=r.proc.pid,
            cgroup=r.place.cgroup_of(r.proc),
            host=r.name,
            site=r.plan.site if fleet else "",
        )
        for r in running
        if r.proc is not None
    ]
    ranges = {r.name: r.place.port_range() for r in running if r.proc is not None}
    return targets, ranges
