"""The real path's loss as the primary's TCP sees it: retransmitted segments against
segments sent, per secondary, from the primary's connections during a repeat.

On real hosts no emulator counts drops: the sender's own counters are what there is. A
transfer's connection may live a millisecond, between any two samples, so the primary's
agent takes each connection's tcp_info as the kernel destroys it (sock_diag's destroy
notifications, the multicast group `ss -E` listens to: the counters as they ended), and
at the end of the repeat those still open (a dump). `path_counts` (pure) sums them per
secondary.
"""

from __future__ import annotations

import socket
import threading
from typing import Any

from harness.observe.sockdiag import NETLINK_SOCK_DIAG, SockDiagRefused, dump, socket_for
from harness.observe.sockdiag_wire import CONNECTED_STATES, parse_sockets
from harness.observe.tcp_info import INFO_EXT, TcpConnection, connections_to, same_address

# sock_diag's multicast groups (linux/sock_diag.h): SKNLGRP_INET_TCP_DESTROY = 1 and
# SKNLGRP_INET6_TCP_DESTROY = 3, as the bits of a bind() mask.
DESTROY_GROUPS = (1 << 0) | (1 << 2)
RECEIVE_BUFFER = 4 << 20  # a fleet's connections may all close at once
DRAIN_QUIET = 0.2  # seconds without a destroy event before the count is closed

Connection = tuple[str, int, int]  # peer address, peer port, local port


def path_counts(last: dict[Connection, dict[str, int]], peers: list[str]) -> dict[str, Any]:
    """Per peer: its connections' last tcp_info summed (pure): segments sent with data,
    retransmitted, their share, and the least RTT over the connections."""
    out: dict[str, Any] = {}
    for peer in peers:
        mine = [info for (address, _, _), info in last.items() if same_address(address, peer)]
        if not mine:
            continue
        sent = sum(info.get("data_segs_out", 0) for info in mine)
        retransmitted = sum(info.get("total_retrans", 0) for info in mine)
        rtts = [info["min_rtt"] / 1000 for info in mine if info.get("min_rtt")]
        out[peer] = {
            "connections": len(mine),
            "data_segs_out": sent,
            "retransmits": retransmitted,
            "retransmit_pct": round(100 * retransmitted / sent, 4) if sent else None,
            "rtt_ms_min": round(min(rtts), 3) if rtts else None,
        }
    return out


class PathWatch:
    """While open, the connections from `local_port` to any of `peers` in this host's
    namespace, each as it ended; `counts()` sums them per peer (see path_counts)."""

    def __init__(self, peers: list[str], local_port: int) -> None:
        self.peers = list(peers)
        self.local_port = local_port
        self.error: str | None = None
        self.last: dict[Connection, dict[str, int]] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        try:
            self._events = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, NETLINK_SOCK_DIAG)
            self._events.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, RECEIVE_BUFFER)
            self._events.bind((0, DESTROY_GROUPS))  # needs CAP_NET_ADMIN
        except OSError as exc:
            raise SockDiagRefused(f"cannot listen to sock_diag's destroy events: {exc}") from exc
        self._events.settimeout(0.1)
        self._thread = threading.Thread(target=self._run, name="xfrbench-paths", daemon=True)
        self._thread.start()

    def _keep(self, conns: list[TcpConnection]) -> None:
        with self._lock:
            for conn in conns:
                ours = conn.sport == self.local_port and conn.info
                if ours and any(same_address(conn.dst, peer) for peer in self.peers):
                    self.last[(conn.dst, conn.dport, conn.sport)] = conn.info

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                data = self._events.recv(1 << 16)
            except TimeoutError:
                continue
            except OSError as exc:  # ENOBUFS: notifications were lost; said with the counts
                self.error = f"destroy events: {exc}"
                continue
            self._keep(connections_to(parse_sockets([data]), None))

    def _drain(self) -> None:
        """The kernel sends destroy events from a workqueue, after the socket is gone: a
        connection that ended just before counts() may not have been read yet. Read until
        the group has been quiet for DRAIN_QUIET seconds."""
        self._events.settimeout(DRAIN_QUIET)
        while True:
            try:
                data = self._events.recv(1 << 16)
            except TimeoutError:
                return
            except OSError as exc:
                self.error = f"destroy events: {exc}"
                return
            self._keep(connections_to(parse_sockets([data]), None))

    def counts(self) -> dict[str, Any]:
        """Stop listening; the counts per peer, the connections still open included."""
        try:
            sock = socket_for()
            try:
                self._keep(connections_to(parse_sockets(dump(sock, None, CONNECTED_STATES,
                                                             INFO_EXT)), None))  # fmt: skip
            finally:
                sock.close()
        except SockDiagRefused as exc:
            self.error = str(exc)
        self._stop.set()
        self._thread.join()
        self._drain()
        self._events.close()
        with self._lock:
            return path_counts(self.last, self.peers)
