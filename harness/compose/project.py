"""One compose project as a testbed, described (pure): the link container in the middle and a
container per endpoint (the primary and its secondaries), each on a network of its own.

Described first, built second (like harness.testbed.topology): `plan_project()` turns a
testbed id and an address slice into a `ProjectSpec`, `render()` into a compose document (no
`version` key: Compose v2 and Debian 12's docker-compose 1.29 both read it as the Compose
Specification). What runs is read back from docker's output by the parsers here into a
`Deployment`; harness.compose.deploy holds the I/O (up, down, discover, nsenter).

The containers only idle: their file systems hold the server binaries and their network
namespaces are the testbed's hosts. The driver names each namespace with `ip netns attach`
(so `ip netns exec NAME` and `socket_in(NAME)` work as for the netns testbed) and starts
servers with `nsenter` into the container's mount, network, UTS and IPC namespaces (not its
pid namespace: the pid the driver gets is the server's own). Paths the servers share with the
driver (the run folder, control sockets) are bind-mounted at the same absolute path.
"""

from __future__ import annotations

import ipaddress
import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.core.errors import EnvironmentProblem, UserInputError
from harness.testbed import topology
from harness.testbed.topology import ROUTER, Endpoint

LABEL_PROJECT = "com.docker.compose.project"
LABEL_SERVICE = "com.docker.compose.service"
LABEL_NETWORK = "com.docker.compose.network"
LABEL_ONEOFF = "com.docker.compose.oneoff"
LINK = "link"  # the router's service
# The checked-in docker-compose.yml: one primary, one secondary.
SERVICES = ("primary", LINK, "secondary")
ENDPOINTS = ("primary", "secondary")
PROJECT_RE = re.compile(r"^[a-z0-9][a-z0-9_-]*$")
COMPOSE_FILE = "compose.json"  # JSON is YAML: no YAML library needed
NSENTER_NAMESPACES = ("--mount", "--net", "--uts", "--ipc")
UP_TIMEOUT = 180.0
DOWN_TIMEOUT = 120.0


def project_name(testbed_id: str) -> str:
    if not topology.is_testbed_id(testbed_id):
        raise ValueError(f"{testbed_id!r} is not a testbed id (6 lowercase hex digits)")
    return f"{topology.PREFIX}{testbed_id}"


def service_of(host: str) -> str:
    """The compose service of a testbed host: the router is the link container."""
    return LINK if host == ROUTER else host


def network_names(endpoints: list[str] | tuple[str, ...]) -> dict[str, str]:
    """Endpoint -> its network's compose name (net_p, net_s or net_s1.., like the netns)."""
    roles = [Endpoint(name, "primary" if name == "primary" else "secondary") for name in endpoints]
    return {name: f"net_{suffix}" for name, suffix in topology.netns_suffixes(roles).items()}


def check_project_name(name: str) -> str:
    if not PROJECT_RE.match(name):
        raise UserInputError(
            f"{name!r} is not a compose project name",
            key="--compose-project",
            fix="use lowercase letters, digits, '-' and '_', starting with a letter or digit",
        )
    return name


# --- the plan (pure) ------------------------------------------------------------------------


@dataclass(frozen=True)
class NetworkPlan:
    """One segment between the link and an endpoint: a docker bridge network."""

    name: str  # compose name: net_p or net_s
    subnet: str
    gateway: str  # docker's address on the host bridge; testbed traffic never uses it
    link_address: str
    host_address: str
    mtu: int | None = None


@dataclass(frozen=True)
class ProjectSpec:
    name: str
    images: dict[str, str]  # service -> image tag
    networks: dict[str, NetworkPlan]  # endpoint role -> its segment
    shared_paths: tuple[str, ...] = ()  # bind-mounted at the same path into both endpoints


def plan_project(
    testbed_id: str,
    slice_: str,
    images: dict[str, str],
    shared_paths: list[Path] | tuple[Path, ...] = (),
    mtus: dict[str, int] | None = None,
) -> ProjectSpec:
    """Addresses as in the netns testbed: the slice split into one segment per endpoint (the
    primary's first), link .1 and endpoint .2 of each; docker's gateway takes the segment's
    last address. `images`: service -> image, for "link", "primary" and every secondary."""
    if LINK not in images:
        raise ValueError("no image given for link")
    endpoints = ["primary", *(name for name in images if name not in ("primary", LINK))]
    if "primary" not in images:
        raise ValueError("no image given for primary")
    bits = math.ceil(math.log2(max(len(endpoints), 2)))
    segments = list(ipaddress.IPv4Network(slice_).subnets(prefixlen_diff=bits))
    names = network_names(endpoints)
    networks: dict[str, NetworkPlan] = {}
    for endpoint, subnet in zip(endpoints, segments, strict=False):
        hosts = list(subnet.hosts())
        if len(hosts) < 3:
            raise UserInputError(
                f"slice {slice_} is too small for a compose testbed of {len(endpoints)} "
                "endpoints (each segment needs 3 addresses: link, endpoint and docker's gateway)",
                key="block",
                fix="use a larger block",
            )
        networks[endpoint] = NetworkPlan(
            name=names[endpoint],
            subnet=str(subnet),
            gateway=str(hosts[-1]),
            link_address=str(hosts[0]),
            host_address=str(hosts[1]),
            mtu=(mtus or {}).get(endpoint),
        )
    for path in shared_paths:
        if not Path(path).is_absolute() or ":" in str(path):
            raise ValueError(f"shared path {path} must be absolute and hold no ':'")
    return ProjectSpec(
        name=project_name(testbed_id),
        images=dict(images),
        networks=networks,
        shared_paths=tuple(str(path) for path in shared_paths),
    )


def render(spec: ProjectSpec) -> dict[str, Any]:
    """The compose document of a per-run project."""
    no_ipv6 = {"net.ipv6.conf.all.disable_ipv6": "1", "net.ipv6.conf.default.disable_ipv6": "1"}

    def idle(service: str) -> dict[str, Any]:
        # tini as PID 1 ends `sleep` at once on `down`; the driver starts the servers.
        return {
            "image": spec.images[service],
            "init": True,
            "command": ["sleep", "infinity"],
            "hostname": service,
            "sysctls": dict(no_ipv6),
            "labels": {"io.xfrbench.project": spec.name},
        }

    services: dict[str, Any] = {}
    for endpoint, net in spec.networks.items():
        services[endpoint] = idle(endpoint) | {
            "networks": {net.name: {"ipv4_address": net.host_address}},
            "volumes": [f"{path}:{path}" for path in spec.shared_paths],
        }
    link = idle(LINK)
    link["networks"] = {
        net.name: {"ipv4_address": net.link_address} for net in spec.networks.values()
    }
    link["sysctls"]["net.ipv4.ip_forward"] = "1"
    link["cap_add"] = ["NET_ADMIN"]
    services[LINK] = link
    networks: dict[str, Any] = {}
    for net in spec.networks.values():
        entry: dict[str, Any] = {
            "driver": "bridge",
            "ipam": {
                "driver": "default",
                "config": [{"subnet": net.subnet, "gateway": net.gateway}],
            },
            "labels": {"io.xfrbench.project": spec.name},
        }
        if net.mtu:
            entry["driver_opts"] = {"com.docker.network.driver.mtu": str(net.mtu)}
        networks[net.name] = entry
    return {"services": services, "networks": networks}


def nsenter_argv(
    pid: int, argv: list[str], cwd: Path | str | None = None, *, die_with_parent: bool = False
) -> list[str]:
    """`argv` inside the container whose PID 1 is `pid`: its files, network, hostname, IPC.

    Without --pid nsenter execs `argv` in place, so the caller's pid is argv's own. Entering
    a mount namespace resets the working directory to its root: --wd sets it again.
    `die_with_parent` (setpriv --pdeathsig, which also execs in place) has the kernel send
    SIGTERM when the spawning thread dies: a server outside the container's pid namespace
    would otherwise outlive a killed driver and keep the container's namespaces alive.
    """
    wd = [f"--wd={cwd}"] if cwd is not None else []
    guard = ["setpriv", "--pdeathsig", "TERM", "--"] if die_with_parent else []
    return [*guard, "nsenter", f"--target={pid}", *NSENTER_NAMESPACES, *wd, "--", *argv]


@dataclass(frozen=True)
class Segment:
    """The addresses of one segment as they run (compose-assigned or planned)."""

    endpoint: str
    network: str
    subnet: str
    link_address: str
    host_address: str


@dataclass(frozen=True)
class Container:
    service: str
    id: str
    pid: int
    image: str
    running: bool
    addresses: dict[str, tuple[str, int]]  # compose network name -> (address, prefix length)


@dataclass(frozen=True)
class Deployment:
    """What runs for one project: a container per service and the subnets of its networks."""

    project: str
    containers: dict[str, Container]
    subnets: dict[str, str] = field(default_factory=dict)  # compose network name -> subnet
    endpoints: tuple[str, ...] = ENDPOINTS  # the endpoint services, the primary first

    def pid(self, service: str) -> int:
        return self.containers[service].pid

    def segment(self, endpoint: str) -> Segment:
        """The network the endpoint shares with the link, and both addresses on it."""
        host = self.containers[endpoint]
        link = self.containers[LINK]
        shared = sorted(set(host.addresses) & set(link.addresses))
        if len(shared) != 1:
            raise EnvironmentProblem(
                f"compose project {self.project}: the {endpoint} shares "
                f"{len(shared)} networks with the link ({', '.join(shared) or 'none'}); "
                "it must share exactly one"
            )
        network = shared[0]
        address, prefixlen = host.addresses[network]
        subnet = self.subnets.get(network) or str(
            ipaddress.IPv4Interface(f"{address}/{prefixlen}").network
        )
        return Segment(endpoint, network, subnet, link.addresses[network][0], address)

    def route_argvs(self) -> dict[str, list[list[str]]]:
        """Per endpoint, the routes through the link: the primary's to every secondary's
        subnet, each secondary's to the primary's."""
        segments = {endpoint: self.segment(endpoint) for endpoint in self.endpoints}
        primary = segments["primary"]
        out: dict[str, list[list[str]]] = {"primary": []}
        for endpoint, seg in segments.items():
            if endpoint == "primary":
                continue
            out["primary"].append(
                ["ip", "route", "replace", seg.subnet, "via", primary.link_address]
            )
            out[endpoint] = [["ip", "route", "replace", primary.subnet, "via", seg.link_address]]
        return out

    def slice(self) -> str:
        """The smallest network holding every segment (the netns testbed's "slice")."""
        nets = [ipaddress.IPv4Network(self.segment(e).subnet) for e in self.endpoints]
        wide = nets[0]
        while not all(wide.supernet_of(n) or wide == n for n in nets):
            wide = wide.supernet()
        return str(wide)

    def topology_plan(
        self,
        testbed_id: str,
        block: str,
        interfaces: dict[str, dict[str, str]],
        namespaces: dict[str, str],
    ) -> topology.TopologyPlan:
        """The netns testbed's plan for these containers, so its link and host code runs
        unchanged. `interfaces`: service -> address -> interface name (interface_addresses()
        of each attached namespace); docker names them eth0, eth1 in attach order.
        `namespaces`: host name (endpoints and "router") -> the name it is attached as."""
        segments: dict[str, topology.Segment] = {}
        for endpoint in self.endpoints:
            seg = self.segment(endpoint)
            try:
                router_if = interfaces[LINK][seg.link_address]
                host_if = interfaces[endpoint][seg.host_address]
            except KeyError as exc:
                raise EnvironmentProblem(
                    f"compose project {self.project}: no interface holds {exc.args[0]}"
                ) from None
            segments[endpoint] = topology.Segment(
                endpoint=endpoint,
                subnet=seg.subnet,
                router_if=router_if,
                host_if=host_if,
                router_address=seg.link_address,
                host_address=seg.host_address,
            )
        return topology.TopologyPlan(
            testbed_id=testbed_id,
            block=block,
            slice=self.slice(),
            namespaces=dict(namespaces),
            segments=segments,
        )

    def describe(self) -> dict[str, Any]:
        return {
            "project": self.project,
            "containers": {
                name: {
                    "id": c.id[:12],
                    "image": c.image,
                    "addresses": {net: f"{a}/{p}" for net, (a, p) in c.addresses.items()},
                }
                for name, c in self.containers.items()
            },
            "subnets": dict(self.subnets),
        }


def parse_containers(
    inspected: list[dict[str, Any]], network_names: dict[str, str]
) -> dict[str, Container]:
    """`docker inspect` output -> one container per service (one-off `run` containers skipped).

    `network_names` maps docker's network names to the compose names (net_p, net_s).
    """
    out: dict[str, Container] = {}
    for item in inspected:
        labels = item.get("Config", {}).get("Labels") or {}
        service = labels.get(LABEL_SERVICE)
        if not service or str(labels.get(LABEL_ONEOFF, "False")).lower() == "true":
            continue
        if service in out:
            raise EnvironmentProblem(
                f"compose service {service} has more than one container; scale it to 1"
            )
        state = item.get("State", {})
        addresses: dict[str, tuple[str, int]] = {}
        for name, net in (item.get("NetworkSettings", {}).get("Networks") or {}).items():
            if net.get("IPAddress"):
                addresses[network_names.get(name, name)] = (
                    str(net["IPAddress"]),
                    int(net.get("IPPrefixLen") or 32),
                )
        out[service] = Container(
            service=service,
            id=str(item.get("Id", "")),
            pid=int(state.get("Pid") or 0),
            image=str(item.get("Config", {}).get("Image", "")),
            running=bool(state.get("Running")),
            addresses=addresses,
        )
    return out


def parse_networks(inspected: list[dict[str, Any]]) -> tuple[dict[str, str], dict[str, str]]:
    """`docker network inspect` -> (docker name -> compose name, compose name -> subnet)."""
    names: dict[str, str] = {}
    subnets: dict[str, str] = {}
    for item in inspected:
        docker_name = str(item.get("Name", ""))
        compose_name = (item.get("Labels") or {}).get(LABEL_NETWORK) or docker_name
        names[docker_name] = compose_name
        for config in (item.get("IPAM") or {}).get("Config") or []:
            if config.get("Subnet") and ":" not in config["Subnet"]:
                subnets[compose_name] = str(config["Subnet"])
    return names, subnets


def parse_ip_addr(text: str) -> dict[str, str]:
    """`ip -j -4 addr show` -> IPv4 address -> interface name."""
    out: dict[str, str] = {}
    for link in json.loads(text or "[]"):
        for info in link.get("addr_info", []):
            if info.get("family") == "inet" and info.get("local"):
                out[str(info["local"])] = str(link["ifname"])
    return out
