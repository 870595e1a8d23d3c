"""Pure wire-format logic for zone transfers: no sockets, no clocks.

- ``split_messages``: cut a TCP byte stream into its 2-byte-length-prefixed DNS messages.
- ``read_name`` / ``skip_name``: domain names with compression pointers, giving the
  lower-cased uncompressed wire (what RFC 4034 canonical form and RFC 8976 digests need) and a
  byte string that sorts in RFC 4034 canonical name order.
- ``walk_answers``: the records of an answer section, one by one.
- ``may_end_with_soa`` / ``find_tsig``: cheap scans from the end of a message, so the reader's
  fast path can skip parsing a message whose last record cannot be an SOA (the only record
  that can end a transfer).
- ``TransferTracker``: the AXFR/IXFR response state machine (after dnspython's
  ``dns.xfr.Inbound``, without applying any data).
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from harness.xfr.serial import serial_lt

HEADER = struct.Struct("!HHHHHH")
RR_FIXED = struct.Struct("!HHIH")  # type, class, ttl, rdlength
U16 = struct.Struct("!H")
U32 = struct.Struct("!I")

SOA = 6
TSIG = 250
AXFR = 252
IXFR = 251
CLASS_ANY = 255

FLAG_QR = 0x8000
FLAG_AA = 0x0400
FLAG_TC = 0x0200

_SOA_RDATA_MIN = 22  # two root names + five 32-bit fields
_SOA_RDATA_MAX = 2 * 255 + 20
_TSIG_FIXED = b"\x00\xfa\x00\xff\x00\x00\x00\x00"  # type TSIG, class ANY, TTL 0
_TSIG_SCAN = 1024  # the TSIG RR (algorithm name, MAC, other data) fits in this tail


class WireError(Exception):
    """A malformed message; the text says what and at which offset."""


class TransferFormError(Exception):
    """A well-formed message that breaks the transfer protocol (order of SOAs, serials)."""


@dataclass(frozen=True)
class Header:
    id: int
    flags: int
    qdcount: int
    ancount: int
    nscount: int
    arcount: int

    @property
    def rcode(self) -> int:
        return self.flags & 0x000F

    @property
    def is_response(self) -> bool:
        return bool(self.flags & FLAG_QR)

    @property
    def truncated(self) -> bool:
        return bool(self.flags & FLAG_TC)

    @property
    def authoritative(self) -> bool:
        return bool(self.flags & FLAG_AA)


def parse_header(msg: bytes) -> Header:
    if len(msg) < 12:
        raise WireError(f"message of {len(msg)} bytes is shorter than a DNS header")
    return Header(*HEADER.unpack_from(msg, 0))


def split_messages(
    buf: bytes | bytearray, start: int = 0, end: int | None = None
) -> tuple[list[bytes], int]:
    """The complete length-prefixed messages in ``buf[start:end]`` and the offset where the
    first incomplete one (or the end) begins."""
    if end is None:
        end = len(buf)
    out: list[bytes] = []
    pos = start
    while end - pos >= 2:
        length = (buf[pos] << 8) | buf[pos + 1]
        if end - pos - 2 < length:
            break
        out.append(bytes(buf[pos + 2 : pos + 2 + length]))
        pos += 2 + length
    return out, pos


def frame(msg: bytes) -> bytes:
    """A message with its 2-byte TCP length prefix (RFC 1035 section 4.2.2)."""
    if len(msg) > 0xFFFF:
        raise WireError(f"message of {len(msg)} bytes does not fit a TCP frame")
    return U16.pack(len(msg)) + msg


def _key_label(label: bytes) -> bytes:
    # A label's contribution to the name sort key: lower-cased, then \x00 and \x01 escaped so
    # that \x00 can terminate the label and shorter labels sort first, as RFC 4034 6.1 wants.
    return label.replace(b"\x01", b"\x01\x02").replace(b"\x00", b"\x01\x01") + b"\x00"


def name_key_from_labels(labels: list[bytes] | tuple[bytes, ...]) -> bytes:
    """Sort key of a name given its labels left to right (root label excluded)."""
    return b"".join(_key_label(label.lower()) for label in reversed(labels))


NameCache = dict[int, tuple[bytes, bytes, int]]


def read_name(msg: bytes, off: int, cache: NameCache) -> tuple[bytes, bytes, int]:
    """(lower-cased uncompressed wire, canonical sort key, offset after the name).

    ``cache`` maps message offsets to names already decoded in this message (pass a new
    dict per message): an AXFR owner name is typically one new label plus a pointer to a
    name seen before, so most names cost one label. Pointers must point backwards, which
    rules out loops.
    """
    labels: list[int] = []  # offsets of length bytes, left to right
    seg_ends: list[int] = []  # per label: where the name ends when read from that label
    seg_first = 0  # index in labels of the first label of the current segment
    pos = off
    limit = off  # a pointer must go below the start of the current segment
    end_after = -1
    size = len(msg)
    while True:
        hit = cache.get(pos)
        if hit is not None:
            suffix_wire, suffix_key, hit_end = hit
            if end_after < 0:
                end_after = hit_end
            seg_ends.extend([hit_end] * (len(labels) - seg_first))
            break
        if pos >= size:
            raise WireError(f"name at offset {off} runs past the end of the message")
        length = msg[pos]
        if length == 0:
            suffix_wire, suffix_key = b"\x00", b""
            if end_after < 0:
                end_after = pos + 1
            seg_ends.extend([pos + 1] * (len(labels) - seg_first))
            break
        if length >= 0xC0:
            if pos + 1 >= size:
                raise WireError(f"truncated compression pointer at offset {pos}")
            target = ((length & 0x3F) << 8) | msg[pos + 1]
            if target >= limit:
                raise WireError(f"compression pointer at offset {pos} does not point backwards")
            if end_after < 0:
                end_after = pos + 2
            seg_ends.extend([pos + 2] * (len(labels) - seg_first))
            seg_first = len(labels)
            pos = limit = target
            continue
        if length > 63:
            raise WireError(f"label length {length} at offset {pos} (bad label type)")
        labels.append(pos)
        pos += 1 + length
    wire = suffix_wire
    key = suffix_key
    for index in range(len(labels) - 1, -1, -1):
        start = labels[index]
        label = msg[start + 1 : start + 1 + msg[start]].lower()
        wire = bytes((len(label),)) + label + wire
        key = key + label.replace(b"\x01", b"\x01\x02").replace(b"\x00", b"\x01\x01") + b"\x00"
        cache[start] = (wire, key, seg_ends[index])
    if len(wire) > 255:
        raise WireError(f"name at offset {off} is longer than 255 octets")
    return wire, key, end_after


def skip_name(msg: bytes, off: int) -> int:
    """Offset just after the (possibly compressed) name at ``off``."""
    pos = off
    size = len(msg)
    while pos < size:
        length = msg[pos]
        if length == 0:
            return pos + 1
        if length >= 0xC0:
            return pos + 2
        if length > 63:
            raise WireError(f"label length {length} at offset {pos} (bad label type)")
        pos += 1 + length
    raise WireError(f"name at offset {off} runs past the end of the message")


def skip_questions(msg: bytes, off: int, count: int) -> int:
    for _ in range(count):
        off = skip_name(msg, off) + 4
    if off > len(msg):
        raise WireError("question section runs past the end of the message")
    return off


def soa_serial(msg: bytes, rdata_off: int, rdlen: int) -> int:
    """The serial field of an SOA rdata (after the two names)."""
    pos = skip_name(msg, skip_name(msg, rdata_off))
    if pos + 20 != rdata_off + rdlen:
        raise WireError(f"SOA rdata at offset {rdata_off} has a bad length")
    return U32.unpack_from(msg, pos)[0]


def may_end_with_soa(msg: bytes, answers_end: int) -> bool:
    """False when the record ending at ``answers_end`` is certainly not an SOA.

    An SOA record ends with its rdata; its type field therefore sits exactly
    ``10 + rdlength`` bytes before the end, with rdlength in 22..530. Looking for the type
    code followed by a matching rdlength finds every SOA (no false negatives); a rare false
    positive only costs a full parse of that message.
    """
    lo = max(12, answers_end - 10 - _SOA_RDATA_MAX)
    pos = answers_end - 10 - _SOA_RDATA_MIN
    while pos >= lo:
        pos = msg.rfind(b"\x00\x06", lo, pos + 2)
        if pos < 0:
            return False
        if U16.unpack_from(msg, pos + 8)[0] == answers_end - pos - 10:
            return True
        pos -= 1
    return False


@dataclass(frozen=True)
class TsigLocation:
    start: int  # offset of the TSIG owner name: the message is signed up to here
    rdata_off: int
    rdlen: int


def find_tsig(msg: bytes, key_wire: bytes) -> TsigLocation | None:
    """The TSIG record that ends the message, if any, for a key whose lower-cased wire name
    is ``key_wire`` (the owner may also be a compression pointer)."""
    size = len(msg)
    lo = max(12, size - _TSIG_SCAN)
    pos = msg.rfind(_TSIG_FIXED, lo)
    while pos >= 0:
        rdlen = U16.unpack_from(msg, pos + 8)[0] if pos + 10 <= size else -1
        if pos + 10 + rdlen == size:
            owner_len = len(key_wire)
            if pos - owner_len >= 12 and msg[pos - owner_len : pos].lower() == key_wire:
                return TsigLocation(pos - owner_len, pos + 10, rdlen)
            if pos - 2 >= 12 and msg[pos - 2] >= 0xC0:
                return TsigLocation(pos - 2, pos + 10, rdlen)
            return None
        pos = msg.rfind(_TSIG_FIXED, lo, pos + len(_TSIG_FIXED) - 1)
    return None


Mode = Literal["axfr", "ixfr"]


class TransferTracker:
    """What the answer records of an AXFR/IXFR response mean, record by record.

    Feed every answer record in order: ``soa(is_apex, serial)`` for an SOA, ``other()`` for
    anything else, or ``others(n)`` for n records known not to be SOAs (the reader's fast
    path). Raises ``TransferFormError`` when the sequence breaks RFC 5936 / RFC 1995.
    """

    def __init__(self, xfr: Mode, client_serial: int | None = None) -> None:
        if xfr == "ixfr" and client_serial is None:
            raise ValueError("an IXFR needs the client's current serial")
        self.query: Mode = xfr
        self.mode: Mode = xfr  # becomes "axfr" when an IXFR answer is AXFR-style
        self.client_serial = client_serial
        self.final_serial: int | None = None
        self.started = False
        self.done = False
        self.style: Literal["incremental", "axfr-style", "up-to-date"] | None = None
        self._expecting_soa = False  # IXFR: the second record tells the style
        self._delete_mode = False
        self._current = client_serial
        self._changes = 0

    @property
    def style_known(self) -> bool:
        return self.query == "axfr" or self.style is not None

    def soa(self, is_apex: bool, serial: int) -> None:
        if not is_apex:
            self.other()
            return
        if self.done:
            raise TransferFormError("records after the closing SOA")
        if not self.started:
            self._first(serial)
            return
        if self.mode == "axfr":
            if self._expecting_soa:
                raise TransferFormError("empty IXFR sequence")
            if serial != self.final_serial:
                raise TransferFormError(
                    f"SOA with serial {serial} inside the transfer of serial {self.final_serial}"
                )
            self.done = True
            return
        if self._expecting_soa:
            self._expecting_soa = False
            self.style = "incremental"
        self._delete_mode = not self._delete_mode
        if self._delete_mode and serial == self.final_serial:
            if self._changes == 0:
                raise TransferFormError("empty IXFR sequence")
            if self._current != self.final_serial:
                raise TransferFormError("IXFR ended before reaching the new serial")
            self.done = True
        elif self._delete_mode:
            if serial != self._current:
                raise TransferFormError(
                    f"IXFR difference starts at serial {serial}, expected {self._current}"
                )
            self._changes += 1
        else:
            self._current = serial

    def _first(self, serial: int) -> None:
        self.started = True
        self.final_serial = serial
        if self.query == "ixfr":
            assert self.client_serial is not None
            if serial == self.client_serial:
                self.style = "up-to-date"
                self.done = True
            elif serial_lt(serial, self.client_serial):
                raise TransferFormError(
                    f"server serial {serial} is older than the client's {self.client_serial}"
                )
            else:
                self._expecting_soa = True

    def other(self) -> None:
        if self.done:
            raise TransferFormError("records after the closing SOA")
        if not self.started:
            raise TransferFormError("the first answer record is not the zone's SOA")
        if self._expecting_soa:
            # An IXFR answer whose second record is not an SOA is a whole zone (RFC 1995 4).
            self._expecting_soa = False
            self.mode = "axfr"
            self.style = "axfr-style"

    def others(self, count: int) -> None:
        if count and (not self.started or self.done or self._expecting_soa):
            # Only valid in the middle of a transfer whose style is known; be exact otherwise.
            for _ in range(count):
                self.other()


RecordSink = Callable[[bytes, int, int, int, int, int, int], None]


def walk_answers(
    msg: bytes,
    off: int,
    count: int,
    tracker: TransferTracker,
    apex_wire: bytes,
    cache: NameCache,
    sink: RecordSink | None = None,
) -> int:
    """Feed ``count`` answer records starting at ``off`` to the tracker (and to ``sink`` as
    ``sink(msg, owner_off, rdtype, rdclass, ttl, rdata_off, rdlen)``); returns the offset
    after the last one."""
    size = len(msg)
    unpack = RR_FIXED.unpack_from
    for _ in range(count):
        owner = off
        pos = skip_name(msg, off)
        if pos + 10 > size:
            raise WireError(f"record at offset {owner} runs past the end of the message")
        rdtype, rdclass, ttl, rdlen = unpack(msg, pos)
        rdata = pos + 10
        off = rdata + rdlen
        if off > size:
            raise WireError(f"rdata at offset {rdata} runs past the end of the message")
        if rdtype == SOA:
            owner_wire = read_name(msg, owner, cache)[0]
            tracker.soa(owner_wire == apex_wire, soa_serial(msg, rdata, rdlen))
        else:
            tracker.other()
        if sink is not None:
            sink(msg, owner, rdtype, rdclass, ttl, rdata, rdlen)
    return off
