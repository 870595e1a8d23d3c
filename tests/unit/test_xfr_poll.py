"""Pure parts of the SOA pollers: query building, answer parsing, matching, distributions.

Answers are built with dnspython (an independent encoder) or by hand where dnspython would
not produce the shape (an uncompressed owner, a compressed question).
"""

from __future__ import annotations

import functools
import socket
import struct
import threading
import time

import dns.edns
import dns.flags
import dns.message
import dns.name
import dns.rcode
import dns.rdatatype
import dns.rrset
import pytest

from harness.xfr import XfrTimeout
from harness.xfr import wire as w
from harness.xfr.poll_zones import (
    ATTEMPT_BITS,
    ATTEMPT_SLOTS,
    ZonesTimeout,
    slot_zone,
    sockets_needed,
    wait_for_zones,
    zone_slot,
)
from harness.xfr.served_times import served_curve, served_distribution
from harness.xfr.soa_wire import (
    fast_serial,
    name_wire,
    parse_soa_answer,
    parse_soa_reply,
    soa_query,
)

ZONE = "Zone-7.Hosting.Example."
SOA_TEXT = "ns1.hosting.example. hostmaster.hosting.example. {} 900 300 604800 900"


def _answer(
    zone: str = ZONE,
    serial: int | None = 2024010101,
    *,
    qid: int = 4242,
    rcode: int = dns.rcode.NOERROR,
    aa: bool = True,
    edns: bool = False,
    owner: str | None = None,
    extra_answer: bool = False,
) -> bytes:
    query = dns.message.make_query(zone, "SOA", use_edns=0 if edns else None)
    query.id = qid
    response = dns.message.make_response(query)
    response.set_rcode(rcode)
    if aa:
        response.flags |= dns.flags.AA
    if extra_answer:  # a record before the SOA: the parser must walk past it
        response.answer.append(dns.rrset.from_text(zone, 300, "IN", "TXT", '"first"'))
    if serial is not None:
        response.answer.append(
            dns.rrset.from_text(owner or zone, 3600, "IN", "SOA", SOA_TEXT.format(serial))
        )
        response.authority.append(dns.rrset.from_text(zone, 3600, "IN", "NS", "ns1.example."))
    return response.to_wire()


def test_query_matches_dnspython() -> None:
    ours = dns.message.from_wire(soa_query(ZONE, 513))
    assert ours.id == 513 and ours.flags == 0  # no RD, no EDNS
    assert ours.question[0].name == dns.name.from_text(ZONE)
    assert ours.question[0].rdtype == dns.rdatatype.SOA
    assert name_wire(ZONE) == dns.name.from_text(ZONE).to_wire()
    assert name_wire(r"a\.b.example.") == dns.name.from_text(r"a\.b.example.").to_wire()
    assert name_wire(".") == b"\x00"
    with pytest.raises(ValueError, match="label"):
        name_wire("a..b.")
    with pytest.raises(ValueError, match="255"):
        name_wire(".".join(["x" * 60] * 5))


def test_compressed_answer_with_authority() -> None:
    data = _answer()
    assert b"\xc0\x0c" in data  # dnspython compresses the SOA owner to the question name
    reply = parse_soa_reply(data)
    assert reply.id == 4242 and reply.qtype == w.SOA
    assert reply.qname == name_wire(ZONE).lower()
    assert reply.serial == 2024010101 and reply.serving == 2024010101
    assert reply.state() == "serial 2024010101"


def test_answer_with_opt_and_a_record_before_the_soa() -> None:
    data = _answer(edns=True, extra_answer=True)
    assert dns.message.from_wire(data).edns == 0  # an OPT record is present
    assert parse_soa_reply(data).serving == 2024010101


def test_uncompressed_owner_in_other_case() -> None:
    # Header, question, then the SOA with its owner written out in full and in upper case.
    question = name_wire(ZONE) + struct.pack("!HH", w.SOA, 1)
    rdata = b"\x02ns\xc0\x0c\x02hm\xc0\x0c" + struct.pack("!IIIII", 77, 1, 2, 3, 4)
    record = name_wire(ZONE.upper()) + struct.pack("!HHIH", w.SOA, 1, 60, len(rdata)) + rdata
    data = struct.pack("!HHHHHH", 9, 0x8400, 1, 1, 0, 0) + question + record
    assert parse_soa_reply(data).serving == 77


@pytest.mark.parametrize(
    ("rcode", "name"),
    [
        (dns.rcode.NOTAUTH, "NOTAUTH"),
        (dns.rcode.SERVFAIL, "SERVFAIL"),
        (dns.rcode.REFUSED, "REFUSED"),
    ],
)
def test_error_rcodes_are_not_serving(rcode: int, name: str) -> None:
    reply = parse_soa_reply(_answer(serial=None, rcode=rcode, aa=False))
    assert reply.rcode == rcode and reply.serving is None and reply.state() == name
    assert reply.qname == name_wire(ZONE).lower()  # still matched to its zone


def test_not_authoritative_referral_and_foreign_soa() -> None:
    assert parse_soa_reply(_answer(aa=False)).serving is None
    assert parse_soa_reply(_answer(aa=False)).state() == "not authoritative"
    # The parent's SOA in answer to the child's question: not the zone's serial.
    foreign = parse_soa_reply(_answer(owner="hosting.example."))
    assert foreign.serial is None and foreign.state() == "no SOA in the answer"


def test_truncated_answer() -> None:
    data = bytearray(_answer(serial=None))
    struct.pack_into("!H", data, 2, struct.unpack_from("!H", data, 2)[0] | w.FLAG_TC)
    reply = parse_soa_reply(bytes(data))
    assert reply.truncated and reply.serving is None and reply.state() == "truncated"
    assert parse_soa_answer(bytes(data), ZONE) == (4242, None, True)


def test_parse_soa_answer_checks_the_question() -> None:
    assert parse_soa_answer(_answer(), ZONE.lower()) == (4242, 2024010101, False)
    assert parse_soa_answer(_answer(), "other.example.") == (4242, None, False)


@pytest.mark.parametrize(
    ("data", "problem"),
    [
        (b"\x00" * 11, "shorter than a DNS header"),
        (soa_query(ZONE, 1), "is a query"),
        (_answer()[: _answer().index(struct.pack("!I", 2024010101)) + 2], "past the end"),
        (_answer()[:20], "past the end"),  # cut inside the question
        (struct.pack("!HHHHHH", 1, 0x8000, 1, 0, 0, 0) + b"\xc0\x0c\x00\x06\x00\x01", "label"),
    ],
)
def test_malformed_answers_raise(data: bytes, problem: str) -> None:
    with pytest.raises(w.WireError, match=problem):
        parse_soa_reply(data)


def test_answer_without_question() -> None:
    formerr = struct.pack("!HHHHHH", 5, 0x8001, 0, 0, 0, 0)
    reply = parse_soa_reply(formerr)
    assert reply.qname == b"" and reply.state() == "FORMERR"


def test_zone_slots_are_unique_and_invertible() -> None:
    for zones, wanted in ((10, 2), (100_000, 2), (200_000, 1)):
        sockets = sockets_needed(zones, wanted)
        assert sockets >= wanted and zones <= sockets * (0x10000 >> ATTEMPT_BITS)
        ids = {
            (sock, first | attempt)
            for sock, first in (zone_slot(i, sockets) for i in range(0, zones, 7))
            for attempt in range(ATTEMPT_SLOTS)
        }
        assert len(ids) == len(range(0, zones, 7)) * ATTEMPT_SLOTS
        assert all(0 <= qid <= 0xFFFF for _, qid in ids)
        for i in range(0, zones, 7):
            sock, first = zone_slot(i, sockets)
            for attempt in range(ATTEMPT_SLOTS):
                assert slot_zone(sock, first | attempt, sockets) == (i, attempt)
    assert sockets_needed(100_000, 2) == 7 and sockets_needed(200_000, 2) == 13


@pytest.mark.parametrize(
    "data",
    [
        _answer(),
        _answer(edns=True),
        _answer(serial=0),
        _answer(serial=0xFFFFFFFF),
    ],
)
def test_fast_path_agrees_with_the_full_parse(data: bytes) -> None:
    question = soa_query(ZONE, 0)[12:]
    assert fast_serial(data, question) is not None
    assert fast_serial(data, question) == parse_soa_reply(data).serving


@pytest.mark.parametrize(
    "data",
    [
        _answer(extra_answer=True),  # SOA not first: the full parse finds it
        _answer(serial=None, rcode=dns.rcode.SERVFAIL, aa=False),
        _answer(serial=None, rcode=dns.rcode.NOTAUTH),
        _answer(aa=False),
        _answer(owner="hosting.example."),
        _answer(ZONE.lower()),  # the question in other case than asked
        _answer("other.example."),
        _answer()[:40],
        b"",
    ],
)
def test_fast_path_declines_other_shapes(data: bytes) -> None:
    assert fast_serial(data, soa_query(ZONE, 0)[12:]) is None


def test_fast_path_declines_truncated() -> None:
    data = bytearray(_answer())
    data[2] |= w.FLAG_TC >> 8
    assert fast_serial(bytes(data), soa_query(ZONE, 0)[12:]) is None


def test_distribution_nearest_rank() -> None:
    since = 100.0
    times = [since + t for t in (5.0, 1.0, 3.0, 2.0, 4.0, 6.0, 7.0, 8.0, 9.0, 10.0)]
    dist = served_distribution(times, since)
    assert dist == {"first": 1.0, "p50": 5.0, "p95": 10.0, "last": 10.0}
    twenty = served_distribution([since + t for t in range(1, 21)], since)
    assert twenty["p95"] == 19.0 and twenty["p50"] == 10.0
    assert served_distribution([], since) == {}


def test_curve_counts_zones_served_by_each_point() -> None:
    since = 50.0
    times = [since + t for t in (0.1, 0.2, 0.2, 1.0, 4.0)]
    curve = served_curve(times, since, points=4)
    assert curve == [[1.0, 4], [2.0, 4], [3.0, 4], [4.0, 5]]
    assert served_curve([], since) == []
    counts = [n for _, n in served_curve([since + i / 7 for i in range(1, 100)], since, 13)]
    assert counts == sorted(counts) and counts[-1] == 99
    with pytest.raises(ValueError):
        served_curve(times, since, points=0)


# --- the poller against a real UDP responder on loopback (no root needed) ----------------


class Responder:
    """A UDP server on 127.0.0.1 answering SOA queries with dnspython: serials per zone,
    REFUSED for unknown zones, and the first query of every zone dropped (a lost packet)
    unless ``drop_first`` is False. A zone's first ``old_answers`` answers carry
    ``old_serial``; zones in ``truncate`` are answered truncated over UDP and in full over
    TCP on the same port, ``tcp_delay`` seconds after the question. ``log`` holds per zone
    (time.monotonic() of the answer, serial answered) for every answer with a serial."""

    def __init__(
        self,
        serials: dict[str, int],
        *,
        drop_first: bool = True,
        old_answers: int = 0,
        old_serial: int = 0,
        truncate: frozenset[str] = frozenset(),
        tcp_delay: float = 0.0,
        address: str = "127.0.0.1",
        port: int = 0,
    ) -> None:
        self.serials = {dns.name.from_text(k): v for k, v in serials.items()}
        self.drop_first, self.old_answers, self.old_serial = drop_first, old_answers, old_serial
        self.truncate = {dns.name.from_text(k) for k in truncate}
        self.tcp_delay = tcp_delay
        while True:  # a port free for both UDP and TCP
            self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            self.sock.bind((address, port))
            self.port = self.sock.getsockname()[1]
            self.tcp = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            try:
                self.tcp.bind((address, self.port))
                break
            except OSError:
                self.sock.close()
                self.tcp.close()
        self.tcp.listen(8)
        self.tcp.settimeout(0.1)
        self.sock.settimeout(0.1)
        self.seen: set[dns.name.Name] = set()
        self.answered: dict[dns.name.Name, int] = {}
        self.log: dict[str, list[tuple[float, int]]] = {}
        self.queries = 0
        self._stop = threading.Event()
        self._threads = [
            threading.Thread(target=self._run, daemon=True),
            threading.Thread(target=self._run_tcp, daemon=True),
        ]

    def __enter__(self) -> Responder:
        for thread in self._threads:
            thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join()
        self.sock.close()
        self.tcp.close()

    def _response(self, query: dns.message.Message) -> dns.message.Message:
        name = query.question[0].name
        response = dns.message.make_response(query)
        if name not in self.serials:
            response.set_rcode(dns.rcode.REFUSED)
            return response
        count = self.answered[name] = self.answered.get(name, 0) + 1
        serial = self.old_serial if count <= self.old_answers else self.serials[name]
        response.flags |= dns.flags.AA
        text = SOA_TEXT.format(serial)
        response.answer.append(dns.rrset.from_text(name, 60, "IN", "SOA", text))
        self.log.setdefault(name.to_text(), []).append((time.monotonic(), serial))
        return response

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                data, peer = self.sock.recvfrom(512)
            except TimeoutError:
                continue
            self.queries += 1
            query = dns.message.from_wire(data)
            name = query.question[0].name
            if self.drop_first and name not in self.seen:
                self.seen.add(name)
                continue
            if name in self.truncate:
                response = dns.message.make_response(query)
                response.flags |= dns.flags.AA | dns.flags.TC
            else:
                response = self._response(query)
            self.sock.sendto(response.to_wire(), peer)

    def _run_tcp(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.tcp.accept()
            except TimeoutError:
                continue
            with conn:
                conn.settimeout(2)
                size = struct.unpack("!H", conn.recv(2))[0]
                query = dns.message.from_wire(conn.recv(size))
                time.sleep(self.tcp_delay)
                wire = self._response(query).to_wire()
                conn.sendall(struct.pack("!H", len(wire)) + wire)


def _zones(n: int) -> list[str]:
    return [f"z{i}.example." for i in range(n)]


def test_lost_queries_are_asked_again_within_the_round() -> None:
    zones = _zones(300)
    rounds: list[tuple[int, int]] = []
    with Responder(dict.fromkeys(zones, 5)) as server:
        since = time.monotonic()
        result = wait_for_zones(
            "127.0.0.1",
            zones,
            5,
            port=server.port,
            timeout=60,
            since=since,
            interval=5.0,  # a round far longer than a retry timeout
            between_rounds=lambda served, total: rounds.append((served, total)),
        )
    assert list(result.served) == zones
    assert all(since < t <= time.monotonic() for t in result.served.values())
    # Every zone's first query was lost: each was asked again after the retry timeout, in
    # the same round, not a round later (the round spreads its queries over 5 s: only the
    # zones first asked in its last retry timeout can be left for the next).
    assert rounds[0] == (0, 300) and (result.rounds == 1 or rounds[1][0] >= 250)
    assert result.resends >= 250 and server.queries >= 2 * 300 and result.answers >= 300
    # No zone answered without serial 5: each error bar runs back to the wait's start.
    assert result.unserved == {}
    assert result.errors() == {zone: t - since for zone, t in result.served.items()}


def test_per_zone_serials_and_wraparound() -> None:
    zones = _zones(3)
    # RFC 1982: 1 follows 4294967295.
    with Responder({zones[0]: 1, zones[1]: 10, zones[2]: 7}) as server:
        result = wait_for_zones(
            "127.0.0.1",
            zones,
            {zones[0]: 4294967295, zones[1]: 9, zones[2]: 7},
            port=server.port,
            timeout=5,
            since=time.monotonic(),
            interval=0.02,
        )
    assert set(result.served) == set(zones)
    assert list(result.distribution()) == ["first", "p50", "p95", "last"]


def test_hook_ends_the_wait_and_timeouts_name_the_first_pending_zone() -> None:
    zones = [*_zones(5), "absent.example."]

    def hook(served: int, total: int) -> None:
        if served == 5:
            raise RuntimeError("the secondary exited")

    serials = dict.fromkeys(zones[:5], 1) | {"behind.example.": 0}
    with Responder(serials) as server:
        poll = functools.partial(wait_for_zones, "127.0.0.1", port=server.port, interval=0.02)
        with pytest.raises(RuntimeError, match="exited"):
            poll(zones, 1, timeout=30, since=time.monotonic(), between_rounds=hook)
        with pytest.raises(ZonesTimeout, match=r"absent\.example\. .*last answer: REFUSED"):
            poll(zones, 1, timeout=0.5, since=time.monotonic())
        with pytest.raises(ZonesTimeout) as caught:
            poll(["behind.example.", *zones[:5]], 1, timeout=0.5, since=time.monotonic())
    message = str(caught.value)
    assert "1 of 6 zones" in message and "first: behind.example. wants serial 1" in message
    assert "last answer: serial 0" in message
    assert set(caught.value.result.served) == set(zones[:5])


def test_no_server_times_out_with_no_answer() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as hole:
        hole.bind(("127.0.0.1", 0))  # a port nobody reads
        port = hole.getsockname()[1]
        with pytest.raises(XfrTimeout, match=r"2 of 2 zones .*first: z0\.example\..*no answer"):
            wait_for_zones(
                "127.0.0.1", _zones(2), 1, port=port, timeout=0.3, since=time.monotonic()
            )
    assert wait_for_zones("127.0.0.1", [], 1, timeout=0, since=0).served == {}
    with pytest.raises(ValueError, match="twice"):
        wait_for_zones("127.0.0.1", ["a.", "A."], 1, timeout=1, since=0)
