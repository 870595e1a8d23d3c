"""Applying text diffs (RFC 1995-style change sets) to zones, as dnspython zones.

A zone's digest (RFC 8976 ZONEMD) is computed in one place, ``harness.xfr.digest``: compare
a zone N + diff with the zone N+1 file through ``zone_digest_dnspython`` and ``zone_digest``.
"""

from __future__ import annotations

from pathlib import Path

import dns.name
import dns.rdata
import dns.rdataclass
import dns.rdatatype
import dns.zone


def load_zone(path: Path | str, origin: str) -> dns.zone.Zone:
    return dns.zone.from_file(str(path), origin=origin, relativize=False, check_origin=True)


def _parse_line(line: str, origin: dns.name.Name) -> tuple[dns.name.Name, int, dns.rdata.Rdata]:
    owner, ttl, rdclass, rdtype, rdata = line.split(None, 4)
    rd = dns.rdata.from_text(
        dns.rdataclass.from_text(rdclass),
        dns.rdatatype.from_text(rdtype),
        rdata.strip(),
        origin,
        relativize=False,
    )
    return dns.name.from_text(owner, origin), int(ttl), rd


def read_diff(diff_path: Path | str, origin: str) -> tuple[list, list]:
    """(deleted, added) record tuples of an RFC 1995-style diff, SOAs included."""
    org = dns.name.from_text(origin)
    sections: list[list] = []
    with open(diff_path, encoding="ascii") as f:
        for raw in f:
            line = raw.strip()
            if not line or line.startswith(";"):
                continue
            record = _parse_line(line, org)
            if record[2].rdtype == dns.rdatatype.SOA:
                sections.append([])
            if not sections:
                raise ValueError(f"{diff_path}: the diff must start with the old SOA")
            sections[-1].append(record)
    if len(sections) != 2:
        raise ValueError(f"{diff_path}: expected exactly two SOA records, found {len(sections)}")
    return sections[0], sections[1]


def apply_diff(
    zone_text_or_path: str | Path | dns.zone.Zone, diff_path: Path | str, origin: str | None = None
) -> dns.zone.Zone:
    """Zone N + diff = zone N+1, as a dnspython zone (its digest: ``harness.xfr.digest``).

    Strict like an IXFR client: every deleted record must exist (the old SOA included, so the
    serial must match) and no added record may exist already.
    """
    if isinstance(zone_text_or_path, dns.zone.Zone):
        zone = zone_text_or_path
    else:
        if origin is None:
            raise ValueError("origin is needed to parse a zone")
        if isinstance(zone_text_or_path, Path) or "\n" not in str(zone_text_or_path):
            zone = load_zone(zone_text_or_path, origin)
        else:
            zone = dns.zone.from_text(str(zone_text_or_path), origin=origin, relativize=False)
    assert zone.origin is not None
    deleted, added = read_diff(diff_path, zone.origin.to_text())
    for name, _ttl, rd in deleted:
        rdataset = zone.get_rdataset(name, rd.rdtype, rd.covers())
        if rdataset is None or rd not in rdataset:
            raise ValueError(f"diff deletes {name} {rd.rdtype.name} {rd} which is not in the zone")
        if len(rdataset) == 1:
            zone.delete_rdataset(name, rd.rdtype, rd.covers())
        else:
            rdataset.remove(rd)
    for name, ttl, rd in added:
        rdataset = zone.find_rdataset(name, rd.rdtype, rd.covers(), create=True)
        if rd in rdataset:
            raise ValueError(f"diff adds {name} {rd.rdtype.name} {rd} which is already there")
        rdataset.add(rd, ttl)
    return zone
