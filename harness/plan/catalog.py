"""A catalog case's plan (pure): what each repeat publishes and measures.

Each repeat: every consumer starts fresh against the catalog as the primary serves it
(`provision`: all its members), then, once all are served, `versions` versions each adding
`add` new members `interval` apart (`add`, `add 2`, ...), one removing the `remove` newest
(`remove`), a one-member change (`change`: a new serial of one member's zone; `rename`: a
member's PTR naming another zone), and a restart of each consumer (`restart`, when asked):
one record per consumer and phase (measure/catalog.py).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass

from harness.zonegen.catalog import DEFAULT_COO_CATALOG, SCHEMA_VERSION, Member, member_id
from harness.zonegen.small import hosting_zone_name

PHASES = ("provision", "add", "remove", "change", "rename", "coo", "restart")


@dataclass(frozen=True)
class CatalogPlan:
    zone: str  # the catalog zone's name
    members: int
    add: int
    remove: int
    interval: float
    restart_secondary: bool
    sample: int
    group: str | None
    names: tuple[str, ...]  # zones named beside the generated members (an operator's own)
    version: str | None = SCHEMA_VERSION  # the version property (None: left out; bad input)
    second_target: str | None = None  # bad input: a second PTR at the first member's node
    versions: int = 1  # versions that each add `add` members, `interval` apart
    change: str | None = None  # "zone" | "rename": a one-member change (None: none)
    coo: int = 0  # members moved to the catalog `coo_zone` (change of ownership; 0: none)
    coo_zone: str = DEFAULT_COO_CATALOG

    @property
    def catalogs(self) -> tuple[str, ...]:
        """The catalog zones the primary serves and each consumer takes, the first first."""
        return (self.zone, self.coo_zone) if self.coo else (self.zone,)

    def phases(self) -> tuple[str, ...]:
        """The phases a repeat measures, in order."""
        wanted = {
            "provision": True,
            "add": self.add > 0,
            "remove": self.remove > 0,
            "change": self.change == "zone",
            "rename": self.change == "rename",
            "coo": self.coo > 0,
            "restart": self.restart_secondary,
        }
        out: list[str] = []
        for phase in PHASES:
            if wanted[phase]:
                out += self.add_phases() if phase == "add" else [phase]
        return tuple(out)

    def add_phases(self) -> list[str]:
        """Each adding version's phase: "add", then "add 2", "add 3", ..."""
        return ["add" if v == 1 else f"add {v}" for v in range(1, self.versions + 1)]

    def added_index(self, repeat: int, version: int) -> int:
        """The hosting zone index of the first member that version `version` (from 1) of
        repeat `repeat` (from 1) adds: every repeat takes zones of its own."""
        per_repeat = self.add * self.versions + (1 if self.change == "rename" else 0)
        return self.members + per_repeat * (repeat - 1) + self.add * (version - 1)

    def renamed_index(self, repeat: int) -> int:
        """The hosting zone index the renamed member of repeat `repeat` names instead."""
        return self.added_index(repeat, self.versions + 1)

    def member(self, origin: str, seed: int, index: int, pool: Sequence[str] = ()) -> Member:
        """Hosting zone `index` (zonegen/small.py) as a member with its own id; its name is
        `pool`'s own string when the pool (its zones' names in index order) has it, so a
        100 k-member catalog holds each name once, not twice (some 7 MB)."""
        zone = hosting_zone_name(origin, seed, index)
        if index < len(pool) and pool[index] == zone:
            zone = pool[index]
        return Member(member_id(index), zone, self.group)

    def first_members(self, origin: str, seed: int, pool: Sequence[str] = ()) -> list[Member]:
        """The catalog the primary loads: the generated members, then the names given."""
        members = [self.member(origin, seed, i, pool) for i in range(self.members)]
        if self.second_target is not None:
            members[0] = dataclasses.replace(members[0], second_target=self.second_target)
        own = [Member(f"own{k}", name, self.group) for k, name in enumerate(self.names)]
        return members + own
