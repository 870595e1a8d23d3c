"""Where a testbed's hosts come from: a provider builds them, the testbed does the rest.

The testbed asks a `HostProvider` for one host per endpoint plus the router, each a named
network namespace it can `ip netns exec` into; everything after that (per-host sysctls,
offloads, link emulation, processes, teardown) is the same whoever built the hosts. Two
providers exist: `NetnsProvider` here (namespaces and veth pairs of the testbed's own), and
harness.compose.provider (the containers of a compose project). Like mininet's host classes,
a provider may hand out its own `Host` subclass: a container's host runs tools from the
container's file system.
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from harness.core.errors import ToolFailed
from harness.testbed import registry as reg
from harness.testbed import topology
from harness.testbed.topology import ROUTER, Endpoint, TopologyPlan

Record = Callable[..., dict[str, Any]]  # registry.add: written down before it is created


def run(
    argv: list[str], *, check: bool = True, timeout: float = 60, **kw: Any
) -> subprocess.CompletedProcess[str]:
    if "stdout" not in kw and "stderr" not in kw:
        kw["capture_output"] = True
    kw.setdefault("text", True)
    result = subprocess.run(argv, check=False, timeout=timeout, **kw)
    if check and result.returncode != 0:
        raise ToolFailed(argv, result.returncode, result.stderr or "")
    return result


@dataclass
class Host:
    name: str  # "primary", "router", "secondary", "<site>-<n>"
    role: str  # "primary" | "secondary" | "router"
    netns: str
    address: str
    interfaces: dict[str, dict[str, Any]] = field(default_factory=dict)

    def argv(self, argv: list[str]) -> list[str]:
        """`argv` from the driver's file system, in this host's network namespace."""
        return ["ip", "netns", "exec", self.netns, *argv]

    def tool_argv(
        self, argv: list[str], cwd: Path | None = None, *, die_with_parent: bool = False
    ) -> list[str]:
        """`argv` from this host's own file system (servers, their control tools): the
        driver's here; a container's for a container host."""
        return self.argv(argv)

    def run_tool(
        self, argv: list[str], check: bool = True, **kw: Any
    ) -> subprocess.CompletedProcess[str]:
        """Like run(), with the host's own tools (see tool_argv)."""
        return run(self.tool_argv(argv), check=check, **kw)

    def run(
        self, argv: list[str], check: bool = True, **kw: Any
    ) -> subprocess.CompletedProcess[str]:
        """Run `argv` inside this host's namespace (text mode, output captured by default)."""
        return run(self.argv(argv), check=check, **kw)

    def sysctl(self, key: str) -> str:
        return self.run(["sysctl", "-n", key]).stdout.strip()

    def sysctls(self, keys: list[str]) -> dict[str, str]:
        """Several keys in one process; keys this kernel lacks are left out."""
        result = self.run(["sysctl", *keys], check=False)
        values: dict[str, str] = {}
        for line in result.stdout.splitlines():
            key, sep, value = line.partition(" = ")
            if sep:
                values[key.strip()] = reg.normalize_sysctl(value)
        return values


@dataclass
class Built:
    """What a provider built: the plan as it runs (a provider may assign its own addresses
    and interface names) and a host per endpoint name and for the router."""

    plan: TopologyPlan
    hosts: dict[str, Host]
    info: dict[str, Any] | None = None  # provider details for the testbed's description


class HostProvider(Protocol):
    name: str  # "netns" | "compose": the testbed's "topology" in describe()
    # The hosts outlive the testbed (a running compose project): the testbed records what it
    # changes in them (root qdiscs, sysctls) so that teardown restores them.
    persistent: bool
    segment_prefixlen: int  # the smallest segment it can build

    def reserved_subnets(self) -> set[str]:
        """Subnets a new testbed must not overlap besides other testbeds' (docker's)."""
        ...

    def fixed_slice(self) -> str | None:
        """The slice the hosts already use, when the provider does not build them."""
        ...

    def build(
        self,
        plan: TopologyPlan,
        endpoints: Sequence[Endpoint],
        mtus: dict[str, int],
        run_dir: Path,
        record: Record,
    ) -> Built: ...


def make_hosts(
    plan: TopologyPlan,
    endpoints: Sequence[Endpoint],
    host_class: type[Host] = Host,
    extra: dict[str, dict[str, Any]] | None = None,
) -> dict[str, Host]:
    """One host per endpoint and the router, named and addressed as the plan says. `extra`:
    per host name, keyword arguments for `host_class` (a container's pid, say)."""
    extra = extra or {}
    roles = [(e.name, e.role) for e in endpoints] + [(ROUTER, ROUTER)]
    return {
        name: host_class(
            name, role, plan.namespaces[name], plan.address(name), **extra.get(name, {})
        )
        for name, role in roles
    }


def record_interfaces(hosts: dict[str, Host], plan: TopologyPlan, mtus: dict[str, int]) -> None:
    router = hosts[ROUTER]
    for name, seg in plan.segments.items():
        hosts[name].interfaces[seg.host_if] = {
            "address": seg.host_address,
            "subnet": seg.subnet,
            "mtu": mtus[name],
            "peer": f"{seg.router_if}@router",
        }
        router.interfaces[seg.router_if] = {
            "address": seg.router_address,
            "subnet": seg.subnet,
            "mtu": mtus[name],
            "peer": f"{seg.host_if}@{name}",
        }


@dataclass(frozen=True)
class Step:
    """One command of a build, and the registry item written down before it runs."""

    argv: list[str]
    item: dict[str, Any] | None = None
    check: bool = True


def netns_build_steps(plan: TopologyPlan, mtus: dict[str, int]) -> list[Step]:
    """Every command that builds the namespaces and veth pairs of `plan` (pure).

    Veths are created straight inside the namespaces: no name ever appears in the init
    netns. No IPv6 inside: no DAD or router solicitations, so counters hold only test
    traffic. Each endpoint routes everything through the router.
    """
    steps: list[Step] = []
    for name in [ROUTER, *plan.segments]:
        netns = plan.namespaces[name]
        steps.append(Step(["ip", "netns", "add", netns], {"kind": "netns", "name": netns}))
        steps.append(Step(["ip", "-n", netns, "link", "set", "lo", "up"]))
        for key in ("net.ipv6.conf.all.disable_ipv6", "net.ipv6.conf.default.disable_ipv6"):
            steps.append(
                Step(["ip", "netns", "exec", netns, "sysctl", "-qw", f"{key}=1"], check=False)
            )
    router = plan.namespaces[ROUTER]
    for name, seg in plan.segments.items():
        netns = plan.namespaces[name]
        steps.append(
            Step(
                ["ip", "-n", netns, "link", "add", seg.host_if, "type", "veth",
                 "peer", "name", seg.router_if, "netns", router]
            )
        )  # fmt: skip
        for where, ifname, address in (
            (netns, seg.host_if, seg.host_address),
            (router, seg.router_if, seg.router_address),
        ):
            mtu = str(mtus[name])
            steps.append(Step(["ip", "-n", where, "link", "set", "dev", ifname, "mtu", mtu, "up"]))
            steps.append(
                Step(["ip", "-n", where, "addr", "add", f"{address}/{seg.prefixlen}",
                      "dev", ifname])
            )  # fmt: skip
        steps.append(
            Step(["ip", "-n", netns, "route", "add", "default", "via", seg.router_address])
        )
    steps.append(Step(["ip", "netns", "exec", router, "sysctl", "-qw", "net.ipv4.ip_forward=1"]))
    return steps


class NetnsProvider:
    """Namespaces and veth pairs of the testbed's own, built with `ip`."""

    name = "netns"
    persistent = False
    segment_prefixlen = topology.NETNS_SEGMENT_PREFIXLEN

    def reserved_subnets(self) -> set[str]:
        return set()

    def fixed_slice(self) -> str | None:
        return None

    def build(
        self,
        plan: TopologyPlan,
        endpoints: Sequence[Endpoint],
        mtus: dict[str, int],
        run_dir: Path,
        record: Record,
    ) -> Built:
        for step in netns_build_steps(plan, mtus):
            if step.item is not None:
                record(**step.item)
            run(step.argv, check=step.check)
        hosts = make_hosts(plan, endpoints)
        record_interfaces(hosts, plan, mtus)
        return Built(plan, hosts)
