"""The real path's loss as the primary's TCP sees it: retransmitted segments against
segments sent, per secondary, from the primary's connections during a repeat.

On real hosts no emulator counts drops: the sender's own counters are what there is. The
primary's agent samples tcp_info (sock_diag) of its connections from the transfer port to
the secondaries every `interval` while a repeat's transfers run, keeps each connection's
last counters and sums them per secondary (`path_counts`, pure). A connection's last
`interval` before it closes is missed; the counters are cumulative, so only what happened
in it.
"""

from __future__ import annotations

from typing import Any

from harness.observe.sockdiag import ConnectionWatch
from harness.observe.tcp_info import TcpConnection, same_address

Connection = tuple[str, int, int]  # peer address, peer port, local port


def path_counts(last: dict[Connection, dict[str, int]], peers: list[str]) -> dict[str, Any]:
    """Per peer: its connections' last tcp_info summed (pure): segments sent with data,
    retransmitted, their share, and the smoothed RTT's extremes over the connections."""
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


class PathWatch(ConnectionWatch):
    """While open, samples the connections from `local_port` to any of `peers` in this
    host's namespace (ConnectionWatch's sampling); `counts()` sums them per peer."""

    def __init__(self, peers: list[str], local_port: int, interval: float = 0.02) -> None:
        # A dump walks the kernel's whole TCP table: new connections are looked for less
        # often than known ones are read.
        super().__init__((peers[0], None), local_port=local_port, interval=interval,
                         discover=10 * interval)  # fmt: skip
        self.peers = list(peers)
        self.last: dict[Connection, dict[str, int]] = {}

    def _matches(self, conn: TcpConnection) -> bool:
        return conn.sport == self.local_port and any(same_address(conn.dst, p) for p in self.peers)

    def _keep(self, conn: TcpConnection) -> None:
        if conn.info:
            self.last[(conn.dst, conn.dport, conn.sport)] = conn.info

    def counts(self) -> dict[str, Any]:
        """Stop sampling; the counts per peer."""
        self.__exit__(None, None, None)
        return path_counts(self.last, self.peers)
