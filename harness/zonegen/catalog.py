"""Catalog zones (RFC 9432, schema version 2): the zone that names a fleet's member zones,
and the change sets between two of its versions. Pure: text in, text out.

A version-2 catalog holds its SOA and an NS (required by the zone format, never used:
`invalid.`), `version.<catalog> TXT "2"`, and one PTR per member at
`<unique-id>.zones.<catalog>` naming the member zone. A member's unique id is a label of its
own (RFC 9432 §4.1: any label unique within the catalog; changing it tells consumers to
reset the member); here `m<index>` of the member's index among the hosting zones, so a
member keeps its id from version to version. Optional properties: `group.<id>.zones TXT`
(consumers map it to a configuration of theirs) and `coo.<id>.zones PTR <other catalog>`
(a change of ownership, §5.2).

A new version's change set is an RFC 1995-style diff (old SOA, deletions, new SOA,
additions: zonegen/diff.py reads it) beside the whole new version, so a primary that takes
updates gets the PTRs added or removed and one that reloads files gets the file.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from harness.zonegen.model import ChangeSet, ZoneFile

TTL = 0  # a catalog's records are never looked up by resolvers; RFC 9432 §4.1 suggests 0
SCHEMA_VERSION = "2"
DEFAULT_CATALOG = "catalog.invalid."
DEFAULT_COO_CATALOG = "catalog2.invalid."  # where catalog.coo moves members


@dataclass(frozen=True, slots=True)  # a catalog holds 100 k of them
class Member:
    """One member of a catalog: its unique id label, its zone, its optional properties."""

    id: str
    zone: str  # absolute, with the final dot
    group: str | None = None
    coo: str | None = None  # the catalog it moves to (change of ownership)
    # A second PTR target at the member's node: bad input (RFC 9432 §4.1 allows exactly
    # one), written only as a scenario asks (catalog.second_target).
    second_target: str | None = None


def member_id(index: int) -> str:
    return f"m{index}"


def member_records(catalog: str, member: Member) -> list[str]:
    """The lines that put `member` in `catalog` (tab-separated: owner, TTL, class, type,
    data)."""
    owner = f"{member.id}.zones.{catalog}"
    lines = [f"{owner}\t{TTL}\tIN\tPTR\t{member.zone}\n"]
    if member.second_target is not None:
        lines.append(f"{owner}\t{TTL}\tIN\tPTR\t{member.second_target}\n")
    if member.group is not None:
        lines.append(f'group.{owner}\t{TTL}\tIN\tTXT\t"{member.group}"\n')
    if member.coo is not None:
        lines.append(f"coo.{owner}\t{TTL}\tIN\tPTR\t{member.coo}\n")
    return lines


def soa_line(catalog: str, serial: int) -> str:
    return f"{catalog}\t{TTL}\tIN\tSOA\tinvalid. invalid. {serial} 3600 600 2147483646 0\n"


def catalog_lines(
    catalog: str, serial: int, members: Iterable[Member], version: str | None = SCHEMA_VERSION
) -> list[str]:
    """The whole catalog at `serial`: SOA, NS, version, then each member in order. A
    `version` other than "2", or None (no version property), makes a catalog a consumer
    must reject (RFC 9432 §4.2.1): written so only as a scenario asks (bad input)."""
    lines = [soa_line(catalog, serial), f"{catalog}\t{TTL}\tIN\tNS\tinvalid.\n"]
    if version is not None:
        lines.append(f'version.{catalog}\t{TTL}\tIN\tTXT\t"{version}"\n')
    for member in members:
        lines.extend(member_records(catalog, member))
    return lines


def catalog_problems(members: Sequence[Member], version: str | None = SCHEMA_VERSION) -> list[str]:
    """What makes a list of members no valid catalog: a zone named twice (RFC 9432 §4.1:
    a consumer must not configure it twice; which one wins is undefined), an id used
    twice, a member node with two PTR targets (§4.1: exactly one), a version property
    missing or other than "2" (§4.2.1: a consumer must not process the catalog)."""
    problems = []
    if version is None:
        problems.append("the catalog has no version property (a consumer must reject it)")
    elif version != SCHEMA_VERSION:
        problems.append(
            f'the catalog\'s version property is "{version}", not "{SCHEMA_VERSION}" '
            "(a consumer must reject it)"
        )
    for zone, count in Counter(m.zone for m in members).items():
        if count > 1:
            problems.append(f"member zone {zone} is named {count} times")
    for ident, count in Counter(m.id for m in members).items():
        if count > 1:
            problems.append(f"unique id {ident} is used {count} times")
    for member in members:
        if member.second_target is not None:
            problems.append(
                f"member {member.id} has two PTR targets, {member.zone} and "
                f"{member.second_target} (exactly one is allowed)"
            )
    return problems


def coo_versions(
    old: Sequence[Member], new: Sequence[Member], count: int, to: str
) -> tuple[list[Member], list[Member], list[Member]]:
    """A change of ownership of `old`'s first `count` members to the catalog `to` (RFC 9432
    §5.1), as three versions in the order they are published: the old catalog with each
    moving member's `coo` PTR naming `to`, the new catalog (`new` and the moving members
    after it, their ids kept: a consumer that sees the same id keeps the zone, a new id
    resets it), then the old catalog without them."""
    moving = list(old[:count])
    marked = [dataclasses.replace(m, coo=to) for m in moving] + list(old[count:])
    moved = list(new) + [dataclasses.replace(m, coo=None) for m in moving]
    return marked, moved, list(old[count:])


def write_catalog(
    path: Path,
    catalog: str,
    serial: int,
    members: Sequence[Member],
    version: str | None = SCHEMA_VERSION,
) -> ZoneFile:
    """The whole catalog written a member at a time: 100 k members' text, joined, held
    some 20 MB of the driver at each version."""
    lines = size = 0
    with path.open("w", encoding="ascii") as out:
        for text in _texts(catalog, serial, members, version):
            out.write(text)
            lines, size = lines + text.count("\n"), size + len(text)
    return ZoneFile(catalog, path, serial, lines, size)


def _texts(
    catalog: str, serial: int, members: Iterable[Member], version: str | None
) -> Iterator[str]:
    yield "".join(catalog_lines(catalog, serial, (), version))
    for member in members:
        yield "".join(member_records(catalog, member))


def catalog_change(
    folder: Path,
    catalog: str,
    serial_from: int,
    serial_to: int,
    old: Sequence[Member],
    new: Sequence[Member],
    version: str | None = SCHEMA_VERSION,
) -> ChangeSet:
    """The change set from the catalog with `old` members at `serial_from` to `new` at
    `serial_to`: its diff (members removed, then added; a member whose properties changed
    is both) and the whole new version, written in `folder`. Members are compared whole
    (equal members write equal records), never as sets of 100 k record lines (some 50 MB
    of the driver at each version of a 100 k-member catalog)."""
    kept_old, kept_new = set(old), set(new)
    # Only members that differ can differ in a line: a member whose group changed keeps its
    # PTR line, which the diff must not delete and add again.
    gone = [line for m in old if m not in kept_new for line in member_records(catalog, m)]
    came = [line for m in new if m not in kept_old for line in member_records(catalog, m)]
    del kept_old, kept_new
    came_set, gone_set = set(came), set(gone)
    deleted = [line for line in gone if line not in came_set]
    added = [line for line in came if line not in gone_set]
    folder.mkdir(parents=True, exist_ok=True)
    diff = folder / f"{catalog}{serial_to}.diff"
    diff.write_text(
        "".join([soa_line(catalog, serial_from), *deleted, soa_line(catalog, serial_to), *added]),
        encoding="ascii",
    )
    whole = write_catalog(folder / f"{catalog}{serial_to}.zone", catalog, serial_to, new, version)
    changed = sum(len(line) for line in (*deleted, *added))
    return ChangeSet(
        catalog, serial_from, serial_to, whole.path, diff, len(added), len(deleted), changed
    )


def member_version(
    folder: Path, source: Path, zone: str, serial_from: int, serial_to: int
) -> ChangeSet:
    """A member zone's next version for a primary that takes whole files: `source` (the
    pool's file, its SOA first) with the SOA's serial set to `serial_to`, and the diff from
    `serial_from` (what the primary serves now) to it, written in `folder`."""
    lines = source.read_text(encoding="ascii").splitlines(keepends=True)
    fields = lines[0].split()
    if len(fields) < 7 or fields[3] != "SOA":
        raise ValueError(f"{source}: its first record is no SOA")

    def soa(serial: int) -> str:
        return (
            "\t".join(fields[:4]) + "\t" + " ".join([*fields[4:6], str(serial), *fields[7:]]) + "\n"
        )

    old, new = soa(serial_from), soa(serial_to)
    folder.mkdir(parents=True, exist_ok=True)
    whole = folder / f"{zone}{serial_to}.zone"
    whole.write_text(new + "".join(lines[1:]), encoding="ascii")
    diff = folder / f"{zone}{serial_to}.diff"
    diff.write_text(old + new, encoding="ascii")
    return ChangeSet(zone, serial_from, serial_to, whole, diff, 0, 0, len(old) + len(new))
