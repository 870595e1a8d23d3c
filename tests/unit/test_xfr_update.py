"""The dynamic update that publishes a change set: built so every server applies all of it."""

from __future__ import annotations

from pathlib import Path

import dns.name
import dns.rdatatype
import dns.rrset

from harness.xfr import TsigKey
from harness.xfr.primary_check import expectations, mismatches
from harness.xfr.update import serial_update
from harness.zonegen import ZoneSpec, change_set, read_diff

KEY = TsigKey("update.", "hmac-sha256", "c2VjcmV0c2VjcmV0c2VjcmV0c2VjcmV0c2VjcmV0MTI=")


def _update_for(spec: ZoneSpec, changes: int, cache: Path) -> tuple[list, list, list]:
    change = change_set(spec, serial_to=spec.serial + 1, changes=changes, cache_dir=cache)
    deleted, added = read_diff(change.diff_path, spec.origin)
    soa = next(r for r in deleted if r[2].rdtype == dns.rdatatype.SOA)
    rrset = dns.rrset.from_rdata(soa[0], soa[1], soa[2])
    update = serial_update(spec.origin, rrset, spec.serial + 1, KEY, deleted=deleted, added=added)
    return update.update, deleted, added


def test_the_tiny_zones_only_ns_is_added_before_it_is_deleted(tmp_path: Path) -> None:
    """RFC 2136 §3.4.2.4: a server ignores a delete of the last NS at the apex, so a change
    set that replaces the tiny zone's one NS must add the new NS first (the demo's primary
    kept both NS records when the delete came first)."""
    spec = ZoneSpec("tiny", 2, "tiny.example.")
    section, deleted, added = _update_for(spec, 2, tmp_path)
    apex = dns.name.from_text("tiny.example.")
    ns_deleted = [r for r in deleted if r[2].rdtype == dns.rdatatype.NS]
    ns_added = [r for r in added if r[2].rdtype == dns.rdatatype.NS]
    assert len(ns_deleted) == len(ns_added) == 1 and ns_deleted[0][0] == apex
    # dnspython keeps one RRset per (name, type, deleting) in the update section, in order.
    ns_sets = [r for r in section if r.name == apex and r.rdtype == dns.rdatatype.NS]
    adds = [i for i, r in enumerate(section) if r in ns_sets and r.deleting is None]
    deletes = [i for i, r in enumerate(section) if r in ns_sets and r.deleting is not None]
    assert adds and deletes and max(adds) < min(deletes)


def test_every_change_is_in_the_update_and_the_soa_last(tmp_path: Path) -> None:
    spec = ZoneSpec("tld", 2000, "tld.example.")
    section, deleted, added = _update_for(spec, 21, tmp_path)
    body = [r for r in section if r.rdtype != dns.rdatatype.SOA]
    assert sum(len(r) for r in body if r.deleting is None) == len(added) - 1
    assert sum(len(r) for r in body if r.deleting is not None) == len(deleted) - 1
    assert section[-1].rdtype == dns.rdatatype.SOA
    first_delete = next(i for i, r in enumerate(section) if r.deleting is not None)
    assert all(r.deleting is not None for r in section[first_delete:-2])


def test_the_primary_check_names_what_the_primary_did_not_take(tmp_path: Path) -> None:
    spec = ZoneSpec("tiny", 2, "tiny.example.")
    change = change_set(spec, serial_to=2, changes=2, cache_dir=tmp_path)
    deleted, added = read_diff(change.diff_path, spec.origin)
    expected = expectations(deleted, added)
    ((key, want),) = expected.items()  # the apex NS only: the SOA is checked by serial
    assert key == ("tiny.example.", dns.rdatatype.NS)
    (old,), (new,) = want.absent, want.present
    assert mismatches(expected, {key: {new}}) == []
    # What the demo's BIND did with a delete-first update: both NS served.
    assert mismatches(expected, {key: {old, new}}) == [
        f"tiny.example. NS {old} was deleted but is still served"
    ]
    assert mismatches(expected, {key: {old}}) == [
        f"tiny.example. NS {new} was added but is not served",
        f"tiny.example. NS {old} was deleted but is still served",
    ]
