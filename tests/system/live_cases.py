"""A helper for system tests: a scenario's first case on a testbed of its own, its servers
started and every secondary serving its first copy (harness/measure/live.py `LiveCase`).

The context stops exactly the servers and removes exactly the testbed it made."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from harness import spec, zonegen
from harness.measure.live import LiveCase
from harness.plan.case import CasePlan, plan_case
from harness.run.runner import NETNS, resolve_binaries
from harness.servers.binaries import ServerBinary
from harness.testbed import Testbed
from harness.testbed.place import TestbedPlaces


def first_case(
    tmp_path: Path, scenario: str
) -> tuple[CasePlan, dict[str, ServerBinary], zonegen.GeneratedZones]:
    """The first case of the scenario `scenario` (TOML text): its plan, binaries and zones."""
    path = tmp_path / "s.toml"
    path.write_text(scenario)
    loaded = spec.load(path)
    plan = plan_case(loaded.cases[0])
    binaries = resolve_binaries([plan], NETNS, loaded.path)[0][plan.name]
    return plan, binaries, zonegen.generate(plan.zone_spec)


@contextmanager
def first_copies(tmp_path: Path, scenario: str) -> Iterator[LiveCase]:
    """The first case of the scenario `scenario` (TOML text), its secondaries serving the
    zone's first version."""
    plan, binaries, zones = first_case(tmp_path, scenario)
    with (
        Testbed.of(plan.endpoints(), tmp_path / "tb") as testbed,
        LiveCase(
            plan, tmp_path / "case", TestbedPlaces(testbed), binaries, zones, None, None
        ) as live,
    ):
        live.start_primary()
        live.prepare_secondaries()
        live.start_secondaries()
        hosts = [host.name for host in plan.secondaries]
        assert live.wait_served(hosts, live.first_zone, live.base_serial, live.clock() + 60)
        yield live
