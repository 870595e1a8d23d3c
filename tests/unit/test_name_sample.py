"""Names sampled from a copy on disk and their records (harness/xfr/name_sample.py): found by
bisecting a file in canonical order, by one pass over a file in any other; drawn the same
way from the same copy and seed; compared with what a server answers, one line per
difference."""

from __future__ import annotations

import random
from pathlib import Path

import dns.name
import dns.rdata
import dns.rdatatype
import pytest

from harness.xfr.name_sample import LinesFile, Sample, differences, draw

ORIGIN = "example."
APEX = dns.name.from_text(ORIGIN)


def _name(text: str) -> dns.name.Name:
    return dns.name.from_text(text)


def _zone(count: int) -> dict[dns.name.Name, list[str]]:
    """A zone of `count` delegations (NS, some with DS and glue below the cut) and an
    NSEC3 owner, as lines per owner name."""
    owners: dict[dns.name.Name, list[str]] = {
        APEX: [
            "example. 3600 IN SOA ns.example. host.example. 5 900 300 604800 900",
            "example. 3600 IN NS ns.example.",
        ],
        _name("ns.example."): ["ns.example. 3600 IN A 192.0.2.53"],
        _name("0p9mhaveqvm6t7vbl5lop2u3t2rp3tom.example."): [
            "0p9mhaveqvm6t7vbl5lop2u3t2rp3tom.example. 900 IN NSEC3 1 0 0 - "
            "2T7B4G4VSA5SMI47K61MV5BV1A22BOJR NS"
        ],
    }
    rng = random.Random(3)
    for i in range(count):
        label = f"d{i:05d}x{rng.randrange(1000)}"
        owner = f"{label}.example."
        lines = [f"{owner} 3600 IN NS ns1.{owner}", f"{owner} 3600 IN NS ns.other.net."]
        if i % 3 == 0:
            lines.append(f"{owner} 3600 IN DS {i} 13 2 {'ab' * 32}")
        owners[_name(owner)] = lines
        owners[_name(f"ns1.{owner}")] = [f"ns1.{owner} 3600 IN A 198.51.100.{i % 250}"]
    return owners


def _write(path: Path, owners: dict[dns.name.Name, list[str]], order: list[dns.name.Name]) -> Path:
    path.write_text("".join(line + "\n" for name in order for line in owners[name]))
    return path


@pytest.fixture(scope="module")
def zone() -> dict[dns.name.Name, list[str]]:
    return _zone(4000)  # about 400 kB: many windows to bisect


def test_a_canonical_file_is_bisected_and_any_other_read_through(
    zone: dict[dns.name.Name, list[str]], tmp_path: Path
) -> None:
    wanted = [APEX, *random.Random(1).sample(sorted(zone), 60), _name("absent.example.")]
    canonical = _write(tmp_path / "canonical", zone, sorted(zone))
    with LinesFile(canonical, ORIGIN) as copy:
        assert copy.size > 4 * 65536
        for name in wanted[:-1]:
            found = copy.block_of(name)  # bisection alone
            assert found is not None and [line.decode().rstrip() for line in found] == zone[name]
        assert copy.block_of(wanted[-1]) is None
    shuffled = list(zone)
    random.Random(2).shuffle(shuffled)
    other = _write(tmp_path / "other", zone, shuffled)
    with LinesFile(other, ORIGIN) as copy:
        blocks = copy.blocks_of(wanted)
    assert set(blocks) == set(wanted[:-1])
    assert all([line.decode().rstrip() for line in blocks[n]] == zone[n] for n in blocks)


def test_the_same_copy_and_seed_draw_the_same_sample(
    zone: dict[dns.name.Name, list[str]], tmp_path: Path
) -> None:
    path = _write(tmp_path / "copy", zone, sorted(zone))
    changed = [(n, dns.rdatatype.NS) for n in sorted(zone)[100:140]]
    one = draw(path, ORIGIN, changed, seed=7)
    assert one.names == draw(path, ORIGIN, changed, seed=7).names
    assert one.names != draw(path, ORIGIN, changed, seed=8).names
    assert len(one.names) == 32 and len(set(one.names)) == 32 and one.names[0] == APEX
    touched = {n for n, _ in changed}
    assert len([n for n in one.names[1:] if n in touched]) == 16  # half the sample, at most
    # Every name's records as the file holds them; NSEC3 is never asked for.
    for name in one.names:
        for line in zone.get(name, []):
            owner, ttl, _, rdtype, rdata = line.split(None, 4)
            if rdtype == "NSEC3":
                continue
            key = (name, dns.rdatatype.from_text(rdtype))
            held_ttl, rdatas = one.expected[key]
            assert held_ttl == int(ttl)
            assert dns.rdata.from_text("IN", rdtype, rdata, APEX, relativize=False) in rdatas
    assert not any(k[1] == dns.rdatatype.NSEC3 for k in one.expected)
    # A deleted name the copy no longer holds must not be served.
    gone = draw(path, ORIGIN, [(_name("gone.example."), dns.rdatatype.DS)], seed=7)
    assert gone.names[1] == _name("gone.example.")
    assert gone.absent == {(_name("gone.example."), dns.rdatatype.DS)}


def test_a_small_zone_gives_what_it_has(tmp_path: Path) -> None:
    owners = _zone(3)
    path = _write(tmp_path / "copy", owners, sorted(owners))
    sample = draw(path, ORIGIN, [], seed=1)
    askable = [n for n, lines in owners.items() if "NSEC3 " not in lines[0]]
    assert sorted(sample.names) == sorted(askable)


def _held(ttl: int, rdtype: str, *texts: str) -> tuple[int, frozenset[object]]:
    return ttl, frozenset(
        dns.rdata.from_text("IN", rdtype, t, APEX, relativize=False) for t in texts
    )


def test_differences_say_what_is_served_otherwise() -> None:
    www, gone = _name("www.example."), _name("gone.example.")
    sample = Sample(
        names=[APEX, www, gone],
        expected={
            (APEX, dns.rdatatype.NS): _held(3600, "NS", "a.example.", "b.example."),
            (www, dns.rdatatype.A): _held(300, "A", "192.0.2.1"),
            (www, dns.rdatatype.AAAA): _held(300, "AAAA", "2001:db8::1"),
            (www, dns.rdatatype.TXT): _held(300, "TXT", '"x"'),
        },
        absent={(gone, dns.rdatatype.DS)},
    )
    same = dict(sample.expected)
    assert differences(sample, {**same, (gone, dns.rdatatype.DS): None}) == []
    answers = {
        (APEX, dns.rdatatype.NS): _held(3600, "NS", "a.example."),
        (www, dns.rdatatype.A): _held(60, "A", "192.0.2.1"),
        (www, dns.rdatatype.AAAA): None,
        (www, dns.rdatatype.TXT): sample.expected[(www, dns.rdatatype.TXT)],
        (gone, dns.rdatatype.DS): _held(300, "DS", f"1 13 2 {'ab' * 32}"),
    }
    assert differences(sample, answers) == [
        "example. NS: served TTL 3600 a.example., the copy holds TTL 3600 a.example., b.example.",
        "gone.example. DS: served (TTL 300 1 13 2 " + "ab" * 32 + ") but not in the copy",
        "www.example. A: served TTL 60 192.0.2.1, the copy holds TTL 300 192.0.2.1",
        "www.example. AAAA: not served (the copy holds TTL 300 2001:db8::1)",
    ]
