"""What one transfer left in the TCP tables, counted on sock_diag dumps captured from this
machine's kernel (tests/fixtures/sockdiag/capture_pair.py says what they hold; the expected
figures follow from its steps)."""

from __future__ import annotations

import socket
import struct
from dataclasses import replace

from harness.observe.sockdiag_wire import parse_sockets
from harness.observe.transfer_sockets import (
    Ends,
    closing,
    ends,
    own_sockets,
    pair_connection,
    pair_sockets,
    transfer_sockets,
)
from tests.unit.test_metrics_sockdiag import chunks

PRIMARY, SECONDARY = "10.250.0.1", "10.250.0.2"
ADDRESSES = {"primary": PRIMARY, "secondary": SECONDARY}


def dump(step: str, role: str) -> list[Ends]:
    return ends(parse_sockets(chunks(f"pair_{step}_{role}")))


def dumps(step: str) -> dict[str, list[Ends]]:
    return {role: dump(step, role) for role in ("primary", "secondary")}


def test_a_transfer_counts_its_own_connections_and_time_wait_not_the_namespaces() -> None:
    before, after, later = dumps("before"), dumps("after"), dumps("later")
    # The namespace's count holds the earlier transfer's and the harness's read-back too.
    assert sum(s.state == "time_wait" for s in after["secondary"]) == 3
    figures = transfer_sockets(before, after, later, ADDRESSES)
    assert figures == {
        # the secondary's transfer connection, closed by it: TIME_WAIT on its side
        "secondary": {"connections": 1, "time_wait_left": 1},
        # the primary's connection to the secondary (a NOTIFY over TCP), closed by it
        "primary": {"connections": 1, "time_wait_left": 1},
        "still_open": 0,  # the connection open throughout is no new one
        "harness": {
            "primary": {"connections": 1, "time_wait_left": 1, "ports": [53]},
            "secondary": {"connections": 1, "time_wait_left": 1, "ports": [53]},
        },
    }


def test_the_same_socket_dumped_from_both_sides_is_one_connection() -> None:
    before, after = dumps("before"), dumps("after")
    everything = [s for socks in after.values() for s in socks]
    twice = pair_sockets(
        before["primary"] + before["secondary"], everything + everything, PRIMARY, SECONDARY
    )
    assert twice["secondary"]["connections"] == 1 and twice["primary"]["connections"] == 1
    # an established connection's two sockets, one in each namespace: one connection
    open_ = [s for s in everything if s.state == "established"]
    assert len(open_) == 2
    assert len({pair_connection(s, PRIMARY, SECONDARY) for s in open_}) == 1


def test_the_wire_s_syns_add_the_connections_a_dump_cannot_show() -> None:
    before, after = dumps("before"), dumps("after")
    b = before["primary"] + before["secondary"]
    a = after["primary"] + after["secondary"]
    (port,) = {s.sport for s in a if s.src == SECONDARY and s.state == "time_wait"} - {
        s.sport for s in b
    }
    seen = pair_sockets(b, a, PRIMARY, SECONDARY, syn_ports=[port, port])
    assert seen["secondary"]["connections"] == 1  # its SYNs, sent again, and its socket
    reset = pair_sockets(b, a, PRIMARY, SECONDARY, syn_ports=[port, 40001])
    assert reset["secondary"]["connections"] == 2  # one reset before the dump: no socket
    assert reset["secondary"]["time_wait_left"] == 1


def test_a_fleets_concurrent_transfers_stay_on_their_own_pairs() -> None:
    # One primary's namespace holds both secondaries' connections; each pair has its own.
    other = "10.250.1.2"
    after = [
        Ends("time_wait", SECONDARY, 40000, PRIMARY, 53),
        Ends("established", PRIMARY, 53, other, 40100),
        Ends("established", PRIMARY, 53, other, 40101),
        Ends("time_wait", PRIMARY, 53, other, 40102),
    ]
    one = pair_sockets([], after, PRIMARY, SECONDARY)
    two = pair_sockets([], after, PRIMARY, other)
    assert one["secondary"] == {"connections": 1, "time_wait_left": 1}
    assert one["primary"] == {"connections": 0, "time_wait_left": 0}
    assert two["secondary"] == {"connections": 3, "time_wait_left": 0}
    assert two["primary"] == {"connections": 0, "time_wait_left": 1}  # the primary closed
    assert two["still_open"] == 2


def test_what_is_on_a_pair_and_what_is_the_harnesss() -> None:
    assert pair_connection(Ends("established", SECONDARY, 5000, PRIMARY, 53), PRIMARY, SECONDARY)
    assert pair_connection(Ends("established", SECONDARY, 5000, PRIMARY, 853), PRIMARY, SECONDARY)
    # neither end, or both, on a DNS port; another pair; the listener
    for sock in (
        Ends("established", SECONDARY, 5000, PRIMARY, 953),
        Ends("established", SECONDARY, 53, PRIMARY, 53),
        Ends("established", "10.250.1.2", 5000, PRIMARY, 53),
        Ends("listen", "0.0.0.0", 53, "0.0.0.0", 0),
    ):
        assert pair_connection(sock, PRIMARY, SECONDARY) is None
    own = own_sockets(
        [],
        [
            Ends("listen", "127.0.0.1", 953, "0.0.0.0", 0),
            Ends("time_wait", "127.0.0.1", 34000, "127.0.0.1", 953),  # rndc
            Ends("established", "::1", 35000, "::1", 53),  # both ends of one
            Ends("established", "::1", 53, "::1", 35000),
            Ends("time_wait", SECONDARY, 36000, SECONDARY, 53),  # a TCP SOA query
            Ends("time_wait", SECONDARY, 37000, PRIMARY, 53),  # the servers'
        ],
    )
    assert own == {"connections": 3, "time_wait_left": 2, "ports": [53, 953]}


def test_an_ipv4_peer_through_an_ipv6_socket_is_its_ipv4_address() -> None:
    sock = Ends.of(
        parse_sockets([_one_socket("::ffff:10.250.0.2", 40000, "::ffff:10.250.0.1", 53)])[0]
    )
    assert (sock.src, sock.dst) == (SECONDARY, PRIMARY)
    assert pair_connection(sock, PRIMARY, SECONDARY) == ((SECONDARY, 40000), (PRIMARY, 53))


def test_closing_counts_the_new_connections_not_yet_in_time_wait() -> None:
    old = Ends("fin_wait2", SECONDARY, 39000, PRIMARY, 53)  # an earlier one, still closing
    new = Ends("fin_wait2", SECONDARY, 40000, PRIMARY, 53)
    other = "10.250.1.2"
    pairs = [(PRIMARY, SECONDARY), (PRIMARY, other)]
    assert closing([old], [old, new], pairs) == [(PRIMARY, SECONDARY)]
    assert closing([old], [old, replace(new, state="time_wait")], pairs) == []
    assert closing([], [Ends("close_wait", PRIMARY, 53, other, 40000)], pairs) == [(PRIMARY, other)]
    assert closing([], [Ends("established", PRIMARY, 53, SECONDARY, 40000)], pairs) == []


def _one_socket(src: str, sport: int, dst: str, dport: int) -> bytes:
    """One inet_diag_msg of an AF_INET6 socket in TIME_WAIT, as the kernel frames it."""
    body = struct.pack("=BBBB", socket.AF_INET6, 6, 0, 0)
    body += struct.pack("!HH", sport, dport)
    body += socket.inet_pton(socket.AF_INET6, src) + socket.inet_pton(socket.AF_INET6, dst)
    body += struct.pack("=III", 0, 0, 0) + struct.pack("=IIIII", 0, 0, 0, 0, 0)
    return struct.pack("=IHHII", 16 + len(body), 20, 2, 1, 0) + body
