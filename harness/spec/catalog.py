"""Catalog zones ([catalog], with `trigger = "catalog"`): the primary serves a catalog
(RFC 9432 v2) naming `members` hosting zones, and each secondary is a consumer that
provisions its members from it (docs/catalog.md).

    [catalog]
    members = 1000          # member zones the catalog names (the [zones] hosting preset)
    add = 1                 # members one later catalog version adds (0: none)
    versions = 1            # catalog versions that each add `add` members, `interval` apart
    remove = 1              # members the version after it removes (0: none)
    interval = "2s"         # between those versions, once the one before is served
    change = "zone"         # a one-member change once all are served: "zone" (a new
                            # serial of one member's zone) or "rename" (a member's PTR
                            # names another zone); none by default
    coo = 5                 # move 5 members to a second catalog (RFC 9432 §5.1) once
                            # all are served; none by default
    coo_zone = "catalog2.invalid."  # that catalog's name (the default)
    restart_secondary = true  # stop and start each consumer once all are served
    sample = 8              # members read back whole and verified (every SOA is checked)
    zone = "catalog.invalid."
    group = "tpl"           # optional: a group property on every member
    names = ["own.example."]  # optional: zones named beside the generated ones
    version = "2"           # bad input: the version property's value ("": none at all)
    second_target = "x.example."  # bad input: a second PTR at the first member's node
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from pydantic import Field, field_validator

from harness.spec.fields import Duration, Strict
from harness.zonegen.catalog import DEFAULT_CATALOG, DEFAULT_COO_CATALOG, SCHEMA_VERSION
from harness.zonegen.model import MAX_ZONES

if TYPE_CHECKING:
    from harness.spec.scenario import Scenario


class CatalogSpec(Strict):
    members: int = Field(ge=1, le=MAX_ZONES // 2)
    # At most 1,000 a version: one dynamic update (a 64 KB message) carries them.
    add: int = Field(default=1, ge=0, le=1000)
    remove: int = Field(default=1, ge=0, le=1000)
    # Versions that each add `add` members, published `interval` apart whether or not the
    # consumers served the one before (an operator's pace), each measured on its own.
    versions: int = Field(default=1, ge=1, le=100)
    interval: Duration = 2.0
    change: Literal["zone", "rename"] | None = None
    # Members moved to a second catalog (change of ownership, RFC 9432 §5.1): the old
    # catalog's coo property, the members in the new one (same ids), then out of the old.
    coo: int | None = Field(default=None, ge=1)
    coo_zone: str = DEFAULT_COO_CATALOG
    restart_secondary: bool = False
    sample: int = Field(default=8, ge=0, le=10_000)
    zone: str = DEFAULT_CATALOG
    group: str | None = Field(default=None, pattern=r"^[A-Za-z0-9_.-]{1,63}$")
    names: list[str] = Field(default_factory=list)
    # The catalog's version property (RFC 9432 §4.2.1). Only "2" is valid; anything else,
    # or "" (no property), is bad input a consumer must reject: the run reports its words.
    version: str = Field(default=SCHEMA_VERSION, pattern=r"^[A-Za-z0-9._-]{0,16}$")
    # Bad input: the first generated member's node gets a second PTR naming this zone
    # (RFC 9432 §4.1 allows exactly one): what each consumer does with it is measured.
    second_target: str | None = Field(
        default=None, pattern=r"^([A-Za-z0-9_-]{1,63}\.)*[A-Za-z0-9_-]{1,63}\.?$"
    )

    @field_validator("zone", "coo_zone", "names", "second_target")
    @classmethod
    def _absolute(cls, value: str | list[str] | None) -> str | list[str] | None:
        def fix(name: str) -> str:
            return name.lower() if name.endswith(".") else name.lower() + "."

        if value is None:
            return None
        return fix(value) if isinstance(value, str) else [fix(v) for v in value]


def catalog_problem(scenario: Scenario) -> tuple[str, str] | None:
    """(key, what is wrong) when the scenario's catalog cannot run as written."""
    catalog = scenario.catalog
    if scenario.trigger == "catalog" and catalog is None:
        return "catalog", 'trigger = "catalog" needs a [catalog] table, e.g. members = 1000'
    if catalog is None:
        return None
    if scenario.trigger != "catalog":
        return "catalog", (
            f'[catalog] applies to trigger = "catalog" only (this scenario\'s trigger is '
            f"{scenario.trigger!r}); set the trigger or remove the table"
        )
    if scenario.zones.preset != "hosting":
        return "zones.preset", (
            f'a catalog\'s members are hosting zones; set preset = "hosting" (not '
            f"{scenario.zones.preset!r})"
        )
    if scenario.zones.zones != 1:
        return "zones.zones", (
            "the catalog decides how many member zones there are; remove zones.zones and "
            "set catalog.members"
        )
    if catalog.versions > 1 and catalog.add == 0:
        return "catalog.versions", (
            f"{catalog.versions} versions that each add catalog.add = 0 members add none; "
            "set add = 1 or more, or remove versions"
        )
    if (pool := pool_size(catalog, scenario.max_repeats)) > MAX_ZONES:
        return "catalog.versions", (
            f"the primary would load {pool:,} hosting zones (members, plus add x versions "
            f"for each of {scenario.max_repeats} repeats), more than {MAX_ZONES:,}; give "
            "fewer versions, a smaller add or fewer repeats"
        )
    if catalog.remove > catalog.members + catalog.add * catalog.versions:
        return "catalog.remove", (
            f"{catalog.remove} members cannot be removed from a catalog of "
            f"{catalog.members + catalog.add * catalog.versions}; give at most that many"
        )
    if (problem := _coo_problem(catalog)) is not None:
        return problem
    if scenario.xfr != ["ixfr"] and scenario.xfr != ["axfr"]:
        return (
            "xfr",
            'a catalog case transfers as its consumers choose; give one kind, e.g. ["ixfr"]',
        )
    return None


def _coo_problem(catalog: CatalogSpec) -> tuple[str, str] | None:
    """(key, what is wrong) when `coo` cannot move that many members."""
    if catalog.coo is None:
        return None
    there = catalog.members + catalog.add * catalog.versions - catalog.remove
    if catalog.coo > there:
        return "catalog.coo", (
            f"{catalog.coo} members cannot move: the catalog names {there} generated members "
            "when they move (members + add x versions - remove); give at most that many"
        )
    if catalog.coo_zone == catalog.zone or catalog.coo_zone in catalog.names:
        return "catalog.coo_zone", (
            f"the members move to another catalog, not {catalog.coo_zone}; name one of its "
            'own, e.g. "catalog2.invalid."'
        )
    return None


def pool_size(catalog: CatalogSpec, repeats: int) -> int:
    """Hosting zones the primary loads: the members, every member a later version adds
    over the run and each repeat's renamed member's new zone (each repeat takes new ones,
    so no consumer sees a zone come back)."""
    renamed = 1 if catalog.change == "rename" else 0
    return catalog.members + (catalog.add * catalog.versions + renamed) * repeats
