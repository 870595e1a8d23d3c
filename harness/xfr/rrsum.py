"""RRSUM: an order-independent, streaming digest of a zone's records, for verification.

Definition. Each resource record is put in its canonical wire form (RFC 4034 section 6.2:
owner name uncompressed and lower-cased, TYPE, CLASS, TTL, RDLENGTH, then RDATA in canonical
form, the names of the types listed there uncompressed and lower-cased, exactly what
``digest.canonical_rdata`` and dnspython's ``Rdata.to_digestable`` produce). That byte string
is hashed with BLAKE2s-256 and the 32 bytes are read as a big-endian integer; the digest is
the sum of these integers modulo 2**256, together with the number of records. Text form:
``rrsum:<records>:<64 hex digits>`` (``ZoneSum.text``).

Why it is a sound check that a copy equals its source:
- Addition is commutative and associative, so neither the order of the records, nor how
  they are cut into messages and compressed, nor how the work is split (messages, chunks of
  a stream, ranges of a zone file, processes) changes the result: partial sums add up.
- A changed record swaps one term for another, a missing one removes a term, an extra one
  adds a term. An unchanged sum then needs the hashes involved to cancel out modulo 2**256,
  which for records that were not crafted for it happens with probability about 2**-256:
  a broken transfer, a bug in a server or in the harness is caught. (Against someone who
  chooses records to collide, a sum of hashes is weaker than a sorted hash: generalised
  birthday attacks, Wagner 2002. A benchmark does not defend against that.)
- The record count is carried beside the sum so that a report can say how many records
  each side holds; a ``ZoneSum`` compares equal only when both agree.

How it differs from RFC 8976 ZONEMD (SIMPLE), which ``harness.xfr.digest`` computes:
- It is a sum over a multiset, with no sorting and no memory per record: that is why it
  streams. ZONEMD hashes the records in canonical order, which needs the whole zone first.
- Duplicates count as many times as they occur; ZONEMD (RRsets are sets) counts them once.
  Servers keep one copy of a duplicated record, so a zone file that repeats a record does
  not match a server's copy of it (zonegen never writes duplicates).
- Every record's own TTL is hashed; ZONEMD hashes one TTL per RRset. A changed TTL is
  detected by both. A zone file whose RRset mixes TTLs does not match a server's copy (the
  server settles on one TTL); zonegen never writes mixed TTLs.
- Every record counts, the apex ZONEMD RRset and its RRSIGs included (ZONEMD leaves those
  out, since they cannot cover themselves).
- It is not ZONEMD: its value cannot be put in or checked against a ZONEMD record, and a
  zone's RRSUM and its ZONEMD digest are never comparable. Use ``harness.xfr.digest`` or
  ``harness.xfr.digest.zone_digest`` where ZONEMD semantics are wanted.

Incremental updates are arithmetic in the same group: after a serial bump the zone's sum is
``base - h(old SOA) + h(new SOA)``; after an IXFR change set (an RFC 1995 diff, both SOAs
included) it is ``base - sum(deleted) + sum(added)`` (``ZoneSum.apply``, ``soa_bump``,
``apply_diff_lines``).

Everything here is pure (no I/O): ``sum_message`` and ``sum_stream`` for transfer messages
(fast paths for the types of the generated zones, ``canonical_rdata`` for the rest),
``sum_rrsets`` for dnspython objects (the reference); ``harness.xfr.rrsum_text`` sums
zone-file lines (one RR per line, as zonegen, kdig and ``dnssec-signzone -O full`` write
them) and applies serial bumps and change sets. File and socket I/O around them lives in
``harness.xfr.verify`` (copies read by AXFR) and ``harness.xfr.zonefile_sum`` (zone
files, diffs).
"""

from __future__ import annotations

import hashlib
import struct
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np

from harness.xfr.digest import RAW_TYPES, canonical_rdata
from harness.xfr.wire import NameCache, WireError, skip_questions

SCHEME = "rrsum"
MODULUS = 1 << 256
_HASH = hashlib.blake2s  # 256-bit output; the fastest hashlib constructor for short inputs
_DIGEST = hashlib.blake2s.digest

# Types whose rdata is one domain name, lower-cased in canonical form (RFC 4034 6.2):
# NS MD MF CNAME MB MG MR PTR DNAME.
NAME_TYPES = frozenset({2, 3, 4, 5, 7, 8, 9, 12, 39})
TYPE_MX = 15
TYPE_SOA = 6
_LEN2 = tuple(i.to_bytes(2, "big") for i in range(256))  # RDLENGTH of a name, up to 255
LENGTH_OCTET = tuple(bytes((i,)) for i in range(64))  # a label's length octet
_POINTERS = tuple(bytes((0xC0 | i >> 8, i & 0xFF)) for i in range(0x4000))  # offset -> pointer
_TYPE_LEN = struct.Struct("!H6xH").unpack_from  # TYPE and RDLENGTH of a record


@dataclass(frozen=True)
class ZoneSum:
    """The RRSUM of a multiset of records: ``total`` (0 <= total < 2**256) and ``records``.

    Sums add and subtract like the multisets they stand for; ``records`` may go negative in
    between (a change set's deletions on their own) but never in a zone's sum.
    """

    total: int = 0
    records: int = 0

    def __post_init__(self) -> None:
        if not 0 <= self.total < MODULUS:
            object.__setattr__(self, "total", self.total % MODULUS)

    def __add__(self, other: ZoneSum) -> ZoneSum:
        return ZoneSum(self.total + other.total, self.records + other.records)

    def __sub__(self, other: ZoneSum) -> ZoneSum:
        return ZoneSum(self.total - other.total, self.records - other.records)

    def apply(self, deleted: ZoneSum, added: ZoneSum) -> ZoneSum:
        """This zone after a change set: ``self - deleted + added``."""
        return self - deleted + added

    @property
    def hex(self) -> str:
        return f"{self.total:064x}"

    @property
    def text(self) -> str:
        """``rrsum:<records>:<hex>``: what ``PullResult.digest`` holds after ``verify_copy``."""
        return f"{SCHEME}:{self.records}:{self.hex}"

    def __str__(self) -> str:
        return self.text

    @classmethod
    def from_text(cls, text: str) -> ZoneSum:
        parts = text.split(":")
        if len(parts) != 3 or parts[0] != SCHEME or len(parts[2]) != 64:
            raise ValueError(f"{text[:40]!r} is not an RRSUM digest (rrsum:<records>:<64 hex>)")
        return cls(int(parts[2], 16), int(parts[1]))


def is_rrsum_text(text: str | None) -> bool:
    """Whether a ``PullResult.digest`` is an RRSUM (and not an RFC 8976 digest)."""
    return text is not None and text.startswith(SCHEME + ":")


def rr_hash(canonical_rr: bytes) -> int:
    """The term one record adds: BLAKE2s-256 of its canonical wire form, as an integer."""
    return int.from_bytes(_HASH(canonical_rr).digest(), "big")


def canonical_rr(owner_wire: bytes, rdtype: int, rdclass: int, ttl: int, rdata: bytes) -> bytes:
    """RFC 4034 6.2 wire form of one record, from its canonical owner and rdata."""
    return owner_wire + struct.pack("!HHIH", rdtype, rdclass, ttl, len(rdata)) + rdata


# --- transfer messages ----------------------------------------------------------------------


def _name_at(msg: bytes, low: bytes, off: int, names: dict[bytes, bytes]) -> tuple[bytes, int]:
    """(canonical wire, offset after it) of the name at ``off``, caching it in ``names``.

    ``names`` maps a compression pointer (its two bytes) to the name it stands for, so a
    pointer costs one slice and one lookup. ``low`` is ``msg.lower()``: a name's labels up
    to its first pointer are one slice of it (bytes.lower changes ASCII letters only, as
    RFC 4034 6.2 asks). Pointers must go backwards, which rules out loops.
    """
    pos = off
    while True:
        c = msg[pos]
        if c == 0:
            wire = low[off : pos + 1]
            end = pos + 1
            break
        if c >= 0xC0:
            suffix = names.get(msg[pos : pos + 2])
            if suffix is None:
                target = ((c & 0x3F) << 8) | msg[pos + 1]
                if target >= off:
                    raise WireError(f"compression pointer at offset {pos} does not point back")
                suffix = _name_at(msg, low, target, names)[0]
            wire = low[off:pos] + suffix
            end = pos + 2
            break
        if c > 63:
            raise WireError(f"label length {c} at offset {pos} (bad label type)")
        pos += c + 1
    if len(wire) > 255:
        raise WireError(f"name at offset {off} is longer than 255 octets")
    if off < 0x4000:  # only these offsets can be pointed at
        names[_POINTERS[off]] = wire
    return wire, end


def sum_message(msg: bytes, drop_last: bool = False) -> ZoneSum:
    """The sum of the answer records of one DNS message (``drop_last``: all but the last one,
    the closing SOA of an AXFR). Questions, authority and additional records (TSIG) are left
    out. Raises ``WireError`` on a malformed message."""
    try:
        return _sum_message(msg, drop_last)
    except (IndexError, struct.error):  # a byte, or a record's fixed fields, cut off
        raise WireError("a record runs past the end of the message") from None
    except RecursionError:
        raise WireError("a chain of compression pointers is too long") from None


def _sum_message(msg: bytes, drop_last: bool) -> ZoneSum:
    # The hot loop of verification: per record a few slices and dict lookups, no objects
    # but the hash input. Names behind pointers come from the cache (`_name_at`), and the
    # rdata of NS-like records that is one pointer from a second cache.
    size = len(msg)
    if size < 12:
        raise WireError(f"message of {size} bytes is shorter than a DNS header")
    low = msg.lower()
    count = (msg[6] << 8) | msg[7]
    off = skip_questions(msg, 12, (msg[4] << 8) | msg[5])
    names: dict[bytes, bytes] = {}
    get = names.get
    pointer_rdata: dict[bytes, bytes] = {}  # pointer -> RDLENGTH + canonical name
    rdata_get = pointer_rdata.get
    type_len = _TYPE_LEN
    name_types = NAME_TYPES
    raw_types = RAW_TYPES
    wcache: NameCache | None = None
    canon: list[bytes] = []  # canonical RR wire forms, hashed together after the loop
    keep = canon.append
    for _ in range(count):
        owner = get(msg[off : off + 2])
        if owner is None:
            owner, pos = _name_at(msg, low, off, names)
        else:
            pos = off + 2
        rtype, rdlen = type_len(msg, pos)
        rd = pos + 10
        end = rd + rdlen  # past the end of the message: caught after the loop
        if rtype in name_types:
            rdata = rdata_get(msg[rd:end]) if rdlen == 2 else None
            if rdata is None:
                name, after = _name_at(msg, low, rd, names)
                if after != end:
                    raise WireError(f"type {rtype} rdata at offset {rd} has a bad length")
                rdata = _LEN2[len(name)] + name
                if rdlen == 2:  # a valid two-byte name is a pointer
                    pointer_rdata[msg[rd:end]] = rdata
            keep(owner + msg[pos : pos + 8] + rdata)
        elif rtype in raw_types:
            keep(owner + msg[pos:end])
        else:
            if rtype == TYPE_MX:
                name, after = _name_at(msg, low, rd + 2, names)
                if after != end:
                    raise WireError(f"MX rdata at offset {rd} has a bad length")
                rdata = msg[rd : rd + 2] + name
            elif rtype == TYPE_SOA:
                mname, after = _name_at(msg, low, rd, names)
                rname, after = _name_at(msg, low, after, names)
                if after + 20 != end:
                    raise WireError(f"SOA rdata at offset {rd} has a bad length")
                rdata = mname + rname + msg[after:end]
            else:
                if wcache is None:
                    wcache = {}
                rclass = (msg[pos + 2] << 8) | msg[pos + 3]
                rdata = canonical_rdata(msg, rtype, rclass, rd, rdlen, wcache)
            keep(owner + msg[pos : pos + 8] + len(rdata).to_bytes(2, "big") + rdata)
        off = end
    if off > size:
        raise WireError(f"the last record runs past the end of the message ({off} > {size})")
    if drop_last:
        if not canon:
            raise WireError("the message that should end with the closing SOA has no answers")
        canon.pop()
    return sum_canonical(canon)


def sum_canonical(canon: list[bytes]) -> ZoneSum:
    # map() keeps the hashing in C. The 256-bit terms are added as eight 32-bit columns in
    # numpy (no overflow below 2**32 records per call), then carried once in Python.
    digests = b"".join(map(_DIGEST, map(_HASH, canon)))
    columns = np.frombuffer(digests, dtype=">u4").reshape(-1, 8).sum(axis=0, dtype=np.uint64)
    total = 0
    for column in columns.tolist():
        total = (total << 32) + column
    return ZoneSum(total, len(canon))


def sum_stream(data: bytes | bytearray | memoryview, drop_last: bool = False) -> ZoneSum:
    """The sum over a run of whole 2-byte-length-prefixed messages (a TCP stream, or a chunk
    of one cut at message boundaries). ``drop_last``: leave out the last answer record of
    the last message (the closing SOA of an AXFR)."""
    view = memoryview(data)
    size = len(view)
    pos = 0
    total = 0
    records = 0
    last: bytes | None = None
    while pos < size:
        if size - pos < 2:
            raise WireError(f"stray byte at offset {pos} of a stream chunk")
        length = (view[pos] << 8) | view[pos + 1]
        if pos + 2 + length > size:
            raise WireError(f"message at offset {pos} of a stream chunk is incomplete")
        msg = bytes(view[pos + 2 : pos + 2 + length])
        pos += 2 + length
        if drop_last and pos == size:
            last = msg
            break
        part = sum_message(msg)
        total += part.total
        records += part.records
    if drop_last:
        if last is None:
            raise WireError("an empty stream has no closing SOA to leave out")
        part = sum_message(last, drop_last=True)
        total += part.total
        records += part.records
    return ZoneSum(total, records)


# --- dnspython objects (the reference) -------------------------------------------------------


def _absolute(value: Any, origin: Any) -> Any:
    import dns.name

    if isinstance(value, str):
        value = dns.name.from_text(value, origin)
    return value if value.is_absolute() else value.derelativize(origin)


def sum_rrsets(records: Iterable[Any], origin: Any) -> ZoneSum:
    """The sum of dnspython RRsets, or of ``(name, ttl, rdclass, rdtype, rdata)`` tuples
    (rdata a ``dns.rdata.Rdata`` or its text, relative to ``origin``). Every rdata of every
    item counts once per occurrence. Slow and simple: the reference for the fast paths."""
    import dns.name
    import dns.rdata
    import dns.rdataclass
    import dns.rdatatype
    import dns.rrset

    if isinstance(origin, str):
        origin = dns.name.from_text(origin)
    terms: list[int] = []
    for item in records:
        if isinstance(item, dns.rrset.RRset):
            owner = _absolute(item.name, origin).canonicalize().to_wire()
            for rdata in item:
                canon = rdata.to_digestable(origin)
                wire = canonical_rr(owner, rdata.rdtype, rdata.rdclass, item.ttl, canon)
                terms.append(rr_hash(wire))
            continue
        name, ttl, rdclass, rdtype, rdata = item
        rdclass = dns.rdataclass.RdataClass.make(rdclass)
        rdtype = dns.rdatatype.RdataType.make(rdtype)
        if not isinstance(rdata, dns.rdata.Rdata):
            rdata = dns.rdata.from_text(rdclass, rdtype, rdata, origin, relativize=False)
        owner = _absolute(name, origin).canonicalize().to_wire()
        terms.append(
            rr_hash(canonical_rr(owner, rdtype, rdclass, int(ttl), rdata.to_digestable(origin)))
        )
    return ZoneSum(sum(terms), len(terms))


def sum_zone_object(zone: Any) -> ZoneSum:
    """The sum of a ``dns.zone.Zone`` (each rdata once, with its rdataset's TTL)."""
    assert zone.origin is not None
    items = (
        (name, rds.ttl, rds.rdclass, rds.rdtype, rd)
        for name, rds in zone.iterate_rdatasets()
        for rd in rds
    )
    return sum_rrsets(items, zone.origin)
