"""The primary's wire watch, its packet parser (pure): NOTIFYs to the secondaries and the
serial they announce, the secondaries' SOA queries and connects."""

from __future__ import annotations

import socket
import struct

import dns.message
import dns.opcode
import dns.rdatatype
import dns.rrset
import pytest

from harness.measure.watch import wire_facts
from harness.xfr.wire_watch import (
    SO_TIMESTAMPNS,
    TIMESPEC,
    WireEvent,
    WireWatch,
    first_notify,
    packet_time,
    parse_packet,
)


def _notify(serial: int | None, *, response: bool = False) -> bytes:
    message = dns.message.make_query("example.", dns.rdatatype.SOA)
    message.set_opcode(dns.opcode.NOTIFY)
    if serial is not None:
        soa = f"ns.example. admin.example. {serial} 3600 600 86400 60"
        message.answer.append(dns.rrset.from_text("example.", 60, "IN", "SOA", soa))
    if response:
        message.flags |= 0x8000
    return message.to_wire()


def _ip(payload: bytes, dst: str, proto: int = socket.IPPROTO_UDP, port: int = 53) -> bytes:
    if proto == socket.IPPROTO_UDP:
        transport = struct.pack("!HHHH", 40000, port, 8 + len(payload), 0) + payload
    else:  # TCP: a 20-byte header, then the 2-byte DNS length
        header = struct.pack("!HHIIBBHHH", 40000, port, 1, 1, 5 << 4, 0x18, 65535, 0, 0)
        transport = header + struct.pack("!H", len(payload)) + payload
    ip = struct.pack(
        "!BBHHHBBH4s4s", 0x45, 0, 20 + len(transport), 0, 0, 64, proto, 0,
        socket.inet_aton("198.18.7.2"), socket.inet_aton(dst),
    )  # fmt: skip
    return ip + transport


def notify_serial(packet: bytes, watched: set[str]) -> tuple[str, int | None] | None:
    found = parse_packet(packet, True, watched)  # leaving the primary
    return None if found is None or found[0] != "notify" else (found[1], found[2])


def test_notify_to_a_watched_secondary_over_udp_and_tcp() -> None:
    watched = {"198.18.7.66", "198.18.7.130"}
    assert notify_serial(_ip(_notify(42), "198.18.7.66"), watched) == ("198.18.7.66", 42)
    tcp = _ip(_notify(43), "198.18.7.130", socket.IPPROTO_TCP)
    assert notify_serial(tcp, watched) == ("198.18.7.130", 43)
    assert notify_serial(_ip(_notify(None), "198.18.7.66"), watched) == ("198.18.7.66", 0)


def test_what_is_not_a_notify_to_us_is_ignored() -> None:
    watched = {"198.18.7.66"}
    assert notify_serial(_ip(_notify(42), "198.18.7.99"), watched) is None  # someone else
    assert notify_serial(_ip(_notify(42, response=True), "198.18.7.66"), watched) is None
    query = dns.message.make_query("example.", dns.rdatatype.SOA).to_wire()
    assert notify_serial(_ip(query, "198.18.7.66"), watched) is None  # an SOA query
    assert notify_serial(_ip(_notify(42), "198.18.7.66", port=853), watched) is None
    assert notify_serial(b"\x60" + bytes(39), watched) is None  # IPv6


def _from(packet: bytes, source: str) -> bytes:
    return packet[:12] + socket.inet_aton(source) + packet[16:]


def test_soa_queries_and_connects_from_a_secondary() -> None:
    watched = {"198.18.7.66"}
    query = dns.message.make_query("example.", dns.rdatatype.SOA).to_wire()
    incoming = _from(_ip(query, "198.18.7.2"), "198.18.7.66")
    soa_query = ("soa_query", "198.18.7.66", None, None, None)
    assert parse_packet(incoming, False, watched) == soa_query
    a_query = dns.message.make_query("example.", dns.rdatatype.A).to_wire()
    assert parse_packet(_from(_ip(a_query, "198.18.7.2"), "198.18.7.66"), False, watched) is None
    syn = bytearray(_from(_ip(b"", "198.18.7.2", socket.IPPROTO_TCP), "198.18.7.66"))
    syn[20 + 13] = 0x02  # SYN alone
    # A connect names its source port: a SYN sent again from it is the same connection.
    assert parse_packet(bytes(syn), False, watched) == ("connect", "198.18.7.66", None, 40000, 53)
    xot = bytearray(_from(_ip(b"", "198.18.7.2", socket.IPPROTO_TCP, port=853), "198.18.7.66"))
    xot[20 + 13] = 0x02  # the connect says its transport: 853 is XoT
    assert parse_packet(bytes(xot), False, watched) == ("connect", "198.18.7.66", None, 40000, 853)
    syn[20 + 13] = 0x12  # SYN+ACK: the primary's answer, not a connect
    assert parse_packet(bytes(syn), False, watched) is None
    assert parse_packet(incoming, False, {"198.18.7.99"}) is None  # not a secondary of ours


def test_connections_are_counted_distinct_by_source_port() -> None:
    """A SYN sent again from the same port (lost, or unanswered) is one connection; a new
    port is a new connection (a refusal, then a retry)."""
    peer = "198.18.7.66"
    events = [
        WireEvent(10.02, "soa_query", peer),
        WireEvent(10.05, "connect", peer, port=40001),
        WireEvent(11.05, "connect", peer, port=40001),  # retransmitted
        WireEvent(13.05, "connect", peer, port=40001),  # and again
    ]
    facts = wire_facts(events, 10.0)
    assert (facts["syns"], facts["connections"]) == (3, 1)
    assert facts["soa_query_s"] == pytest.approx(0.02)
    again = wire_facts([*events, WireEvent(20.0, "connect", peer, port=40002)], 10.0)
    assert (again["syns"], again["connections"]) == (4, 2)
    assert again["connect_s"] == pytest.approx(10.0)


def test_a_notify_without_serial_counts_only_from_the_publish_on() -> None:
    # PowerDNS NOTIFYs carry no serial and are repeated a tick later; the last serial's
    # NOTIFY (10.0) and its repeat (11.0) left before serial 4 was published at 11.5.
    peer = "198.18.7.130"
    events = [
        WireEvent(10.0, "notify", peer, 0),
        WireEvent(11.0, "notify", peer, 0),
        WireEvent(11.2, "notify", "198.18.7.131", 0),
        WireEvent(12.0, "soa_query", peer),
        WireEvent(12.5, "notify", peer, 0),
    ]
    assert first_notify(events, 4, peer, since=11.5) == 12.5
    assert first_notify(events, 4, peer, since=13.0) is None
    # A NOTIFY that names its serial counts from that serial on, never for an older one.
    named = [WireEvent(10.0, "notify", peer, 3), WireEvent(10.5, "notify", peer, 4)]
    assert first_notify(named, 4, peer, since=0.0) == 10.5
    assert first_notify(named, 5, peer, since=0.0) is None


def test_the_ports_a_peer_connected_to_are_the_primarys_not_its_own() -> None:
    # No socket: the events as the watch keeps them. A retransmitted SYN keeps its source
    # port; what tells the transport is the port on the primary.
    watch = WireWatch("unused", ["198.18.7.66", "198.18.7.130"])
    watch._events = [
        WireEvent(1.0, "connect", "198.18.7.66", None, 40000, 853),
        WireEvent(1.5, "soa_query", "198.18.7.66"),
        WireEvent(2.0, "connect", "198.18.7.66", None, 40002, 53),
        WireEvent(2.0, "connect", "198.18.7.130", None, 40004, 53),
        WireEvent(3.0, "connect", "198.18.7.66", None, 40006, 853),
    ]
    assert watch.connect_ports("198.18.7.66", 0.5, 2.5) == [853, 53]
    assert watch.connect_ports("198.18.7.66", 2.5, 9.0) == [853]


def test_forgotten_events_still_count_for_the_last_one_seen() -> None:
    # A 100 k-member catalog's case forgets the events of each polling round (what it
    # kept was some 300 k of them); settling still asks when the last one came.
    watch = WireWatch("unused", ["198.18.7.66"])
    watch.note(WireEvent(1.0, "notify", "198.18.7.66", 7))
    watch.note(WireEvent(4.0, "soa_query", "198.18.7.66"))
    watch.note(WireEvent(3.0, "connect", "198.18.7.66", None, 40000, 53))
    watch.forget_before(10.0)
    assert watch.events("198.18.7.66", 0.0) == []
    assert watch.last(("soa_query", "connect"), "198.18.7.66") == 4.0
    assert watch.last(("notify",)) == 1.0
    assert watch.last(("notify",), "198.18.7.130") is None


def test_a_packet_is_dated_by_the_kernels_stamp() -> None:
    stamp = TIMESPEC.pack(1_795_632_008, 250_000_000)  # taken 0.25 s before "now"
    ancillary = [(socket.SOL_SOCKET, SO_TIMESTAMPNS, stamp)]
    assert packet_time(ancillary, 1_795_632_008.5, 100.0) == pytest.approx(99.75)
    assert packet_time([], 1_795_632_008.5, 100.0) == 100.0  # no stamp: when read
    # A stamp "after now" (the wall clock stepped back) is no later than now.
    assert packet_time(ancillary, 1_795_632_008.0, 100.0) == 100.0
