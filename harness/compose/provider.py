"""The compose host provider: a testbed's hosts are the containers of a compose project.

    Testbed.of(endpoints, run_dir, provider=ComposeProvider(ComposeSetup(images=...)))

Everything after the hosts exist (sysctls, offloads, link emulation, the reachability check)
is the testbed's own code, run on the attached namespace names. Two modes:

- per-run (`project` None): a project `xfb-<testbed id>` is rendered into the testbed folder,
  brought up, and taken down at teardown (registry item `compose_project`, listed before
  `up`, so `xfrbench clean` removes it after a killed driver);
- static (`project` given): the containers of a running project (the checked-in
  docker-compose.yml) are used as they are and left running (`persistent`: the testbed
  records what it changes in them so the next case starts alike).

Either way each container's network namespace is named like the netns testbed's
(`netns_attached`: teardown removes the names only). Importing this module registers the
two undo kinds with the testbed registry.
"""

from __future__ import annotations

import subprocess
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.compose import deploy
from harness.compose import project as proj
from harness.core.errors import EnvironmentProblem, ToolFailed, UserInputError
from harness.testbed import registry as reg
from harness.testbed import topology
from harness.testbed.hosts import Built, Host, Record, make_hosts, record_interfaces
from harness.testbed.topology import ROUTER, Endpoint, TopologyPlan


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
class ContainerHost(Host):
    """A host that is a container: its tools (servers, control tools, version probes) come
    from the container's file system."""

    container_pid: int = 0

    def tool_argv(
        self, argv: list[str], cwd: Path | None = None, *, die_with_parent: bool = False
    ) -> list[str]:
        return proj.nsenter_argv(self.container_pid, argv, cwd, die_with_parent=die_with_parent)


class ComposeProvider:
    name = "compose"
    segment_prefixlen = topology.COMPOSE_SEGMENT_PREFIXLEN

    def __init__(self, setup: ComposeSetup) -> None:
        self.setup = setup
        self.persistent = setup.static

    def reserved_subnets(self) -> set[str]:
        """Docker refuses networks that overlap one it has (a per-run project's are new)."""
        return set() if self.setup.static else deploy.docker_subnets()

    def fixed_slice(self) -> str | None:
        if self.setup.project is None:
            return None
        return deploy.discover(self.setup.project).slice()

    def build(
        self,
        plan: TopologyPlan,
        endpoints: Sequence[Endpoint],
        mtus: dict[str, int],
        run_dir: Path,
        record: Record,
    ) -> Built:
        """Bring up (or find) the containers, name their namespaces, route through the link."""
        setup = self.setup
        names = [e.name for e in endpoints]
        if setup.static:
            assert setup.project is not None
            if names != list(proj.ENDPOINTS):
                raise UserInputError(
                    f"a static compose project has one primary and one secondary; the "
                    f"scenario has {len(names) - 1} secondaries",
                    key="--compose-project",
                    fix="run without --compose-project (a per-run project per case)",
                )
            odd = {endpoint: mtu for endpoint, mtu in mtus.items() if mtu != 1500}
            if odd:
                raise UserInputError(
                    f"a static compose project's networks have a fixed MTU (1500); the "
                    f"scenario asks for {odd}",
                    key="link.mtu",
                    fix="run without --compose-project (a per-run project sets the MTU), "
                    "or leave link.mtu at 1500",
                )
            deployment = deploy.discover(setup.project)
        else:
            spec = proj.plan_project(
                plan.testbed_id, plan.slice, setup.images, list(setup.shared), mtus=dict(mtus)
            )
            compose = deploy.ComposeProject(spec, run_dir / "compose")
            record("compose_project", name=spec.name, file=str(compose.file))
            deployment = compose.up()
        hosts = [*names, ROUTER]
        pids = {host: deployment.pid(proj.service_of(host)) for host in hosts}
        for host in hosts:
            record("netns_attached", name=plan.namespaces[host], pid=pids[host])
            deploy.attach_netns(plan.namespaces[host], pids[host])
        interfaces = {
            proj.service_of(host): deploy.interface_addresses(plan.namespaces[host])
            for host in hosts
        }
        built = deployment.topology_plan(plan.testbed_id, plan.block, interfaces, plan.namespaces)
        for endpoint, argvs in deployment.route_argvs().items():
            for argv in argvs:
                full = ["ip", "netns", "exec", plan.namespaces[endpoint], *argv]
                result = subprocess.run(
                    full, capture_output=True, text=True, timeout=30, check=False
                )
                if result.returncode != 0:
                    raise ToolFailed(full, result.returncode, result.stderr)
        for endpoint in names:
            for path in setup.shared:
                deploy.check_shared(pids[endpoint], path)
        extra: dict[str, dict[str, Any]] = {host: {"container_pid": pids[host]} for host in hosts}
        made = make_hosts(built, endpoints, ContainerHost, extra)
        record_interfaces(made, built, mtus)
        info = {"mode": "static" if setup.static else "per-run", **deployment.describe()}
        if made[ROUTER].sysctl("net.ipv4.ip_forward") != "1":
            raise EnvironmentProblem(
                f"the link container of {deployment.project} does not forward "
                "(net.ipv4.ip_forward is not 1; see docker-compose.yml)"
            )
        return Built(built, made, info)


def _undo_attached(action: reg.Action) -> str:
    # Only the name: the namespace is its container's (processes in it are the container's,
    # or ours and stopped by their own items first).
    name = action.target
    return f"namespace name {name} detached" if deploy.detach_netns(name) else ""


def _undo_project(action: reg.Action) -> str:
    file = action.detail.get("file")
    removed = deploy.down_project(action.target, Path(file) if file else None)
    if not removed:
        return ""
    return f"compose project {action.target} ({', '.join(removed)})"


reg.register_undo("netns_attached", lambda item: str(item["name"]), _undo_attached)
reg.register_undo("compose_project", lambda item: str(item["name"]), _undo_project)
