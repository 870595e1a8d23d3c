"""Catalog zones (RFC 9432 v2) as the harness writes them: a zone dnspython loads, members
as PTRs under zones. with their own ids, and change sets that take one version to the next."""

from __future__ import annotations

from pathlib import Path

import dns.name
import dns.rdatatype

from harness.zonegen.catalog import (
    Member,
    catalog_change,
    catalog_problems,
    member_id,
    write_catalog,
)
from harness.zonegen.diff import apply_diff, load_zone, read_diff

CAT = "catalog.invalid."


def members(indexes: range, group: str | None = None) -> list[Member]:
    return [Member(member_id(i), f"z{i}.example.", group=group) for i in indexes]


def ptrs(zone: object) -> dict[str, str]:
    out = {}
    for name, node in zone.nodes.items():  # type: ignore[attr-defined]
        rdataset = node.get_rdataset(1, dns.rdatatype.PTR)
        if rdataset is not None and str(name).endswith(f".zones.{CAT}"):
            out[str(name)] = str(next(iter(rdataset)).target)
    return out


def test_a_version_2_catalog_names_each_member_once(tmp_path: Path) -> None:
    file = write_catalog(tmp_path / "cat.zone", CAT, 7, members(range(3), group="tpl"))
    zone = load_zone(file.path, CAT)
    version = zone.find_rdataset(dns.name.from_text(f"version.{CAT}"), dns.rdatatype.TXT)
    assert [r.strings for r in version] == [(b"2",)]
    assert ptrs(zone) == {f"m{i}.zones.{CAT}": f"z{i}.example." for i in range(3)}
    group = zone.find_rdataset(dns.name.from_text(f"group.m1.zones.{CAT}"), dns.rdatatype.TXT)
    assert [r.strings for r in group] == [(b"tpl",)]
    assert file.serial == 7 and file.records == 3 + 3 * 2


def test_a_change_set_adds_and_removes_member_ptrs(tmp_path: Path) -> None:
    old, new = members(range(5)), members(range(1, 7))  # m0 leaves, m5 and m6 join
    base = write_catalog(tmp_path / "base.zone", CAT, 1, old)
    change = catalog_change(tmp_path / "sets", CAT, 1, 2, old, new)
    assert (change.added, change.deleted) == (2, 1)
    deleted, added = read_diff(change.diff_path, CAT)
    assert [str(n) for n, _, r in deleted if r.rdtype == dns.rdatatype.PTR] == [f"m0.zones.{CAT}"]
    applied = apply_diff(load_zone(base.path, CAT), change.diff_path, CAT)
    assert change.zone_path is not None
    assert ptrs(applied) == ptrs(load_zone(change.zone_path, CAT))
    assert set(ptrs(applied).values()) == {f"z{i}.example." for i in range(1, 7)}


def test_a_duplicate_member_or_id_is_named() -> None:
    twice = [Member("m1", "a.example."), Member("m2", "a.example."), Member("m2", "b.example.")]
    assert catalog_problems(twice) == [
        "member zone a.example. is named 2 times",
        "unique id m2 is used 2 times",
    ]
    assert catalog_problems(members(range(4))) == []


def test_a_version_a_consumer_rejects_is_written_as_asked_and_named(tmp_path: Path) -> None:
    """Bad input (catalog.version): "99" is published as it is, "" leaves the property out."""
    for version, strings in (("99", [(b"99",)]), (None, None)):
        file = write_catalog(tmp_path / "cat.zone", CAT, 1, members(range(2)), version)
        zone = load_zone(file.path, CAT)
        found = zone.get_rdataset(dns.name.from_text(f"version.{CAT}"), dns.rdatatype.TXT)
        assert (None if found is None else [r.strings for r in found]) == strings
        assert len(ptrs(zone)) == 2
    assert catalog_problems(members(range(2)), "99") == [
        'the catalog\'s version property is "99", not "2" (a consumer must reject it)'
    ]
    assert catalog_problems(members(range(2)), None) == [
        "the catalog has no version property (a consumer must reject it)"
    ]


def test_a_second_ptr_target_is_written_at_the_members_node_and_named(tmp_path: Path) -> None:
    """Bad input (catalog.second_target): the node holds two PTRs, as the primary serves it."""
    bad = [Member("m0", "z0.example.", second_target="other.example."), *members(range(1, 3))]
    zone = load_zone(write_catalog(tmp_path / "cat.zone", CAT, 1, bad).path, CAT)
    node = zone.find_rdataset(dns.name.from_text(f"m0.zones.{CAT}"), dns.rdatatype.PTR)
    assert sorted(str(r.target) for r in node) == ["other.example.", "z0.example."]
    assert catalog_problems(bad) == [
        "member m0 has two PTR targets, z0.example. and other.example. (exactly one is allowed)"
    ]
