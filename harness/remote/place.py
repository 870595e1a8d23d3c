"""The hosts of an inventory as places (harness/place/): each one reached through its agent
over the SSH channel (remote/channel.py), the agent executing primitives only
(remote/agent_place.py: spawn, signal, halt, kill, put, remove, exec, and the probes that
must run next to the server).

    places = AgentPlaces({"ns1": (address, channel, run_dir), ...}, clock=fleet.clock)
    place = places.place("ns1")
    place.put(folder / "named.conf", text.encode())   # the engine rendered it
    proc = place.start(server.argv(), workdir=folder)

Paths given to a place are its host's: a server's folder is where the run's results folder
has it, in the host's own run folder (`here`), and the engine renders a server's files for
it, then puts them. Times the agent reports are its host's unix time; the place puts them
on the engine's clock (time.monotonic(), the controller's) with the channel's measured
offset. Its sockets are read by its agent through sock_diag (every TCP socket, the open
connections on a server's ports, a transfer's connection sampled: `tcp_sockets`,
`connection_count`, `connection_watch`), rebuilt here. What cannot be carried out here is
refused with a message, never faked: its cgroup read by the controller's sampler (its
agent samples it: remote/relayed.py), and a serial followed through a stream
(harness/place's docstring lists what an agent place does without).
"""

from __future__ import annotations

import base64
import contextlib
import signal
import subprocess
import time
from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import dns.name
import dns.rdata
import dns.rdataclass
import dns.rdatatype
import dns.rrset

from harness.core.errors import ToolFailed
from harness.core.transport import Transport
from harness.link.linkem import LinkControl
from harness.observe.cgroup import Cgroup
from harness.observe.procfs import parse_port_range
from harness.observe.sockdiag_wire import DiagSocket
from harness.observe.tcp_states import PortRange
from harness.place import Place, Proc, Sampling
from harness.remote.agent_place import record_text
from harness.remote.agent_sockets import AgentCount, AgentTcpWatch
from harness.remote.channel import AgentChannel, AgentError, ClockReading
from harness.remote.linkctl import HostsLinkControl
from harness.remote.relayed import (
    AgentFollower,
    HostClock,
    Relayed,
    RelayedSampler,
    directions_of,
    link_counters,
)
from harness.servers.setup import Reach
from harness.spec import LinkSpec
from harness.xfr import PullResult, TsigKey, XfrTimeout
from harness.xfr.name_sample import Held, Key
from harness.xfr.poll import SerialsSeen
from harness.xfr.poll_zones import ZonesServed, ZonesTimeout
from harness.xfr.rrsum import ZoneSum
from harness.xfr.wire_watch import WireEvent

READ_CHUNK = 8 << 20  # bytes of a file read per request
LISTEN_STEP = 1.0  # seconds of each wait for a listener, between checks that it lives
PORT_RANGE = "net.ipv4.ip_local_port_range"
ROUND_OFF_S = 1e-4  # seconds: a window's widening (wire_window)


def wire_window(t0: float, until: float, to_host: Callable[[float], float]) -> tuple[float, float]:
    """The primary's wire events of [t0, until] on the controller's clock, as the primary's
    host times to ask its agent for, widened by the conversions' round-off: a host's time
    put on the controller's clock and back is off by ~1e-6 s at unix times, and packets
    read in one batch with a NOTIFY share its time exactly (pure)."""
    return to_host(t0) - ROUND_OFF_S, to_host(until) + ROUND_OFF_S


def on_bench(
    events: list[dict[str, Any]], t0: float, to_bench: Callable[[float], float]
) -> list[WireEvent]:
    """The agent's wire events on the controller's clock, none before t0 (pure)."""
    return [
        WireEvent(max(t0, to_bench(e["at"])), e["kind"], e["peer"], e["serial"], e["port"],
                  e.get("to_port"))
        for e in events
    ]  # fmt: skip


class AgentProc:
    """A process an agent spawned: its pid on that host; its status asked of the agent."""

    def __init__(self, channel: AgentChannel, pid: int) -> None:
        self.channel = channel
        self.pid = pid
        self._status: int | None = None

    @property
    def returncode(self) -> int | None:
        return self._status

    def poll(self) -> int | None:
        if self._status is None:
            self._status = self.channel.call("poll", pid=self.pid, wait=10)
        return self._status

    def terminate(self) -> None:
        self.channel.call("signal", pid=self.pid, signum=int(signal.SIGTERM), wait=10)

    def ended(self, status: int) -> int:
        self._status = status
        return status


class AgentWire:
    """The primary's wire watched by its agent (xfr/wire_watch.py's `WireWatch` there), with
    its methods on the engine's clock."""

    def __init__(self, channel: AgentChannel, peers: list[str], clock: HostClock) -> None:
        self.channel = channel
        self.peers = peers
        self.clock = clock

    def __enter__(self) -> AgentWire:
        self.channel.call("wire_start", peers=self.peers, wait=10)
        return self

    def __exit__(self, *exc: object) -> None:
        self.channel.call("wire_stop", wait=10)

    def events(self, peer: str, since: float, until: float | None = None) -> list[WireEvent]:
        until_ = time.monotonic() if until is None else until
        host_since, host_until = wire_window(since, until_, self.clock.to_host)
        found = self.channel.call("wire_events", peer=peer, since=host_since,
                                  until=None if until is None else host_until, wait=10)  # fmt: skip
        return on_bench(found, since, self.clock.to_bench)

    def connect_ports(self, peer: str, since: float, until: float | None = None) -> list[int]:
        events = self.events(peer, since, until)
        return [e.to_port for e in events if e.kind == "connect" and e.to_port is not None]

    def wait_notify(
        self, serial: int, timeout: float, peer: str, since: float = 0.0
    ) -> float | None:
        at = self.channel.call("wire_notify", serial=serial, timeout=timeout, peer=peer,
                               since=self.clock.to_host(since), wait=timeout)  # fmt: skip
        return None if at is None else self.clock.to_bench(at)

    def last(self, kinds: Collection[str], peer: str | None = None) -> float | None:
        at = self.channel.call("wire_last", kinds=list(kinds), peer=peer, wait=10)
        return None if at is None else self.clock.to_bench(at)

    def forget_before(self, moment: float) -> None:
        self.channel.call("wire_forget", before=self.clock.to_host(moment), wait=10)


def soa_rrset(answer: list[Any]) -> dns.rrset.RRset:
    name, ttl, text = answer
    return dns.rrset.from_text(name, ttl, dns.rdataclass.IN, dns.rdatatype.SOA, text)


def held_from(answer: list[Any] | None, rdtype: int) -> Held | None:
    if answer is None:
        return None
    ttl, texts = answer
    return ttl, frozenset(dns.rdata.from_text(dns.rdataclass.IN, rdtype, t) for t in texts)


Sync = Callable[[dict[str, Path], str], None]  # files {name: this machine's} into a folder


class AgentPlace:
    """One host of an inventory, through its agent."""

    shares_files = False

    def __init__(
        self,
        name: str,
        address: str,
        channel: AgentChannel,
        run_dir: str,
        clock: HostClock,
        results: Path | None = None,
        sync: Sync | None = None,
    ) -> None:
        self.name = name
        self.address = address
        self.channel = channel
        self.run_dir = run_dir  # the host's folder of this run: every file the place touches
        self.clock = clock
        self.results = results  # the run's results folder here, which run_dir mirrors
        self.sync = sync  # rsync to the host (remote/sync.py); else files go by put
        self.started: AgentProc | None = None  # the server it runs (a cold start's wait)
        self._spawns = 0

    # --- commands and processes ---------------------------------------------------------

    def run(
        self,
        argv: list[str],
        *,
        check: bool = True,
        timeout: float = 60.0,
        output: Path | None = None,
    ) -> subprocess.CompletedProcess[str]:
        answer = self.channel.call("exec", argv=argv, timeout=timeout, wait=timeout,
                                   output=None if output is None else str(output))  # fmt: skip
        if check and answer["status"] != 0:
            raise ToolFailed(argv, answer["status"], answer["stderr"])
        return subprocess.CompletedProcess(argv, answer["status"], answer["stdout"],
                                           answer["stderr"])  # fmt: skip

    def control_socket(self) -> Path:
        """In the run's folder (removed with it), cut to a unix socket's 107 bytes."""
        return Path(f"{self.run_dir}/ctl/{self.name}.sock"[:107])

    def folder(self, *parts: str) -> Path:
        """A path in this host's folder of the run."""
        return Path(self.run_dir, *parts)

    def start(self, argv: list[str], *, workdir: Path) -> Proc:
        self._spawns += 1
        self.channel.call("mkdir", path=str(self.control_socket().parent), mode=0o700)
        answer = self.channel.call("spawn", name=f"{self.name}-{self._spawns}", argv=argv,
                                   workdir=str(workdir))  # fmt: skip
        self.started = AgentProc(self.channel, int(answer["pid"]))
        return self.started

    def stop(self, proc: Proc, *, signalled: bool = False) -> int:
        """Its agent stops it; one stopped already (killed) keeps the status it had."""
        assert isinstance(proc, AgentProc)
        try:
            status = self.channel.call("halt", pid=proc.pid, signalled=signalled, wait=30)
        except AgentError:
            if proc.returncode is None:
                raise
            return proc.returncode
        return proc.ended(int(status))

    def kill(self, proc: Proc) -> list[int]:
        assert isinstance(proc, AgentProc)
        pids = self.channel.call("kill", pid=proc.pid, wait=30)
        proc.ended(-int(signal.SIGKILL))
        return [int(p) for p in pids]

    def host_time(self, wall: float) -> float:
        """By the clock offset the channel measured (the lab's hosts share this machine's
        clock: offset ~0; a real host's log is off by its offset without it)."""
        return self.clock.from_wall(wall)

    def cgroup_of(self, proc: Proc) -> Cgroup | None:
        return None  # its host's: sampled by its agent (Places.sampling), not by the controller

    # --- files -----------------------------------------------------------------------------

    def here(self, local: Path) -> Path:
        """`local`'s place under the host's run folder (fetch.yml brings it back there);
        itself for a place without a results folder (an agent on this machine)."""
        if self.results is None:
            return local
        return Path(self.run_dir, local.relative_to(self.results))

    def copy_in(self, files: dict[Path, Path]) -> None:
        """By rsync, a folder's files at once, where the place has it; else put whole."""
        folders: dict[Path, dict[str, Path]] = {}
        for target, source in files.items():
            folders.setdefault(target.parent, {})[target.name] = source
        for folder, named in folders.items():
            if self.sync is not None:
                self.sync(named, str(folder))
                continue
            for name, source in named.items():
                self.put(folder / name, source.read_bytes())

    def put(self, path: Path, data: bytes, mode: int = 0o644) -> None:
        self.channel.call("put", path=str(path), data=base64.b64encode(data).decode(),
                          mode=mode)  # fmt: skip

    def write(self, path: Path, chunks: Iterable[str], mode: int = 0o600) -> None:
        self.put(path, "".join(chunks).encode(), mode)

    def mkdir(self, path: Path, mode: int = 0o755) -> None:
        self.channel.call("mkdir", path=str(path), mode=mode)

    def remove(self, path: Path) -> None:
        self.channel.call("remove", path=str(path))

    def fresh(self, folder: Path) -> None:
        self.channel.call("fresh", workdir=str(folder))

    def read(self, path: Path) -> str:
        data, offset = bytearray(), 0
        while True:
            answer = self.channel.call("read", path=str(path), offset=offset, limit=READ_CHUNK)
            chunk = base64.b64decode(answer["data"])
            data += chunk
            offset = answer["offset"]
            if len(chunk) < READ_CHUNK:
                return data.decode(errors="replace")

    # --- TCP settings and sampling -----------------------------------------------------------

    def port_range(self) -> PortRange:
        sysctls = self.channel.call("sysctls", keys=[PORT_RANGE])
        return parse_port_range(sysctls.get(PORT_RANGE, "32768 60999"))

    def flush_route_metrics(self) -> None:
        self.channel.call("flush_metrics")

    def connection_count(self, ports: Collection[int]) -> AgentCount:
        return AgentCount(self.channel, ports)

    def tcp_sockets(self) -> list[DiagSocket]:
        """Dumped by its agent (observe/sockdiag.py there), rebuilt here."""
        found = self.channel.call("tcp_sockets", wait=30)
        return [DiagSocket.from_json(data) for data in found]

    def connection_watch(
        self,
        peer: tuple[str, int | None],
        candidates: Callable[[], Iterable[tuple[str, int]]] | None,
    ) -> AgentTcpWatch:
        """Sampled by its agent, which finds the connections by dumping (filtered in the
        kernel): `candidates` come from the primary's wire, on another host."""
        return AgentTcpWatch(self.channel, peer)

    # --- probes next to the server ---------------------------------------------------------

    def reach(self, timeout: float) -> Reach:
        """A signed update relayed by the agent (sent next to the server, its answer and
        TSIG checked here), control tools run on the host."""

        def exchange(wire: bytes) -> bytes:
            data = base64.b64encode(wire).decode()
            answer = self.channel.call("exchange", address=self.address, data=data,
                                       timeout=timeout, wait=timeout)  # fmt: skip
            return base64.b64decode(answer)

        return Reach(self.address, None, timeout, lambda argv: self.run(argv, timeout=timeout),
                     exchange, self.copy_in)  # fmt: skip

    def soa(self, zone: str, timeout: float) -> dns.rrset.RRset:
        return soa_rrset(self.channel.call("soa", address=self.address, zone=zone,
                                           timeout=timeout, wait=timeout))  # fmt: skip

    def wait_listening(self, port: int, timeout: float, alive: Callable[[], None]) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            alive()
            with contextlib.suppress(XfrTimeout):
                self.channel.call("wait_listening", address=self.address, port=port,
                                  timeout=LISTEN_STEP, wait=LISTEN_STEP)  # fmt: skip
                return True
        return False

    def _copy(self, data: dict[str, Any]) -> PullResult:
        result = PullResult(**data)
        if result.started_at is not None:
            result.started_at = self.clock.to_wall(result.started_at)
        return result

    def read_copy(self, zone: str, timeout: float) -> PullResult:
        return self._copy(self.channel.call("verify", zone=zone, timeout=timeout, wait=timeout))

    def read_copies(self, zones: list[str], timeout: float) -> dict[str, PullResult]:
        copies = self.channel.call("verify_zones", zones=zones, timeout=timeout, wait=timeout)
        return {zone: self._copy(data) for zone, data in copies.items()}

    def served_names(self, keys: Iterable[Key], timeout: float) -> dict[Key, Held | None]:
        asked = list(keys)
        answers = self.channel.call("served", keys=[[n.to_text(), int(t)] for n, t in asked],
                                    timeout=timeout, wait=timeout)  # fmt: skip
        return {key: held_from(a, key[1]) for key, a in zip(asked, answers, strict=True)}

    def check_serves(
        self, zone: str, reference: Any, serial: int, changed: Any, timeout: float
    ) -> str | None:
        assert isinstance(reference, ZoneSum)
        change = None
        if changed is not None:
            change = [[record_text(r) for r in part] for part in changed]
        return self.channel.call(  # type: ignore[no-any-return]
            "check_serves", address=self.address, zone=zone,
            reference=[reference.total, reference.records], serial=serial, changed=change,
            timeout=timeout, wait=timeout,
        )  # fmt: skip

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
        """`tls_ca` is the host's copy of the CA (the engine put it there)."""
        key = None if tsig is None else {"name": tsig.name, "algorithm": tsig.algorithm,
                                         "secret": tsig.secret}  # fmt: skip
        return self._copy(self.channel.call(
            "pull", method=method, address=address, zone=zone, transport=transport.to_dict(),
            tsig=key, tls_ca=None if tls_ca is None else str(tls_ca), timeout=timeout,
            wait=timeout,
        ))  # fmt: skip

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
        """Polled by the agent, which checks between rounds that the server it started
        lives (`between_rounds` is the engine's, run once before)."""
        between_rounds(0, len(zones))
        pid = self.started.pid if self.started is not None else None
        answer = self.channel.call(
            "wait_zones", name=self.name, address=self.address, zones=list(zones),
            serial=serial, timeout=timeout, max_rate=max_rate, pid=pid, wait=timeout,
        )  # fmt: skip
        seen = ZonesServed(
            {z: self.clock.to_bench(at) for z, at in answer["served"].items()}, since,
            unserved={z: self.clock.to_bench(at) for z, at in answer["unserved"].items()},
            **answer["counts"],
        )  # fmt: skip
        if answer["error"]:
            raise ZonesTimeout(answer["error"], seen)
        return seen

    def wire(self, peers: list[str]) -> contextlib.AbstractContextManager[Any]:
        return AgentWire(self.channel, peers, self.clock)


class AgentPlaces:
    """The hosts of an inventory as places; each host's server polled by its own agent."""

    def __init__(
        self,
        hosts: dict[str, tuple[str, AgentChannel, str]],
        clock: Callable[[str], ClockReading],
        *,
        results: Path | None = None,
        sync: Callable[[str], Sync] | None = None,
        serving: Collection[str] = (),
    ) -> None:
        """`results`: the run's folder here, mirrored by each host's run folder; `sync`:
        a host's rsync; `serving`: hosts whose agent serves its samples to Prometheus."""
        self._places = {
            name: AgentPlace(
                name,
                address,
                channel,
                run_dir,
                HostClock(lambda n=name: clock(n)),
                results,
                None if sync is None else sync(name),
            )
            for name, (address, channel, run_dir) in hosts.items()
        }
        self.clock = clock
        self.serving = serving
        self.links: dict[str, LinkSpec] = {}  # secondary host -> its site's emulated link
        self.link_faults = False  # its linkem takes faults: every direction, a control socket

    @property
    def backend(self) -> str:
        """Each secondary host's own linkem emulates its site's link (run/remote.py)."""
        return "linkem" if self.links else "none"

    def place(self, name: str) -> AgentPlace:
        return self._places[name]

    def _relayed(self, names: Iterable[str]) -> list[Relayed]:
        return [Relayed(n, self.place(n).channel, lambda n=n: self.clock(n)) for n in names]

    def sampling(self, sampler: Sampling | None) -> Sampling | None:
        if sampler is None:
            return None
        return RelayedSampler(sampler, self._relayed(self._places), self.serving)

    @contextlib.contextmanager
    def path_counts(
        self, primary: str, secondaries: list[str], port: int
    ) -> Iterator[dict[str, Any]]:
        """The primary's agent watches its connections (remote/pathwatch.py)."""
        by_address = {self.place(name).address: name for name in secondaries}
        channel = self.place(primary).channel
        channel.call("paths_start", peers=list(by_address), port=port, wait=10)
        counts: dict[str, Any] = {}
        try:
            yield counts
        finally:
            found = channel.call("paths_stop", wait=30)
            counts |= {by_address[a]: c for a, c in found.items() if a in by_address}

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
        """Every host's agent polls its own server at once; `between` runs before and
        after (the agents cannot call it back), `straggle` is not applied (each agent waits
        for its own server until the deadline)."""
        if between is not None:
            between()
        timeout = max(0.0, deadline - time.monotonic())

        def wait(place: AgentPlace) -> dict[str, Any]:
            result: dict[str, Any] = place.channel.call(
                "wait_serials", targets={place.name: place.address}, zone=zone, serial=serial,
                timeout=timeout, interval=interval, wait=timeout,
            )  # fmt: skip
            return result

        chosen = [self.place(p.name) for p in places]
        with ThreadPoolExecutor(max_workers=max(1, len(chosen))) as pool:
            answers = list(pool.map(wait, chosen))
        seen = SerialsSeen({}, {}, {})
        for place, answer in zip(chosen, answers, strict=True):
            to_bench = place.clock.to_bench
            seen.served |= {k: to_bench(v) for k, v in answer["served"].items()}
            seen.unserved |= {k: to_bench(v) for k, v in answer["unserved"].items()}
            seen.max_gap_s |= answer["max_gap_s"]
        if between is not None:
            between()
        return seen

    def follow_serials(
        self, places: dict[str, Place], zone: str, interval: float
    ) -> contextlib.AbstractContextManager[Any]:
        """Each host's agent follows its own servers' serials (by the names given)."""
        hosts: dict[str, dict[str, str]] = {}
        for name, place in places.items():
            hosts.setdefault(place.name, {})[name] = place.address
        agents = {h.name: h for h in self._relayed(hosts)}
        clocks = {name: self.place(name).clock for name in hosts}
        return AgentFollower({n: (agents[n], targets, clocks[n]) for n, targets in hosts.items()},
                             zone, interval)  # fmt: skip

    def flush_route_metrics(self) -> None:
        with ThreadPoolExecutor(max_workers=max(1, len(self._places))) as pool:
            list(pool.map(lambda p: p.flush_route_metrics(), self._places.values()))

    def link_counters(self) -> dict[str, Any]:
        return link_counters(self._relayed(self.links)) if self.links else {}

    def link_queued(self) -> tuple[int, float] | None:
        return None

    def link_control(self) -> LinkControl | None:
        """Each linked host's linkem through its agent (remote/linkctl.py), for faults."""
        if not self.link_faults:
            return None
        return HostsLinkControl({name: (self.place(name).channel, self.place(name).clock.to_wall)
                                 for name in self.links})  # fmt: skip

    def link_directions(self) -> list[Any]:
        return list(directions_of(self.links, every=self.link_faults))

    def each(self) -> Iterator[AgentPlace]:
        return iter(self._places.values())
