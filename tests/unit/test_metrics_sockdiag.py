"""sock_diag parsers on dumps captured from this machine's kernel (tests/fixtures/sockdiag).

The capture (capture.py there) builds, per family: a listener on port 5300, 25 client ports
in TIME_WAIT, and one established pair whose receiver (the client side) set SO_RCVBUF 16384
and read exactly 300000 bytes; ip_local_port_range 40000-40999, congestion control reno.
/proc/<pid>/net/tcp{,6} were copied at the same moment: both paths must agree.
"""

from __future__ import annotations

import errno
import socket
import struct
from pathlib import Path

import pytest

from harness.observe import procfs, sockdiag_wire, tcp_info

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "sockdiag"
RANGE = (40000, 40999)


def chunks(name: str) -> list[bytes]:
    data = (FIXTURES / f"{name}.chunks").read_bytes()
    out, pos = [], 0
    while pos < len(data):
        (length,) = struct.unpack_from("<I", data, pos)
        out.append(data[pos + 4 : pos + 4 + length])
        pos += 4 + length
    return out


def all_chunks() -> list[bytes]:
    return [
        c for fam in ("inet", "inet6") for what in ("rest", "tw") for c in chunks(f"{fam}_{what}")
    ]


def proc_texts() -> list[str]:
    return [(FIXTURES / name).read_text() for name in ("proc_tcp", "proc_tcp6")]


def test_request_layout() -> None:
    req = sockdiag_wire.request(socket.AF_INET6, 1 << sockdiag_wire.TCP_TIME_WAIT, ext=0b10, seq=7)
    length, kind, flags, seq, _ = sockdiag_wire.NLMSGHDR.unpack_from(req, 0)
    assert (length, kind, seq) == (len(req), sockdiag_wire.SOCK_DIAG_BY_FAMILY, 7)
    assert length == 16 + 56  # nlmsghdr + inet_diag_req_v2
    assert flags == sockdiag_wire.NLM_F_REQUEST | sockdiag_wire.NLM_F_DUMP
    family, protocol, ext, states = struct.unpack_from("=BBBxI", req, 16)
    assert (family, protocol, ext, states) == (socket.AF_INET6, socket.IPPROTO_TCP, 2, 64)
    assert req[24:] == bytes(48)  # an all-zero socket id: every socket
    assert (
        sockdiag_wire.ext_bits(sockdiag_wire.INET_DIAG_INFO, sockdiag_wire.INET_DIAG_SKMEMINFO)
        == 0b1000010
    )


def test_sockets_as_set_up() -> None:
    found = sockdiag_wire.parse_sockets(all_chunks())
    assert len(found) == 2 * (1 + 25 + 2)
    for family, host in ((socket.AF_INET, "127.0.0.1"), (socket.AF_INET6, "::1")):
        mine = [s for s in found if s.family == family]
        assert {s.src for s in mine} == {host}
        waiting = [s for s in mine if s.state_name == "time_wait"]
        assert len(waiting) == 25
        assert all(s.dport == 5300 and RANGE[0] <= s.sport <= RANGE[1] for s in waiting)
        (listener,) = [s for s in mine if s.state_name == "listen"]
        assert listener.sport == 5300 and listener.dport == 0 and listener.inode > 0


def test_summary_equals_the_proc_text_of_the_same_moment() -> None:
    diag = sockdiag_wire.summarise(all_chunks(), RANGE)
    assert diag == ({"established": 4, "listen": 2, "time_wait": 50}, 52)
    assert diag == procfs.summarise_tcp(proc_texts(), RANGE)
    assert sockdiag_wire.summarise(all_chunks(), (1, 65535)) == procfs.summarise_tcp(
        proc_texts(), (1, 65535)
    )
    assert sockdiag_wire.summarise(all_chunks(), None)[1] == 0


def test_one_dump_of_both_families_gives_the_same_figures() -> None:
    both = chunks("both_all")
    found = sockdiag_wire.parse_sockets(both)
    assert {s.family for s in found} == {socket.AF_INET, socket.AF_INET6}
    assert sockdiag_wire.NLMSGHDR.unpack_from(both[0], 0)[1] == sockdiag_wire.TCPDIAG_GETSOCK
    assert sockdiag_wire.summarise(both, RANGE) == procfs.summarise_tcp(proc_texts(), RANGE)


def test_time_wait_chunks_take_the_fast_path() -> None:
    records, done = chunks("inet_tw")
    # With CAP_NET_ADMIN a TIME_WAIT record carries INET_DIAG_MARK: 96 bytes, not 88.
    assert sockdiag_wire.uniform_records(records) == (25, 96)
    assert sockdiag_wire.uniform_records(done) == (0, sockdiag_wire.RECORD_LEN)
    assert sockdiag_wire.is_done(done) and not sockdiag_wire.is_done(records)
    assert sockdiag_wire.uniform_records(chunks("inet_rest")[0]) is not None  # same length...
    # ...but it holds a listener, which the fast path leaves to the walk (ports differ).
    rest = chunks("inet_rest")
    assert sockdiag_wire.summarise(rest, (1, 65535)) == procfs.summarise_tcp(
        [_only_family(proc_texts()[0], "rest")], (1, 65535)
    )


def _only_family(text: str, what: str) -> str:
    # The IPv4 /proc text without its TIME_WAIT lines (state 06).
    lines = text.splitlines()
    keep = [line for line in lines[1:] if (line.split()[3] == "06") == (what == "tw")]
    return "\n".join([lines[0], *keep]) + "\n"


def _big_time_wait_chunk(count: int, strip_mark: bool) -> tuple[bytes, set[int]]:
    """``count`` TIME_WAIT records made from a captured one, each with its own port, and
    NLMSG_DONE; the record as captured (96 bytes) or without its attribute (88)."""
    records, done = chunks("inet_tw")
    step = sockdiag_wire.uniform_records(records)
    assert step is not None
    one = bytearray(records[: step[1]])
    if strip_mark:
        one = one[: sockdiag_wire.RECORD_LEN]
        struct.pack_into("=I", one, 0, sockdiag_wire.RECORD_LEN)
    out = bytearray()
    ports = set()
    for k in range(count):
        port = 1024 + k % 60000
        struct.pack_into("!H", one, 20, port)
        out += one
        ports.add(port)
    return bytes(out + done), ports


@pytest.mark.parametrize("strip_mark", [True, False])
def test_fast_path_equals_the_walk_on_30k_sockets(strip_mark: bool) -> None:
    chunk, ports = _big_time_wait_chunk(30_000, strip_mark)
    assert sockdiag_wire.uniform_records(chunk) is not None
    walked = sockdiag_wire.parse_sockets([chunk])
    assert len(walked) == 30_000 and {s.sport for s in walked} == ports
    states, in_range = sockdiag_wire.summarise([chunk], (2000, 9999))
    assert states == {"time_wait": 30_000}
    assert in_range == len([p for p in ports if 2000 <= p <= 9999])
    # A record of another length in the middle breaks the shape: the walk takes over.
    mixed = chunk[:-20] + chunks("inet_rest")[0]
    assert sockdiag_wire.uniform_records(mixed) is None
    assert sockdiag_wire.summarise([mixed], None)[0] == {
        "established": 2,
        "listen": 1,
        "time_wait": 30_000,
    }


def test_malformed_and_refused_dumps() -> None:
    records = chunks("inet_tw")[0]
    with pytest.raises(sockdiag_wire.SockDiagError, match="length"):
        sockdiag_wire.parse_sockets([records[:-5]])
    error = (
        sockdiag_wire.NLMSGHDR.pack(36, sockdiag_wire.NLMSG_ERROR, 0, 1, 0)
        + struct.pack("=i", -errno.EPERM)
        + bytes(16)
    )
    with pytest.raises(OSError) as caught:
        sockdiag_wire.is_done(error)
    assert caught.value.errno == errno.EPERM


def _info_connections() -> list[tcp_info.TcpConnection]:
    found = sockdiag_wire.parse_sockets(chunks("inet_info") + chunks("inet6_info"))
    return tcp_info.connections_to(found, None)


def test_tcp_info_of_the_small_window_receiver() -> None:
    conns = _info_connections()
    assert len(conns) == 4 and {c.state for c in conns} == {"established"}
    assert {c.congestion for c in conns} == {"reno"}
    for host in ("127.0.0.1", "::1"):
        (receiver,) = tcp_info.connections_to(
            sockdiag_wire.parse_sockets(chunks("inet_info") + chunks("inet6_info")), (host, 5300)
        )
        (sender,) = [c for c in conns if c.src == host and c.sport == 5300]
        assert receiver.info["bytes_received"] == 300_000
        assert sender.info["bytes_acked"] == 300_000
        # SO_RCVBUF 16384 is doubled by the kernel; the window is what that buffer allows.
        assert receiver.memory["rcvbuf"] == 2 * 16384
        assert 0 < receiver.info["rcv_wnd"] <= receiver.memory["rcvbuf"]
        # The window the receiver advertised is the one the sender saw.
        assert sender.info["snd_wnd"] == receiver.info["rcv_wnd"]
        assert receiver.info["rcv_space"] > 0 and sender.info["snd_cwnd"] > 0
        assert receiver.fields()["info"]["rcv_wnd"] == receiver.info["rcv_wnd"]


def test_tcp_info_length_decides_the_fields() -> None:
    found = sockdiag_wire.parse_sockets(chunks("inet_info"))
    raw = found[0].attrs[sockdiag_wire.INET_DIAG_INFO]
    full = tcp_info.parse_tcp_info(raw)
    assert len(raw) >= 236 and "rcv_wnd" in full  # this kernel (>= 6.2) has it
    pre_62 = tcp_info.parse_tcp_info(raw[:232])  # Linux 5.4 .. 6.1: up to snd_wnd
    assert "snd_wnd" in pre_62 and "rcv_wnd" not in pre_62
    assert pre_62 == {k: v for k, v in full.items() if k in pre_62}
    old = tcp_info.parse_tcp_info(raw[:104])  # before 3.15: up to total_retrans
    assert "total_retrans" in old and "pacing_rate" not in old
    assert {"snd_wscale", "rcv_wscale"} <= set(full) and "wscale" not in full
    assert full["options"] & 4  # TCPI_OPT_WSCALE: window scaling was agreed
    assert tcp_info.parse_skmeminfo(found[0].attrs[sockdiag_wire.INET_DIAG_SKMEMINFO])["sndbuf"] > 0


def test_exact_request_names_one_socket() -> None:
    (receiver,) = [c for c in _info_connections() if c.dport == 5300 and c.dst == "127.0.0.1"]
    assert receiver.key is not None
    req = sockdiag_wire.exact_request(receiver.key, ext=tcp_info.INFO_EXT)
    length, kind, flags, _, _ = sockdiag_wire.NLMSGHDR.unpack_from(req, 0)
    assert (length, kind, flags) == (
        72,
        sockdiag_wire.SOCK_DIAG_BY_FAMILY,
        sockdiag_wire.NLM_F_REQUEST,
    )
    assert struct.unpack_from("!HH", req, 24) == (receiver.sport, 5300)
    assert req[28:32] == socket.inet_aton("127.0.0.1") and req[44:48] == req[28:32]
    low, high = struct.unpack_from("=II", req, 64)
    assert (high << 32) | low == receiver.key.cookie != 0
    v1 = sockdiag_wire.request(None, sockdiag_wire.CONNECTED_STATES, tcp_info.INFO_EXT)
    assert sockdiag_wire.NLMSGHDR.unpack_from(v1, 0)[:2] == (16 + 60, sockdiag_wire.TCPDIAG_GETSOCK)


def test_connection_peaks_and_the_window_bound() -> None:
    conns = [c for c in _info_connections() if c.dport == 5300]  # both receivers
    peaks = tcp_info.connection_peaks(conns)
    assert peaks["samples"] == 2 and peaks["connections"] == 2
    assert peaks["rcv_wnd_max"] == max(c.info["rcv_wnd"] for c in conns)
    assert peaks["rcvbuf_max"] == 2 * 16384 and peaks["congestion"] == "reno"
    assert peaks["bytes_received"] == 300_000
    assert peaks["cwnd_bytes_max"] == max(c.info["snd_cwnd"] * c.info["snd_mss"] for c in conns)
    bound = tcp_info.advertised_window_bound_bps(peaks, 0.5)
    assert bound == 8 * peaks["rcv_wnd_max"] / 0.5
    assert tcp_info.advertised_window_bound_bps({}, 0.5) is None
    assert tcp_info.connection_peaks([]) == {}
    # A kernel without tcpi_rcv_wnd: the figure is left out, not made up.
    old = [
        tcp_info.TcpConnection(
            c.src,
            c.sport,
            c.dst,
            c.dport,
            c.state,
            {k: v for k, v in c.info.items() if k != "rcv_wnd"},
            {},
            None,
        )
        for c in conns
    ]
    assert "rcv_wnd_max" not in tcp_info.connection_peaks(old)
    assert tcp_info.advertised_window_bound_bps(tcp_info.connection_peaks(old), 0.5) is None


def test_remote_filter_is_one_host_condition_the_kernel_accepts() -> None:
    code = sockdiag_wire.remote_filter("198.18.0.2", 53)
    op, yes, no = struct.unpack_from("=BBH", code, 0)
    family, prefix, port = struct.unpack_from("=BB2xi", code, 4)
    assert (op, yes, no) == (sockdiag_wire.INET_DIAG_BC_D_COND, len(code), len(code) + 4)
    assert (family, prefix, port) == (socket.AF_INET, 32, 53)
    assert code[12:] == socket.inet_aton("198.18.0.2")
    any_port = sockdiag_wire.remote_filter("2001:db8::1", None)
    assert struct.unpack_from("=BB2xi", any_port, 4) == (socket.AF_INET6, 128, -1)
    assert len(any_port) == 4 + 8 + 16


def test_a_filtered_request_carries_the_bytecode_attribute() -> None:
    code = sockdiag_wire.remote_filter("198.18.0.2", 853)
    for family in (None, socket.AF_INET):
        plain = sockdiag_wire.request(family)
        req = sockdiag_wire.request(family, bytecode=code)
        (length,) = struct.unpack_from("=I", req, 0)
        assert length == len(req) == len(plain) + 4 + len(code)
        attr_len, attr_type = struct.unpack_from("=HH", req, len(plain))
        assert (attr_len, attr_type) == (4 + len(code), sockdiag_wire.INET_DIAG_REQ_BYTECODE)
        assert req[len(plain) + 4 :] == code
