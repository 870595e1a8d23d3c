"""The one ZONEMD (harness.xfr.digest) equals dnspython's RFC 8976 digest, from the wire, from
records and from a zone file."""

from __future__ import annotations

from pathlib import Path

import dns.message
import dns.name
import dns.rdatatype
import dns.rrset
import dns.zone
import pytest

from harness.xfr import wire as w
from harness.xfr.digest import DigestBuilder, records_digest, zone_digest, zone_digest_dnspython

TRICKY = """
$ORIGIN example.
$TTL 3600
@ IN SOA NS1.Example. HostMaster.example. 7 900 300 604800 900
@ IN NS ns1
@ IN NS NS2.OTHER.TEST.
@ 300 IN ZONEMD 7 1 1 ( {zeros} )
@ IN RRSIG ZONEMD 8 1 300 20300101000000 20200101000000 1 example. AAAA
@ IN RRSIG NS 8 1 3600 20300101000000 20200101000000 1 Example. AAAA
@ IN DNSKEY 257 3 8 AwEAAc3Q
ns1 IN A 192.0.2.1
ns1 IN AAAA 2001:db8::1
Mail IN MX 10 NS1
txt IN TXT "hello" "World"
_sip._tcp IN SRV 0 5 5060 NS1
sub IN NS ns.sub
sub IN DS 12345 8 2 0123456789ABCDEF0123456789ABCDEF0123456789ABCDEF0123456789ABCDEF
ns.sub IN A 192.0.2.53
dup 60 IN A 1.2.3.4
dup 30 IN A 1.2.3.4
dup 60 IN A 1.2.3.5
alias IN CNAME Www.Example.
nsec IN NSEC Next.Example. A NS RRSIG
nap IN NAPTR 100 10 "S" "SIP+D2U" "" _sip._udp.Example.
rp IN RP Admin.Example. txt
\\000a IN A 1.1.1.1
\\001 IN A 1.1.1.2
a\\000 IN A 1.1.1.3
*.wild IN A 1.1.1.4
"""


def tricky_zone() -> dns.zone.Zone:
    return dns.zone.from_text(TRICKY.format(zeros="00" * 48), origin="example.")


def axfr_messages(zone: dns.zone.Zone, per_message: int) -> list[bytes]:
    soa = zone.find_rrset(zone.origin, "SOA")
    records = [
        dns.rrset.from_rdata(name.derelativize(zone.origin), rds.ttl, rd)
        for name, rds in zone.iterate_rdatasets()
        if rds.rdtype != dns.rdatatype.SOA
        for rd in rds
    ]
    soa_abs = dns.rrset.from_rdata_list(zone.origin, soa.ttl, list(soa))
    sequence = [soa_abs, *records, soa_abs]
    query = dns.message.make_query(zone.origin, "AXFR")
    out = []
    for i in range(0, len(sequence), per_message):
        response = dns.message.make_response(query)
        response.answer = sequence[i : i + per_message]
        out.append(response.to_wire(origin=zone.origin))
    return out


def wire_digest(messages: list[bytes], origin: str) -> str:
    builder = DigestBuilder(origin)
    tracker = w.TransferTracker("axfr")
    apex = dns.name.from_text(origin).to_digestable()
    for msg in messages:
        header = w.parse_header(msg)
        cache: w.NameCache = {}
        off = w.skip_questions(msg, 12, header.qdcount)

        def sink(m: bytes, o: int, t: int, c: int, ttl: int, ro: int, rl: int) -> None:
            builder.add_wire(m, o, t, c, ttl, ro, rl, cache)  # noqa: B023 (used at once)

        w.walk_answers(msg, off, header.ancount, tracker, apex, cache, sink)
    assert tracker.done
    return builder.hexdigest()


def test_records_digest_equals_dnspython_on_tricky_zone() -> None:
    zone = tricky_zone()
    expected = zone_digest_dnspython(zone)
    tuples = [
        (name, rds.ttl, rds.rdclass, rds.rdtype, rd)
        for name, rds in zone.iterate_rdatasets()
        for rd in rds
    ]
    assert records_digest(tuples, "example.") == expected
    rrsets = [
        dns.rrset.from_rdata_list(name, rds.ttl, list(rds))
        for name, rds in zone.iterate_rdatasets()
    ]
    assert records_digest(rrsets, "example.") == expected
    # Order does not matter; text rdata works too.
    text = [
        (str(n), t, "IN", dns.rdatatype.to_text(ty), rd.to_text()) for n, t, _, ty, rd in tuples
    ]
    assert records_digest(list(reversed(text)), "example.") == expected


@pytest.mark.parametrize("per_message", [1, 7, 1000])
def test_wire_digest_equals_dnspython(per_message: int) -> None:
    zone = tricky_zone()
    assert wire_digest(axfr_messages(zone, per_message), "example.") == zone_digest_dnspython(zone)


def test_digest_changes_with_content_and_ttl_but_not_zonemd() -> None:
    base = zone_digest_dnspython(tricky_zone())
    changed_ttl = dns.zone.from_text(
        TRICKY.format(zeros="00" * 48).replace("ns1 IN A", "ns1 60 IN A"), origin="example."
    )
    other_zonemd = dns.zone.from_text(TRICKY.format(zeros="11" * 48), origin="example.")
    assert zone_digest_dnspython(changed_ttl) != base
    assert zone_digest_dnspython(other_zonemd) == base


def test_the_wire_digest_equals_the_file_digest(tmp_path: Path) -> None:
    zonegen = pytest.importorskip("harness.zonegen")
    generated = zonegen.generate(
        zonegen.ZoneSpec(preset="tld", records=3000, origin="tld.", seed=1), cache_dir=tmp_path
    )
    path = generated.files[0].path
    zone = dns.zone.from_file(str(path), origin="tld.", relativize=False)
    messages = axfr_messages(zone, 500)
    assert wire_digest(messages, "tld.") == zone_digest(path, "tld.")


# RFC 8976 Appendix A.1, "Simple ZONEMD Example": the digest the RFC gives for its zone.
RFC8976_A1 = """\
example.      86400  IN  SOA     ns1 admin 2018031900 1800 900 604800 86400
              86400  IN  NS      ns1
              86400  IN  NS      ns2
              86400  IN  ZONEMD  2018031900 1 1 (
                                 c68090d90a7aed716bc459f9340e3d7c
                                 1370d4d24b7e2fc3a1ddc0b9a87153b9
                                 a9713b3c9ae5cc27777f98b8e730044c )
ns1           3600   IN  A       203.0.113.63
ns2           3600   IN  AAAA    2001:db8::63
"""
RFC8976_A1_DIGEST = (
    "c68090d90a7aed716bc459f9340e3d7c1370d4d24b7e2fc3a1ddc0b9a87153b9"
    "a9713b3c9ae5cc27777f98b8e730044c"
)


def test_the_rfc_8976_simple_example(tmp_path: Path) -> None:
    path = tmp_path / "example.zone"
    path.write_text(RFC8976_A1)
    assert zone_digest(path, "example.") == RFC8976_A1_DIGEST
    zone = dns.zone.from_text(RFC8976_A1, origin="example.", relativize=False)
    assert wire_digest(axfr_messages(zone, 2), "example.") == RFC8976_A1_DIGEST
