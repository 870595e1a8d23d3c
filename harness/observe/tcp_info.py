"""What sock_diag says about a TCP connection: pure decoding and reduction.

- ``parse_tcp_info`` / ``parse_skmeminfo``: the INET_DIAG_INFO (``struct tcp_info``) and
  INET_DIAG_SKMEMINFO attributes, as far as this kernel's struct reaches.
- ``connections_to``: the dumped sockets whose remote end is a peer, as ``TcpConnection``
  (tcp_info, socket buffers, congestion control); ``INFO_EXT`` asks for those attributes.
- ``Peaks`` / ``connection_peaks``: a transfer's samples reduced for its record (largest
  advertised windows, cwnd, RTT extremes, last counters); ``advertised_window_bound_bps``.
"""

from __future__ import annotations

import socket
import struct
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from harness.observe.sockdiag_wire import (
    INET_DIAG_CONG,
    INET_DIAG_INFO,
    INET_DIAG_SKMEMINFO,
    DiagSocket,
    SocketKey,
    ext_bits,
)

SK_MEMINFO = ("rmem_alloc", "rcvbuf", "wmem_alloc", "sndbuf", "fwd_alloc", "wmem_queued")
SK_MEMINFO += ("optmem", "backlog", "drops")

# struct tcp_info (include/uapi/linux/tcp.h): name, offset, struct format. The kernel hands
# out its own struct's length; a field past that length is absent on that kernel (rcv_wnd
# came with Linux 6.2, the total_rto fields with 6.7).
TCP_INFO_FIELDS: tuple[tuple[str, int, str], ...] = (
    ("state", 0, "B"),
    ("ca_state", 1, "B"),
    ("retransmits", 2, "B"),
    ("probes", 3, "B"),
    ("backoff", 4, "B"),
    ("options", 5, "B"),
    ("wscale", 6, "B"),  # snd_wscale: low 4 bits, rcv_wscale: high 4 bits
    ("rto", 8, "I"),  # microseconds
    ("ato", 12, "I"),
    ("snd_mss", 16, "I"),
    ("rcv_mss", 20, "I"),
    ("unacked", 24, "I"),
    ("sacked", 28, "I"),
    ("lost", 32, "I"),
    ("retrans", 36, "I"),
    ("fackets", 40, "I"),
    ("last_data_sent", 44, "I"),  # milliseconds ago
    ("last_ack_sent", 48, "I"),
    ("last_data_recv", 52, "I"),
    ("last_ack_recv", 56, "I"),
    ("pmtu", 60, "I"),
    ("rcv_ssthresh", 64, "I"),
    ("rtt", 68, "I"),  # microseconds (smoothed)
    ("rttvar", 72, "I"),
    ("snd_ssthresh", 76, "I"),
    ("snd_cwnd", 80, "I"),  # segments
    ("advmss", 84, "I"),
    ("reordering", 88, "I"),
    ("rcv_rtt", 92, "I"),
    ("rcv_space", 96, "I"),  # bytes: the receiver's estimate of what the sender sends per RTT
    ("total_retrans", 100, "I"),
    ("pacing_rate", 104, "Q"),  # bytes per second
    ("max_pacing_rate", 112, "Q"),
    ("bytes_acked", 120, "Q"),
    ("bytes_received", 128, "Q"),
    ("segs_out", 136, "I"),
    ("segs_in", 140, "I"),
    ("notsent_bytes", 144, "I"),
    ("min_rtt", 148, "I"),
    ("data_segs_in", 152, "I"),
    ("data_segs_out", 156, "I"),
    ("delivery_rate", 160, "Q"),
    ("busy_time", 168, "Q"),  # microseconds
    ("rwnd_limited", 176, "Q"),  # microseconds the sender was limited by the receive window
    ("sndbuf_limited", 184, "Q"),
    ("delivered", 192, "I"),
    ("delivered_ce", 196, "I"),
    ("bytes_sent", 200, "Q"),
    ("bytes_retrans", 208, "Q"),
    ("dsack_dups", 216, "I"),
    ("reord_seen", 220, "I"),
    ("rcv_ooopack", 224, "I"),
    ("snd_wnd", 228, "I"),  # bytes: the peer's advertised window, after scaling
    ("rcv_wnd", 232, "I"),  # bytes: our advertised window, after scaling (Linux >= 6.2)
    ("rehash", 236, "I"),
    ("total_rto", 240, "H"),
    ("total_rto_recoveries", 242, "H"),
    ("total_rto_time", 244, "I"),
    ("received_ce", 248, "I"),  # Accurate ECN counters (Linux >= 6.18)
    ("delivered_e1_bytes", 252, "I"),
    ("delivered_e0_bytes", 256, "I"),
    ("delivered_ce_bytes", 260, "I"),
    ("received_e1_bytes", 264, "I"),
    ("received_e0_bytes", 268, "I"),
    ("received_ce_bytes", 272, "I"),
    ("accecn_fail_mode", 276, "H"),
    ("accecn_opt_seen", 278, "H"),
)
_TCP_INFO_STRUCTS = tuple(
    (name, offset, struct.Struct("=" + fmt)) for name, offset, fmt in TCP_INFO_FIELDS
)
# The attributes ``connections_to`` decodes: what a dump or a lookup asks for.
INFO_EXT = ext_bits(INET_DIAG_INFO, INET_DIAG_CONG, INET_DIAG_SKMEMINFO)


def parse_tcp_info(data: bytes) -> dict[str, int]:
    """``struct tcp_info`` -> {field: value} for every field this kernel's struct holds
    (``len(data)``), plus snd_wscale and rcv_wscale split from their shared byte."""
    out = {
        name: fmt.unpack_from(data, offset)[0]
        for name, offset, fmt in _TCP_INFO_STRUCTS
        if offset + fmt.size <= len(data)
    }
    if "wscale" in out:
        wscale = out.pop("wscale")
        out["snd_wscale"], out["rcv_wscale"] = wscale & 0x0F, wscale >> 4
    return out


def parse_skmeminfo(data: bytes) -> dict[str, int]:
    """INET_DIAG_SKMEMINFO (u32 per SK_MEMINFO_* index) -> {rcvbuf, sndbuf, ...}."""
    count = min(len(data) // 4, len(SK_MEMINFO))
    return dict(zip(SK_MEMINFO, struct.unpack_from(f"={count}I", data), strict=False))


@dataclass(frozen=True)
class TcpConnection:
    """A connection as ``tcp_connections`` reports it."""

    src: str
    sport: int
    dst: str
    dport: int
    state: str
    info: dict[str, int]  # parse_tcp_info
    memory: dict[str, int]  # parse_skmeminfo (rcvbuf, sndbuf: the socket's buffer sizes)
    congestion: str | None  # "cubic", "bbr", ...
    key: SocketKey | None = None  # for ``lookup``

    def fields(self) -> dict[str, Any]:
        return {
            "src": self.src,
            "sport": self.sport,
            "dst": self.dst,
            "dport": self.dport,
            "state": self.state,
            "congestion": self.congestion,
            "info": dict(self.info),
            "memory": dict(self.memory),
        }


def same_address(a: str, b: str) -> bool:
    """Whether two address texts name the same address (IPv4-mapped IPv6 included)."""
    if a == b:
        return True
    for family in (socket.AF_INET, socket.AF_INET6):
        try:
            if socket.inet_pton(family, a) == socket.inet_pton(family, b):
                return True
        except OSError:
            continue
    # An IPv4 peer seen through an IPv6 socket: ::ffff:192.0.2.1.
    return a.removeprefix("::ffff:") == b.removeprefix("::ffff:")


def connections_to(
    sockets: Iterable[DiagSocket], peer: tuple[str, int] | None
) -> list[TcpConnection]:
    """The dumped sockets whose remote end is ``peer`` (address, port), all when None."""
    out = []
    for sock in sockets:
        if peer is not None and (sock.dport != peer[1] or not same_address(sock.dst, peer[0])):
            continue
        info = sock.attrs.get(INET_DIAG_INFO)
        mem = sock.attrs.get(INET_DIAG_SKMEMINFO)
        cong = sock.attrs.get(INET_DIAG_CONG)
        out.append(
            TcpConnection(
                src=sock.src,
                sport=sock.sport,
                dst=sock.dst,
                dport=sock.dport,
                state=sock.state_name,
                info=parse_tcp_info(info) if info else {},
                memory=parse_skmeminfo(mem) if mem else {},
                congestion=cong.rstrip(b"\x00").decode("ascii", "replace") if cong else None,
                key=sock.key,
            )
        )
    return out


class Peaks:
    """Running reduction of a transfer's connection samples (see ``connection_peaks``):
    constant memory however long the transfer."""

    _MAXIMA = (
        ("rcv_wnd_max", "rcv_wnd"),
        ("rcv_space_max", "rcv_space"),
        ("snd_wnd_max", "snd_wnd"),
        ("snd_cwnd_max", "snd_cwnd"),
    )
    _LAST = ("bytes_received", "bytes_acked", "total_retrans", "rcv_mss", "snd_mss")
    _LAST_SECONDS = ("rwnd_limited", "sndbuf_limited", "busy_time")  # microseconds

    def __init__(self) -> None:
        self.samples = 0
        self.connections: set[tuple[str, int, str, int]] = set()
        self.out: dict[str, Any] = {}
        self.congestion: set[str] = set()
        self.last: dict[str, int] = {}

    def add(self, sample: TcpConnection) -> None:
        info, out = sample.info, self.out
        self.samples += 1
        self.connections.add((sample.src, sample.sport, sample.dst, sample.dport))
        for name, field_ in self._MAXIMA:
            if field_ in info:
                out[name] = max(out.get(name, 0), info[field_])
        if "snd_mss" in info and "snd_cwnd" in info:
            cwnd_bytes = info["snd_cwnd"] * info["snd_mss"]
            out["cwnd_bytes_max"] = max(out.get("cwnd_bytes_max", 0), cwnd_bytes)
        if info.get("rtt"):
            rtt = info["rtt"] / 1000
            out["rtt_ms_min"] = min(out.get("rtt_ms_min", rtt), rtt)
            out["rtt_ms_max"] = max(out.get("rtt_ms_max", rtt), rtt)
        if "rcvbuf" in sample.memory:
            out["rcvbuf_max"] = max(out.get("rcvbuf_max", 0), sample.memory["rcvbuf"])
        if sample.congestion:
            self.congestion.add(sample.congestion)
        self.last = info

    def result(self) -> dict[str, Any]:
        if not self.samples:
            return {}
        out: dict[str, Any] = {"samples": self.samples, "connections": len(self.connections)}
        out.update(self.out)
        out.update({name: self.last[name] for name in self._LAST if name in self.last})
        for name in self._LAST_SECONDS:
            if name in self.last:
                out[f"{name}_s"] = self.last[name] / 1e6
        if len(self.congestion) == 1:
            out["congestion"] = next(iter(self.congestion))
        return out


def connection_peaks(samples: Iterable[TcpConnection]) -> dict[str, Any]:
    """What a transfer's connection samples say, reduced for a transfer record: the largest
    window this side advertised (``rcv_wnd_max``, bytes), the largest window the peer
    advertised (``snd_wnd_max``), the congestion window peak in segments and bytes, RTT
    extremes (ms, the kernel's smoothed RTT), the largest receive buffer, and the last
    sample's cumulative counters (bytes, retransmissions, seconds limited by the receive
    window or the send buffer). Fields this kernel's tcp_info lacks are left out; no
    samples give {}."""
    peaks = Peaks()
    for sample in samples:
        peaks.add(sample)
    return peaks.result()


def advertised_window_bound_bps(peaks: dict[str, Any], rtt_s: float) -> float | None:
    """The window bound of a transfer from what the receiver really advertised:
    ``rcv_wnd_max`` / RTT (bits per second), None without a sampled window."""
    window = peaks.get("rcv_wnd_max")
    if not window or rtt_s <= 0:
        return None
    return 8 * window / rtt_s
