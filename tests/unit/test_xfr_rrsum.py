"""RRSUM: equals a plain dnspython reference, ignores order, compression and message
boundaries, sees every changed, missing or extra record, and updates incrementally."""

from __future__ import annotations

import hashlib
import io
import random
import struct
from pathlib import Path

import dns.message
import dns.name
import dns.rdata
import dns.rdataclass
import dns.rdatatype
import dns.rrset
import dns.zone
import pytest

from harness.xfr.rrsum import (
    MODULUS,
    ZoneSum,
    sum_message,
    sum_rrsets,
    sum_stream,
    sum_zone_object,
)
from harness.xfr.rrsum_text import (
    LineCaches,
    LineError,
    LineSummer,
    apply_changes,
    apply_diff_lines,
    soa_bump,
    sum_lines,
)
from harness.xfr.wire import WireError, frame
from harness.zonegen import ZoneSpec, change_set, generate
from harness.zonegen.tld import soa_line

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
dup 60 IN A 1.2.3.5
alias IN CNAME Www.Example.
ptr IN PTR Host.Example.
nsec IN NSEC Next.Example. A NS RRSIG
nap IN NAPTR 100 10 "S" "SIP+D2U" "" _sip._udp.Example.
rp IN RP Admin.Example. txt
\\000a IN A 1.1.1.1
\\001 IN A 1.1.1.2
a\\000 IN A 1.1.1.3
*.wild IN A 1.1.1.4
"""


def tricky_zone() -> dns.zone.Zone:
    return dns.zone.from_text(TRICKY.format(zeros="00" * 48), origin="example.", relativize=False)


Record = tuple[dns.name.Name, int, dns.rdata.Rdata]


def records_of(zone: dns.zone.Zone) -> list[Record]:
    """(absolute owner, ttl, rdata) of every record, SOA first."""
    out = [(name, rds.ttl, rd) for name, rds in zone.iterate_rdatasets() for rd in rds]
    out.sort(key=lambda r: r[2].rdtype != dns.rdatatype.SOA)
    return out


def reference(records: list[Record]) -> ZoneSum:
    """The definition, written out plainly: BLAKE2s-256 of each canonical RR, summed."""
    total = 0
    for name, ttl, rd in records:
        rdata = rd.to_digestable(dns.name.root)
        wire = (
            name.canonicalize().to_wire()
            + struct.pack("!HHIH", rd.rdtype, rd.rdclass, ttl, len(rdata))
            + rdata
        )
        total += int.from_bytes(hashlib.blake2s(wire).digest(), "big")
    return ZoneSum(total % 2**256, len(records))


def axfr(
    records: list[Record], per_message: int, *, compress: bool = True, origin: str = "example."
) -> list[bytes]:
    """AXFR response messages: the SOA, the records, the SOA again, ``per_message`` a message.
    Uncompressed messages are rendered by hand (dnspython always compresses)."""
    sequence = [*records, records[0]]
    query = dns.message.make_query(origin, "AXFR")
    out = []
    for i in range(0, len(sequence), per_message):
        part = sequence[i : i + per_message]
        rrsets = [dns.rrset.from_rdata(name, ttl, rd) for name, ttl, rd in part]
        if compress:
            response = dns.message.make_response(query)
            response.answer = rrsets
            out.append(response.to_wire())
            continue
        buf = io.BytesIO()
        buf.write(struct.pack("!HHHHHH", query.id, 0x8400, 0, len(rrsets), 0, 0))
        for rrset in rrsets:
            rrset.to_wire(buf, None)
        out.append(buf.getvalue())
    return out


def stream(messages: list[bytes]) -> bytes:
    return b"".join(frame(m) for m in messages)


def messages_sum(messages: list[bytes]) -> ZoneSum:
    total = ZoneSum()
    for i, msg in enumerate(messages):
        total = total + sum_message(msg, drop_last=i == len(messages) - 1)
    return total


# --- equal to the reference, independent of layout ------------------------------------------


@pytest.mark.parametrize("per_message", [1, 7, 1000])
@pytest.mark.parametrize("compress", [True, False])
def test_wire_sum_equals_reference(per_message: int, compress: bool) -> None:
    records = records_of(tricky_zone())
    expected = reference(records)
    messages = axfr(records, per_message, compress=compress)
    assert messages_sum(messages) == expected
    assert sum_stream(stream(messages), drop_last=True) == expected
    assert expected.records == len(records)


def test_dnspython_paths_equal_reference() -> None:
    zone = tricky_zone()
    expected = reference(records_of(zone))
    assert sum_zone_object(zone) == expected
    rrsets = [
        dns.rrset.from_rdata_list(name, rds.ttl, list(rds))
        for name, rds in zone.iterate_rdatasets()
    ]
    assert sum_rrsets(rrsets, "example.") == expected


def test_text_lines_equal_reference() -> None:
    zone = tricky_zone()
    records = records_of(zone)
    lines = [f"{name} {ttl} IN {rd.rdtype.name} {rd.to_text()}" for name, ttl, rd in records]
    assert sum_lines(lines, "example.") == reference(records)
    # Relative names, '@', tabs, comments and blank lines read as a zone file would.
    relative = [
        "; a comment",
        "",
        "@\t3600\tIN\tSOA\tNS1.Example. HostMaster 7 900 300 604800 900",
        "Mail 3600 IN MX 10 NS1 ; trailing comment",
        "ns1 3600 in A 192.0.2.1",
    ]
    wanted = [r for r in records if str(r[0]) in ("example.", "Mail.example.", "ns1.example.")]
    wanted = [r for r in wanted if r[2].rdtype in (dns.rdatatype.SOA, dns.rdatatype.MX, 1)]
    assert sum_lines(relative, "example.") == reference(wanted)


def test_order_and_case_do_not_matter() -> None:
    records = records_of(tricky_zone())
    body = records[1:]
    random.Random(7).shuffle(body)
    shuffled = [records[0], *body]
    assert sum_stream(stream(axfr(shuffled, 5)), drop_last=True) == reference(records)
    upper = [(dns.name.from_text(str(n).upper()), t, rd) for n, t, rd in records]
    assert messages_sum(axfr(upper, 9)) == reference(records)


def test_zonegen_file_equals_its_transfer(tmp_path: Path) -> None:
    zone_file = generate(ZoneSpec("tld", 3000, "tld."), cache_dir=tmp_path).files[0]
    zone = dns.zone.from_file(str(zone_file.path), origin="tld.", relativize=False)
    records = records_of(zone)
    with open(zone_file.path, "rb") as fh:
        from_file = sum_lines(fh, "tld.")
    assert from_file == reference(records)
    assert sum_stream(stream(axfr(records, 400, origin="tld.")), drop_last=True) == from_file


# --- sees every difference -------------------------------------------------------------------


def _replace(records: list[Record], index: int, text: str, ttl: int | None = None) -> list[Record]:
    name, old_ttl, rd = records[index]
    new = dns.rdata.from_text(rd.rdclass, rd.rdtype, text, dns.name.root, relativize=False)
    return [*records[:index], (name, old_ttl if ttl is None else ttl, new), *records[index + 1 :]]


def test_detects_changed_missing_extra_and_duplicate_records() -> None:
    records = records_of(tricky_zone())
    base = messages_sum(axfr(records, 8))
    a_index = next(i for i, r in enumerate(records) if str(r[2]) == "192.0.2.1")
    ns_index = next(i for i, r in enumerate(records) if r[2].rdtype == dns.rdatatype.NS)
    extra = (dns.name.from_text("new.example."), 60, records[a_index][2])
    variants = {
        "changed address": _replace(records, a_index, "192.0.2.2"),
        "changed ttl": _replace(records, a_index, "192.0.2.1", ttl=61),
        "changed name in rdata": _replace(records, ns_index, "ns3.example."),
        "missing": records[:a_index] + records[a_index + 1 :],
        "extra": [*records, extra],
        "duplicate": [*records, records[a_index]],
    }
    seen = {base}
    for what, changed in variants.items():
        got = messages_sum(axfr(changed, 8))
        assert got not in seen, what
        assert got == reference(changed), what
        seen.add(got)
    assert messages_sum(axfr(variants["missing"], 8)).records == base.records - 1
    # Two changes that keep the count: still a different sum.
    swapped = _replace(_replace(records, a_index, "192.0.2.53"), a_index + 1, "2001:db8::2")
    assert messages_sum(axfr(swapped, 8)) != base


def test_closing_soa_is_left_out_once() -> None:
    records = records_of(tricky_zone())
    messages = axfr(records, 1000)
    assert sum_message(messages[0]).records == len(records) + 1
    assert sum_message(messages[0], drop_last=True) == reference(records)


@pytest.mark.parametrize(
    ("mutate", "match"),
    [
        (lambda m: m[:-3], "past the end"),
        (lambda m: m[:12], "past the end"),
        (lambda m: m[:6] + b"\xff\xff" + m[8:], "past the end"),  # ANCOUNT too big
        (lambda m: m[:2], "shorter than a DNS header"),
    ],
)
def test_malformed_messages_raise(mutate, match: str) -> None:  # type: ignore[no-untyped-def]
    message = axfr(records_of(tricky_zone()), 1000)[0]
    with pytest.raises(WireError, match=match):
        sum_message(mutate(message))


def test_forward_and_looping_pointers_raise() -> None:
    header = struct.pack("!HHHHHH", 1, 0x8400, 0, 1, 0, 0)
    forward = header + b"\xc0\x20" + struct.pack("!HHIH", 1, 1, 0, 4) + b"\x01\x02\x03\x04"
    with pytest.raises(WireError, match="does not point back"):
        sum_message(forward)
    loop = header + b"\x01a\xc0\x0c" + struct.pack("!HHIH", 1, 1, 0, 4) + b"\x01\x02\x03\x04"
    with pytest.raises(WireError, match="does not point back"):
        sum_message(loop)
    bad_label = header + b"\x41a\x00" + struct.pack("!HHIH", 1, 1, 0, 4) + b"\x01\x02\x03\x04"
    with pytest.raises(WireError, match="bad label type"):
        sum_message(bad_label)


def test_a_record_cut_after_its_owner_raises_a_wire_error() -> None:
    header = struct.pack("!HHHHHH", 1, 0x8400, 0, 1, 0, 0)
    with pytest.raises(WireError, match="past the end"):
        sum_message(header + b"\x01a\x00\x00\x01")  # TYPE, and nothing after it


def test_bad_name_rdata_length_raises() -> None:
    header = struct.pack("!HHHHHH", 1, 0x8400, 0, 1, 0, 0)
    ns = header + b"\x00" + struct.pack("!HHIH", 2, 1, 0, 3) + b"\x00\x00\x00"
    with pytest.raises(WireError, match="bad length"):
        sum_message(ns)


# --- arithmetic and incremental updates ------------------------------------------------------


def test_zonesum_arithmetic_and_text() -> None:
    a, b = ZoneSum(MODULUS - 1, 3), ZoneSum(5, 2)
    assert (a + b) == ZoneSum(4, 5)
    assert (a + b) - b == a
    assert ZoneSum(-1, 0).total == MODULUS - 1
    assert ZoneSum.from_text(a.text) == a
    assert a.text.startswith("rrsum:3:") and len(a.hex) == 64
    with pytest.raises(ValueError, match="not an RRSUM"):
        ZoneSum.from_text("ab" * 48)


def _file_sum(path: Path, origin: str) -> ZoneSum:
    with open(path, "rb") as fh:
        return sum_lines(fh, origin)


@pytest.mark.parametrize(
    ("spec", "changes"),
    [
        (ZoneSpec("tld", 2000, "cz.", seed=3), 9),
        (ZoneSpec("tld", 2000, "cz.", seed=3), 0),
        (ZoneSpec("hosting", 12, "h.example.", zones=2), 4),
        (ZoneSpec("tiny", 2, "example."), 1),
    ],
)
def test_change_sets_update_the_sum(tmp_path: Path, spec: ZoneSpec, changes: int) -> None:
    base = generate(spec, cache_dir=tmp_path).files[0]
    first = running = _file_sum(base.path, base.origin)
    for k in (1, 2, 3):
        cs = change_set(spec, spec.serial + k, changes, cache_dir=tmp_path)
        with open(cs.diff_path, "rb") as fh:
            running = apply_diff_lines(running, fh, cs.origin)
        assert running == _file_sum(cs.zone_path, cs.origin), k
        assert running.records == first.records + k * (cs.added - cs.deleted)
        assert running != first


def test_soa_bump_equals_recomputation(tmp_path: Path) -> None:
    spec = ZoneSpec("tld", 1500, "tld.")
    base = generate(spec, cache_dir=tmp_path).files[0]
    bumped = change_set(spec, 2, 0, cache_dir=tmp_path)  # only the serial changes
    base_sum = _file_sum(base.path, "tld.")
    new = soa_bump(base_sum, soa_line("tld.", 1), soa_line("tld.", 2), "tld.")
    assert new == _file_sum(bumped.zone_path, "tld.")
    assert new.records == base_sum.records and new != base_sum
    # apply_changes with the same lines is the same thing.
    assert apply_changes(base_sum, [soa_line("tld.", 1)], [soa_line("tld.", 2)], "tld.") == new


def test_bad_lines_raise_line_errors() -> None:
    with pytest.raises(LineError, match="directive"):
        sum_lines(["$TTL 300"], "example.")
    with pytest.raises(LineError, match="TTL"):
        sum_lines(["a.example. IN A 192.0.2.1 x"], "example.")
    with pytest.raises(LineError, match="bad rdata"):
        sum_lines(["a.example. 300 IN A 300.1.2.3"], "example.")
    with pytest.raises(LineError, match="expected"):
        sum_lines(["a.example. 300 IN"], "example.")
    with pytest.raises(LineError, match="unknown class"):
        sum_lines(["a.example. 300 XX A 192.0.2.1"], "example.")


def test_txt_and_soa_fast_paths_equal_dnspython() -> None:
    origin = dns.name.from_text("example.")
    texts = ['"hello" "World"', '""', '"a\\"b" "c d"', "unquoted words", '"x"  "y" ', '"é"']
    for text in texts:
        rd = dns.rdata.from_text("IN", "TXT", text, origin)
        line = f"t.example. 300 IN TXT {text}"
        expected = reference([(dns.name.from_text("t.example."), 300, rd)])
        assert sum_lines([line], "example.") == expected, text
    soa = "Ns1.Example. hostmaster 7 900 300 604800 900"
    rd = dns.rdata.from_text("IN", "SOA", soa, origin, relativize=False)
    expected = reference([(origin, 3600, rd)])
    assert sum_lines([f"@ 3600 IN SOA {soa}"], "example.") == expected


def test_summers_sharing_caches_keep_relative_names_to_their_own_zone() -> None:
    lines = [b"@ 3600 IN NS ns1", b"@ 3600 IN NS ns.provider.test.", b"www 300 IN A 192.0.2.1"]
    caches = LineCaches()
    first = LineSummer("a.example.", caches)
    first.add_lines(lines)
    second = LineSummer("b.example.", caches)
    second.add_lines(lines)
    assert first.result() == sum_lines(lines, "a.example.")
    assert second.result() == sum_lines(lines, "b.example.") != first.result()
