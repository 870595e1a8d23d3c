"""The testbed's topology from a compose project instead of `ip netns add` and veth pairs.

`Testbed(..., compose=ComposeSetup(...))` calls `build_topology()` in place of its own veth
builder; everything after it (sysctls, offloads, link emulation, the reachability check)
runs unchanged on the attached namespace names. Two modes:

- per-run (`project` None): a project `xfb-<testbed id>` is rendered into the testbed folder,
  brought up, and taken down at teardown (registry item `compose_project`, listed before
  `up`, so `xfrbench clean` removes it after a killed driver);
- static (`project` given): the containers of a running project (the checked-in
  docker-compose.yml) are used as they are and left running; what the case changes in them
  (root qdiscs, per-host sysctls) is recorded so the next case starts alike.

Either way each container's network namespace is named xfb-<id>-p/r/s (`netns_attached`:
teardown removes the names only).
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.compose import project as proj
from harness.errors import ToolFailed, UserInputError
from harness.testbed import plan as planning

SERVICE_OF_ROLE = proj.SERVICE_OF_ROLE  # testbed role -> compose service


@dataclass(frozen=True)
class ComposeSetup:
    """How one case's testbed gets its hosts.

    `images`: service -> image tag (per-run mode). `project`: a running project to use
    (static mode). `shared`: driver folders the servers must see at the same path.
    """

    images: dict[str, str] = field(default_factory=dict)
    project: str | None = None
    shared: tuple[Path, ...] = ()

    @property
    def static(self) -> bool:
        return self.project is not None


@dataclass
class Built:
    plan: planning.TopologyPlan
    pids: dict[str, int]  # testbed role -> the container's PID 1 (as the driver sees it)
    deployment: proj.Deployment
    mtus: dict[str, int]  # endpoint -> the MTU of its segment

    def describe(self, setup: ComposeSetup) -> dict[str, Any]:
        return {"mode": "static" if setup.static else "per-run", **self.deployment.describe()}


def used_subnets(setup: ComposeSetup) -> set[str]:
    """Subnets a per-run project must not overlap (docker refuses overlapping networks)."""
    return set() if setup.static else proj.docker_subnets()


def static_slice(setup: ComposeSetup) -> str:
    assert setup.project is not None
    return proj.discover(setup.project).slice()


def build_topology(
    setup: ComposeSetup,
    testbed_id: str,
    block: str,
    slice_: str,
    directory: Path,
    mtus: dict[str, int],
    add: Callable[..., dict[str, Any]],
) -> Built:
    """Bring up (or find) the containers, name their namespaces, route through the link.

    `add(kind, **data)` records an item in the testbed's registry before it is created.
    `mtus`: endpoint -> MTU of its segment (the docker network's MTU option, per-run only).
    """
    if setup.static:
        assert setup.project is not None
        odd = {endpoint: mtu for endpoint, mtu in mtus.items() if mtu != 1500}
        if odd:
            raise UserInputError(
                f"a static compose project's networks have a fixed MTU (1500); the scenario "
                f"asks for {odd}",
                key="link.mtu",
                fix="run without --compose-project (a per-run project sets the MTU), "
                "or leave link.mtu at 1500",
            )
        deployment = proj.discover(setup.project)
    else:
        spec = proj.plan_project(
            testbed_id, slice_, setup.images, list(setup.shared), mtus=dict(mtus)
        )
        compose = proj.ComposeProject(spec, directory)
        add("compose_project", name=spec.name, file=str(compose.file))
        deployment = compose.up()
    names = {role: planning.netns_name(testbed_id, role) for role in planning.ROLES}
    pids = {role: deployment.pid(SERVICE_OF_ROLE[role]) for role in planning.ROLES}
    for role in planning.ROLES:
        add("netns_attached", name=names[role], pid=pids[role])
        proj.attach_netns(names[role], pids[role])
    interfaces = {
        SERVICE_OF_ROLE[role]: proj.interface_addresses(names[role]) for role in planning.ROLES
    }
    plan = deployment.topology_plan(testbed_id, block, interfaces)
    for endpoint, argvs in deployment.route_argvs().items():
        for argv in argvs:
            full = ["ip", "netns", "exec", names[endpoint], *argv]
            result = subprocess.run(full, capture_output=True, text=True, timeout=30, check=False)
            if result.returncode != 0:
                raise ToolFailed(full, result.returncode, result.stderr)
    for endpoint in proj.ENDPOINTS:
        for path in setup.shared:
            proj.check_shared(pids[endpoint], path)
    return Built(plan, pids, deployment, dict(mtus))
