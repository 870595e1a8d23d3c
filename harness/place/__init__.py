"""Where a server runs: the one small interface the case engine (measure/live.py,
`LiveCase`) asks of a host, whatever the host is.

    places = TestbedPlaces(testbed)        # testbed/place.py: namespaces, or containers
    place = places.place("primary")
    proc = place.start(argv, workdir=folder)     # in a cgroup of its own, recorded
    place.run(server.reconfig_argv(), timeout=30)
    place.soa("example.", timeout=5)       # asked near the server, on its own host

A `Place` is one host that runs one server; `Places` is the hosts of a case together with
the link between them (what spans hosts: one select loop polling every secondary, the
link's counters and queues). The engine decides everything (server setup, switching a
case's transport and transfer kind, publishing, proofs, what to sample, teardown); a place
only carries out primitives. Operations that must run next to the server for their timing
to mean something (SOA polls, the primary's wire watcher, reading a copy back, a client's
pull) are place operations, named as such, not decisions.

Three implementations:
- a network namespace of the testbed's own (testbed/place.py `TestbedPlace` over a
  `testbed.Host`): commands through `ip netns exec`, processes recorded in the testbed's
  registry, probes from a socket opened in the namespace;
- a container of a compose project: the same `TestbedPlace` over compose's `ContainerHost`
  (compose/provider.py), whose tools come from the container's file system (nsenter); the
  container's namespace is attached by name, so probes are the namespace's;
- a host of an inventory reached through its agent over SSH (remote/place.py `AgentPlace`
  over remote/channel.py): the agent executes primitives only (remote/agent_place.py:
  spawn in a cgroup with a pid file, poll, signal, halt, kill, put, mkdir, remove, exec,
  and the probes next to the server: SOA, sampled names, the primary's check, a signed
  update relayed as wire bytes, copies read back, a client's pull, zone and serial waits,
  the wire watcher, its sockets through sock_diag); every time it reports is put on the
  engine's clock (`HostClock`).
  `run --inventory` (run/remote.py) runs LiveCase over it; so does
  tests/system/test_places.py, agents in a testbed's namespaces.

How the engine's decisions reach a host that is not this machine:
- files: the engine renders a server's configs and puts them (measure/processes.py
  `put_config`: `Place.mkdir`, `Place.write`), links or sends the generated zones
  (`copy_in`: rsync to a host) and a whole new version of a zone (`Reach.copy_in`), puts
  the group's TLS files (the key on the primary's host alone), removes a restarted
  server's forgotten state and its control channel (`remove`), reads its log (`read`); a
  server's folder is where the visit's folder has it on that host (`here`). Where files
  are not shared (`shares_files`) a copy is read back, never read from the server's file,
  and BIND loads its text zone (its raw format is made where its binary runs);
- sampling: `Places.sampling` gives the engine the run's sampler here, or one relaying
  what each host's agent samples of the processes it spawned (remote/relayed.py), their
  times on the controller's clock;
- the link: each secondary host's linkem (remote/hostlink.py, started per visit by
  run/remote.py) gives `link_directions` and `link_counters`, and in a group with faults
  `link_control` (remote/linkctl.py: each command relayed by the agent of the host whose
  direction it names, linkem's times put on the controller's clock); the real path's TCP
  counts come from the primary's agent (`Places.path_counts`, a record's extra.path);
- records' clock errors: run/remote.py `with_clock` adds each host's clock reading to
  a duration that spans two hosts;
- servers' logs: a log stamps its host's clock, so the engine's times are put on that
  clock (`Place.host_time`, by the host's measured offset) before the log is read (a cold
  start's, a transfer's, a fault's account, whose marks come back on the engine's);
- a change stream: each host's agent follows its own servers' serials
  (`follow_serials`: remote/relayed.py `AgentFollower`, a SerialFollower in each agent),
  their changes put on the controller's clock.

- sockets: each host's agent runs sock_diag there (`tcp_sockets` for what a transfer left,
  `connection_count` for settle's looks, `connection_watch` for a record's extra.tcp; a
  refusal there comes back as SockDiagRefused), and answers plain data, no times; its
  watch finds the connection by dumping (the wire's candidates are the primary host's);
- CPU and memory: the agent spawns each server in a cgroup of its own and samples it (µs,
  as the netns sampler); a host where it can make none samples /proc, whose 10 ms ticks
  its samples carry (cpu_resolution_s) and compare does not read a difference within.

What an agent place does without, said where it shows: settle's looker reads no cgroup
CPU (`cgroup_of` None: the host's groups are its agent's); catalog cases (their catalog's
versions are written here), which run/remote.py refuses.
"""

from __future__ import annotations

import contextlib
import subprocess
from collections.abc import Callable, Collection, Iterable, Sequence
from pathlib import Path
from typing import Any, Protocol

import dns.rrset

from harness.core.transport import Transport
from harness.link.linkem import LinkControl
from harness.observe.cgroup import Cgroup
from harness.observe.sampler import Target
from harness.observe.sockdiag_wire import DiagSocket
from harness.observe.tcp_states import PortRange
from harness.servers.setup import Reach
from harness.xfr import PullResult, TsigKey
from harness.xfr.follow import SerialFollower
from harness.xfr.name_sample import Held, Key
from harness.xfr.poll import SerialsSeen
from harness.xfr.poll_zones import ZonesServed
from harness.xfr.wire_watch import WireWatch


class Counting(Protocol):
    """Open connections counted at each call, while the context is open
    (observe/sockdiag.py `ConnectionCount`, or an agent's)."""

    def __call__(self) -> int: ...

    def __enter__(self) -> Counting: ...

    def __exit__(self, *exc: object) -> None: ...


class TcpWatch(Protocol):
    """A transfer's connection sampled while the context is open (observe/sockdiag.py
    `ConnectionWatch`, or an agent's): `peaks()` once it closed, `error` if it stopped."""

    error: str | None

    def __enter__(self) -> Any: ...

    def __exit__(self, *exc: object) -> None: ...

    def peaks(self) -> dict[str, Any]: ...


class Proc(Protocol):
    """A process a place started (subprocess.Popen locally)."""

    @property
    def pid(self) -> int: ...

    @property
    def returncode(self) -> int | Any: ...

    def poll(self) -> int | None: ...

    def terminate(self) -> None: ...


class Place(Protocol):
    """One host where a server runs."""

    name: str  # the host's name in the plan ("primary", "<site>-<n>", an inventory name)
    address: str  # where its server listens and its peers reach it
    # Its files are this machine's (a namespace; a container over the run's folder): the
    # engine's own tools may read and convert them in place (a disk copy, BIND's raw).
    shares_files: bool

    # --- commands and processes ---------------------------------------------------------

    def run(
        self,
        argv: list[str],
        *,
        check: bool = True,
        timeout: float = 60.0,
        output: Path | None = None,
    ) -> subprocess.CompletedProcess[str]:
        """A tool of this host (its own file system), its output captured as text, or its
        standard output written to the host's file `output` (a copy a tool prints)."""
        ...

    def control_socket(self) -> Path:
        """Where its server's control socket goes (a short path of this host)."""
        ...

    def start(self, argv: list[str], *, workdir: Path) -> Proc:
        """Start a server: in a cgroup of its own, stdout and stderr
        appended to `workdir`'s stdout.log and stderr.log, recorded for teardown; returns
        once it lives in the place's network namespace."""
        ...

    def stop(self, proc: Proc, *, signalled: bool = False) -> int:
        """SIGTERM (unless `signalled`: sent already), wait, SIGKILL; the exit status."""
        ...

    def kill(self, proc: Proc) -> list[int]:
        """A crash: SIGKILL to every process of its cgroup (else its tree), then stop()'s
        bookkeeping; the pids killed."""
        ...

    def cgroup_of(self, proc: Proc) -> Cgroup | None:
        """The cgroup `proc` runs in (None: none could be made here)."""
        ...

    def host_time(self, wall: float) -> float:
        """The engine's unix time `wall` on this host's clock, as its servers' logs stamp
        it (a cold start's log is read against its start this way)."""
        ...

    # --- files -------------------------------------------------------------------------

    def here(self, local: Path) -> Path:
        """Where this host keeps what the engine keeps at `local`, a path of the run's
        results folder (a server's folder, the TLS files): `local` itself where files are
        shared, the same place in the host's own folder of the run otherwise."""
        ...

    def copy_in(self, files: dict[Path, Path]) -> None:
        """Files of this machine, never edited (generated zones), at their paths here
        ({path here: this machine's file}): linked where files are shared, else sent."""
        ...

    def fresh(self, folder: Path) -> None:
        """`folder` emptied, with an empty `zones/` in it (a secondary's cold state)."""
        ...

    def read(self, path: Path) -> str:
        """A file of this host as text ("" when it cannot be read)."""
        ...

    def put(self, path: Path, data: bytes, mode: int = 0o644) -> None:
        """A file the engine wrote (a rendered config, a key), put whole on this host."""
        ...

    def write(self, path: Path, chunks: Iterable[str], mode: int = 0o600) -> None:
        """A text file the engine rendered (a server's config), put whole on this host,
        written as its pieces come (a config for 100 k zones is 40 MB)."""
        ...

    def mkdir(self, path: Path, mode: int = 0o755) -> None:
        """A folder of this host (and its parents), kept when it exists."""
        ...

    def remove(self, path: Path) -> None:
        """A file or folder of this host gone (nothing when it is not there)."""
        ...

    # --- TCP settings and sampling -------------------------------------------------------

    def port_range(self) -> PortRange:
        """Its ephemeral ports (ip_local_port_range): who opened a connection."""
        ...

    def flush_route_metrics(self) -> None: ...

    def connection_count(self, ports: Collection[int]) -> Counting:
        """A count of its open connections on `ports` (settle's looks: sock_diag, one dump a
        call), until the context ends (raises SockDiagRefused)."""
        ...

    def tcp_sockets(self) -> list[DiagSocket]:
        """Every TCP socket of its namespace, without attributes (raises SockDiagRefused)."""
        ...

    def connection_watch(
        self,
        peer: tuple[str, int | None],
        candidates: Callable[[], Iterable[tuple[str, int]]] | None,
    ) -> TcpWatch:
        """tcp_info of its connections to `peer`, sampled while the context is open (where
        it samples: `candidates` are the connections the primary's wire saw opened, where
        the place can look them up)."""
        ...

    # --- probes next to the server (their timing is this host's) ----------------------

    def reach(self, timeout: float) -> Reach:
        """How a dialect's publish reaches its server from here (a signed update, its
        control tools)."""
        ...

    def soa(self, zone: str, timeout: float) -> dns.rrset.RRset: ...

    def wait_listening(self, port: int, timeout: float, alive: Callable[[], None]) -> bool:
        """Until its server listens on `port` (True), or `timeout` (False)."""
        ...

    def read_copy(self, zone: str, timeout: float) -> PullResult:
        """Its server's copy of `zone` read back by AXFR on this host (RRSUM)."""
        ...

    def read_copies(self, zones: list[str], timeout: float) -> dict[str, PullResult]: ...

    def served_names(self, keys: Iterable[Key], timeout: float) -> dict[Key, Held | None]:
        """What its server answers for each (name, type) (xfr/name_sample.py)."""
        ...

    def check_serves(
        self, zone: str, reference: Any, serial: int, changed: Any, timeout: float
    ) -> str | None:
        """None when its server (a primary) serves `reference` at `serial`."""
        ...

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
        """A client on this host pulls `zone` from the server at `address` over
        `transport` (of the group's key and TLS CA, those it uses)."""
        ...

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
        """Every zone of its server polled here until it serves `serial` (a cold start)."""
        ...

    def wire(self, peers: list[str]) -> contextlib.AbstractContextManager[WireWatch]:
        """The wire watcher on this host: NOTIFYs, SOA queries and connects of `peers`."""
        ...


class Sampling(Protocol):
    """What the engine asks of a sampler (observe/sampler.py `Sampler`, or one relaying
    the samples a host's agent takes of its servers)."""

    def watch(
        self,
        case: str,
        targets: list[Target],
        link_counters: Callable[[], dict[str, Any]] | None,
        ranges: dict[str, PortRange] | None = None,
    ) -> Any: ...

    def mark(self, event: str, repeat: int) -> Any: ...

    def note(self, case: str, lines: list[dict[str, Any]]) -> None: ...


class Places(Protocol):
    """The places of a case and the link between them."""

    backend: str  # the link emulator ("linkem", "netem", "none")

    def place(self, name: str) -> Place: ...

    def sampling(self, sampler: Sampling | None) -> Sampling | None:
        """Who samples the servers of these places for `sampler` (itself on this machine,
        where cgroups and /proc are the engine's; else each host's agent, relayed)."""
        ...

    def path_counts(
        self, primary: str, secondaries: list[str], port: int
    ) -> contextlib.AbstractContextManager[dict[str, Any]]:
        """While open, the primary's connections to its secondaries on `port` watched
        from its host (the real path's retransmits and RTT); the dict yielded is filled at
        the close, by secondary, where a host counts them (empty elsewhere)."""
        ...

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
        """Each place's server polled for `serial` next to it (locally: one select loop
        over every namespace, so a fleet of 100 is polled as finely as one)."""
        ...

    def follow_serials(
        self, places: dict[str, Place], zone: str, interval: float
    ) -> contextlib.AbstractContextManager[SerialFollower]:
        """One poller thread following every place's serial of `zone` (a change stream),
        by the names given."""
        ...

    def flush_route_metrics(self) -> None:
        """Every host forgets cached route metrics (repeats start alike)."""
        ...

    def link_counters(self) -> dict[str, Any]: ...

    def link_queued(self) -> tuple[int, float] | None: ...

    def link_control(self) -> LinkControl | None:
        """linkem's runtime control (a testbed built for faults, an inventory's linked hosts
        in a group with faults), else None."""
        ...

    def link_directions(self) -> list[Any]:
        """The emulated directions (link/: name, endpoint, spec); [] without emulation."""
        ...
