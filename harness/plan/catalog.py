"""A catalog case's plan (pure): what each repeat publishes and measures.

Each repeat: every consumer starts fresh against the catalog as the primary serves it
(`provision`: all its members), then, once all are served, a version adding `add` new
members (`add`), one removing the `remove` newest (`remove`), and a restart of each consumer
(`restart`, when asked): one record per consumer and phase (measure/catalog.py).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from harness.zonegen.catalog import SCHEMA_VERSION, Member, member_id
from harness.zonegen.small import hosting_zone_name

PHASES = ("provision", "add", "remove", "restart")


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

    def phases(self) -> tuple[str, ...]:
        """The phases a repeat measures, in order."""
        wanted = {
            "provision": True,
            "add": self.add > 0,
            "remove": self.remove > 0,
            "restart": self.restart_secondary,
        }
        return tuple(phase for phase in PHASES if wanted[phase])

    def member(self, origin: str, seed: int, index: int) -> Member:
        """Hosting zone `index` (zonegen/small.py) as a member with its own id."""
        return Member(member_id(index), hosting_zone_name(origin, seed, index), self.group)

    def first_members(self, origin: str, seed: int) -> list[Member]:
        """The catalog the primary loads: the generated members, then the names given."""
        members = [self.member(origin, seed, i) for i in range(self.members)]
        if self.second_target is not None:
            members[0] = dataclasses.replace(members[0], second_target=self.second_target)
        own = [Member(f"own{k}", name, self.group) for k, name in enumerate(self.names)]
        return members + own
