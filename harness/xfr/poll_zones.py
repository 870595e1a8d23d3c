"""The many-zone SOA poller: when did a secondary first serve each of thousands of zones
(a cold start of 100 k zones), and how late may each be seen?

``wait_for_zones`` queries every pending zone once per round, all queries in flight on a few
UDP sockets; an answer's socket and message id name its zone and which of its last
``ATTEMPT_SLOTS`` queries it answers, and its question must be that zone's. A round over N
pending zones lasts ``max(interval, N / max_rate)``: the server receives
``min(N / interval, max_rate)`` queries per second (defaults: 5 per zone and second, at most
100 k/s, so a round over 100 k zones takes 1 s), and only zones not yet served are asked. A
query left unanswered for a retry timeout (from the answers' round trips, as TCP's RTO, and
backing off as it does) is taken as lost and asked again within the round, up to
``MAX_RESENDS`` times, so a lost packet costs a timeout, not a round. At most ``window``
queries are in flight: a server (or a poller) short of CPU stretches the round instead of
dropping queries.

Each zone's served time comes with its error bar (``ZonesServed.errors``, see
``harness.xfr.served_times.served_error``): the server began serving the zone between the
moment it answered the last query without the wanted serial, which is no earlier than that
query's send time (kept per query), and the first answer with it. A query that got no answer
says nothing about when the server switched, so it never narrows the bar: a lossy path
widens it. Answers are read as in ``harness.xfr.poll``; a truncated one is asked again over
TCP on another thread (``harness.xfr.soa_query.TcpFallback``), so the loop never waits for a
connection.
"""

from __future__ import annotations

import math
import select
import socket
import time
from array import array
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from harness.core.netns import socket_in
from harness.xfr import XfrTimeout
from harness.xfr import wire as w
from harness.xfr.serial import serial_ge
from harness.xfr.served_times import served_curve, served_distribution, served_error
from harness.xfr.soa_query import TcpFallback, address_family
from harness.xfr.soa_wire import fast_serial, name_wire, parse_soa_reply, soa_query_tail

DEFAULT_ZONES_INTERVAL = 0.2  # seconds: the shortest round, hence the finest resolution
DEFAULT_MAX_RATE = 100_000.0  # queries per second: a round over 100 k zones takes 1 s
DEFAULT_WINDOW = 256  # queries in flight: about what a server's UDP socket buffer holds
_SEND_SLICE = 0.001  # seconds of the round's queries sent per burst
_SOCKET_BUFFER = 4 << 20  # bytes; a burst of answers must not overflow the receive queue
ATTEMPT_BITS = 2  # low bits of a query's id: which of its zone's last queries it is
ATTEMPT_SLOTS = 1 << ATTEMPT_BITS
_ATTEMPT_MASK = ATTEMPT_SLOTS - 1
_ZONES_PER_SOCKET = 0x10000 >> ATTEMPT_BITS
MAX_RESENDS = 3  # queries of one zone asked again within a round, at most
RETRY_INITIAL = 0.1  # seconds: the retry timeout until an answer has been timed
RETRY_MIN = 0.02  # seconds: a local server answers in well under a millisecond


def zone_slot(zone: int, sockets: int) -> tuple[int, int]:
    """(socket, id of its first attempt) of the queries for zone number ``zone``: the id's
    high bits name the zone on its socket and its low ``ATTEMPT_BITS`` which of the zone's
    last queries it is, so an answer costs no lookup and a late answer still finds its zone
    and the time its query was sent."""
    return zone % sockets, (zone // sockets) << ATTEMPT_BITS


def slot_zone(sock: int, qid: int, sockets: int) -> tuple[int, int]:
    """(zone number, attempt slot) of an answer on socket ``sock`` with id ``qid`` (the
    inverse of ``zone_slot``); the caller checks that the question is that zone's."""
    return (qid >> ATTEMPT_BITS) * sockets + sock, qid & _ATTEMPT_MASK


def sockets_needed(zones: int, wanted: int) -> int:
    """At least ``wanted`` sockets, and enough that no socket has more zones than its
    message ids can name (16384, beside the attempt bits)."""
    return max(wanted, -(-zones // _ZONES_PER_SOCKET))


class RetryTimer:
    """How long a query may go unanswered before it is asked again: RFC 6298's estimate
    from the round trips of answered queries (smoothed RTT + 4 x its mean deviation),
    kept between ``floor`` and ``ceiling``."""

    def __init__(self, initial: float, floor: float, ceiling: float) -> None:
        self.floor, self.ceiling = floor, max(floor, ceiling)
        self.timeout = min(max(initial, self.floor), self.ceiling)
        self._srtt: float | None = None
        self._rttvar = 0.0

    def back_off(self) -> None:
        """A query went unanswered: wait twice as long for the next (RFC 6298, 5.5)."""
        self.timeout = min(2 * self.timeout, self.ceiling)

    def sample(self, rtt: float) -> None:
        if self._srtt is None:
            self._srtt, self._rttvar = rtt, rtt / 2
        else:
            self._rttvar = 0.75 * self._rttvar + 0.25 * abs(self._srtt - rtt)
            self._srtt = 0.875 * self._srtt + 0.125 * rtt
        self.timeout = min(max(self._srtt + 4 * self._rttvar, self.floor), self.ceiling)


class ZonesTimeout(XfrTimeout):
    """``wait_for_zones`` reached its deadline; ``result`` holds the zones served so far."""

    def __init__(self, message: str, result: ZonesServed) -> None:
        super().__init__(message)
        self.result = result


@dataclass
class ZonesServed:
    """What ``wait_for_zones`` saw. ``served`` maps each zone (as given) to the
    ``time.monotonic()`` of the first answer with a serial >= the wanted one; ``unserved``
    to the send time of the last query it answered without it (zones that answered none
    so are missing)."""

    served: dict[str, float]
    since: float
    rounds: int = 0
    queries: int = 0
    answers: int = 0  # answers matched to a query of ours (any rcode)
    resends: int = 0  # queries asked again within a round, after the retry timeout
    round_s: list[float] = field(default_factory=list)  # send span of each finished round
    unserved: dict[str, float] = field(default_factory=dict)

    def distribution(self) -> dict[str, float]:
        return served_distribution(self.served.values(), self.since)

    def curve(self, points: int = 50) -> list[list[float]]:
        return served_curve(self.served.values(), self.since, points)

    def errors(self, origin: float | None = None) -> dict[str, float]:
        """Each served zone's error bar (``served_error``), from ``origin`` (by default the
        wait's ``since``) at the earliest."""
        start = self.since if origin is None else origin
        return {
            zone: served_error(at, self.unserved.get(zone), start)
            for zone, at in self.served.items()
        }


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
    ``max(interval, pending / max_rate)`` seconds; a query left unanswered for the retry
    timeout (``RetryTimer``, at most ``interval``) is asked again at once, up to
    ``MAX_RESENDS`` times a round, and a late answer to an earlier query still counts (it
    shows what the server served when it answered). At most ``window`` queries are in
    flight (sent, not answered, younger than the retry timeout): a server slower than the
    pace stretches the round instead of overflowing its socket buffer, and one that stalls
    receives at most ``window`` queries per retry timeout, which backs off to ``interval``.
    The zones are shared by ``sockets`` UDP sockets (more when a socket would hold too many
    zones for its message ids, see ``zone_slot``; the question is checked too). A truncated
    answer is asked again over TCP on another thread. ``between_rounds(served, total)`` is
    called before each round;
    what it raises ends the wait (the runner checks that the server still runs). The
    deadline is ``since + timeout``; then ``ZonesTimeout`` (an ``XfrTimeout``) says how many
    zones are pending and the first of them with its last answer, and its ``result`` holds
    the zones served by then.
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
    if len({name_wire(zone).lower() for zone in zones}) != total:
        raise ValueError("wait_for_zones got the same zone twice")
    wanted = [serial] * total if isinstance(serial, int) else _per_zone(serial, zones)
    nsock = sockets_needed(total, sockets)
    # Per zone only its query (the question is its tail's, from byte 10: name, type,
    # class as sent) and its first id, compact: 100 k zones' lists of names, questions and
    # ids held some 16 MB more of the driver (a 100 k-member catalog's start).
    tails = [soa_query_tail(zone) for zone in zones]
    first_ids = array("I", (zone_slot(i, nsock)[1] for i in range(total)))
    served_at: list[float | None] = [None] * total
    unserved: list[float | None] = [None] * total  # last query answered without the serial
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
    pack = w.U16.pack
    sends = [sock.send for sock in socks]
    # Per zone and attempt slot (zone * ATTEMPT_SLOTS + slot): when that query was sent,
    # and whether it still awaits its answer (and holds a place in the window).
    sent_at = array("d", [0.0]) * (total * ATTEMPT_SLOTS)
    waiting = bytearray(total * ATTEMPT_SLOTS)
    next_attempt = bytearray(total)  # the slot of the zone's next query
    resent = bytearray(total)  # queries asked again since the zone's last round
    retry: deque[tuple[float, int]] = deque()  # (sent at, slot) of every query, oldest first
    again: deque[int] = deque()  # zones to ask again now
    outstanding = 0
    timer = RetryTimer(RETRY_INITIAL, RETRY_MIN, interval)
    tcp = TcpFallback()

    def ask(i: int, now: float) -> bool:
        """Send zone i's next query; False when it could not be sent."""
        nonlocal outstanding
        a = next_attempt[i]
        query = pack(first_ids[i] | a) + tails[i]
        try:
            sends[i % nsock](query)
        except ConnectionRefusedError:
            # The ICMP error of an earlier query (no server yet), reported by this send
            # and cleared: this query was not sent. Once more.
            try:
                sends[i % nsock](query)
            except OSError:
                return False
        except OSError:  # a full buffer: asked again later
            return False
        next_attempt[i] = (a + 1) & _ATTEMPT_MASK
        slot = i * ATTEMPT_SLOTS + a
        if not waiting[slot]:  # else it replaces the query of ATTEMPT_SLOTS ago
            waiting[slot] = 1
            outstanding += 1
        sent_at[slot] = now
        retry.append((now, slot))
        result.queries += 1
        return True

    def not_serving(i: int, sent: float, state: str) -> None:
        current = unserved[i]
        if current is None or sent > current:
            unserved[i] = sent
        last_state[i] = state

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
            i, a = slot_zone(k, (data[0] << 8) | data[1], nsock)
            if i >= total:
                continue
            state, truncated = None, False
            got = fast_serial(data, tails[i][10:])
            if got is None:  # not the common shape: read it in full
                try:
                    reply = parse_soa_reply(data)
                except w.WireError:
                    continue
                if reply.qname != tails[i][10:-4].lower() or reply.qtype != w.SOA:
                    continue  # the id of zone i, but not its question: not ours
                got, state, truncated = reply.serving, reply.state(), reply.truncated
            slot = i * ATTEMPT_SLOTS + a
            if waiting[slot]:
                waiting[slot] = 0
                outstanding -= 1
                timer.sample(arrived - sent_at[slot])
            result.answers += 1
            if served_at[i] is not None:
                continue
            if truncated:  # its serial over TCP, beside this loop
                tcp.ask(i, address, zones[i], port, netns)
            elif got is not None and serial_ge(got, wanted[i]):
                served_at[i] = arrived
                served_count += 1
            else:
                not_serving(i, sent_at[slot], state or f"serial {got}")

    def tcp_answers() -> None:
        nonlocal served_count
        for answer in tcp.done():
            i = answer.key
            assert isinstance(i, int)
            if served_at[i] is not None or answer.serial is None:
                continue  # no answer over TCP says nothing of when the server switched
            if serial_ge(answer.serial, wanted[i]):
                served_at[i] = answer.answered
                served_count += 1
            else:
                not_serving(i, answer.asked, f"serial {answer.serial}")

    def handle(events: list[tuple[int, int]]) -> None:
        for fd, _ in events:
            if fd == tcp.fd:
                tcp_answers()
            else:
                drain(slot_of_fd[fd])

    def finish() -> None:
        result.served = _served(zones, served_at)
        result.unserved = {zones[i]: t for i, t in enumerate(unserved) if t is not None}

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
        poller.register(tcp.fd, select.POLLIN)
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
                    finish()
                    raise ZonesTimeout(
                        _zones_timeout(result, zones, served_at, now, where, wanted, last_state),
                        result,
                    )
                overdue = now - timer.timeout
                while retry and retry[0][0] < overdue:
                    at, slot = retry.popleft()
                    if not waiting[slot] or sent_at[slot] != at:
                        continue  # answered (or its slot taken by a later query)
                    # Lost, as TCP takes a segment unacknowledged for its RTO: it leaves the
                    # window, the timer backs off (a stalled server gets ever fewer).
                    waiting[slot] = 0
                    outstanding -= 1
                    timer.back_off()
                    i, a = divmod(slot, ATTEMPT_SLOTS)
                    latest = next_attempt[i] == (a + 1) & _ATTEMPT_MASK
                    if latest and served_at[i] is None and resent[i] < MAX_RESENDS:
                        again.append(i)
                while again and outstanding < window:
                    i = again.popleft()
                    if served_at[i] is None and ask(i, now):
                        resent[i] += 1
                        result.resends += 1
                due = min(count, math.floor((now - began) / span * count) + burst)
                while sent < due and outstanding < window:
                    i = batch[sent]
                    sent += 1
                    if served_at[i] is not None:
                        continue
                    resent[i] = 0
                    last = i * ATTEMPT_SLOTS + ((next_attempt[i] - 1) & _ATTEMPT_MASK)
                    if waiting[last] and now - sent_at[last] < timer.timeout:
                        continue  # asked again a moment ago: that query is this round's
                    ask(i, now)
                handle(poller.poll(0))
                if served_count == total:
                    break
                end = began + span
                if sent >= count and now >= end:
                    break
                if sent >= count:
                    wake = end
                elif outstanding >= window:  # an answer, or the oldest query's timeout
                    wake = math.inf
                else:
                    wake = began + span * (sent / count)
                if retry:
                    wake = min(wake, retry[0][0] + timer.timeout)
                wait = max(0.0, min(wake, deadline) - monotonic())
                handle(poller.poll(wait * 1000))
            result.rounds += 1
            result.round_s.append(monotonic() - began)
            if served_count == total:
                break
            pending = [i for i in pending if served_at[i] is None]
    finally:
        for sock in socks:
            sock.close()
        tcp.close()
    finish()
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
