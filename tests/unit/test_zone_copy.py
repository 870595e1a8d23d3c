"""A server's copy of a zone as a file (harness/xfr/zone_copy.py): each server's own file,
captured from real runs (tests/fixtures/disk_copies/), sums to the primary's zone; master
files are read with their $ORIGIN, $TTL, left-out owners, parentheses and comments."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.xfr.rrsum_text import soa_bump, sum_lines
from harness.xfr.zone_copy import CopyError, head_serial, master_lines, write_lines
from harness.xfr.zonefile_sum import zone_file_sum
from harness.zonegen import ZoneSpec, generate
from harness.zonegen.tld import soa_line

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "disk_copies"
# How each server's file is read (its dialect's DiskCopy.format).
FORMATS = {"bind": "lines", "knot": "lines", "nsd": "master", "pdns": "master"}


def _summed(path: Path, fmt: str, origin: str, tmp_path: Path):  # type: ignore[no-untyped-def]
    if fmt == "master":
        lines = tmp_path / "lines"
        write_lines(path, lines, origin)
        path = lines
    return zone_file_sum(path, origin, cache=False)


@pytest.mark.parametrize("kind", sorted(FORMATS))
def test_each_servers_file_sums_to_the_primarys_zone(kind: str, tmp_path: Path) -> None:
    # The captures: a 300-record tld zone, seed 1, at serial 2 (the serial alone bumped).
    spec = ZoneSpec("tld", 300, "exp.example.", seed=1)
    base = generate(spec, cache_dir=tmp_path / "zones").files[0]
    origin = "exp.example."
    primary = soa_bump(
        zone_file_sum(base.path, origin), soa_line(origin, 1), soa_line(origin, 2), origin
    )
    fmt = FORMATS[kind]
    path = FIXTURES / f"{kind}.zone"
    assert _summed(path, fmt, origin, tmp_path) == primary
    assert head_serial(path, fmt, origin) == 2  # type: ignore[arg-type]


@pytest.mark.parametrize("kind", ["bind", "knot", "nsd"])
def test_signed_copies_sum_to_the_signed_zone(kind: str, tmp_path: Path) -> None:
    """RRSIG, NSEC3 and DNSKEY as each server writes them (PowerDNS keeps no NSEC3 of a
    presigned zone: its copy is not the zone, and the check says so)."""
    origin = "sig.example."
    primary = zone_file_sum(FIXTURES / "signed-primary.zone", origin, cache=False)
    path = FIXTURES / f"{kind}-signed.zone"
    assert _summed(path, FORMATS[kind], origin, tmp_path) == primary
    pdns = _summed(FIXTURES / "pdns-signed.zone", "master", origin, tmp_path)
    assert pdns != primary and pdns.records < primary.records


def test_master_lines_reads_directives_left_out_owners_and_parentheses(tmp_path: Path) -> None:
    text = b"""; a comment
$ORIGIN example.
$TTL 300
@  IN  SOA  ns.example. host.example. (
        7 ; serial
        900 300 604800 900 )
   IN NS ns
ns 60 A 192.0.2.1
   IN 70 AAAA 2001:db8::1
$ORIGIN sub.example.
www   CNAME  host   ; relative to sub.example.
txt   TXT  "a ; b" "c"
$ORIGIN .
abs.example 1h IN MX 10 mail
"""
    got = list(master_lines(text.splitlines(keepends=True), "example."))
    assert got == [
        b"example.\t300\tIN\tSOA\tns.example. host.example. 7 900 300 604800 900\n",
        b"example.\t300\tIN\tNS\tns\n",
        b"ns.example.\t60\tIN\tA\t192.0.2.1\n",
        b"ns.example.\t70\tIN\tAAAA\t2001:db8::1\n",
        b"www.sub.example.\t300\tIN\tCNAME\thost.sub.example.\n",
        b'txt.sub.example.\t300\tIN\tTXT\t"a ; b" "c"\n',
        b"abs.example.\t3600\tIN\tMX\t10 mail.\n",
    ]
    # What they say is what the lines say: the sum reads relative names under the zone.
    assert sum_lines(got, "example.").records == 7
    (tmp_path / "zone").write_bytes(text)
    assert head_serial(tmp_path / "zone", "master", "example.") == 7


@pytest.mark.parametrize(
    ("text", "words"),
    [
        (b"$INCLUDE other.zone\n", "directive"),
        (b"a 300 IN SOA ns host ( 1 2\n", "never closed"),
        (b"    300 IN A 192.0.2.1\n", "without an owner"),
        (b"a IN A 192.0.2.1\n", "[ttl] [class] type rdata"),
        (b"a 5parsecs IN A 192.0.2.1\n", "bad TTL"),
    ],
)
def test_master_lines_refuses_what_it_cannot_read(text: bytes, words: str) -> None:
    with pytest.raises(CopyError, match=words.replace("[", r"\[").replace("]", r"\]")):
        list(master_lines(text.splitlines(keepends=True), "example."))


def test_head_serial_of_a_missing_file_or_one_being_written(tmp_path: Path) -> None:
    path = tmp_path / "zone"
    assert head_serial(path, "lines", "example.") is None
    path.write_bytes(b"; nothing yet\n")
    assert head_serial(path, "lines", "example.") is None
    path.write_bytes(
        b"other.example. 300 IN SOA a. b. 9 1 1 1 1\nexample. 300 SOA a. b. 4 1 1 1 1\n"
    )
    assert head_serial(path, "lines", "example.") == 4  # the zone's own SOA, class or not
