"""SOA pollers: when did a secondary start answering the new serial, and how late may we
have seen it?

``wait_for_serial`` keeps one UDP socket (created inside the server's netns, see
``harness.core.netns``) and sends an SOA query every ``interval`` seconds; answers to any of its
recent queries count, so a path slower than the interval still works. The time it returns is
the ``time.monotonic()`` at which the first answer with a serial >= the wanted one arrived:
an upper bound of the moment the secondary started serving it, late by at most one
interval plus one round trip. ``wait_for_serials`` polls many servers (a fleet) so, in one
loop, and says for each served time its error bar's start: the server began serving between
the moment it answered the last query without the wanted serial, which is no earlier than
that query's send time (kept per query id), and the first answer with it
(``harness.xfr.served_times.served_error``). A query that got no answer says nothing about
when the server switched, so it never narrows the bar.

Many zones of one server (a cold start) are polled by ``harness.xfr.poll_zones``. Answers are
read without dnspython by the pure functions of ``harness.xfr.soa_wire``: ``fast_serial`` for
the common clean answer, ``parse_soa_reply`` for everything else. A truncated answer is asked
again over TCP on another thread (``harness.xfr.soa_query.TcpFallback``), so the loop never
waits for a connection.
"""

from __future__ import annotations

import contextlib
import math
import random
import select
import socket
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from harness.core.netns import socket_in
from harness.xfr import XfrTimeout
from harness.xfr import wire as w
from harness.xfr.serial import serial_ge
from harness.xfr.soa_query import TcpFallback, address_family
from harness.xfr.soa_wire import (
    fast_serial,
    name_wire,
    parse_soa_answer,
    parse_soa_reply,
    soa_query,
    soa_query_tail,
)

MAX_INTERVAL = 0.010  # seconds; finer polling is the point of this module
_OUTSTANDING = 4096  # query ids remembered while waiting


# --- one zone, one server -----------------------------------------------------------------


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
    sock = socket_in(netns, address_family(address), socket.SOCK_DGRAM)
    outstanding: dict[int, None] = {}  # ids of queries sent, oldest first
    last_seen: Any = None
    tcp = TcpFallback()
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
            wait = max(0.0, min(next_send, deadline) - now)
            ready, _, _ = select.select([sock, tcp.fd], [], [], wait)
            if tcp.fd in ready:
                for answer in tcp.done():
                    if answer.serial is not None:
                        last_seen = answer.serial
                        if serial_ge(answer.serial, serial):
                            return answer.answered
            if sock not in ready:
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
                if truncated:  # asked again over TCP, beside this loop
                    tcp.ask(0, address, zone, port, netns)
                    continue
                if got is None:
                    continue
                last_seen = got
                if serial_ge(got, serial):
                    return arrived
    finally:
        sock.close()
        tcp.close()


def _same_address(a: str, b: str) -> bool:
    try:
        family = address_family(b)
        return socket.inet_pton(family, a) == socket.inet_pton(family, b)
    except OSError:
        return False


# --- many servers at once ----------------------------------------------------------------


@dataclass
class SerialsSeen:
    """When each server first answered the wanted serial, and how finely it was polled."""

    served: dict[str, float]  # name -> time.monotonic() of that answer
    max_gap_s: dict[str, float]  # name -> the longest wait between two of its queries
    # name -> send time of the last query it answered without the wanted serial (an older
    # one, or an error): the error bar's start (``served_error``); missing: it answered none
    unserved: dict[str, float] = field(default_factory=dict)


def wait_for_serials(
    targets: Mapping[str, tuple[str, str | None]],
    zone: str,
    serial: int,
    *,
    deadline: float,
    port: int = 53,
    interval: float = 0.005,
    between: Callable[[], None] | None = None,
    between_every: float = 1.0,
    straggle: float | None = None,
) -> SerialsSeen:
    """Poll every target (name -> (address, netns)) every `interval` until each answers a
    serial >= `serial` (RFC 1982) or `deadline` (monotonic) passes: one UDP socket per
    target, created in its own namespace, all in one select loop, so that a fleet of 100
    secondaries is polled as finely as one. Each query's send time is kept by its id, so
    that the last one answered without the serial starts the served time's error bar. A
    truncated answer is asked again over TCP on another thread. Targets that did not serve
    by the deadline are missing from `served`. `between` runs about every `between_every`
    seconds (the caller checks that the servers are alive; it may raise). `straggle`: once
    one target served, the others get this long more at most (the deadline comes sooner)."""
    if not 0 < interval <= MAX_INTERVAL:
        raise ValueError(f"interval must be in (0, {MAX_INTERVAL}] s, got {interval}")
    socks: dict[int, tuple[str, socket.socket]] = {}
    tail = soa_query_tail(zone)  # every query but its id, built once (a fleet sends 3 k/s)
    question = tail[10:]  # name, type, class as sent
    pack_id = w.U16.pack
    qname = name_wire(zone).lower()
    tcp = TcpFallback()
    try:
        for name, (address, netns) in targets.items():
            sock = socket_in(netns, address_family(address), socket.SOCK_DGRAM)
            sock.setblocking(False)
            socks[sock.fileno()] = (name, sock)
        addresses = {name: (address, port) for name, (address, _) in targets.items()}
        sent: dict[str, dict[int, float]] = {name: {} for name in targets}  # id -> sent at
        served: dict[str, float] = {}
        unserved: dict[str, float] = {}
        last_send: dict[str, float] = {}
        gaps: dict[str, float] = dict.fromkeys(targets, 0.0)

        def answered(name: str, got: int | None, asked: float, arrived: float) -> None:
            if got is not None and serial_ge(got, serial):
                served[name] = arrived
            elif asked > unserved.get(name, -math.inf):
                unserved[name] = asked

        next_send = next_check = time.monotonic()
        while len(served) < len(targets):
            now = time.monotonic()
            if straggle is not None and served:
                deadline = min(deadline, min(served.values()) + straggle)
            if now >= deadline:
                break
            if between is not None and now >= next_check:
                between()
                next_check = now + between_every
            if now >= next_send:
                for name, sock in socks.values():
                    if name in served:
                        continue
                    qid = random.getrandbits(16)
                    ids = sent[name]
                    ids.pop(qid, None)
                    if len(ids) >= _OUTSTANDING:
                        del ids[next(iter(ids))]
                    ids[qid] = now
                    with contextlib.suppress(BlockingIOError, OSError):
                        sock.sendto(pack_id(qid) + tail, addresses[name])
                    if name in last_send:
                        gaps[name] = max(gaps[name], now - last_send[name])
                    last_send[name] = now
                next_send = now + interval
            pending = [sock for name, sock in socks.values() if name not in served]
            wait = max(0.0, min(next_send, deadline) - time.monotonic())
            ready, _, _ = select.select([*pending, tcp.fd], [], [], wait)
            for sock in ready:
                if sock == tcp.fd:
                    for answer in tcp.done():
                        name = str(answer.key)
                        if answer.serial is not None and name not in served:
                            answered(name, answer.serial, answer.asked, answer.answered)
                    continue
                name = socks[sock.fileno()][0]
                while name not in served:
                    try:
                        data, peer = sock.recvfrom(65535)
                    except (BlockingIOError, InterruptedError, OSError):
                        break  # drained, or an ICMP error while the server (re)starts
                    arrived = time.monotonic()
                    if peer[0] != addresses[name][0] or len(data) < 12:
                        continue
                    got = fast_serial(data, question)
                    truncated = False
                    if got is None:  # not the common shape: read it in full
                        try:
                            reply = parse_soa_reply(data)
                        except w.WireError:
                            continue
                        if reply.qname != qname or reply.qtype != w.SOA:
                            continue
                        got, truncated = reply.serving, reply.truncated
                    asked = sent[name].get(w.U16.unpack_from(data, 0)[0])
                    if asked is None:
                        continue  # not an answer to a query of ours
                    if truncated:  # its serial over TCP, beside this loop
                        tcp.ask(name, addresses[name][0], zone, port, targets[name][1])
                        continue
                    answered(name, got, asked, arrived)
        return SerialsSeen(served, gaps, unserved)
    finally:
        for _, sock in socks.values():
            sock.close()
        tcp.close()
