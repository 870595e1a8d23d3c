"""SOA pollers: when did a secondary start answering the new serial?

``wait_for_serial`` keeps one UDP socket (created inside the server's netns, see
``harness.netns``) and sends an SOA query every ``interval`` seconds; answers to any of its
recent queries count, so a path slower than the interval still works. The time it returns is
the ``time.monotonic()`` at which the first answer with a serial >= the wanted one arrived:
an upper bound of the moment the secondary started serving it, late by at most one
interval plus one round trip.
"""

from __future__ import annotations

import contextlib
import random
import select
import socket
import time
from typing import Any

from harness.netns import socket_in
from harness.xfr import XfrTimeout
from harness.xfr import wire as w
from harness.xfr.serial import serial_ge

MAX_INTERVAL = 0.010  # seconds; finer polling is the point of this module
_OUTSTANDING = 4096  # query ids remembered while waiting


def _family(address: str) -> int:
    return socket.AF_INET6 if ":" in address else socket.AF_INET


def soa_query(zone: str, qid: int) -> bytes:
    """Wire form of a plain SOA query for ``zone`` with message id ``qid``."""
    import dns.message
    import dns.rdatatype

    query = dns.message.make_query(zone, dns.rdatatype.SOA)
    query.id = qid
    query.flags &= ~0x0100  # no RD: we ask the authoritative server itself
    return query.to_wire()


def parse_soa_answer(data: bytes, zone: str) -> tuple[int, int | None, bool]:
    """(message id, serial or None, truncated) of an answer to an SOA query.

    None when the answer is not an authoritative NOERROR answer carrying the zone's SOA
    (SERVFAIL while loading, REFUSED, NOTAUTH, a referral, a non-authoritative cache).
    """
    import dns.exception
    import dns.message
    import dns.name
    import dns.rdatatype

    header = w.parse_header(data)
    if header.truncated:
        return header.id, None, True
    if not header.is_response or header.rcode != 0 or not header.authoritative:
        return header.id, None, False
    try:
        msg = dns.message.from_wire(data, keyring=False, ignore_trailing=True)
    except dns.exception.DNSException:
        return header.id, None, False
    origin = dns.name.from_text(zone)
    for rrset in msg.answer:
        if rrset.rdtype == dns.rdatatype.SOA and rrset.name == origin and len(rrset):
            return header.id, int(rrset[0].serial), False
    return header.id, None, False


def _tcp_soa(address: str, zone: str, port: int, netns: str | None, timeout: float) -> int | None:
    qid = random.getrandbits(16)
    sock = socket_in(netns, _family(address), socket.SOCK_STREAM)
    try:
        sock.settimeout(timeout)
        sock.connect((address, port))
        sock.sendall(w.frame(soa_query(zone, qid)))
        buf = b""
        while True:
            messages, _ = w.split_messages(buf)
            if messages:
                got_id, serial, _ = parse_soa_answer(messages[0], zone)
                return serial if got_id == qid else None
            chunk = sock.recv(65536)
            if not chunk:
                return None
            buf += chunk
    except (OSError, w.WireError):
        return None
    finally:
        sock.close()


def query_soa_serial(
    address: str,
    zone: str,
    *,
    port: int = 53,
    netns: str | None = None,
    timeout: float = 0.5,
) -> int | None:
    """The serial ``address`` serves for ``zone``, or None (no answer in ``timeout``, not
    authoritative, SERVFAIL, REFUSED...). UDP first, TCP when the answer is truncated."""
    qid = random.getrandbits(16)
    deadline = time.monotonic() + timeout
    sock = socket_in(netns, _family(address), socket.SOCK_DGRAM)
    try:
        sock.connect((address, port))  # connected: ICMP errors surface, strangers are dropped
        sock.send(soa_query(zone, qid))
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return None
            sock.settimeout(remaining)
            data = sock.recv(65535)
            with contextlib.suppress(w.WireError):
                got_id, serial, truncated = parse_soa_answer(data, zone)
                if got_id != qid:
                    continue
                if truncated:
                    return _tcp_soa(address, zone, port, netns, max(0.05, remaining))
                return serial
    except OSError:  # timeout, connection refused (ICMP port unreachable), no route
        return None
    finally:
        sock.close()


def wait_for_serial(
    address: str,
    zone: str,
    serial: int,
    *,
    port: int = 53,
    netns: str | None = None,
    interval: float = 0.005,
    timeout: float,
    since: float,
) -> float:
    """Poll until ``address`` answers a serial >= ``serial`` (RFC 1982); return the
    ``time.monotonic()`` of that answer. ``since`` is the monotonic time the wait is
    measured from (the trigger); the deadline is ``since + timeout``.

    Raises ``XfrTimeout`` ("timeout after 12.3 s waiting for serial N from ADDR").
    """
    if not 0 < interval <= MAX_INTERVAL:
        raise ValueError(f"interval must be in (0, {MAX_INTERVAL}] s, got {interval}")
    deadline = since + timeout
    where = f"{address}#{port}" if port != 53 else address
    sock = socket_in(netns, _family(address), socket.SOCK_DGRAM)
    outstanding: dict[int, None] = {}  # ids of queries sent, oldest first
    last_seen: Any = None
    try:
        sock.setblocking(False)
        # Not connected: an ICMP "port unreachable" while the server (re)starts must not
        # end the wait; answers from other addresses are filtered below.
        target = (address, port)
        next_send = time.monotonic()
        while True:
            now = time.monotonic()
            if now >= deadline:
                seen = "" if last_seen is None else f" (last answer: serial {last_seen})"
                raise XfrTimeout(
                    f"timeout after {now - since:.1f} s waiting for serial {serial} "
                    f"from {where}{seen}"
                )
            if now >= next_send:
                qid = random.getrandbits(16)
                outstanding.pop(qid, None)
                outstanding[qid] = None
                if len(outstanding) > _OUTSTANDING:
                    del outstanding[next(iter(outstanding))]
                with contextlib.suppress(BlockingIOError, OSError):
                    sock.sendto(soa_query(zone, qid), target)
                next_send = now + interval
            ready, _, _ = select.select([sock], [], [], max(0.0, min(next_send, deadline) - now))
            if not ready:
                continue
            while True:
                try:
                    data, peer = sock.recvfrom(65535)
                except (BlockingIOError, InterruptedError):
                    break
                except OSError:
                    break  # an ICMP error queued on the socket; keep polling
                arrived = time.monotonic()
                if peer[0] != address and not _same_address(peer[0], address):
                    continue
                try:
                    got_id, got, truncated = parse_soa_answer(data, zone)
                except w.WireError:
                    continue
                if got_id not in outstanding:
                    continue
                if truncated:
                    got = _tcp_soa(address, zone, port, netns, 0.5)
                    arrived = time.monotonic()
                if got is None:
                    continue
                last_seen = got
                if serial_ge(got, serial):
                    return arrived
    finally:
        sock.close()


def _same_address(a: str, b: str) -> bool:
    try:
        family = _family(b)
        return socket.inet_pton(family, a) == socket.inet_pton(family, b)
    except OSError:
        return False
