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
    member_version,
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


def test_a_changed_property_or_a_rename_changes_only_its_own_lines(tmp_path: Path) -> None:
    old = members(range(3), group="a")
    regrouped = Member("m1", "z1.example.", group="b")
    renamed = Member("m2", "other.example.", group="a")
    change = catalog_change(tmp_path, CAT, 1, 2, old, [old[0], regrouped, renamed])
    deleted, added = read_diff(change.diff_path, CAT)
    # The regrouped member keeps its PTR (deleting and adding it would reset it), the
    # renamed one keeps its id and group and names another zone.
    assert sorted(f"{n} {r.rdtype.name} {r}" for n, _, r in deleted[1:]) == [
        f'group.m1.zones.{CAT} TXT "a"',
        f"m2.zones.{CAT} PTR z2.example.",
    ]
    assert sorted(f"{n} {r.rdtype.name} {r}" for n, _, r in added[1:]) == [
        f'group.m1.zones.{CAT} TXT "b"',
        f"m2.zones.{CAT} PTR other.example.",
    ]
    assert change.zone_path is not None
    assert ptrs(load_zone(change.zone_path, CAT))[f"m2.zones.{CAT}"] == "other.example."


def test_a_members_next_version_is_its_file_at_a_new_serial(tmp_path: Path) -> None:
    source = tmp_path / "z.example.zone"
    source.write_text(
        "z.example.\t3600\tIN\tSOA\tns.z.example. h.z.example. 1 10800 3600 1209600 300\n"
        "z.example.\t3600\tIN\tNS\tns.z.example.\n"
        "www.z.example.\t300\tIN\tA\t192.0.2.1\n"
    )
    change = member_version(tmp_path / "v", source, "z.example.", 4, 5)
    assert change.zone_path is not None
    new = load_zone(change.zone_path, "z.example.")
    assert new.get_soa().serial == 5
    assert new.find_rdataset("www", dns.rdatatype.A)[0].address == "192.0.2.1"
    deleted, added = read_diff(change.diff_path, "z.example.")
    assert [(r.serial, len(deleted)) for _, _, r in deleted] == [(4, 1)]
    assert [(r.serial, len(added)) for _, _, r in added] == [(5, 1)]


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
