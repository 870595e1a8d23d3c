"""Timestamp the primary's own NOTIFY as it leaves its host.

A server sends NOTIFY some time after it starts serving a new serial (BIND queues it on its
zone timer: 0 to 0.4 s here), so "the primary serves serial N" is no stand-in for "NOTIFY
sent". An AF_PACKET socket in the primary's namespace sees the packet on its way out; the
NOTIFY's SOA carries the serial, so a retransmission or an older NOTIFY is not mistaken for
the one that announced the change.
"""

from __future__ import annotations

import socket
import struct
import threading
import time
from collections.abc import Collection
from types import TracebackType

from harness.netns import socket_in
from harness.xfr.serial import serial_ge

ETH_P_ALL = 0x0003  # outgoing packets reach only 'all protocols' taps
ETH_P_IP = 0x0800
PACKET_OUTGOING = 4
OPCODE_NOTIFY = 4


def notify_serial(ip_packet: bytes, destinations: Collection[str]) -> tuple[str, int] | None:
    """If this IPv4 packet is a DNS NOTIFY to one of `destinations` (over UDP, or over TCP as
    Knot sends it), that destination and the serial it announces (0 when it carries no SOA);
    otherwise None. Pure function over the packet bytes."""
    if len(ip_packet) < 20 or ip_packet[0] >> 4 != 4:
        return None
    destination = socket.inet_ntoa(ip_packet[16:20])
    if destination not in destinations:
        return None
    ihl = (ip_packet[0] & 0x0F) * 4
    transport = ip_packet[ihl:]
    if ip_packet[9] == socket.IPPROTO_UDP:
        if len(transport) < 8 or struct.unpack_from("!H", transport, 2)[0] != 53:
            return None
        payload = transport[8:]
    elif ip_packet[9] == socket.IPPROTO_TCP:
        if len(transport) < 20 or struct.unpack_from("!H", transport, 2)[0] != 53:
            return None
        # DNS over TCP: a 2-byte length, then the message (a NOTIFY fits one segment).
        payload = transport[(transport[12] >> 4) * 4 + 2 :]
    else:
        return None
    serial = _notify_message_serial(payload)
    return None if serial is None else (destination, serial)


def _notify_message_serial(payload: bytes) -> int | None:
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


class NotifyWatch:
    """Context manager: watch NOTIFYs leaving `netns` for `destinations` (a primary's
    secondaries); `wait(serial, timeout, destination)` gives the monotonic time the first
    one to that destination announcing `serial` (or later) went out."""

    def __init__(self, netns: str, destinations: str | Collection[str]) -> None:
        self.netns = netns
        self.destinations = {destinations} if isinstance(destinations, str) else set(destinations)
        self._seen: list[tuple[float, str, int]] = []
        self._cond = threading.Condition()
        self._stop = threading.Event()
        self._sock: socket.socket | None = None
        self._thread: threading.Thread | None = None

    def __enter__(self) -> NotifyWatch:
        self._sock = socket_in(
            self.netns, socket.AF_PACKET, socket.SOCK_DGRAM, socket.htons(ETH_P_ALL)
        )
        self._sock.settimeout(0.1)
        self._thread = threading.Thread(target=self._read, name="notify-watch", daemon=True)
        self._thread.start()
        return self

    def _read(self) -> None:
        assert self._sock is not None
        while not self._stop.is_set():
            try:
                packet, address = self._sock.recvfrom(65535)
            except TimeoutError:
                continue
            except OSError:
                return
            seen_at = time.monotonic()
            if address[2] != PACKET_OUTGOING or address[1] != ETH_P_IP:
                continue
            found = notify_serial(packet, self.destinations)
            if found is not None:
                with self._cond:
                    self._seen.append((seen_at, *found))
                    self._cond.notify_all()

    def wait(self, serial: int, timeout: float, destination: str | None = None) -> float | None:
        """When the NOTIFY for `serial` left (to `destination`, or to any of them), or None if
        none did within `timeout`."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                for seen_at, to, announced in self._seen:
                    if destination not in (None, to):
                        continue
                    if announced == 0 or serial_ge(announced, serial):
                        return seen_at
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return None
                self._cond.wait(remaining)

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
