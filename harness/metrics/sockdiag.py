"""TCP sockets of a network namespace through netlink sock_diag (inet_diag), not /proc text.

Reading /proc/<pid>/net/tcp{,6} costs 75-90 ms at 30 k TIME_WAIT sockets (the kernel prints
every line, Python scans them). A NETLINK_SOCK_DIAG dump (``SOCK_DIAG_BY_FAMILY`` with an
``inet_diag_req_v2``) hands out the same sockets as fixed binary records. Two uses:

- ``tcp_summary``: sockets per state and distinct ephemeral ports in use, the figures
  ``procfs.summarise_tcp`` gives from the /proc text (the sampler's per-host line).
- ``tcp_connections``: ``struct tcp_info`` (INET_DIAG_INFO), the socket's buffers
  (INET_DIAG_SKMEMINFO) and congestion control (INET_DIAG_CONG) of the connections to a
  peer: the window the secondary really advertised (``rcv_wnd``, Linux >= 6.2), its
  ``rcv_space``, the sender's ``snd_cwnd`` and RTT, retransmissions.

A dump lists the sockets of the namespace the netlink socket was opened in: ``socket_for``
opens it inside a named namespace or a process's one (setns, so root), then switches back.

Pure parsers over the bytes first (tested on dumps captured from a real kernel, see
tests/fixtures/sockdiag/), thin I/O after. Netlink and inet_diag headers are in host byte
order except the ports and addresses of ``inet_diag_sockid`` (network order).
"""

from __future__ import annotations

import bisect
import errno
import os
import socket
import struct
import threading
import time
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from harness.errors import EnvironmentProblem
from harness.metrics.procfs import TCP_STATES, PortRange
from harness.netns import _setns, entered

NETLINK_SOCK_DIAG = 4
SOCK_DIAG_BY_FAMILY = 20
TCPDIAG_GETSOCK = 18  # the original inet_diag request: both families in one dump
_SOCKET_TYPES = (SOCK_DIAG_BY_FAMILY, TCPDIAG_GETSOCK)  # what the answers are typed
NLM_F_REQUEST = 0x01
NLM_F_DUMP = 0x300  # NLM_F_ROOT | NLM_F_MATCH
NLMSG_ERROR = 2
NLMSG_DONE = 3

# Attributes of an inet_diag_msg (include/uapi/linux/inet_diag.h); a request asks for
# attribute A with bit 1 << (A - 1) of idiag_ext.
INET_DIAG_MEMINFO = 1
INET_DIAG_INFO = 2
INET_DIAG_CONG = 4
INET_DIAG_SKMEMINFO = 7

TCP_ESTABLISHED = 1
TCP_TIME_WAIT = 6
TCP_LISTEN = 10
ALL_STATES = 0xFFFFFFFF
CONNECTED_STATES = sum(1 << s for s in (1, 2, 3, 4, 5, 8, 9, 11))  # not TW, CLOSE, LISTEN

NLMSGHDR = struct.Struct("=IHHII")  # len, type, flags, seq, pid
# inet_diag_req_v2: family, protocol, ext, pad, states; then inet_diag_sockid: sport,
# dport (network order), src[4], dst[4] (network order), if, cookie[2] (host order).
_REQ = struct.Struct("=BBBxI")
_REQ_V1 = struct.Struct("=BBBB")  # family, src_len, dst_len, ext; sockid; states, dbs
_SOCKID_PORTS = struct.Struct("!HH")
_SOCKID_TAIL = struct.Struct("=III")
# inet_diag_msg after the sockid: expires, rqueue, wqueue, uid, inode.
_MSG_TAIL = struct.Struct("=IIIII")
_RTATTR = struct.Struct("=HH")
_I32 = struct.Struct("=i")
HDR_LEN = NLMSGHDR.size  # 16
DIAG_MSG_LEN = 72  # inet_diag_msg: 4 + sockid 48 + 20
RECORD_LEN = HDR_LEN + DIAG_MSG_LEN  # one socket without attributes (TIME_WAIT's shape)
_DONE_LEN = HDR_LEN + 4
SK_MEMINFO = ("rmem_alloc", "rcvbuf", "wmem_alloc", "sndbuf", "fwd_alloc", "wmem_queued")
SK_MEMINFO += ("optmem", "backlog", "drops")

# struct tcp_info (include/uapi/linux/tcp.h): name, offset, struct format. The kernel hands
# out its own struct's length; a field past that length is absent on that kernel (rcv_wnd
# came with Linux 6.2, the total_rto fields with 6.7).
TCP_INFO_FIELDS: tuple[tuple[str, int, str], ...] = (
    ("state", 0, "B"),
    ("ca_state", 1, "B"),
    ("retransmits", 2, "B"),
    ("probes", 3, "B"),
    ("backoff", 4, "B"),
    ("options", 5, "B"),
    ("wscale", 6, "B"),  # snd_wscale: low 4 bits, rcv_wscale: high 4 bits
    ("rto", 8, "I"),  # microseconds
    ("ato", 12, "I"),
    ("snd_mss", 16, "I"),
    ("rcv_mss", 20, "I"),
    ("unacked", 24, "I"),
    ("sacked", 28, "I"),
    ("lost", 32, "I"),
    ("retrans", 36, "I"),
    ("fackets", 40, "I"),
    ("last_data_sent", 44, "I"),  # milliseconds ago
    ("last_ack_sent", 48, "I"),
    ("last_data_recv", 52, "I"),
    ("last_ack_recv", 56, "I"),
    ("pmtu", 60, "I"),
    ("rcv_ssthresh", 64, "I"),
    ("rtt", 68, "I"),  # microseconds (smoothed)
    ("rttvar", 72, "I"),
    ("snd_ssthresh", 76, "I"),
    ("snd_cwnd", 80, "I"),  # segments
    ("advmss", 84, "I"),
    ("reordering", 88, "I"),
    ("rcv_rtt", 92, "I"),
    ("rcv_space", 96, "I"),  # bytes: the receiver's estimate of what the sender sends per RTT
    ("total_retrans", 100, "I"),
    ("pacing_rate", 104, "Q"),  # bytes per second
    ("max_pacing_rate", 112, "Q"),
    ("bytes_acked", 120, "Q"),
    ("bytes_received", 128, "Q"),
    ("segs_out", 136, "I"),
    ("segs_in", 140, "I"),
    ("notsent_bytes", 144, "I"),
    ("min_rtt", 148, "I"),
    ("data_segs_in", 152, "I"),
    ("data_segs_out", 156, "I"),
    ("delivery_rate", 160, "Q"),
    ("busy_time", 168, "Q"),  # microseconds
    ("rwnd_limited", 176, "Q"),  # microseconds the sender was limited by the receive window
    ("sndbuf_limited", 184, "Q"),
    ("delivered", 192, "I"),
    ("delivered_ce", 196, "I"),
    ("bytes_sent", 200, "Q"),
    ("bytes_retrans", 208, "Q"),
    ("dsack_dups", 216, "I"),
    ("reord_seen", 220, "I"),
    ("rcv_ooopack", 224, "I"),
    ("snd_wnd", 228, "I"),  # bytes: the peer's advertised window, after scaling
    ("rcv_wnd", 232, "I"),  # bytes: our advertised window, after scaling (Linux >= 6.2)
    ("rehash", 236, "I"),
    ("total_rto", 240, "H"),
    ("total_rto_recoveries", 242, "H"),
    ("total_rto_time", 244, "I"),
    ("received_ce", 248, "I"),  # Accurate ECN counters (Linux >= 6.18)
    ("delivered_e1_bytes", 252, "I"),
    ("delivered_e0_bytes", 256, "I"),
    ("delivered_ce_bytes", 260, "I"),
    ("received_e1_bytes", 264, "I"),
    ("received_e0_bytes", 268, "I"),
    ("received_ce_bytes", 272, "I"),
    ("accecn_fail_mode", 276, "H"),
    ("accecn_opt_seen", 278, "H"),
)
_TCP_INFO_STRUCTS = tuple(
    (name, offset, struct.Struct("=" + fmt)) for name, offset, fmt in TCP_INFO_FIELDS
)


class SockDiagError(Exception):
    """A malformed dump (the text says what and at which offset)."""


class SockDiagRefused(EnvironmentProblem):
    """The kernel or the host refused the netlink dump; the caller falls back to /proc."""


# --- pure: requests ------------------------------------------------------------------------


def request(family: int | None, states: int = ALL_STATES, ext: int = 0, seq: int = 1) -> bytes:
    """A dump request for the TCP sockets in the ``states`` bitmask (bit S for state S),
    with the attributes of ``ext`` (bit A-1 for attribute A).

    ``family`` None asks both families at once with the original ``inet_diag_req``
    (TCPDIAG_GETSOCK, which the kernel serves as AF_UNSPEC): the kernel walks its TCP hash
    table once per dump, and that table is shared by all namespaces unless
    net.ipv4.tcp_child_ehash_entries gave them their own (262144 buckets here: some 16 ms a
    walk, whatever the namespace holds). A family asks ``inet_diag_req_v2`` for that one.
    """
    flags = NLM_F_REQUEST | NLM_F_DUMP
    sockid = _SOCKID_PORTS.pack(0, 0) + bytes(32) + _SOCKID_TAIL.pack(0, 0, 0)
    if family is None:
        body = _REQ_V1.pack(0, 0, 0, ext) + sockid + struct.pack("=II", states, 0)
        return NLMSGHDR.pack(HDR_LEN + len(body), TCPDIAG_GETSOCK, flags, seq, 0) + body
    body = _REQ.pack(family, socket.IPPROTO_TCP, ext, states) + sockid
    return NLMSGHDR.pack(HDR_LEN + len(body), SOCK_DIAG_BY_FAMILY, flags, seq, 0) + body


def exact_request(key: SocketKey, ext: int = 0, seq: int = 1) -> bytes:
    """A request for one socket (no dump: the kernel looks it up in its hash table)."""
    src = socket.inet_pton(key.family, key.src).ljust(16, b"\x00")
    dst = socket.inet_pton(key.family, key.dst).ljust(16, b"\x00")
    body = (
        _REQ.pack(key.family, socket.IPPROTO_TCP, ext, ALL_STATES)
        + _SOCKID_PORTS.pack(key.sport, key.dport)
        + src
        + dst
        + _SOCKID_TAIL.pack(0, key.cookie & 0xFFFFFFFF, key.cookie >> 32)
    )
    return NLMSGHDR.pack(HDR_LEN + len(body), SOCK_DIAG_BY_FAMILY, NLM_F_REQUEST, seq, 0) + body


@dataclass(frozen=True)
class SocketKey:
    """What names one socket to the kernel: family, both ends and its cookie."""

    family: int
    src: str
    sport: int
    dst: str
    dport: int
    cookie: int


def ext_bits(*attributes: int) -> int:
    return sum(1 << (a - 1) for a in attributes)


# --- pure: responses -----------------------------------------------------------------------


def messages(chunk: bytes) -> Iterator[tuple[int, int, int]]:
    """(type, offset of the payload, payload end) of each netlink message of one recv().

    Raises ``SockDiagError`` on a length that does not fit, and ``OSError`` with the errno
    of an NLMSG_ERROR (a refused request)."""
    pos, size = 0, len(chunk)
    while pos + HDR_LEN <= size:
        length, kind, _, _, _ = NLMSGHDR.unpack_from(chunk, pos)
        if length < HDR_LEN or pos + length > size:
            raise SockDiagError(f"netlink message of length {length} at offset {pos}")
        if kind == NLMSG_ERROR:
            code = -_I32.unpack_from(chunk, pos + HDR_LEN)[0] if length >= _DONE_LEN else 0
            if code:
                raise OSError(code, f"sock_diag: {os.strerror(code)}")
        else:
            yield kind, pos + HDR_LEN, pos + length
        pos += (length + 3) & ~3


def is_done(chunk: bytes) -> bool:
    """True when this recv() ends the dump (it holds NLMSG_DONE); raises ``OSError`` for an
    NLMSG_ERROR. A chunk of bare records is judged by its length alone (see
    ``uniform_records``), so a 30 k-socket dump is not walked twice."""
    uniform = uniform_records(chunk)
    if uniform is not None:
        return uniform[0] * uniform[1] != len(chunk)
    return any(kind == NLMSG_DONE for kind, _, _ in messages(chunk))


@dataclass(frozen=True)
class DiagSocket:
    """One socket of a dump: the inet_diag_msg, and the attributes asked for."""

    family: int
    state: int
    sport: int
    dport: int
    src: str
    dst: str
    inode: int
    cookie: int
    rqueue: int
    wqueue: int
    attrs: dict[int, bytes] = field(default_factory=dict, repr=False)

    @property
    def state_name(self) -> str:
        return TCP_STATES.get(self.state, f"state_{self.state:02X}")

    @property
    def key(self) -> SocketKey:
        return SocketKey(self.family, self.src, self.sport, self.dst, self.dport, self.cookie)


def _address(family: int, raw: bytes) -> str:
    return socket.inet_ntop(family, raw[:4] if family == socket.AF_INET else raw)


def parse_sockets(chunks: Iterable[bytes]) -> list[DiagSocket]:
    """Every socket in the dump's recv() chunks, with its attributes."""
    out: list[DiagSocket] = []
    for chunk in chunks:
        for kind, start, end in messages(chunk):
            if kind not in _SOCKET_TYPES:
                continue
            if end - start < DIAG_MSG_LEN:
                raise SockDiagError(f"inet_diag_msg of {end - start} bytes at offset {start}")
            family, state = chunk[start], chunk[start + 1]
            sport, dport = _SOCKID_PORTS.unpack_from(chunk, start + 4)
            _, low, high = _SOCKID_TAIL.unpack_from(chunk, start + 40)
            _, rqueue, wqueue, _, inode = _MSG_TAIL.unpack_from(chunk, start + 52)
            attrs: dict[int, bytes] = {}
            pos = start + DIAG_MSG_LEN
            while pos + 4 <= end:
                length, kind_attr = _RTATTR.unpack_from(chunk, pos)
                if length < 4 or pos + length > end:
                    raise SockDiagError(f"attribute of length {length} at offset {pos}")
                attrs[kind_attr] = bytes(chunk[pos + 4 : pos + length])
                pos += (length + 3) & ~3
            out.append(
                DiagSocket(
                    family=family,
                    state=state,
                    sport=sport,
                    dport=dport,
                    src=_address(family, chunk[start + 8 : start + 24]),
                    dst=_address(family, chunk[start + 24 : start + 40]),
                    inode=inode,
                    cookie=(high << 32) | low,
                    rqueue=rqueue,
                    wqueue=wqueue,
                    attrs=attrs,
                )
            )
    return out


def uniform_records(chunk: bytes) -> tuple[int, int] | None:
    """(sockets, record length) when the chunk is nothing but sockets of one record length
    (a TIME_WAIT dump: a bare inet_diag_msg, with INET_DIAG_MARK when the reader has
    CAP_NET_ADMIN), possibly closed by NLMSG_DONE; None when it is anything else. Checked
    with byte slices, not a Python loop per socket."""
    size = len(chunk)
    if size < _DONE_LEN:
        return None
    first_len, first_type = NLMSGHDR.unpack_from(chunk, 0)[:2]
    if first_type == NLMSG_DONE:
        return (0, RECORD_LEN) if size == _DONE_LEN and first_len == _DONE_LEN else None
    step = (first_len + 3) & ~3
    if first_type not in _SOCKET_TYPES or first_len < RECORD_LEN or step > size:
        return None
    if size % step == _DONE_LEN % step:
        tail = NLMSGHDR.unpack_from(chunk, size - _DONE_LEN)
        if tail[0] != _DONE_LEN or tail[1] != NLMSG_DONE:
            return None
        size -= _DONE_LEN
    elif size % step:
        return None
    count = size // step
    # Every record's length and type (bytes 0-5) must be the first one's; the flags (bytes
    # 6-7) carry NLM_F_MULTI and are left out.
    for k in range(6):
        if chunk[k:size:step].count(chunk[k]) != count:
            return None
    return count, step


def summarise(chunks: Iterable[bytes], port_range: PortRange | None) -> tuple[dict[str, int], int]:
    """(sockets per state name, distinct local ports of non-listening sockets inside
    ``port_range``): ``procfs.summarise_tcp``'s figures, from dump chunks.

    A chunk of bare records (a TIME_WAIT dump) is counted by byte slicing, without a Python
    loop per socket; any other chunk is walked message by message.
    """
    states: Counter[int] = Counter()
    ports: set[int] = set()
    for chunk in chunks:
        uniform = uniform_records(chunk)
        count, step = uniform or (0, RECORD_LEN)
        end = count * step
        if uniform is not None and TCP_LISTEN not in chunk[HDR_LEN + 1 : end : step]:
            states.update(chunk[HDR_LEN + 1 : end : step])
            if port_range is not None and count:
                pairs = bytearray(2 * count)  # each record's sport, network order
                pairs[0::2] = chunk[HDR_LEN + 4 : end : step]
                pairs[1::2] = chunk[HDR_LEN + 5 : end : step]
                ports.update(struct.unpack(f"!{count}H", pairs))
            continue
        for kind, start, end_msg in messages(chunk):
            if kind not in _SOCKET_TYPES:
                continue
            if end_msg - start < DIAG_MSG_LEN:
                raise SockDiagError(f"inet_diag_msg of {end_msg - start} bytes at {start}")
            state = chunk[start + 1]
            states[state] += 1
            if port_range is not None and state != TCP_LISTEN:
                ports.add((chunk[start + 4] << 8) | chunk[start + 5])
    in_range = 0
    if port_range is not None:
        ordered = sorted(ports)  # in C; a generator over 30 k ports costs five times more
        in_range = bisect.bisect_right(ordered, port_range[1]) - bisect.bisect_left(
            ordered, port_range[0]
        )
    names = {TCP_STATES.get(code, f"state_{code:02X}"): n for code, n in states.items()}
    return dict(sorted(names.items())), in_range


def parse_tcp_info(data: bytes) -> dict[str, int]:
    """``struct tcp_info`` -> {field: value} for every field this kernel's struct holds
    (``len(data)``), plus snd_wscale and rcv_wscale split from their shared byte."""
    out = {
        name: fmt.unpack_from(data, offset)[0]
        for name, offset, fmt in _TCP_INFO_STRUCTS
        if offset + fmt.size <= len(data)
    }
    if "wscale" in out:
        wscale = out.pop("wscale")
        out["snd_wscale"], out["rcv_wscale"] = wscale & 0x0F, wscale >> 4
    return out


def parse_skmeminfo(data: bytes) -> dict[str, int]:
    """INET_DIAG_SKMEMINFO (u32 per SK_MEMINFO_* index) -> {rcvbuf, sndbuf, ...}."""
    count = min(len(data) // 4, len(SK_MEMINFO))
    return dict(zip(SK_MEMINFO, struct.unpack_from(f"={count}I", data), strict=False))


@dataclass(frozen=True)
class TcpConnection:
    """A connection as ``tcp_connections`` reports it."""

    src: str
    sport: int
    dst: str
    dport: int
    state: str
    info: dict[str, int]  # parse_tcp_info
    memory: dict[str, int]  # parse_skmeminfo (rcvbuf, sndbuf: the socket's buffer sizes)
    congestion: str | None  # "cubic", "bbr", ...
    key: SocketKey | None = None  # for ``lookup``

    def fields(self) -> dict[str, Any]:
        return {
            "src": self.src,
            "sport": self.sport,
            "dst": self.dst,
            "dport": self.dport,
            "state": self.state,
            "congestion": self.congestion,
            "info": dict(self.info),
            "memory": dict(self.memory),
        }


def _same_address(a: str, b: str) -> bool:
    if a == b:
        return True
    for family in (socket.AF_INET, socket.AF_INET6):
        try:
            if socket.inet_pton(family, a) == socket.inet_pton(family, b):
                return True
        except OSError:
            continue
    # An IPv4 peer seen through an IPv6 socket: ::ffff:192.0.2.1.
    return a.removeprefix("::ffff:") == b.removeprefix("::ffff:")


def connections_to(
    sockets: Iterable[DiagSocket], peer: tuple[str, int] | None
) -> list[TcpConnection]:
    """The dumped sockets whose remote end is ``peer`` (address, port), all when None."""
    out = []
    for sock in sockets:
        if peer is not None and (sock.dport != peer[1] or not _same_address(sock.dst, peer[0])):
            continue
        info = sock.attrs.get(INET_DIAG_INFO)
        mem = sock.attrs.get(INET_DIAG_SKMEMINFO)
        cong = sock.attrs.get(INET_DIAG_CONG)
        out.append(
            TcpConnection(
                src=sock.src,
                sport=sock.sport,
                dst=sock.dst,
                dport=sock.dport,
                state=sock.state_name,
                info=parse_tcp_info(info) if info else {},
                memory=parse_skmeminfo(mem) if mem else {},
                congestion=cong.rstrip(b"\x00").decode("ascii", "replace") if cong else None,
                key=sock.key,
            )
        )
    return out


# --- I/O -----------------------------------------------------------------------------------


_THREAD_NET = "/proc/thread-self/ns/net"


def socket_for(netns: str | None = None, pid: int | None = None) -> socket.socket:
    """A NETLINK_SOCK_DIAG socket in a named namespace, in the namespace of ``pid``, or in
    the caller's. Raises ``SockDiagRefused`` when the host does not allow it."""
    if netns is not None and pid is not None:
        raise ValueError("give netns or pid, not both")
    try:
        if pid is not None:
            return _socket_in_pid(pid)
        with entered(netns):
            return socket.socket(socket.AF_NETLINK, socket.SOCK_DGRAM, NETLINK_SOCK_DIAG)
    except SockDiagRefused:
        raise
    except EnvironmentProblem as exc:  # setns refused (no CAP_SYS_ADMIN)
        raise SockDiagRefused(f"cannot open a sock_diag socket: {exc}") from exc
    except OSError as exc:
        raise SockDiagRefused(_refusal("opening a NETLINK_SOCK_DIAG socket", exc)) from exc


def _socket_in_pid(pid: int) -> socket.socket:
    path = f"/proc/{pid}/ns/net"
    target = os.open(path, os.O_RDONLY | os.O_CLOEXEC)  # FileNotFoundError: pid gone
    try:
        if os.fstat(target).st_ino == os.stat(_THREAD_NET).st_ino:
            # Already there: no setns, so no privilege needed.
            return socket.socket(socket.AF_NETLINK, socket.SOCK_DGRAM, NETLINK_SOCK_DIAG)
        own = os.open(_THREAD_NET, os.O_RDONLY | os.O_CLOEXEC)
        try:
            _setns(target, f"the network namespace of pid {pid}")
            try:
                return socket.socket(socket.AF_NETLINK, socket.SOCK_DGRAM, NETLINK_SOCK_DIAG)
            finally:
                _setns(own, "the original network namespace")
        finally:
            os.close(own)
    finally:
        os.close(target)


def _refusal(what: str, exc: OSError) -> str:
    reason = os.strerror(exc.errno) if exc.errno else str(exc)
    hint = {
        errno.EPROTONOSUPPORT: "the kernel lacks CONFIG_INET_DIAG",
        errno.EAFNOSUPPORT: "netlink is not available (a sandbox such as gVisor?)",
        errno.ENOENT: "the kernel lacks tcp_diag (CONFIG_INET_TCP_DIAG or its module)",
        errno.EPERM: "a seccomp or LSM policy forbids it",
        errno.EACCES: "a seccomp or LSM policy forbids it",
    }.get(exc.errno or 0, "")
    return f"{what} failed: {reason}" + (f" ({hint})" if hint else "")


_RECV = 1 << 16  # the kernel fills at most about 32 KiB per dump message batch
_TIMEOUT = 5.0  # seconds; a dump of 30 k sockets takes milliseconds
INFO_EXT = ext_bits(INET_DIAG_INFO, INET_DIAG_CONG, INET_DIAG_SKMEMINFO)


def dump(
    sock: socket.socket, family: int | None = None, states: int = ALL_STATES, ext: int = 0
) -> list[bytes]:
    """The raw recv() chunks of one dump on ``sock`` (pure parsers take it from here);
    ``family`` None: both families in one walk (see ``request``)."""
    try:
        sock.settimeout(_TIMEOUT)
        sock.send(request(family, states, ext))
        chunks = []
        while True:
            chunk = sock.recv(_RECV)
            if not chunk:
                break
            chunks.append(chunk)
            if is_done(chunk):
                break
        return chunks
    except SockDiagError as exc:
        raise SockDiagRefused(f"sock_diag dump is malformed: {exc}") from exc
    except OSError as exc:
        raise SockDiagRefused(_refusal("a sock_diag dump of TCP sockets", exc)) from exc


def lookup(sock: socket.socket, key: SocketKey, ext: int = INFO_EXT) -> DiagSocket | None:
    """One socket by its key (a hash lookup in the kernel, no walk); None once it is gone."""
    try:
        sock.settimeout(_TIMEOUT)
        sock.send(exact_request(key, ext))
        chunk = sock.recv(_RECV)
        found = parse_sockets([chunk])
    except OSError as exc:
        if exc.errno == errno.ENOENT:
            return None
        raise SockDiagRefused(_refusal("a sock_diag lookup of a TCP socket", exc)) from exc
    except SockDiagError as exc:
        raise SockDiagRefused(f"sock_diag answer is malformed: {exc}") from exc
    return found[0] if found else None


def tcp_summary(
    port_range: PortRange | None, *, netns: str | None = None, pid: int | None = None
) -> tuple[dict[str, int], int]:
    """Sockets per state and ephemeral ports in use (see ``summarise``) in a namespace:
    one dump of both families."""
    sock = socket_for(netns, pid)
    try:
        chunks = dump(sock)
    finally:
        sock.close()
    return summarise(chunks, port_range)


def tcp_connections(
    peer: tuple[str, int] | None = None,
    *,
    netns: str | None = None,
    pid: int | None = None,
    states: int = CONNECTED_STATES,
) -> list[TcpConnection]:
    """TCP connections of a namespace whose remote end is ``peer`` (address, port), with
    tcp_info, socket buffers and congestion control."""
    sock = socket_for(netns, pid)
    try:
        found = parse_sockets(dump(sock, None, states, INFO_EXT))
    finally:
        sock.close()
    return connections_to(found, peer)


# --- watching one transfer's connection ------------------------------------------------------


class Peaks:
    """Running reduction of a transfer's connection samples (see ``connection_peaks``):
    constant memory however long the transfer."""

    _MAXIMA = (
        ("rcv_wnd_max", "rcv_wnd"),
        ("rcv_space_max", "rcv_space"),
        ("snd_wnd_max", "snd_wnd"),
        ("snd_cwnd_max", "snd_cwnd"),
    )
    _LAST = ("bytes_received", "bytes_acked", "total_retrans", "rcv_mss", "snd_mss")
    _LAST_SECONDS = ("rwnd_limited", "sndbuf_limited", "busy_time")  # microseconds

    def __init__(self) -> None:
        self.samples = 0
        self.connections: set[tuple[str, int, str, int]] = set()
        self.out: dict[str, Any] = {}
        self.congestion: set[str] = set()
        self.last: dict[str, int] = {}

    def add(self, sample: TcpConnection) -> None:
        info, out = sample.info, self.out
        self.samples += 1
        self.connections.add((sample.src, sample.sport, sample.dst, sample.dport))
        for name, field_ in self._MAXIMA:
            if field_ in info:
                out[name] = max(out.get(name, 0), info[field_])
        if "snd_mss" in info and "snd_cwnd" in info:
            cwnd_bytes = info["snd_cwnd"] * info["snd_mss"]
            out["cwnd_bytes_max"] = max(out.get("cwnd_bytes_max", 0), cwnd_bytes)
        if info.get("rtt"):
            rtt = info["rtt"] / 1000
            out["rtt_ms_min"] = min(out.get("rtt_ms_min", rtt), rtt)
            out["rtt_ms_max"] = max(out.get("rtt_ms_max", rtt), rtt)
        if "rcvbuf" in sample.memory:
            out["rcvbuf_max"] = max(out.get("rcvbuf_max", 0), sample.memory["rcvbuf"])
        if sample.congestion:
            self.congestion.add(sample.congestion)
        self.last = info

    def result(self) -> dict[str, Any]:
        if not self.samples:
            return {}
        out: dict[str, Any] = {"samples": self.samples, "connections": len(self.connections)}
        out.update(self.out)
        out.update({name: self.last[name] for name in self._LAST if name in self.last})
        for name in self._LAST_SECONDS:
            if name in self.last:
                out[f"{name}_s"] = self.last[name] / 1e6
        if len(self.congestion) == 1:
            out["congestion"] = next(iter(self.congestion))
        return out


def connection_peaks(samples: Iterable[TcpConnection]) -> dict[str, Any]:
    """What a transfer's connection samples say, reduced for a transfer record: the largest
    window this side advertised (``rcv_wnd_max``, bytes), the largest window the peer
    advertised (``snd_wnd_max``), the congestion window peak in segments and bytes, RTT
    extremes (ms, the kernel's smoothed RTT), the largest receive buffer, and the last
    sample's cumulative counters (bytes, retransmissions, seconds limited by the receive
    window or the send buffer). Fields this kernel's tcp_info lacks are left out; no
    samples give {}."""
    peaks = Peaks()
    for sample in samples:
        peaks.add(sample)
    return peaks.result()


def advertised_window_bound_bps(peaks: dict[str, Any], rtt_s: float) -> float | None:
    """The window bound of a transfer from what the receiver really advertised:
    ``rcv_wnd_max`` / RTT (bits per second), None without a sampled window."""
    window = peaks.get("rcv_wnd_max")
    if not window or rtt_s <= 0:
        return None
    return 8 * window / rtt_s


class ConnectionWatch:
    """Samples tcp_info of the connections to ``peer`` (address, port or None) in a
    namespace every ``interval`` seconds, in a thread, while the ``with`` body runs.

    Known connections are looked up by key (a hash lookup in the kernel); a dump of the
    namespace's connected sockets finds new ones every ``discover`` seconds (a dump walks
    the kernel's whole TCP hash table, some milliseconds). ``local_port`` narrows the
    match (the primary's side of a transfer: local port 53, peer the secondary's address).
    While no connection is known it dumps every ``interval``, so that a transfer's first
    moments are seen. ``peaks()`` is the reduction for a transfer record (constant memory);
    ``error`` says why sampling stopped, if it did.
    """

    def __init__(
        self,
        peer: tuple[str, int | None],
        *,
        netns: str | None = None,
        pid: int | None = None,
        local_port: int | None = None,
        interval: float = 0.02,
        discover: float = 0.2,
    ) -> None:
        if interval <= 0 or discover < interval:
            raise ValueError(f"need 0 < interval <= discover (got {interval}, {discover})")
        self.peer = peer
        self.local_port = local_port
        self.interval = interval
        self.discover = discover
        self.tracker = Peaks()
        self.error: str | None = None
        self._sock = socket_for(netns, pid)  # here, so a refusal raises in the caller
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="xfrbench-tcpinfo", daemon=True)

    def __enter__(self) -> ConnectionWatch:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self._sock.close()

    def peaks(self) -> dict[str, Any]:
        return self.tracker.result()

    def _matches(self, conn: TcpConnection) -> bool:
        address, port = self.peer
        if port is not None and conn.dport != port:
            return False
        if self.local_port is not None and conn.sport != self.local_port:
            return False
        return _same_address(conn.dst, address)

    def _run(self) -> None:
        known: dict[SocketKey, None] = {}
        next_dump = 0.0
        try:
            while not self._stop.is_set():
                now = time.monotonic()
                if now >= next_dump or not known:
                    found = connections_to(
                        parse_sockets(dump(self._sock, None, CONNECTED_STATES, INFO_EXT)), None
                    )
                    fresh = [c for c in found if self._matches(c)]
                    known = {c.key: None for c in fresh if c.key is not None}
                    for conn in fresh:
                        self.tracker.add(conn)
                    next_dump = now + self.discover
                else:
                    for key in list(known):
                        sock = lookup(self._sock, key)
                        if sock is None or sock.state == TCP_TIME_WAIT:
                            del known[key]
                            continue
                        for conn in connections_to([sock], None):
                            self.tracker.add(conn)
                self._stop.wait(self.interval)
        except SockDiagRefused as exc:  # reported, never raised into a run
            self.error = str(exc)
