"""The primary's wire watch on a real testbed: NOTIFYs out, SOA queries and connects in,
and nothing of the bulk traffic in between (the BPF filter keeps it in the kernel)."""

from __future__ import annotations

import os
import socket
import threading
import time
from pathlib import Path

import dns.message
import dns.opcode
import dns.rdatatype
import dns.rrset
import pytest

from harness.core.netns import socket_in
from harness.spec import HostsSpec, LinkSpec
from harness.testbed import Testbed
from harness.xfr.wire_watch import WireWatch

pytestmark = [
    pytest.mark.root,
    pytest.mark.netns,
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root for namespaces"),
]


def _notify(serial: int) -> bytes:
    message = dns.message.make_query("example.", dns.rdatatype.SOA)
    message.set_opcode(dns.opcode.NOTIFY)
    soa = f"ns.example. admin.example. {serial} 3600 600 86400 60"
    message.answer.append(dns.rrset.from_text("example.", 60, "IN", "SOA", soa))
    return message.to_wire()


def _drain(sock: socket.socket) -> None:
    sock.settimeout(10)
    while sock.recv(1 << 20):
        pass


def test_notify_soa_query_and_connect_are_seen_bulk_data_is_not(tmp_path: Path) -> None:
    with Testbed(LinkSpec(), HostsSpec(), tmp_path / "tb") as bed:
        primary, secondary = bed.primary, bed.secondary
        # A listener on the primary's port 53 (TCP) so that connects complete, and a bulk
        # sink on another port.
        listener = socket_in(primary.netns, socket.AF_INET, socket.SOCK_STREAM)
        listener.bind((primary.address, 53))
        listener.listen(8)
        sink = socket_in(primary.netns, socket.AF_INET, socket.SOCK_STREAM)
        sink.bind((primary.address, 9000))
        sink.listen(1)
        with WireWatch(primary.netns, [secondary.address]) as watch:
            start = time.monotonic()
            out = socket_in(primary.netns, socket.AF_INET, socket.SOCK_DGRAM)
            out.sendto(_notify(42), (secondary.address, 53))
            query = dns.message.make_query("example.", dns.rdatatype.SOA).to_wire()
            udp = socket_in(secondary.netns, socket.AF_INET, socket.SOCK_DGRAM)
            udp.sendto(query, (primary.address, 53))
            udp.sendto(dns.message.make_query("example.", "A").to_wire(), (primary.address, 53))
            conn = socket_in(secondary.netns, socket.AF_INET, socket.SOCK_STREAM)
            conn.connect((primary.address, 53))
            bulk = socket_in(secondary.netns, socket.AF_INET, socket.SOCK_STREAM)
            bulk.connect((primary.address, 9000))
            accepted, _ = sink.accept()
            reader = threading.Thread(target=_drain, args=(accepted,))
            reader.start()
            bulk.sendall(b"x" * 2_000_000)
            bulk.close()
            reader.join(10)
            assert watch.wait_notify(42, 2.0, secondary.address) is not None
            time.sleep(0.2)
            events = watch.events(secondary.address, start)
            kinds = [e.kind for e in events]
            packets = watch.packets
            for sock in (out, udp, conn, accepted, listener, sink):
                sock.close()
    # One of each: the A query and the bulk transfer's packets never reach Python.
    assert sorted(kinds) == ["connect", "notify", "soa_query"], kinds
    assert [e.to_port for e in events if e.kind == "connect"] == [53]  # the transport it is for
    # 2 MB crossed the wire in ~1,400 segments; the kernel passed on only the few that match.
    assert packets < 20, packets


# Alone (tests/conftest.py): a packet's date within 50 ms of its sending.
@pytest.mark.alone
def test_a_packet_is_dated_when_the_kernel_took_it_not_when_it_was_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A NOTIFY read late (the watch's thread waits its turn) must not be dated late: one
    was, after the 1 ms transfer it started was served (a negative duration)."""
    read = WireWatch._read

    def late(self: WireWatch) -> None:
        time.sleep(0.3)  # the packets wait in the socket meanwhile
        read(self)

    monkeypatch.setattr(WireWatch, "_read", late)
    with Testbed(LinkSpec(), HostsSpec(), tmp_path / "tb") as bed:
        primary, secondary = bed.primary, bed.secondary
        with WireWatch(primary.netns, [secondary.address]) as watch:
            out = socket_in(primary.netns, socket.AF_INET, socket.SOCK_DGRAM)
            sent = time.monotonic()
            out.sendto(_notify(43), (secondary.address, 53))
            at = watch.wait_notify(43, 2.0, secondary.address)
            out.close()
    assert at is not None and sent <= at < sent + 0.05, at - sent if at else None
