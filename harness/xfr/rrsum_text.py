"""RRSUM of zone-file lines (see ``harness.xfr.rrsum`` for what the sum is): ``LineSummer``
reads lines of the form ``owner ttl class type rdata`` as zonegen, kdig and
``dnssec-signzone -O full`` write them (or ``owner ttl type rdata``, as Knot does);
``soa_bump`` and ``apply_diff_lines`` update a zone's sum arithmetically after a serial bump
or an IXFR change set. Pure, no I/O.
"""

from __future__ import annotations

import re
import socket
import struct
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from harness.core.errors import UserInputError
from harness.xfr.rrsum import (
    LENGTH_OCTET,
    NAME_TYPES,
    TYPE_MX,
    TYPE_SOA,
    ZoneSum,
    sum_canonical,
)

_TXT = 16
_TXT_STRINGS = re.compile(rb'\s*"([^"\\]*)"')  # quoted, no escapes (else dnspython)
_CLASSES = {b"IN": 1, b"CH": 3, b"HS": 4, b"in": 1}
_CLASS_WORDS = frozenset({b"IN", b"CH", b"CHAOS", b"HS", b"HESIOD", b"NONE", b"ANY"})
_RDATA_CACHE_MAX = 1 << 17  # entries; rdata repeats a lot (NS providers, DS of a template)


@dataclass(frozen=True)
class _Head:
    """What a line's TTL, class and type fields stand for."""

    wire: bytes  # TYPE, CLASS, TTL
    rdtype: int
    rdclass: int
    cache: dict[bytes, bytes]  # rdata text -> RDLENGTH + canonical rdata, for this type


class LineError(ValueError):
    """A zone-file line the line parser cannot read; the text says what."""


def _is_class(word: bytes) -> bool:
    """Whether a line's third field names a class (no type is spelled like one)."""
    upper = word.upper()
    return upper in _CLASS_WORDS or upper.startswith(b"CLASS")


def _origin_free(rdtype: int, text: bytes) -> bool:
    """Whether rdata in this text means the same in any zone (no relative name in it)."""
    if rdtype in (1, 28, 43, _TXT):
        return True
    return (rdtype in NAME_TYPES or rdtype == TYPE_MX) and text.rstrip().endswith(b".")


def _txt_wire(text: bytes) -> bytes | None:
    """TXT rdata of quoted strings without escapes; None for anything else."""
    out = []
    pos = 0
    while pos < len(text):
        match = _TXT_STRINGS.match(text, pos)
        if match is None:
            return None if text[pos:].strip() else b"".join(out) or None
        string = match[1]
        if len(string) > 255:
            return None
        out.append(bytes((len(string),)) + string)
        pos = match.end()
    return b"".join(out) or None


@dataclass
class LineCaches:
    """What a LineSummer learns as it reads: the heads (TTL, class, type) it has seen, and
    per type the wire form of rdata texts."""

    heads: dict[tuple[bytes, bytes, bytes], _Head] = field(default_factory=dict)
    rdata: dict[tuple[int, int], dict[bytes, bytes]] = field(default_factory=dict)


class LineSummer:
    """Sums zone-file lines of the form ``owner ttl class type rdata`` (whitespace between;
    comment and blank lines skipped), as zonegen, kdig and ``dnssec-signzone -O full``
    write them, or ``owner ttl type rdata`` in class IN, as Knot does. Names without a
    final dot are relative to the origin, ``@`` is the origin.

    A, AAAA, NS, CNAME, PTR, DS and MX are converted here (and their rdata cached, since it
    repeats); every other type, and any rdata the fast converters refuse, goes through
    dnspython. Directives ($ORIGIN, $TTL, $INCLUDE) and records spread over lines with
    parentheses are not accepted: they would make a line depend on the lines before it.
    """

    def __init__(self, origin: str, caches: LineCaches | None = None) -> None:
        import dns.name

        self.origin = dns.name.from_text(origin)
        self._origin_wire = self.origin.canonicalize().to_wire()
        self._origin_text = self.origin.to_text().encode().lower()
        self._suffix = b"." + self._origin_text if self._origin_text != b"." else b"."
        self._owner_text = b""
        self._owner_wire = b""
        # `caches` shared by the summers of many zones (small zones repeat their heads and
        # their providers' NS rdata): then only rdata that means the same in any zone is
        # cached.
        self._shared = caches is not None
        caches = caches or LineCaches()
        self._heads = caches.heads
        self._rdata = caches.rdata
        self.total = 0
        self.records = 0

    def result(self) -> ZoneSum:
        return ZoneSum(self.total, self.records)

    def add_lines(self, lines: Iterable[bytes]) -> None:
        canon: list[bytes] = []
        keep = canon.append
        head_get = self._heads.get
        owner_text = self._owner_text
        owner_wire = self._owner_wire
        for line in lines:
            fields = line.rstrip().split(None, 4)
            if len(fields) >= 4 and fields[2] not in _CLASSES and not _is_class(fields[2]):
                # `owner ttl type rdata`: the zone's class (IN), as Knot writes zone files.
                fields = line.rstrip().split(None, 3)
                fields.insert(2, b"IN")
            if len(fields) < 5:
                if not fields or fields[0].startswith(b";"):
                    continue
                if fields[0].startswith(b"$"):
                    raise LineError(f"directive {fields[0].decode(errors='replace')} not supported")
                raise LineError(f"expected 'owner ttl class type rdata', got {line[:80]!r}")
            owner, ttl, cls, rtype, text = fields
            if owner != owner_text:
                if owner.startswith((b";", b"$")):
                    if owner[0] == 0x3B:  # ';'
                        continue
                    raise LineError(f"directive {owner.decode(errors='replace')} not supported")
                owner_wire = self._name(owner)
                owner_text = owner
            head = head_get((ttl, cls, rtype))
            if head is None:
                head = self._head(ttl, cls, rtype)
            rdata = head.cache.get(text)
            if rdata is None:
                rdata = self._convert(head, text)
            keep(owner_wire + head.wire + rdata)
        self._owner_text, self._owner_wire = owner_text, owner_wire
        part = sum_canonical(canon)
        self.total += part.total
        self.records += part.records

    def _name(self, text: bytes) -> bytes:
        """Canonical wire of a name in presentation form (escapes via dnspython)."""
        if text.endswith(self._suffix):
            # Fast path: one label under the origin (a delegation's owner, mostly).
            label = text[: -len(self._suffix)].lower()
            if 0 < len(label) <= 63 and b"." not in label and b"\\" not in label:
                return LENGTH_OCTET[len(label)] + label + self._origin_wire
        if text == b"@":
            return self._origin_wire
        if b"\\" in text:
            import dns.name

            try:
                return dns.name.from_text(text.decode(), self.origin).canonicalize().to_wire()
            except Exception as exc:
                raise LineError(f"bad name {text[:80]!r}: {exc}") from None
        if not text.endswith(b"."):
            text = text + b"." + self._origin_text if self._origin_text != b"." else text + b"."
        if text == b".":
            return b"\x00"
        labels = text[:-1].lower().split(b".")
        out = []
        for label in labels:
            if not 0 < len(label) <= 63:
                raise LineError(f"bad name {text[:80]!r}: empty label or label over 63 octets")
            out.append(LENGTH_OCTET[len(label)] + label)
        wire = b"".join(out) + b"\x00"
        if len(wire) > 255:
            raise LineError(f"name {text[:80]!r} is longer than 255 octets")
        return wire

    def _head(self, ttl: bytes, cls: bytes, rtype: bytes) -> _Head:
        import dns.rdataclass
        import dns.rdatatype

        try:
            ttl_value = int(ttl)
            if not 0 <= ttl_value < 1 << 32:
                raise ValueError
        except ValueError:
            raise LineError(
                f"TTL {ttl[:20]!r} is not a number (ttl and class are required)"
            ) from None
        try:
            rdclass = _CLASSES.get(cls) or int(dns.rdataclass.from_text(cls.decode()))
            rdtype = int(dns.rdatatype.from_text(rtype.decode()))
        except Exception:
            raise LineError(f"unknown class {cls[:20]!r} or type {rtype[:20]!r}") from None
        cache = self._rdata.setdefault((rdtype, rdclass), {})
        head = _Head(struct.pack("!HHI", rdtype, rdclass, ttl_value), rdtype, rdclass, cache)
        if len(self._heads) < 4096:
            self._heads[(ttl, cls, rtype)] = head
        return head

    def _convert(self, head: _Head, text: bytes) -> bytes:
        """RDLENGTH + canonical rdata of ``text``, cached."""
        rdata = None
        try:
            rdata = self._fast(head.rdtype, text)
        except (ValueError, OSError, struct.error):
            rdata = None  # let dnspython say what is wrong, or read what we did not expect
        if rdata is None:
            rdata = self._dnspython(head.rdtype, head.rdclass, text)
        value = len(rdata).to_bytes(2, "big") + rdata
        if self._shared and not _origin_free(head.rdtype, text):
            return value
        if len(head.cache) >= _RDATA_CACHE_MAX:
            head.cache.clear()
        head.cache[text] = value
        return value

    def _fast(self, rdtype: int, text: bytes) -> bytes | None:
        if rdtype == 1:
            return socket.inet_pton(socket.AF_INET, text.decode())
        if rdtype == 28:
            return socket.inet_pton(socket.AF_INET6, text.decode())
        if rdtype in NAME_TYPES:
            parts = text.split()
            return self._name(parts[0]) if len(parts) == 1 and b";" not in text else None
        if rdtype == 43:  # DS: key tag, algorithm, digest type, digest in hex (may be split)
            tag, alg, dtype, digest = text.split(None, 3)
            hexdigits = b"".join(digest.split())
            return struct.pack("!HBB", int(tag), int(alg), int(dtype)) + bytes.fromhex(
                hexdigits.decode()
            )
        if rdtype == TYPE_MX:
            if b";" in text:
                return None
            pref, name = text.split()
            return struct.pack("!H", int(pref)) + self._name(name)
        if rdtype == TYPE_SOA:  # one per zone, but many small zones make it the common case
            fields = text.split()
            if len(fields) != 7 or b";" in text or b"(" in text:
                return None
            mname, rname, *numbers = fields
            return self._name(mname) + self._name(rname) + struct.pack("!5I", *map(int, numbers))
        if rdtype == _TXT:
            return _txt_wire(text)
        return None

    def _dnspython(self, rdtype: int, rdclass: int, text: bytes) -> bytes:
        import dns.exception
        import dns.rdata

        try:
            rdata = dns.rdata.from_text(
                rdclass, rdtype, text.decode(), self.origin, relativize=False
            )
            return rdata.to_digestable(self.origin)
        except (dns.exception.DNSException, ValueError, UnicodeDecodeError) as exc:
            raise LineError(f"bad rdata {text[:80]!r} for type {rdtype}: {exc}") from None


def sum_lines(lines: Iterable[bytes | str], origin: str) -> ZoneSum:
    """The sum of zone-file lines (see ``LineSummer`` for the accepted form)."""
    summer = LineSummer(origin)
    summer.add_lines(line.encode() if isinstance(line, str) else line for line in lines)
    return summer.result()


def soa_bump(base: ZoneSum, old_soa: str | bytes, new_soa: str | bytes, origin: str) -> ZoneSum:
    """The zone's sum after only its SOA changed (a serial bump): ``base - h(old) + h(new)``.
    The SOAs are zone-file lines such as ``zonegen.tld.soa_line`` writes."""
    return base.apply(sum_lines([old_soa], origin), sum_lines([new_soa], origin))


def split_diff(lines: Iterable[bytes | str]) -> tuple[list[bytes], list[bytes]]:
    """(deleted, added) lines of an RFC 1995-style diff as zonegen writes it: the old SOA and
    the deletions, then the new SOA and the additions (each SOA starts its section)."""
    sections: list[list[bytes]] = []
    for raw in lines:
        line = raw.encode() if isinstance(raw, str) else raw
        fields = line.split(None, 4)
        if len(fields) < 4 or fields[0].startswith(b";"):
            continue
        if fields[3].upper() == b"SOA":
            sections.append([])
        if not sections:
            raise UserInputError(
                "an IXFR diff must start with the old SOA", fix="use a zonegen change set diff"
            )
        sections[-1].append(line)
    if len(sections) != 2:
        raise UserInputError(
            f"an IXFR diff holds exactly two SOA records, found {len(sections)}",
            fix="use the diff of one change set (zonegen change_set: diff_path)",
        )
    return sections[0], sections[1]


def diff_sums(lines: Iterable[bytes | str], origin: str) -> tuple[ZoneSum, ZoneSum]:
    """(deleted, added) sums of an RFC 1995-style diff, the SOAs included."""
    deleted, added = split_diff(lines)
    return sum_lines(deleted, origin), sum_lines(added, origin)


def apply_diff_lines(base: ZoneSum, lines: Iterable[bytes | str], origin: str) -> ZoneSum:
    """The zone's sum after an IXFR change set: ``base - deleted + added`` (SOAs included)."""
    deleted, added = diff_sums(lines, origin)
    return base.apply(deleted, added)


def apply_changes(
    base: ZoneSum, deleted: Sequence[bytes | str], added: Sequence[bytes | str], origin: str
) -> ZoneSum:
    """The zone's sum after deleting and adding the given zone-file lines."""
    return base.apply(sum_lines(deleted, origin), sum_lines(added, origin))
