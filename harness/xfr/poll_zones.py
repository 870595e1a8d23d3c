"""The many-zone SOA poller: when did a secondary first serve each of thousands of zones
(a cold start of 100 k zones)?

``wait_for_zones`` queries every pending zone once per round, all queries in flight on a few
UDP sockets; an answer's socket and message id name its zone, and its question must be that
zone's. A round over N pending zones lasts ``max(interval, N / max_rate)``: the server
receives ``min(N / interval, max_rate)`` queries per second (defaults: 5 per zone and second,
at most 100 k/s, so a round over 100 k zones takes 1 s), and only zones not yet served are
asked. At most ``window`` queries are in flight: a server (or a poller) short of CPU
stretches the round instead of dropping queries. A zone's time is late by at most one round
(the rounds' lengths are in the result) plus one round trip. Answers are read as in
``harness.xfr.poll``.
"""

from __future__ import annotations

import math
import select
import socket
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from harness.core.netns import socket_in
from harness.xfr import XfrTimeout
from harness.xfr import wire as w
from harness.xfr.serial import serial_ge
from harness.xfr.served_times import served_curve, served_distribution
from harness.xfr.soa_query import address_family, tcp_soa_serial
from harness.xfr.soa_wire import fast_serial, name_wire, parse_soa_reply, soa_query_tail

DEFAULT_ZONES_INTERVAL = 0.2  # seconds: the shortest round, hence the finest resolution
DEFAULT_MAX_RATE = 100_000.0  # queries per second: a round over 100 k zones takes 1 s
DEFAULT_WINDOW = 256  # queries in flight: about what a server's UDP socket buffer holds
_SEND_SLICE = 0.001  # seconds of the round's queries sent per burst
_SOCKET_BUFFER = 4 << 20  # bytes; a burst of answers must not overflow the receive queue


def zone_slot(zone: int, sockets: int) -> tuple[int, int]:
    """(socket, message id) of every query for zone number ``zone``: the id names the zone
    on its socket, so an answer costs no lookup and a late answer still finds its zone."""
    return zone % sockets, zone // sockets


def slot_zone(sock: int, qid: int, sockets: int) -> int:
    """The zone number an answer on socket ``sock`` with id ``qid`` belongs to (the inverse
    of ``zone_slot``); the caller checks that the question is that zone's."""
    return qid * sockets + sock


def sockets_needed(zones: int, wanted: int) -> int:
    """At least ``wanted`` sockets, and enough that no socket has more than 65536 zones."""
    return max(wanted, -(-zones // 0x10000))


class ZonesTimeout(XfrTimeout):
    """``wait_for_zones`` reached its deadline; ``result`` holds the zones served so far."""

    def __init__(self, message: str, result: ZonesServed) -> None:
        super().__init__(message)
        self.result = result


@dataclass
class ZonesServed:
    """What ``wait_for_zones`` saw. ``served`` maps each zone (as given) to the
    ``time.monotonic()`` of the first answer with a serial >= the wanted one."""

    served: dict[str, float]
    since: float
    rounds: int = 0
    queries: int = 0
    answers: int = 0  # answers matched to a query of ours (any rcode)
    round_s: list[float] = field(default_factory=list)  # send span of each finished round

    def distribution(self) -> dict[str, float]:
        return served_distribution(self.served.values(), self.since)

    def curve(self, points: int = 50) -> list[list[float]]:
        return served_curve(self.served.values(), self.since, points)


def wait_for_zones(
    address: str,
    zones: Sequence[str],
    serial: int | Mapping[str, int],
    *,
    port: int = 53,
    netns: str | None = None,
    timeout: float,
    since: float,
    interval: float = DEFAULT_ZONES_INTERVAL,
    max_rate: float = DEFAULT_MAX_RATE,
    sockets: int = 2,
    window: int = DEFAULT_WINDOW,
    between_rounds: Callable[[int, int], None] | None = None,
) -> ZonesServed:
    """Poll every zone until ``address`` answers each with a serial >= ``serial`` (one for
    all, or one per zone; RFC 1982); return when each was first seen served.

    Each round queries every zone still pending, spread evenly over
    ``max(interval, pending / max_rate)`` seconds; a query that got no answer is asked
    again next round, and a late answer to an earlier round still counts (it shows what the
    server served when it answered). At most ``window`` queries are in flight (sent, not
    answered, younger than one round): a server slower than the pace stretches the round
    instead of overflowing its socket buffer, and one that stalls receives at most
    ``window`` queries a round. The zones are shared by ``sockets`` UDP sockets (more when
    a socket would hold over 65536 zones: the message id names the zone on its socket, see
    ``zone_slot``; the question is checked too). ``between_rounds(served, total)`` is called
    before each round; what it raises ends the wait (the runner checks that the server
    still runs). The deadline is ``since + timeout``; then ``ZonesTimeout`` (an
    ``XfrTimeout``) says how many zones are pending and the first of them with its last
    answer, and its ``result`` holds the zones served by then.
    """
    if interval <= 0 or max_rate <= 0 or sockets < 1 or window < 1:
        raise ValueError(
            "need interval > 0, max_rate > 0, sockets >= 1, window >= 1 "
            f"(got {interval}, {max_rate}, {sockets}, {window})"
        )
    total = len(zones)
    result = ZonesServed(served={}, since=since)
    if not total:
        return result
    qnames = [name_wire(zone).lower() for zone in zones]
    if len(set(qnames)) != total:
        raise ValueError("wait_for_zones got the same zone twice")
    wanted = [serial] * total if isinstance(serial, int) else _per_zone(serial, zones)
    nsock = sockets_needed(total, sockets)
    tails = [soa_query_tail(zone) for zone in zones]
    queries = [w.U16.pack(zone_slot(i, nsock)[1]) + tail for i, tail in enumerate(tails)]
    questions = [tail[10:] for tail in tails]  # name, type, class as sent
    served_at: list[float | None] = [None] * total
    last_state: list[str] = ["no answer"] * total  # for the timeout message
    deadline = since + timeout
    where = f"{address}#{port}" if port != 53 else address
    target = (address, port)
    socks = [socket_in(netns, address_family(address), socket.SOCK_DGRAM) for _ in range(nsock)]
    slot_of_fd = {sock.fileno(): k for k, sock in enumerate(socks)}
    poller = select.poll()
    pending = list(range(total))
    served_count = 0
    monotonic = time.monotonic
    sends = [sock.send for sock in socks]
    in_flight = bytearray(total)  # 1: a query of this zone awaits its answer
    flying: deque[tuple[float, int]] = deque()  # (sent at, zone), oldest first
    outstanding = 0

    def drain(k: int) -> None:
        nonlocal served_count, outstanding
        recv = socks[k].recv
        while True:
            try:
                data = recv(4096)
            except (BlockingIOError, InterruptedError):
                return
            except OSError:
                continue  # "connection refused": an ICMP error while the server is not up
            arrived = monotonic()
            if len(data) < 12:
                continue
            i = slot_zone(k, (data[0] << 8) | data[1], nsock)
            if i >= total:
                continue
            if in_flight[i]:
                in_flight[i] = 0
                outstanding -= 1
            got = fast_serial(data, questions[i])
            if got is None:  # not the common shape: read it in full
                try:
                    reply = parse_soa_reply(data)
                except w.WireError:
                    continue
                if reply.qname != qnames[i] or reply.qtype != w.SOA:
                    continue  # the id of zone i, but not its question: not ours
                got = reply.serving
                if reply.truncated:
                    got = tcp_soa_serial(address, zones[i], port, netns, 0.5)
                    arrived = monotonic()
                if got is None:
                    result.answers += 1
                    last_state[i] = reply.state()
                    continue
            result.answers += 1
            if served_at[i] is not None:
                continue
            if serial_ge(got, wanted[i]):
                served_at[i] = arrived
                served_count += 1
            else:
                last_state[i] = f"serial {got}"

    try:
        for sock in socks:
            sock.setblocking(False)
            # Connected: the kernel drops datagrams from anyone else, and send()/recv() skip
            # the address handling of sendto()/recvfrom() (a third of the per-query cost).
            sock.connect(target)
            for option, force in (
                (socket.SO_RCVBUF, getattr(socket, "SO_RCVBUFFORCE", 33)),
                (socket.SO_SNDBUF, getattr(socket, "SO_SNDBUFFORCE", 32)),
            ):
                try:  # root may exceed net.core.rmem_max (a global sysctl)
                    sock.setsockopt(socket.SOL_SOCKET, force, _SOCKET_BUFFER)
                except OSError:
                    sock.setsockopt(socket.SOL_SOCKET, option, _SOCKET_BUFFER)
            poller.register(sock, select.POLLIN)
        while True:
            if between_rounds is not None:
                between_rounds(served_count, total)
            batch = pending
            count = len(batch)
            span = max(interval, count / max_rate)
            burst = max(1, math.ceil(count * _SEND_SLICE / span))
            began = monotonic()
            sent = 0
            while True:
                now = monotonic()
                if now >= deadline:
                    result.served = _served(zones, served_at)
                    raise ZonesTimeout(
                        _zones_timeout(result, zones, served_at, now, where, wanted, last_state),
                        result,
                    )
                lost = now - span
                while flying and flying[0][0] < lost:
                    i = flying.popleft()[1]
                    if in_flight[i]:  # no answer in time: it no longer holds the window
                        in_flight[i] = 0
                        outstanding -= 1
                due = min(count, math.floor((now - began) / span * count) + burst)
                while sent < due and outstanding < window:
                    i = batch[sent]
                    sent += 1
                    if served_at[i] is not None:
                        continue
                    try:
                        sends[i % nsock](queries[i])
                    except ConnectionRefusedError:
                        # The ICMP error of an earlier query (no server yet), reported by
                        # this send and cleared: this query was not sent. Once more.
                        try:
                            sends[i % nsock](queries[i])
                        except OSError:
                            continue
                    except OSError:  # a full buffer: asked again next round
                        continue
                    result.queries += 1
                    if not in_flight[i]:
                        in_flight[i] = 1
                        outstanding += 1
                    flying.append((now, i))
                for fd, _ in poller.poll(0):
                    drain(slot_of_fd[fd])
                if served_count == total:
                    break
                end = began + span
                if sent >= count and now >= end:
                    break
                if sent >= count:
                    wake = end
                elif outstanding >= window:  # an answer, or the oldest query's loss
                    wake = flying[0][0] + span
                else:
                    wake = began + span * (sent / count)
                wait = max(0.0, min(wake, deadline) - monotonic())
                for fd, _ in poller.poll(wait * 1000):
                    drain(slot_of_fd[fd])
            result.rounds += 1
            result.round_s.append(monotonic() - began)
            if served_count == total:
                break
            pending = [i for i in pending if served_at[i] is None]
    finally:
        for sock in socks:
            sock.close()
    result.served = _served(zones, served_at)
    return result


def _served(zones: Sequence[str], served_at: list[float | None]) -> dict[str, float]:
    return {zone: t for zone, t in zip(zones, served_at, strict=True) if t is not None}


def _per_zone(serials: Mapping[str, int], zones: Sequence[str]) -> list[int]:
    missing = [zone for zone in zones if zone not in serials]
    if missing:
        raise ValueError(f"no wanted serial for {len(missing)} zones (first: {missing[0]})")
    return [serials[zone] for zone in zones]


def _zones_timeout(
    result: ZonesServed,
    zones: Sequence[str],
    served_at: list[float | None],
    now: float,
    where: str,
    wanted: list[int],
    last_state: list[str],
) -> str:
    pending = [i for i, t in enumerate(served_at) if t is None]
    first = pending[0]
    return (
        f"timeout after {now - result.since:.1f} s: {len(pending)} of {len(zones)} zones "
        f"not serving their serial at {where} (first: {zones[first]} wants serial "
        f"{wanted[first]}, last answer: {last_state[first]}); see the secondary's log for "
        "failed transfers, or raise the scenario's timeout"
    )
