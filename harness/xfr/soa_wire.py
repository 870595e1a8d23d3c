"""SOA queries and their answers on the wire: pure encoding and decoding, no sockets.

- ``soa_query`` / ``soa_query_tail`` / ``name_wire``: a plain SOA query for a zone, as the
  pollers send it (no RD: the authoritative server itself is asked; no EDNS).
- ``fast_serial``: the serial of the common clean answer, by byte comparisons alone (at
  100 k answers a second the parse is a large part of a poller's cost).
- ``parse_soa_reply`` (a ``SoaReply``) and ``parse_soa_answer``: any other answer: rcode,
  authority, truncation, and the serial of the zone's own SOA in the answer section.

Answers are read without dnspython; only a zone name with escapes is left to it.
"""

from __future__ import annotations

import struct
from typing import NamedTuple

from harness.xfr import wire as w

CLASS_IN = 1
RCODE_NAMES = {0: "NOERROR", 1: "FORMERR", 2: "SERVFAIL", 3: "NXDOMAIN", 4: "NOTIMP", 5: "REFUSED"}
RCODE_NAMES.update({6: "YXDOMAIN", 7: "YXRRSET", 8: "NXRRSET", 9: "NOTAUTH", 10: "NOTZONE"})
_QUESTION_FIXED = struct.Struct("!HH")
_OWNER_IS_QNAME = b"\xc0\x0c"  # a pointer to the question name at offset 12
_SOA_RDATA_MIN = 22  # two root names and five 32-bit fields


def name_wire(zone: str) -> bytes:
    """Uncompressed wire form of a zone name, case kept ("example.com." or "example.com")."""
    if "\\" in zone:  # escapes (\. \DDD): leave them to dnspython
        import dns.name

        return bytes(dns.name.from_text(zone).to_wire())
    stripped = zone.rstrip(".")
    labels = [label.encode("ascii") for label in stripped.split(".")] if stripped else []
    out = bytearray()
    for label in labels:
        if not 0 < len(label) < 64:
            raise ValueError(f"zone name {zone!r} has an empty or over-long label")
        out.append(len(label))
        out += label
    out.append(0)
    if len(out) > 255:
        raise ValueError(f"zone name {zone!r} is longer than 255 octets")
    return bytes(out)


def soa_query_tail(zone: str) -> bytes:
    """An SOA query for ``zone`` without its 2-byte id: flags (no RD: we ask the
    authoritative server itself), one question, no EDNS."""
    return b"\x00\x00\x00\x01\x00\x00\x00\x00\x00\x00" + name_wire(zone) + b"\x00\x06\x00\x01"


def soa_query(zone: str, qid: int) -> bytes:
    """Wire form of a plain SOA query for ``zone`` with message id ``qid``."""
    return w.U16.pack(qid) + soa_query_tail(zone)


class SoaReply(NamedTuple):
    """What an answer to an SOA query says (see ``parse_soa_reply``)."""

    id: int
    qname: bytes  # question name, lower-cased uncompressed wire; b"" without a question
    qtype: int
    rcode: int
    authoritative: bool
    truncated: bool
    serial: int | None  # serial of the SOA owned by qname in the answer section, if any

    @property
    def serving(self) -> int | None:
        """The serial the server says it serves: only from an authoritative NOERROR answer
        carrying the zone's SOA (not SERVFAIL while loading, REFUSED, NOTAUTH, a referral,
        a non-authoritative cache, nor a truncated answer)."""
        if self.rcode or not self.authoritative or self.truncated or self.qtype != w.SOA:
            return None
        return self.serial

    def state(self) -> str:
        """A short description for error messages ("SERVFAIL", "serial 7", ...)."""
        if self.truncated:
            return "truncated"
        if self.rcode:
            return RCODE_NAMES.get(self.rcode, f"rcode {self.rcode}")
        if not self.authoritative:
            return "not authoritative"
        if self.serial is None:
            return "no SOA in the answer"
        return f"serial {self.serial}"


def _question_name_end(msg: bytes) -> int:
    # The first name of a message cannot be compressed: a pointer would aim into the header.
    pos = 12
    size = len(msg)
    while pos < size:
        length = msg[pos]
        if length == 0:
            if pos + 1 - 12 > 255:
                raise w.WireError("question name is longer than 255 octets")
            return pos + 1
        if length > 63:
            raise w.WireError(f"label length {length} at offset {pos} in the question name")
        pos += 1 + length
    raise w.WireError("question name runs past the end of the message")


def parse_soa_reply(msg: bytes) -> SoaReply:
    """Parse an answer to an SOA query; raises ``WireError`` for anything malformed or a
    message that is not a response.

    Only the header, the question and the answer records up to the zone's SOA are read:
    OPT, authority and additional records after it are never touched. The answer's SOA is
    usually owned by a pointer to the question name (checked by bytes); any other owner is
    decompressed and compared.
    """
    if len(msg) < 12:
        raise w.WireError(f"message of {len(msg)} bytes is shorter than a DNS header")
    qid, flags, qdcount, ancount, _, _ = w.HEADER.unpack_from(msg, 0)
    if not flags & w.FLAG_QR:
        raise w.WireError(f"message {qid} is a query, not a response")
    rcode = flags & 0x000F
    aa = bool(flags & w.FLAG_AA)
    tc = bool(flags & w.FLAG_TC)
    if qdcount != 1:  # FORMERR and some NOTIMP answers carry no question
        return SoaReply(qid, b"", 0, rcode, aa, tc, None)
    end = _question_name_end(msg)
    if end + 4 > len(msg):
        raise w.WireError("question section runs past the end of the message")
    qname = msg[12:end].lower()
    qtype, qclass = _QUESTION_FIXED.unpack_from(msg, end)
    serial = None
    if qclass == CLASS_IN and ancount and not tc:
        off = end + 4
        size = len(msg)
        for _ in range(ancount):
            if msg[off : off + 2] == _OWNER_IS_QNAME:
                pos, same = off + 2, True
            else:
                owner, _, pos = w.read_name(msg, off, {})
                same = owner == qname
            if pos + 10 > size:
                raise w.WireError(f"record at offset {off} runs past the end of the message")
            rdtype, rdclass, _, rdlen = w.RR_FIXED.unpack_from(msg, pos)
            rdata = pos + 10
            off = rdata + rdlen
            if off > size:
                raise w.WireError(f"rdata at offset {rdata} runs past the end of the message")
            if same and rdtype == w.SOA and rdclass == CLASS_IN:
                # The serial opens the five 32-bit fields that end the rdata: no need to
                # walk the two names before it.
                if rdlen < _SOA_RDATA_MIN:
                    raise w.WireError(f"SOA rdata at offset {rdata} is too short ({rdlen})")
                serial = w.U32.unpack_from(msg, off - 20)[0]
                break
    return SoaReply(qid, qname, qtype, rcode, aa, tc, serial)


def parse_soa_answer(data: bytes, zone: str) -> tuple[int, int | None, bool]:
    """(message id, serial or None, truncated) of an answer to an SOA query for ``zone``.

    None when the answer is for another name or is not an authoritative NOERROR answer
    carrying the zone's SOA (see ``SoaReply.serving``).
    """
    reply = parse_soa_reply(data)
    if reply.truncated:
        return reply.id, None, True
    if reply.qname != name_wire(zone).lower():
        return reply.id, None, False
    return reply.id, reply.serving, False


def fast_serial(msg: bytes, question: bytes) -> int | None:
    """The serial in ``msg`` when it is the common clean answer to ``question`` (the
    question section exactly as sent: name, type SOA, class IN): authoritative NOERROR, not
    truncated, its first answer record the SOA with the owner compressed to the question.
    None means "not that shape": read it with ``parse_soa_reply`` (an error rcode, a name
    in other case, another record first...). Raises nothing on short input."""
    end = 12 + len(question)
    if len(msg) < end + 12 or msg[12:end] != question:
        return None
    # QR and AA set, TC clear, rcode NOERROR; one question; at least one answer record.
    if ((msg[2] << 8) | msg[3]) & 0x860F != 0x8400 or msg[4:6] != b"\x00\x01":
        return None
    if msg[6:8] == b"\x00\x00" or msg[end : end + 2] != _OWNER_IS_QNAME:
        return None
    rdtype, rdclass, _, rdlen = w.RR_FIXED.unpack_from(msg, end + 2)
    stop = end + 12 + rdlen
    if rdtype != w.SOA or rdclass != CLASS_IN or rdlen < _SOA_RDATA_MIN or stop > len(msg):
        return None
    return int(w.U32.unpack_from(msg, stop - 20)[0])
