"""The netlink sock_diag (inet_diag) messages of TCP sockets: pure packing and parsing.

No sockets here: ``harness.observe.sockdiag`` sends what ``request`` / ``exact_request``
build and hands the recv() chunks to the parsers below, which are tested on dumps captured
from a real kernel (tests/fixtures/sockdiag/).

- ``request`` / ``exact_request``: a dump of the TCP sockets in some states, or a lookup of
  one socket by its ``SocketKey``; ``ext_bits`` names the attributes to ask for.
- ``messages`` / ``is_done``: netlink framing of one recv(), NLMSG_ERROR as ``OSError``.
- ``parse_sockets``: every ``DiagSocket`` of a dump, with its raw attributes.
- ``uniform_records`` / ``summarise``: sockets per state and ephemeral ports in use, by byte
  slicing when a chunk is nothing but bare records (30 k TIME_WAIT sockets).

Netlink and inet_diag headers are in host byte order except the ports and addresses of
``inet_diag_sockid`` (network order).
"""

from __future__ import annotations

import bisect
import os
import socket
import struct
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from harness.observe.tcp_states import TCP_STATES, PortRange

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

# Request attributes and the bytecode a dump may carry (include/uapi/linux/inet_diag.h).
INET_DIAG_REQ_BYTECODE = 1
INET_DIAG_BC_D_COND = 8  # the remote end: family, prefix, port (-1: any), address
_BC_OP = struct.Struct("=BBH")  # code, yes, no: jumps in bytes from this op's start
_HOSTCOND = struct.Struct("=BB2xi")  # family, prefix_len, (pad), port; then the address

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


class SockDiagError(Exception):
    """A malformed dump (the text says what and at which offset)."""


# --- requests ------------------------------------------------------------------------------


def request(
    family: int | None,
    states: int = ALL_STATES,
    ext: int = 0,
    seq: int = 1,
    bytecode: bytes = b"",
) -> bytes:
    """A dump request for the TCP sockets in the ``states`` bitmask (bit S for state S),
    with the attributes of ``ext`` (bit A-1 for attribute A). ``bytecode`` (see
    ``remote_filter``) makes the kernel skip every other socket: they are neither copied
    nor parsed.

    ``family`` None asks both families at once with the original ``inet_diag_req``
    (TCPDIAG_GETSOCK, which the kernel serves as AF_UNSPEC): the kernel walks its TCP hash
    table once per dump, and that table is shared by all namespaces unless
    net.ipv4.tcp_child_ehash_entries gave them their own (262144 buckets here: some 16 ms a
    walk, whatever the namespace holds). A family asks ``inet_diag_req_v2`` for that one.
    """
    flags = NLM_F_REQUEST | NLM_F_DUMP
    sockid = _SOCKID_PORTS.pack(0, 0) + bytes(32) + _SOCKID_TAIL.pack(0, 0, 0)
    if bytecode:
        attr_len = _RTATTR.size + len(bytecode)
        tail = _RTATTR.pack(attr_len, INET_DIAG_REQ_BYTECODE) + bytecode
        tail += bytes(-attr_len % 4)
    else:
        tail = b""
    if family is None:
        body = _REQ_V1.pack(0, 0, 0, ext) + sockid + struct.pack("=II", states, 0) + tail
        return NLMSGHDR.pack(HDR_LEN + len(body), TCPDIAG_GETSOCK, flags, seq, 0) + body
    body = _REQ.pack(family, socket.IPPROTO_TCP, ext, states) + sockid + tail
    return NLMSGHDR.pack(HDR_LEN + len(body), SOCK_DIAG_BY_FAMILY, flags, seq, 0) + body


def remote_filter(address: str, port: int | None) -> bytes:
    """inet_diag bytecode keeping only sockets whose remote end is ``address`` (and
    ``port``, None: any): one INET_DIAG_BC_D_COND op with its hostcond. An IPv4 address
    also matches IPv4-mapped IPv6 sockets (the kernel's rule). The kernel accepts a socket
    when the program runs off its end exactly, rejects it when a jump goes 4 bytes past."""
    family = socket.AF_INET6 if ":" in address else socket.AF_INET
    raw = socket.inet_pton(family, address)
    cond = _HOSTCOND.pack(family, len(raw) * 8, -1 if port is None else port) + raw
    size = _BC_OP.size + len(cond)
    return _BC_OP.pack(INET_DIAG_BC_D_COND, size, size + 4) + cond


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


# --- responses -----------------------------------------------------------------------------


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

    def to_json(self) -> list[Any]:
        """As plain data (an agent's answer): its fields in order, attributes in hex."""
        attrs = {str(kind): value.hex() for kind, value in self.attrs.items()}
        return [self.family, self.state, self.sport, self.dport, self.src, self.dst,
                self.inode, self.cookie, self.rqueue, self.wqueue, attrs]  # fmt: skip

    @classmethod
    def from_json(cls, data: list[Any]) -> DiagSocket:
        *fields, attrs = data
        return cls(*fields, attrs={int(k): bytes.fromhex(v) for k, v in attrs.items()})


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
