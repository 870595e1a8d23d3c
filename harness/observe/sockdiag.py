"""TCP sockets of a network namespace through netlink sock_diag (inet_diag), not /proc text.

Reading /proc/<pid>/net/tcp{,6} costs 75-90 ms at 30 k TIME_WAIT sockets (the kernel prints
every line, Python scans them). A NETLINK_SOCK_DIAG dump (``SOCK_DIAG_BY_FAMILY`` with an
``inet_diag_req_v2``) hands out the same sockets as fixed binary records. Three uses:

- ``tcp_summary``: sockets per state and distinct ephemeral ports in use, the figures
  ``procfs.summarise_tcp`` gives from the /proc text (the sampler's per-host line).
- ``tcp_sockets``: every socket's ends and state, for what one transfer left
  (``harness.observe.transfer_sockets`` counts them).
- ``tcp_connections``: ``struct tcp_info`` (INET_DIAG_INFO), the socket's buffers
  (INET_DIAG_SKMEMINFO) and congestion control (INET_DIAG_CONG) of the connections to a
  peer: the window the secondary really advertised (``rcv_wnd``, Linux >= 6.2), its
  ``rcv_space``, the sender's ``snd_cwnd`` and RTT, retransmissions. ``ConnectionWatch``
  samples them in a thread while a transfer runs.

A dump lists the sockets of the namespace the netlink socket was opened in: ``socket_for``
opens it inside a named namespace or a process's one (setns, so root), then switches back.

This module is the thin I/O: the messages are packed and parsed in
``harness.observe.sockdiag_wire``, the connection figures decoded in
``harness.observe.tcp_info``.
"""

from __future__ import annotations

import errno
import os
import socket
import threading
import time
from collections.abc import Callable, Collection, Iterable
from typing import Any

from harness.core.errors import EnvironmentProblem
from harness.core.netns import _setns, entered
from harness.observe.sockdiag_wire import (
    ALL_STATES,
    CONNECTED_STATES,
    TCP_TIME_WAIT,
    DiagSocket,
    SockDiagError,
    SocketKey,
    exact_request,
    is_done,
    parse_sockets,
    remote_filter,
    request,
    summarise,
)
from harness.observe.tcp_info import INFO_EXT, Peaks, TcpConnection, connections_to, same_address
from harness.observe.tcp_states import PortRange

NETLINK_SOCK_DIAG = 4


class SockDiagRefused(EnvironmentProblem):
    """The kernel or the host refused the netlink dump; the caller falls back to /proc."""


_THREAD_NET = "/proc/thread-self/ns/net"


def socket_for(netns: str | None = None, pid: int | None = None) -> socket.socket:
    """A NETLINK_SOCK_DIAG socket in a named namespace, in the namespace of ``pid``, or in
    the caller's. Raises ``SockDiagRefused`` when the host does not allow it."""
    if netns is not None and pid is not None:
        raise ValueError("give netns or pid, not both")
    try:
        if pid is not None:
            return _socket_in_pid(pid)
        with entered(netns):
            return socket.socket(socket.AF_NETLINK, socket.SOCK_DGRAM, NETLINK_SOCK_DIAG)
    except SockDiagRefused:
        raise
    except EnvironmentProblem as exc:  # setns refused (no CAP_SYS_ADMIN)
        raise SockDiagRefused(f"cannot open a sock_diag socket: {exc}") from exc
    except OSError as exc:
        raise SockDiagRefused(_refusal("opening a NETLINK_SOCK_DIAG socket", exc)) from exc


def _socket_in_pid(pid: int) -> socket.socket:
    path = f"/proc/{pid}/ns/net"
    target = os.open(path, os.O_RDONLY | os.O_CLOEXEC)  # FileNotFoundError: pid gone
    try:
        if os.fstat(target).st_ino == os.stat(_THREAD_NET).st_ino:
            # Already there: no setns, so no privilege needed.
            return socket.socket(socket.AF_NETLINK, socket.SOCK_DGRAM, NETLINK_SOCK_DIAG)
        own = os.open(_THREAD_NET, os.O_RDONLY | os.O_CLOEXEC)
        try:
            _setns(target, f"the network namespace of pid {pid}")
            try:
                return socket.socket(socket.AF_NETLINK, socket.SOCK_DGRAM, NETLINK_SOCK_DIAG)
            finally:
                _setns(own, "the original network namespace")
        finally:
            os.close(own)
    finally:
        os.close(target)


def _refusal(what: str, exc: OSError) -> str:
    reason = os.strerror(exc.errno) if exc.errno else str(exc)
    hint = {
        errno.EPROTONOSUPPORT: "the kernel lacks CONFIG_INET_DIAG",
        errno.EAFNOSUPPORT: "netlink is not available (a sandbox such as gVisor?)",
        errno.ENOENT: "the kernel lacks tcp_diag (CONFIG_INET_TCP_DIAG or its module)",
        errno.EPERM: "a seccomp or LSM policy forbids it",
        errno.EACCES: "a seccomp or LSM policy forbids it",
    }.get(exc.errno or 0, "")
    return f"{what} failed: {reason}" + (f" ({hint})" if hint else "")


_RECV = 1 << 16  # the kernel fills at most about 32 KiB per dump message batch
_TIMEOUT = 5.0  # seconds; a dump of 30 k sockets takes milliseconds


def dump(
    sock: socket.socket,
    family: int | None = None,
    states: int = ALL_STATES,
    ext: int = 0,
    bytecode: bytes = b"",
) -> list[bytes]:
    """The raw recv() chunks of one dump on ``sock`` (pure parsers take it from here);
    ``family`` None: both families in one walk (see ``request``); ``bytecode`` a kernel
    filter (``remote_filter``)."""
    try:
        sock.settimeout(_TIMEOUT)
        sock.send(request(family, states, ext, bytecode=bytecode))
        chunks = []
        while True:
            chunk = sock.recv(_RECV)
            if not chunk:
                break
            chunks.append(chunk)
            if is_done(chunk):
                break
        return chunks
    except SockDiagError as exc:
        raise SockDiagRefused(f"sock_diag dump is malformed: {exc}") from exc
    except OSError as exc:
        raise SockDiagRefused(_refusal("a sock_diag dump of TCP sockets", exc)) from exc


def lookup(sock: socket.socket, key: SocketKey, ext: int = INFO_EXT) -> DiagSocket | None:
    """One socket by its key (a hash lookup in the kernel, no walk); None once it is gone."""
    try:
        sock.settimeout(_TIMEOUT)
        sock.send(exact_request(key, ext))
        chunk = sock.recv(_RECV)
        found = parse_sockets([chunk])
    except OSError as exc:
        if exc.errno == errno.ENOENT:
            return None
        raise SockDiagRefused(_refusal("a sock_diag lookup of a TCP socket", exc)) from exc
    except SockDiagError as exc:
        raise SockDiagRefused(f"sock_diag answer is malformed: {exc}") from exc
    return found[0] if found else None


def tcp_summary(
    port_range: PortRange | None, *, netns: str | None = None, pid: int | None = None
) -> tuple[dict[str, int], int]:
    """Sockets per state and ephemeral ports in use (see ``summarise``) in a namespace:
    one dump of both families."""
    sock = socket_for(netns, pid)
    try:
        chunks = dump(sock)
    finally:
        sock.close()
    return summarise(chunks, port_range)


def tcp_sockets(*, netns: str | None = None, pid: int | None = None) -> list[DiagSocket]:
    """Every TCP socket of a namespace, in every state, without attributes: one dump of
    both families (what a transfer left, harness.observe.transfer_sockets)."""
    sock = socket_for(netns, pid)
    try:
        return parse_sockets(dump(sock))
    finally:
        sock.close()


def tcp_connections(
    peer: tuple[str, int] | None = None,
    *,
    netns: str | None = None,
    pid: int | None = None,
    states: int = CONNECTED_STATES,
) -> list[TcpConnection]:
    """TCP connections of a namespace whose remote end is ``peer`` (address, port), with
    tcp_info, socket buffers and congestion control."""
    sock = socket_for(netns, pid)
    try:
        found = parse_sockets(dump(sock, None, states, INFO_EXT))
    finally:
        sock.close()
    return connections_to(found, peer)


def open_connections(sock: socket.socket, ports: Collection[int]) -> int:
    """TCP connections in any state but LISTEN, TIME_WAIT and CLOSE with either end on one
    of `ports` (a server's DNS ports), in the namespace `sock` was opened in (one dump)."""
    found = parse_sockets(dump(sock, None, CONNECTED_STATES))
    return sum(1 for s in found if s.sport in ports or s.dport in ports)


class ConnectionCount:
    """`open_connections` of a namespace, counted again at each call through one sock_diag
    socket kept open (made here, so a refusal raises in the caller) until the context
    ends (settle's looks, measure/quiet.py)."""

    def __init__(self, ports: Collection[int], *, netns: str | None = None) -> None:
        self.ports = frozenset(ports)
        self._sock = socket_for(netns)

    def __call__(self) -> int:
        return open_connections(self._sock, self.ports)

    def __enter__(self) -> ConnectionCount:
        return self

    def __exit__(self, *exc: object) -> None:
        self._sock.close()


# --- watching one transfer's connection ------------------------------------------------------


NO_COOKIE = (1 << 64) - 1  # INET_DIAG_NOCOOKIE in both words: a lookup by the ends alone
CANDIDATE_PATIENCE = 1.0  # seconds a connection announced but not found is looked for


class ConnectionWatch:
    """Samples tcp_info of the connections to ``peer`` (address, port or None) in a
    namespace every ``interval`` seconds, in a thread, while the ``with`` body runs.

    Known connections are looked up by key (a hash lookup in the kernel, no walk). New
    ones are found one of two ways:

    - ``candidates`` given: a callable returning the local (address, port) of connections
      opened towards the peer since the watch began, as the primary's wire watch sees their
      SYNs (harness.xfr.wire_watch, kernel-filtered). Each is looked up by its ends; no
      dump at all. A dump walks the kernel's whole TCP hash table, shared by every
      namespace (some 16 ms here), so a fleet's watchers dumping every 20 ms while their
      secondaries waited for a transfer slot cost the driver most of a core.
    - otherwise a dump of the namespace's connected sockets every ``discover`` seconds
      (every ``interval`` while none is known, so that a transfer's first moments are
      seen), filtered in the kernel to the peer (``remote_filter``): only its sockets are
      copied to us.

    ``local_port`` narrows the match (the primary's side of a transfer: local port 53,
    peer the secondary's address). ``peaks()`` is the reduction for a transfer record
    (constant memory); ``error`` says why sampling stopped, if it did.
    """

    def __init__(
        self,
        peer: tuple[str, int | None],
        *,
        netns: str | None = None,
        pid: int | None = None,
        local_port: int | None = None,
        interval: float = 0.02,
        discover: float = 0.2,
        candidates: Callable[[], Iterable[tuple[str, int]]] | None = None,
    ) -> None:
        if interval <= 0 or discover < interval:
            raise ValueError(f"need 0 < interval <= discover (got {interval}, {discover})")
        self.peer = peer
        self.local_port = local_port
        self.interval = interval
        self.discover = discover
        self.candidates = candidates
        self.tracker = Peaks()
        self.error: str | None = None
        self.dumps = 0  # table walks made (the cost the candidates avoid)
        self._filter = remote_filter(peer[0], peer[1])
        self._sock = socket_for(netns, pid)  # here, so a refusal raises in the caller
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="xfrbench-tcpinfo", daemon=True)

    def __enter__(self) -> ConnectionWatch:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self._sock.close()

    def peaks(self) -> dict[str, Any]:
        return self.tracker.result()

    def _matches(self, conn: TcpConnection) -> bool:
        address, port = self.peer
        if port is not None and conn.dport != port:
            return False
        if self.local_port is not None and conn.sport != self.local_port:
            return False
        return same_address(conn.dst, address)

    def _run(self) -> None:
        try:
            if self.candidates is None:
                self._run_dumps()
            else:
                self._run_candidates(self.candidates)
        except SockDiagRefused as exc:  # reported, never raised into a run
            self.error = str(exc)

    def _add(self, sockets: Iterable[DiagSocket]) -> dict[SocketKey, None]:
        """Track the matching connections; returns their keys."""
        found = [c for c in connections_to(sockets, None) if self._matches(c)]
        for conn in found:
            self.tracker.add(conn)
        return {c.key: None for c in found if c.key is not None}

    def _follow(self, known: dict[SocketKey, None]) -> None:
        for key in list(known):
            sock = lookup(self._sock, key)
            if sock is None or sock.state == TCP_TIME_WAIT:
                del known[key]
                continue
            self._add([sock])

    def _run_dumps(self) -> None:
        known: dict[SocketKey, None] = {}
        next_dump = 0.0
        while not self._stop.is_set():
            now = time.monotonic()
            if now >= next_dump or not known:
                chunks = dump(self._sock, None, CONNECTED_STATES, INFO_EXT, self._filter)
                self.dumps += 1
                known = self._add(parse_sockets(chunks))
                next_dump = now + self.discover
            else:
                self._follow(known)
            self._stop.wait(self.interval)

    def _run_candidates(self, candidates: Callable[[], Iterable[tuple[str, int]]]) -> None:
        address, port = self.peer
        known: dict[SocketKey, None] = {}
        looking: dict[tuple[str, int], float] = {}  # announced, not found yet: since when
        done: set[tuple[str, int]] = set()
        family = socket.AF_INET6 if ":" in address else socket.AF_INET
        while not self._stop.is_set():
            now = time.monotonic()
            for local in candidates():
                if local not in done and local not in looking:
                    looking[local] = now
            for local, since in list(looking.items()):
                key = SocketKey(family, local[0], local[1], address, port or 0, NO_COOKIE)
                sock = lookup(self._sock, key)
                if sock is not None and sock.state != TCP_TIME_WAIT:
                    known.update(self._add([sock]))
                if sock is not None or now - since > CANDIDATE_PATIENCE:
                    del looking[local]
                    done.add(local)
            self._follow(known)
            self._stop.wait(self.interval)
