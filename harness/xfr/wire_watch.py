"""What crosses the primary's wire, timestamped: its NOTIFYs, the secondaries' SOA queries and
the connections they open for the transfer.

A server sends NOTIFY some time after it starts serving a new serial (BIND queues it on its
zone timer: 0 to 0.4 s here), so "the primary serves serial N" is no stand-in for "NOTIFY
sent"; and a secondary that waits for a transfer slot (the primary's transfers-out, NSD's
xfrd or Knot's limits) shows it on the wire only as a late (or repeated) connect: a
connection is told from a retransmitted SYN by its source port. An AF_PACKET socket in
the primary's namespace sees every packet on its way in or out; a classic BPF filter keeps
the kernel from copying the transfer's bulk data to us: only UDP to port 53, TCP SYNs to 53
or 853, and outgoing TCP data to port 53 (Knot sends its NOTIFY over TCP) reach Python.
Parsing is pure (`parse_packet`); the watch is a thread around it.
"""

from __future__ import annotations

import socket
import struct
import sys
import threading
import time
from collections.abc import Collection, Iterable
from dataclasses import dataclass
from types import TracebackType

from harness.core.netns import socket_in
from harness.xfr.serial import serial_ge

ETH_P_ALL = 0x0003  # outgoing packets reach only 'all protocols' taps
ETH_P_IP = 0x0800
PACKET_OUTGOING = 4
OPCODE_NOTIFY = 4
SOA = 6
SO_ATTACH_FILTER = 26
SO_TIMESTAMPNS = 35  # asm-generic/socket.h (SO_TIMESTAMPNS_OLD): also the cmsg's type
TIMESPEC = struct.Struct("@ll")  # struct timespec: seconds, nanoseconds (CLOCK_REALTIME)
TCP_SYN, TCP_ACK = 0x02, 0x10


@dataclass(frozen=True, slots=True)  # a 100 k-member catalog's start sees 300 k of them
class WireEvent:
    at: float  # when the kernel took the packet, on time.monotonic()'s clock
    kind: str  # "notify" (primary -> secondary), "soa_query" or "connect" (secondary -> it)
    peer: str  # the secondary's address
    serial: int | None = None  # a NOTIFY's announced serial (0: none given)
    port: int | None = None  # a connect's source port: a SYN sent again is one connection
    to_port: int | None = None  # a connect's port on the primary: 53 (TCP) or 853 (XoT)


# Classic BPF opcodes (linux/filter.h).
_LDB, _LDH, _LDW = 0x30, 0x28, 0x20  # load byte / half / word at k
_LDB_X, _LDH_X, _LDX_MSH = 0x50, 0x48, 0xB1  # at X + k; X = 4 * (byte k & 0xf)
_JEQ, _JSET, _RET = 0x15, 0x45, 0x06
_PKTTYPE = (-0x1000 + 4) & 0xFFFFFFFF  # SKF_AD_OFF + SKF_AD_PKTTYPE


def assemble(program: list[tuple[str, int, int, str, str]]) -> bytes:
    """Classic BPF from (label, code, k, if-true label, if-false label) lines; jumps are
    written as labels ("" = the next line) and encoded as the relative offsets BPF wants."""
    at = {label: index for index, (label, *_rest) in enumerate(program) if label}
    out = []
    for index, (_, code, k, yes, no) in enumerate(program):
        jt = at[yes] - index - 1 if yes else 0
        jf = at[no] - index - 1 if no else 0
        out.append(struct.pack("HBBI", code, jt, jf, k))
    return b"".join(out)


def _bpf() -> bytes:
    """The filter (offsets from the IP header: the socket is SOCK_DGRAM, no link header).

    Keep: UDP to port 53; TCP to 53 or 853 that is a SYN without ACK; TCP data to those
    ports leaving this host. Drop: fragments, everything else."""
    return assemble(
        [
            ("", _LDB, 9, "", ""),  # the protocol
            ("", _JEQ, 17, "udp", "tcp"),
            ("udp", _LDH, 6, "", ""),  # flags and fragment offset
            ("", _JSET, 0x1FFF, "drop", ""),
            ("", _LDX_MSH, 0, "", ""),  # X = the IP header's length
            ("", _LDH_X, 2, "", ""),  # the destination port
            ("", _JEQ, 53, "accept", "drop"),
            ("tcp", _JEQ, 6, "", "drop"),
            ("", _LDH, 6, "", ""),
            ("", _JSET, 0x1FFF, "drop", ""),
            ("", _LDX_MSH, 0, "", ""),
            ("", _LDH_X, 2, "", ""),
            ("", _JEQ, 53, "flags", ""),
            ("", _JEQ, 853, "flags", "drop"),
            ("flags", _LDB_X, 13, "", ""),  # the TCP flags
            ("", _JSET, TCP_SYN, "", "data"),
            ("", _JSET, TCP_ACK, "drop", "accept"),
            ("data", _LDW, _PKTTYPE, "", ""),
            ("", _JEQ, PACKET_OUTGOING, "accept", "drop"),
            ("accept", _RET, 0xFFFF, "", ""),
            ("drop", _RET, 0, "", ""),
        ]
    )


def parse_packet(
    ip_packet: bytes, outgoing: bool, peers: Collection[str]
) -> tuple[str, str, int | None, int | None, int | None] | None:
    """(kind, peer, serial, port, to_port) if this IPv4 packet is a NOTIFY to a peer (UDP,
    or TCP as Knot sends it), an SOA query from a peer, or a peer's SYN to port 53/853
    (port: its source port, which a retransmitted SYN keeps; to_port: 53 or 853, the
    transport it connects for); else None."""
    if len(ip_packet) < 20 or ip_packet[0] >> 4 != 4:
        return None
    source = socket.inet_ntoa(ip_packet[12:16])
    destination = socket.inet_ntoa(ip_packet[16:20])
    ihl = (ip_packet[0] & 0x0F) * 4
    transport = ip_packet[ihl:]
    proto = ip_packet[9]
    if proto == socket.IPPROTO_TCP:
        if len(transport) < 20:
            return None
        source_port, port = struct.unpack_from("!HH", transport, 0)
        flags = transport[13]
        if flags & TCP_SYN and not flags & TCP_ACK:
            if port in (53, 853) and source in peers and not outgoing:
                return "connect", source, None, source_port, port
            return None
        if not (outgoing and port == 53 and destination in peers):
            return None
        payload = transport[(transport[12] >> 4) * 4 + 2 :]  # after the 2-byte length
        serial = _notify_serial(payload)
        return None if serial is None else ("notify", destination, serial, None, None)
    if proto != socket.IPPROTO_UDP or len(transport) < 8:
        return None
    if struct.unpack_from("!H", transport, 2)[0] != 53:
        return None
    payload = transport[8:]
    if outgoing and destination in peers:
        serial = _notify_serial(payload)
        return None if serial is None else ("notify", destination, serial, None, None)
    if not outgoing and source in peers and _is_soa_query(payload):
        return "soa_query", source, None, None, None
    return None


def packet_time(ancillary: list[tuple[int, int, bytes]], now: float, now_monotonic: float) -> float:
    """When the kernel took a packet, on the monotonic clock: its SO_TIMESTAMPNS stamp
    (wall clock) moved by how long ago that was. The thread reads packets when it gets to
    them, up to milliseconds late under load: a NOTIFY stamped on reading came after a 1 ms
    transfer it started was served (a negative duration). Without a stamp: now."""
    for level, kind, data in ancillary:
        if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS and len(data) >= TIMESPEC.size:
            seconds, nanoseconds = TIMESPEC.unpack_from(data)
            ago = now - (seconds + nanoseconds / 1e9)
            return now_monotonic - max(0.0, ago)
    return now_monotonic


def _notify_serial(payload: bytes) -> int | None:
    if len(payload) < 12:
        return None
    flags, _qdcount, ancount = struct.unpack_from("!HHH", payload, 2)
    if (flags >> 11) & 0xF != OPCODE_NOTIFY or flags & 0x8000:  # a query, not the answer
        return None
    if ancount == 0:
        return 0
    try:
        import dns.message

        message = dns.message.from_wire(payload, ignore_trailing=True, keyring=False)
        for rrset in message.answer:
            for rdata in rrset:
                serial = getattr(rdata, "serial", None)
                if serial is not None:
                    return int(serial)
    except Exception:  # a malformed packet is simply not the NOTIFY we wait for
        return None
    return 0


def _is_soa_query(payload: bytes) -> bool:
    """A standard query (QR 0, opcode 0) for type SOA: walk the question's name."""
    if len(payload) < 17:
        return False
    flags, qdcount = struct.unpack_from("!HH", payload, 2)
    if flags & 0x8000 or (flags >> 11) & 0xF or qdcount < 1:
        return False
    pos = 12
    while pos < len(payload):
        length = payload[pos]
        if length == 0:
            pos += 1
            break
        if length & 0xC0:
            return False  # no compression in a question of a first message
        pos += 1 + length
    return pos + 2 <= len(payload) and struct.unpack_from("!H", payload, pos)[0] == SOA


def first_notify(events: Iterable[WireEvent], serial: int, peer: str, since: float) -> float | None:
    """When the first NOTIFY to `peer` at or after `since` that may announce `serial` left.
    A NOTIFY without a serial (PowerDNS sends none) may announce any, so one that left
    before `since` (the last serial's, or its repeat) must not stand for the new one."""
    for event in events:
        if event.kind != "notify" or event.peer != peer or event.at < since:
            continue
        if event.serial == 0 or serial_ge(event.serial or 0, serial):
            return event.at
    return None


class WireWatch:
    """Context manager: watch the primary's wire in `netns` for its `peers` (secondaries'
    addresses). Events are kept for the watch's life, only those about peers."""

    def __init__(self, netns: str, peers: Collection[str]) -> None:
        self.netns = netns
        self.peers = frozenset(peers)
        self._events: list[WireEvent] = []
        # (kind, peer) -> the latest event's time, kept when the events are forgotten: what
        # settling asks (measure/quiet.py) stays true however few events are kept.
        self._latest: dict[tuple[str, str], float] = {}
        self.packets = 0  # what the filter let through to Python (its cost)
        self._cond = threading.Condition()
        self._stop = threading.Event()
        self._sock: socket.socket | None = None
        self._thread: threading.Thread | None = None

    def __enter__(self) -> WireWatch:
        sock = socket_in(self.netns, socket.AF_PACKET, socket.SOCK_DGRAM, socket.htons(ETH_P_ALL))
        program = _bpf()
        fprog = struct.pack("HL", len(program) // 8, _address_of(program))
        sock.setsockopt(socket.SOL_SOCKET, SO_ATTACH_FILTER, fprog)
        sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
        sock.settimeout(0.1)
        self._sock = sock
        self._thread = threading.Thread(target=self._read, name="wire-watch", daemon=True)
        self._thread.start()
        return self

    def _read(self) -> None:
        assert self._sock is not None
        while not self._stop.is_set():
            try:
                packet, ancillary, _, address = self._sock.recvmsg(65535, TIMESPEC.size + 64)
            except TimeoutError:
                continue
            except OSError:
                return
            seen_at = packet_time(ancillary, time.time(), time.monotonic())
            self.packets += 1
            if address[1] != ETH_P_IP:
                continue
            found = parse_packet(packet, address[2] == PACKET_OUTGOING, self.peers)
            if found is not None:
                kind, peer, *rest = found
                self.note(WireEvent(seen_at, kind, sys.intern(peer), *rest))  # one str a peer

    def note(self, event: WireEvent) -> None:
        """Keep `event` (the reading thread's, or a test's) and wake whoever waits."""
        with self._cond:
            self._events.append(event)
            key = (event.kind, event.peer)
            self._latest[key] = max(event.at, self._latest.get(key, event.at))
            self._cond.notify_all()

    def events(self, peer: str, since: float, until: float | None = None) -> list[WireEvent]:
        with self._cond:
            return [
                e
                for e in self._events
                if e.peer == peer and e.at >= since and (until is None or e.at <= until)
            ]

    def connect_ports(self, peer: str, since: float, until: float | None = None) -> list[int]:
        """The primary's ports `peer` connected to between two times (one per SYN seen):
        53 for TCP, 853 for XoT."""
        events = self.events(peer, since, until)
        return [e.to_port for e in events if e.kind == "connect" and e.to_port is not None]

    def wait_notify(
        self, serial: int, timeout: float, peer: str, since: float = 0.0
    ) -> float | None:
        """When the first NOTIFY for `serial` (or later) to `peer` left at or after `since`
        (monotonic), or None if none did within `timeout`."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                found = first_notify(self._events, serial, peer, since)
                if found is not None:
                    return found
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return None
                self._cond.wait(remaining)

    def last(self, kinds: Collection[str], peer: str | None = None) -> float | None:
        """When the latest event of one of `kinds` (to or from `peer`, or any) was seen,
        forgotten or not; None when there was none."""
        with self._cond:
            times = [
                at
                for (kind, whose), at in self._latest.items()
                if kind in kinds and (peer is None or whose == peer)
            ]
        return max(times) if times else None

    def forget_before(self, moment: float) -> None:
        """Drop what is older than `moment` (a long case keeps only what it still needs)."""
        with self._cond:
            self._events = [e for e in self._events if e.at >= moment]

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=1.0)
        if self._sock is not None:
            self._sock.close()


def _address_of(data: bytes) -> int:
    """The address of a bytes object's buffer, for the sock_fprog the kernel copies from
    during setsockopt (the object outlives the call)."""
    import ctypes

    buffer = ctypes.create_string_buffer(data, len(data))
    _KEEP.append(buffer)
    return ctypes.addressof(buffer)


_KEEP: list[object] = []
