"""A server's copy of a zone as a file: its formats, its SOA serial, and the one form the
zone-file sum reads (pure, but for the file I/O of ``head_serial`` and ``write_lines``).

Two formats (``CopyFormat``), as the servers write them:

- ``lines``: one record per line, ``owner ttl [class] type rdata`` with absolute owners:
  BIND's ``masterfile-style full`` and Knot's zone files (which leave the class out). The
  compiled zone-file sum (``zonefile_sum``) reads it as it is.
- ``master``: an RFC 1035 master file with ``$ORIGIN`` and ``$TTL``, owners relative to the
  origin or left out (the previous one's), records spread over lines in parentheses and
  comments: NSD's zone files and ``pdnsutil list-zone``. ``master_lines`` writes each record
  as a ``lines`` line; rdata names relative to an ``$ORIGIN`` other than the zone's are made
  absolute by dnspython (the sum reads relative rdata names against the zone's origin).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

CopyFormat = Literal["lines", "master"]
COPY_FORMATS: tuple[CopyFormat, ...] = ("lines", "master")
HEAD_BYTES = 1 << 16  # the SOA is the first record of every server's file; ample

_CLASSES = frozenset({b"IN", b"CH", b"CHAOS", b"HS", b"HESIOD", b"NONE", b"ANY"})
# Types whose rdata holds no domain name: their text means the same under any $ORIGIN.
_NAME_FREE = frozenset(
    {
        b"A",
        b"AAAA",
        b"DS",
        b"CDS",
        b"TXT",
        b"SPF",
        b"DNSKEY",
        b"CDNSKEY",
        b"NSEC3",
        b"NSEC3PARAM",
        b"SSHFP",
        b"TLSA",
        b"CAA",
        b"HINFO",
        b"ZONEMD",
        b"OPENPGPKEY",
    }
)


@dataclass(frozen=True)
class DiskCopy:
    """A secondary's copy of a zone as a file, and how the server makes that file hold
    what it serves now: each dialect says its own (Server.disk_copy), and
    harness/measure/disk_copy.py reads and checks it.

    `flush`: its control command that writes the copy; `waits`: the command returns once
    the file is written (else the server writes it after answering, to a file it renames
    over this one, and the harness waits until the file holds the serial); `prints`: the
    command prints the copy, and its output is the file."""

    path: Path
    format: CopyFormat
    flush: tuple[str, ...]
    waits: bool = False
    prints: bool = False


class CopyError(ValueError):
    """A copy the harness cannot read: the text says what and where."""


def _is_class(word: bytes) -> bool:
    upper = word.upper()
    return upper in _CLASSES or upper.startswith(b"CLASS")


def _ttl(word: bytes) -> bytes | None:
    """The TTL `word` spells, in seconds (units as in "1h30m" too); None: not a TTL (no
    type or class starts with a digit)."""
    if word.isdigit():
        return word
    if not word[:1].isdigit():
        return None
    import dns.ttl

    try:
        return str(dns.ttl.from_text(word.decode())).encode()
    except (ValueError, UnicodeDecodeError, dns.ttl.BadTTL):
        raise CopyError(f"bad TTL {word[:20]!r}") from None


def _uncomment(line: bytes) -> bytes:
    """The line without its comment (a ';' outside quotes)."""
    if b";" not in line:
        return line
    quoted = False
    escaped = False
    for i, c in enumerate(line):
        if escaped:
            escaped = False
        elif c == 0x5C:  # backslash
            escaped = True
        elif c == 0x22:  # '"'
            quoted = not quoted
        elif c == 0x3B and not quoted:  # ';'
            return line[:i]
    return line


def _absolute(name: bytes, origin: bytes) -> bytes:
    """`name` (presentation form) made absolute under `origin` (absolute, final dot)."""
    if name == b"@":
        return origin
    if name.endswith(b".") and not name.endswith(b"\\."):
        return name
    return name + b"." + origin if origin != b"." else name + b"."


def _entries(lines: Iterable[bytes]) -> Iterator[tuple[bool, bytes]]:
    """(owner left out, text) per record or directive: comments gone, parentheses joined."""
    pending: list[bytes] = []
    blank_owner = False
    for raw in lines:
        line = _uncomment(raw.rstrip(b"\r\n"))
        if pending:
            pending.append(line)
            if b")" not in line:
                continue
            text = b" ".join(pending)
            pending = []
        else:
            if not line.strip():
                continue
            blank_owner = line[:1] in (b" ", b"\t")
            if b"(" in line and b")" not in line:
                pending = [line]
                continue
            text = line
        yield blank_owner, text.replace(b"(", b" ").replace(b")", b" ")
    if pending:
        raise CopyError("a record's parenthesis is never closed")


def master_lines(lines: Iterable[bytes], origin: str) -> Iterator[bytes]:
    """The records of a master file as ``owner\\tttl\\tclass\\ttype\\trdata`` lines with
    absolute owners (``lines`` format, what the zone-file sum reads). Raises ``CopyError``
    on what it cannot read ($INCLUDE, $GENERATE, a record without a type, no TTL)."""
    zone = origin.encode().lower()
    zone = zone if zone.endswith(b".") else zone + b"."
    current = zone
    default_ttl: bytes | None = None
    owner: bytes | None = None
    ttl: bytes | None = None
    for blank_owner, text in _entries(lines):
        fields = text.split()
        if fields[0].startswith(b"$"):
            directive = fields[0].upper()
            if directive == b"$ORIGIN" and len(fields) == 2:
                current = _absolute(fields[1], current)
            elif directive == b"$TTL" and len(fields) == 2 and _ttl(fields[1]) is not None:
                default_ttl = _ttl(fields[1])
            else:
                raise CopyError(f"directive {text.strip()[:60]!r} not supported")
            continue
        if not blank_owner:
            owner = _absolute(fields.pop(0), current)
        if owner is None:
            raise CopyError(f"a record without an owner: {text.strip()[:60]!r}")
        rdclass = b"IN"
        explicit = None
        for _ in range(2):  # TTL and class, in either order, either left out
            if fields and explicit is None and (explicit := _ttl(fields[0])) is not None:
                fields.pop(0)
            elif fields and _is_class(fields[0]):
                rdclass = fields.pop(0)
        # A record without a TTL has the $TTL's, else the last one written (RFC 2308 §4).
        ttl = explicit or default_ttl or ttl
        if len(fields) < 2 or ttl is None:
            raise CopyError(f"expected '[ttl] [class] type rdata', got {text.strip()[:60]!r}")
        rdtype, rdata = fields[0], b" ".join(fields[1:])
        if current != zone and rdtype.upper() not in _NAME_FREE:
            rdata = _rdata_absolute(rdclass, rdtype, rdata, current)
        yield b"\t".join((owner, ttl, rdclass, rdtype, rdata)) + b"\n"


def _rdata_absolute(rdclass: bytes, rdtype: bytes, rdata: bytes, origin: bytes) -> bytes:
    """Rdata text with every name absolute (it was read under `origin`)."""
    import dns.exception
    import dns.name
    import dns.rdata

    try:
        value = dns.rdata.from_text(
            rdclass.decode(),
            rdtype.decode(),
            rdata.decode(),
            dns.name.from_text(origin.decode()),
            relativize=False,
        )
    except (dns.exception.DNSException, ValueError, UnicodeDecodeError) as exc:
        raise CopyError(f"bad rdata {rdata[:60]!r} for type {rdtype!r}: {exc}") from None
    return value.to_text().encode()


def write_lines(source: Path, target: Path, origin: str) -> None:
    """``master_lines`` of the file `source`, written to `target` (streamed)."""
    with open(source, "rb") as src, open(target, "wb") as out:
        batch: list[bytes] = []
        for line in master_lines(src, origin):
            batch.append(line)
            if len(batch) >= 65536:
                out.writelines(batch)
                batch.clear()
        out.writelines(batch)


def soa_serial(lines: Iterable[bytes], origin: str) -> int | None:
    """The serial of the first SOA at `origin` among `lines` (``lines`` format), or None."""
    apex = origin.encode().lower()
    apex = apex if apex.endswith(b".") else apex + b"."
    for line in lines:
        fields = line.split()
        if len(fields) < 4 or fields[0].startswith(b";"):
            continue
        at = 3 if _is_class(fields[2]) else 2
        if fields[at].upper() != b"SOA" or fields[0].lower() != apex:
            continue
        rdata = fields[at + 1 :]
        return int(rdata[2]) if len(rdata) >= 3 and rdata[2].isdigit() else None
    return None


def head_serial(path: Path, fmt: CopyFormat, origin: str) -> int | None:
    """The serial the copy in `path` holds (its SOA, near the top), or None while there is
    no such file or no SOA at its head (being written: every server writes a new copy
    beside the old one and renames it over it)."""
    try:
        with open(path, "rb") as fh:
            head = os.pread(fh.fileno(), HEAD_BYTES, 0)
    except FileNotFoundError:
        return None
    lines = head.splitlines(keepends=True)
    if len(head) == HEAD_BYTES and lines:
        lines = lines[:-1]  # cut in the middle
    if fmt == "master":
        return soa_serial(_until_error(master_lines(lines, origin)), origin)
    return soa_serial(lines, origin)


def _until_error(lines: Iterator[bytes]) -> Iterator[bytes]:
    """`lines` up to the first that cannot be read (the head may end inside a record)."""
    try:
        yield from lines
    except CopyError:
        return
