"""Zone digests, the harness's one ZONEMD: RFC 8976, scheme SIMPLE (1), hash SHA-384 (1), hex.

It is the digest dnspython's ``dns.zone.Zone.compute_digest`` returns for the same zone
(``zone_digest`` for a zone file, ``zone_digest_dnspython`` for a loaded zone): every RR in
canonical form (RFC 4034 6.2: owner and the names in the rdata of the listed types
lower-cased, no compression), RRs in canonical order (owner in RFC 4034 6.1 order, then
type, then rdata as octet strings), duplicates removed, the apex ZONEMD RRset and the RRSIGs
covering it left out. Like dnspython, an RRset whose records arrive with different TTLs is
hashed with the smallest of them (RRSIGs form one RRset per covered type for this purpose).
Two copies of a zone have the same digest iff they hold the same RRsets with the same TTLs,
so a transferred zone verifies against its source whatever the record order or text layout.

Two ways in besides a file: ``records_digest`` for dnspython objects, and
``DigestBuilder.add_wire`` for records read straight from transfer messages, which
canonicalises the common types itself (no dnspython objects: about 1 M records in a few
seconds) and hands other types to dnspython.
"""

from __future__ import annotations

import hashlib
import struct
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from harness.xfr.wire import NameCache, WireError, name_key_from_labels, read_name

SCHEME_SIMPLE = 1
HASH_SHA384 = 1
ZONEMD = 63
RRSIG = 46
_TYPE_CLASS = struct.Struct("!HH")
_TTL_LEN = struct.Struct("!IH")

# Types whose rdata has no domain names: the wire form already is the canonical form.
RAW_TYPES = frozenset(
    {
        1,  # A
        13,  # HINFO
        16,  # TXT
        28,  # AAAA
        43,  # DS
        44,  # SSHFP
        48,  # DNSKEY
        50,  # NSEC3
        51,  # NSEC3PARAM
        52,  # TLSA
        53,  # SMIMEA
        59,  # CDS
        60,  # CDNSKEY
        61,  # OPENPGPKEY
        63,  # ZONEMD
        99,  # SPF
        257,  # CAA
    }
)
# One name, lower-cased in canonical form (RFC 4034 6.2); compression allowed for some.
NAME_TYPES = frozenset({2, 3, 4, 5, 7, 8, 9, 12, 39})  # NS MD MF CNAME MB MG MR PTR DNAME
_PREFIXED_NAME = {15: 2, 33: 6}  # MX: preference; SRV: priority, weight, port


class DigestBuilder:
    """Collects records, then hashes them in canonical order.

    Each record is kept as ``(sort key, ttl, owner wire, rdata length)`` where the sort key
    is ``owner key + 0x00 + type + class + canonical rdata``: one bytes comparison orders
    two records exactly as RFC 4034 wants, and equal keys are duplicates.
    """

    def __init__(self, origin: Any) -> None:
        import dns.name

        if isinstance(origin, str):
            origin = dns.name.from_text(origin)
        self.origin = origin
        self._apex_key = name_key_from_labels(origin.labels[:-1])
        self._entries: list[tuple[bytes, int, bytes, int]] = []

    def __len__(self) -> int:
        return len(self._entries)

    def add(
        self, owner_wire: bytes, owner_key: bytes, rdtype: int, rdclass: int, ttl: int, rdata: bytes
    ) -> None:
        """Add one record already in canonical form (lower-cased owner wire and rdata)."""
        key = owner_key + b"\x00" + _TYPE_CLASS.pack(rdtype, rdclass) + rdata
        self._entries.append((key, ttl, owner_wire, len(rdata)))

    def add_wire(
        self,
        msg: bytes,
        owner_off: int,
        rdtype: int,
        rdclass: int,
        ttl: int,
        rdata_off: int,
        rdlen: int,
        cache: NameCache,
    ) -> None:
        """Add one record as found in a message (compressed names allowed)."""
        owner_wire, owner_key, _ = read_name(msg, owner_off, cache)
        rdata = canonical_rdata(msg, rdtype, rdclass, rdata_off, rdlen, cache)
        self.add(owner_wire, owner_key, rdtype, rdclass, ttl, rdata)

    def digest(self) -> bytes:
        entries = self._entries
        entries.sort()
        hasher = hashlib.sha384()
        apex_prefix = self._apex_key + b"\x00"
        group: list[tuple[bytes, bytes, int]] = []  # (key, owner wire, rdlen) of one RRset
        group_id = b""
        group_ttl = 0
        last_key = None
        skipping = False
        for key, ttl, owner_wire, rdlen in entries:
            if key == last_key:  # a duplicate, possibly with another TTL
                if not skipping:
                    group_ttl = min(group_ttl, ttl)
                continue
            last_key = key
            type_end = len(key) - rdlen  # the type and class are the 4 bytes before
            rdtype = (key[type_end - 4] << 8) | key[type_end - 3]
            if rdtype == RRSIG:  # RRSIGs are one RRset per covered type
                covered = key[type_end : type_end + 2]
                this_id = key[:type_end] + covered
            else:
                covered = b""
                this_id = key[:type_end]
            skipping = (rdtype == ZONEMD or covered == b"\x00\x3f") and (
                type_end - 4 == len(apex_prefix) and key.startswith(apex_prefix)
            )
            if skipping:
                continue
            if this_id != group_id:
                _hash_rrset(hasher, group, group_ttl)
                group = []
                group_id = this_id
                group_ttl = ttl
            else:
                group_ttl = min(group_ttl, ttl)
            group.append((key, owner_wire, rdlen))
        _hash_rrset(hasher, group, group_ttl)
        return hasher.digest()

    def hexdigest(self) -> str:
        return self.digest().hex()


def _hash_rrset(hasher: Any, group: list[tuple[bytes, bytes, int]], ttl: int) -> None:
    for key, owner_wire, rdlen in group:
        type_end = len(key) - rdlen
        hasher.update(
            owner_wire + key[type_end - 4 : type_end] + _TTL_LEN.pack(ttl, rdlen) + key[type_end:]
        )


def canonical_rdata(
    msg: bytes, rdtype: int, rdclass: int, off: int, rdlen: int, cache: NameCache
) -> bytes:
    """The RFC 4034 canonical form of the rdata at ``msg[off:off+rdlen]``."""
    end = off + rdlen
    if rdtype in RAW_TYPES:
        return msg[off:end]
    if rdtype in NAME_TYPES:
        wire, _, after = read_name(msg, off, cache)
        _check_end(after, end, rdtype, off)
        return wire
    prefix = _PREFIXED_NAME.get(rdtype)
    if prefix is not None:
        wire, _, after = read_name(msg, off + prefix, cache)
        _check_end(after, end, rdtype, off)
        return msg[off : off + prefix] + wire
    if rdtype == 6:  # SOA
        mname, _, pos = read_name(msg, off, cache)
        rname, _, pos = read_name(msg, pos, cache)
        _check_end(pos + 20, end, rdtype, off)
        return mname + rname + msg[pos:end]
    if rdtype == RRSIG:
        signer, _, pos = read_name(msg, off + 18, cache)
        if pos > end:
            raise WireError(f"RRSIG rdata at offset {off} is too short")
        return msg[off : off + 18] + signer + msg[pos:end]
    return _dnspython_canonical(msg, rdtype, rdclass, off, rdlen)


def _check_end(after: int, end: int, rdtype: int, off: int) -> None:
    if after != end:
        raise WireError(f"type {rdtype} rdata at offset {off} has a bad length")


def _dnspython_canonical(msg: bytes, rdtype: int, rdclass: int, off: int, rdlen: int) -> bytes:
    # Everything else (NSEC's case-preserving next name, NAPTR, SVCB, ...) is left to
    # dnspython, which knows each type's canonicalisation rules.
    import dns.exception
    import dns.rdata

    try:
        rdata = dns.rdata.from_wire(rdclass, rdtype, msg, off, rdlen)
    except dns.exception.DNSException as exc:
        raise WireError(f"type {rdtype} rdata at offset {off}: {exc}") from exc
    return rdata.to_digestable()


def _as_name(value: Any, origin: Any) -> Any:
    import dns.name

    if isinstance(value, str):
        value = dns.name.from_text(value, origin)
    if not value.is_absolute():
        value = value.derelativize(origin)
    return value


def records_digest(records: Iterable[Any], origin: Any) -> str:
    """Hex RFC 8976 SIMPLE/SHA-384 digest of ``records``: dnspython RRsets, or
    ``(name, ttl, rdclass, rdtype, rdata)`` tuples whose rdata is a ``dns.rdata.Rdata`` (or
    its text form, read relative to ``origin``)."""
    import dns.name
    import dns.rdata
    import dns.rdataclass
    import dns.rdatatype
    import dns.rrset

    if isinstance(origin, str):
        origin = dns.name.from_text(origin)
    builder = DigestBuilder(origin)
    names: dict[Any, tuple[bytes, bytes]] = {}

    def owner_forms(name: Any) -> tuple[bytes, bytes]:
        forms = names.get(name)
        if forms is None:
            forms = (name.to_digestable(), name_key_from_labels(name.labels[:-1]))
            names[name] = forms
        return forms

    for item in records:
        if isinstance(item, dns.rrset.RRset):
            name = _as_name(item.name, origin)
            wire, key = owner_forms(name)
            for rdata in item:
                canon = rdata.to_digestable(origin)
                builder.add(wire, key, rdata.rdtype, rdata.rdclass, item.ttl, canon)
            continue
        name, ttl, rdclass, rdtype, rdata = item
        name = _as_name(name, origin)
        rdclass = dns.rdataclass.RdataClass.make(rdclass)
        rdtype = dns.rdatatype.RdataType.make(rdtype)
        if not isinstance(rdata, dns.rdata.Rdata):
            rdata = dns.rdata.from_text(rdclass, rdtype, rdata, origin)
        wire, key = owner_forms(name)
        builder.add(wire, key, rdtype, rdclass, int(ttl), rdata.to_digestable(origin))
    return builder.hexdigest()


def zone_digest_dnspython(zone: Any) -> str:
    """dnspython's own digest of a ``dns.zone.Zone`` (hex): the reference the harness's
    builder is tested against, and the digest of a zone already loaded."""
    import dns.zone

    scheme = dns.zone.DigestScheme.SIMPLE
    return zone.compute_digest(dns.zone.DigestHashAlgorithm.SHA384, scheme).digest.hex()


def zone_digest(path: Path | str, origin: str) -> str:
    """The digest of the zone file at ``path`` (loaded whole by dnspython: fine for test-sized
    and 1 M-record zones, minutes and GBs for 14 M records)."""
    import dns.zone

    zone = dns.zone.from_file(str(path), origin=origin, relativize=False, check_origin=True)
    return zone_digest_dnspython(zone)
