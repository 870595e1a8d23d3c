"""How many versions of an own zone's change history a run may publish, checked before any
server starts (`[zones] versions`, harness/zonegen/ownzone.py).

A visit of a group publishes the warm-up serial, then one serial per repeat (a stream: one
per stream serial), and before a repeat of a switched configuration one more to prove the
switch (harness/run/session.py). Whether a switch is proven depends on how each server was
switched (a restart always is), which only the running servers know; so the count takes
every switch as proven, an upper bound. A group publishes change sets (each a version) when
it has an IXFR case or its primary takes whole zone files; an AXFR-only group changes the
serial alone. Every visit starts from the first version again (a fresh primary).
"""

from __future__ import annotations

from harness.core.errors import ScenarioError
from harness.plan.case import CasePlan, GroupPlan, group_cases
from harness.servers import server_class


def publishes(group: GroupPlan) -> int:
    """The most serials one visit of `group` publishes: warm-up, repeats, proofs."""
    slots = 0
    serials = 0
    for case in group.cases:
        repeats = case.case.scenario.max_repeats
        per_repeat = len(case.stream.offsets(case.name, 1)) if case.stream is not None else 1
        slots += repeats
        serials += repeats * per_repeat
    proofs = slots - 1 if len(group.cases) > 1 else 0
    return 1 + serials + proofs


def consumes_versions(group: GroupPlan) -> bool:
    primary = server_class(group.first.primary.server.kind)
    return group.ixfr or primary.publishes_zone_files(group.ixfr, group.first.zone_spec.signed)


def versions_needed(plans: list[CasePlan]) -> int:
    """The versions (the loaded one included) the run may need; 1 when it publishes no
    change sets or is a cold start."""
    needed = 1
    for group in group_cases(plans):
        if group.first.cold_start or not consumes_versions(group):
            continue
        needed = max(needed, 1 + publishes(group))
    return needed


def check_versions(plans: list[CasePlan], scenario_path: object) -> None:
    """Refuse a scenario whose change history is shorter than what it publishes."""
    if not plans or plans[0].zone_spec.preset != "file":
        return
    given = len(plans[0].zone_spec.versions)
    if not given:
        return  # no history: each publish is the same records under a new serial
    needed = versions_needed(plans)
    if needed > given:
        raise ScenarioError(
            f"{scenario_path}: zones.versions: the run may publish {needed - 1} new serials "
            f"(warm-ups, repeats, switch proofs{', stream serials' if plans[0].stream else ''})"
            f" and each is the next version: it needs up to {needed} versions, "
            f"{given} given",
            fix=f"give {needed} versions, or fewer repeats or cases",
        )
