"""One compose project as a testbed: primary <-> link <-> secondary, each host a container.

Described first, built second (like harness.testbed.plan): `plan_project()` turns a testbed id
and an address slice into a `ProjectSpec`, `render()` into a compose document (no `version`
key: Compose v2 and Debian 12's docker-compose 1.29 both read it as the Compose
Specification), and `ComposeProject` brings it up and down. `discover()` reads what runs from
the labels every Compose version sets, so the same code drives a per-run project and the
checked-in docker-compose.yml.

    with ComposeProject(spec, run_dir) as deployment:
        attach_netns("xfb-1a2b3c-p", deployment.pid("primary"))
        subprocess.Popen(nsenter_argv(deployment.pid("primary"), ["named", ...], cwd=...))

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
import re
import secrets
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

from harness.compose import daemon, images
from harness.errors import EnvironmentProblem, ToolFailed, UserInputError, XfrbenchError
from harness.testbed import plan as planning

LABEL_PROJECT = "com.docker.compose.project"
LABEL_SERVICE = "com.docker.compose.service"
LABEL_NETWORK = "com.docker.compose.network"
LABEL_ONEOFF = "com.docker.compose.oneoff"
SERVICES = ("primary", "link", "secondary")
ENDPOINTS = ("primary", "secondary")
NETWORK_OF = {"primary": "net_p", "secondary": "net_s"}  # each endpoint's segment
SERVICE_OF_ROLE = {"primary": "primary", "router": "link", "secondary": "secondary"}
PROJECT_RE = re.compile(r"^[a-z0-9][a-z0-9_-]*$")
COMPOSE_FILE = "compose.json"  # JSON is YAML: no YAML library needed
NSENTER_NAMESPACES = ("--mount", "--net", "--uts", "--ipc")
UP_TIMEOUT = 180.0
DOWN_TIMEOUT = 120.0


def project_name(testbed_id: str) -> str:
    if not planning.is_testbed_id(testbed_id):
        raise ValueError(f"{testbed_id!r} is not a testbed id (6 lowercase hex digits)")
    return f"{planning.PREFIX}{testbed_id}"


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
    """Addresses as in the netns testbed: the slice's halves, link .1 and endpoint .2 of each;
    docker's gateway takes the half's last address."""
    halves = list(ipaddress.IPv4Network(slice_).subnets(prefixlen_diff=1))
    networks: dict[str, NetworkPlan] = {}
    for endpoint, subnet in zip(ENDPOINTS, halves, strict=True):
        hosts = list(subnet.hosts())
        if len(hosts) < 3:
            raise UserInputError(
                f"slice {slice_} is too small for a compose testbed (each half needs 3 "
                "addresses: link, endpoint and docker's gateway)",
                key="block",
                fix="use a block of at least a /28",
            )
        networks[endpoint] = NetworkPlan(
            name=NETWORK_OF[endpoint],
            subnet=str(subnet),
            gateway=str(hosts[-1]),
            link_address=str(hosts[0]),
            host_address=str(hosts[1]),
            mtu=(mtus or {}).get(endpoint),
        )
    missing = [service for service in SERVICES if service not in images]
    if missing:
        raise ValueError(f"no image given for {', '.join(missing)}")
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
    for endpoint in ENDPOINTS:
        net = spec.networks[endpoint]
        services[endpoint] = idle(endpoint) | {
            "networks": {net.name: {"ipv4_address": net.host_address}},
            "volumes": [f"{path}:{path}" for path in spec.shared_paths],
        }
    link = idle("link")
    link["networks"] = {
        net.name: {"ipv4_address": net.link_address} for net in spec.networks.values()
    }
    link["sysctls"]["net.ipv4.ip_forward"] = "1"
    link["cap_add"] = ["NET_ADMIN"]
    services["link"] = link
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

    def pid(self, service: str) -> int:
        return self.containers[service].pid

    def segment(self, endpoint: str) -> Segment:
        """The network the endpoint shares with the link, and both addresses on it."""
        host = self.containers[endpoint]
        link = self.containers["link"]
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
        """Per endpoint, the route to the other endpoint's subnet through the link."""
        segments = {endpoint: self.segment(endpoint) for endpoint in ENDPOINTS}
        out: dict[str, list[list[str]]] = {}
        for endpoint, other in (("primary", "secondary"), ("secondary", "primary")):
            mine, theirs = segments[endpoint], segments[other]
            out[endpoint] = [["ip", "route", "replace", theirs.subnet, "via", mine.link_address]]
        return out

    def slice(self) -> str:
        """The smallest network holding both segments (the netns testbed's "slice")."""
        a, b = (ipaddress.IPv4Network(self.segment(e).subnet) for e in ENDPOINTS)
        while not (a.supernet_of(b) or a == b):
            a = a.supernet()
        return str(a)

    def topology_plan(
        self, testbed_id: str, block: str, interfaces: dict[str, dict[str, str]]
    ) -> planning.TopologyPlan:
        """The netns testbed's plan for these containers, so its link and host code runs
        unchanged. `interfaces`: service -> address -> interface name (interface_addresses()
        of each attached namespace); docker names them eth0, eth1 in attach order."""
        segments: dict[str, planning.Segment] = {}
        for endpoint in ENDPOINTS:
            seg = self.segment(endpoint)
            try:
                router_if = interfaces["link"][seg.link_address]
                host_if = interfaces[endpoint][seg.host_address]
            except KeyError as exc:
                raise EnvironmentProblem(
                    f"compose project {self.project}: no interface holds {exc.args[0]}"
                ) from None
            segments[endpoint] = planning.Segment(
                endpoint=endpoint,
                subnet=seg.subnet,
                router_if=router_if,
                host_if=host_if,
                router_address=seg.link_address,
                host_address=seg.host_address,
            )
        return planning.TopologyPlan(
            testbed_id=testbed_id,
            block=block,
            slice=self.slice(),
            namespaces={role: planning.netns_name(testbed_id, role) for role in planning.ROLES},
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


# --- I/O ------------------------------------------------------------------------------------


def _ids(kind: str, project: str) -> list[str]:
    """Ids of containers, networks or volumes carrying the project's label."""
    fmt = "{{.Name}}" if kind == "volume" else "{{.ID}}"
    args = ["ps", "-a"] if kind == "container" else [kind, "ls"]
    result = daemon.docker(
        *args, "--filter", f"label={LABEL_PROJECT}={project}", "--format", fmt, check=False
    )
    if result.returncode != 0:
        raise ToolFailed(["docker", *args], result.returncode, result.stderr)
    return result.stdout.split()


def discover(project: str) -> Deployment:
    """The running deployment of `project` (per-run or the checked-in docker-compose.yml)."""
    check_project_name(project)
    names, subnets = parse_networks(daemon.inspect(*_ids("network", project), kind="network"))
    containers = parse_containers(daemon.inspect(*_ids("container", project)), names)
    missing = [s for s in SERVICES if s not in containers or not containers[s].running]
    if missing:
        raise EnvironmentProblem(
            f"compose project {project!r} has no running {', '.join(missing)} container; "
            "start it with `docker compose up -d` (or pick the project with --compose-project)"
        )
    return Deployment(project, containers, subnets)


def own_project() -> str | None:
    """The compose project of the container this process runs in (the driver), if any."""
    try:
        hostname = Path("/etc/hostname").read_text().strip()
    except OSError:
        return None
    if not hostname:
        return None
    result = daemon.docker(
        "inspect", "--format", "{{json .Config.Labels}}", hostname, check=False, timeout=20
    )
    if result.returncode != 0:
        return None
    labels = json.loads(result.stdout.strip() or "null") or {}
    project = labels.get(LABEL_PROJECT)
    return str(project) if project else None


def interface_addresses(netns: str) -> dict[str, str]:
    """IPv4 address -> interface name inside a named namespace (attached or not)."""
    result = subprocess.run(
        ["ip", "-n", netns, "-j", "-4", "addr", "show"],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    if result.returncode != 0:
        raise ToolFailed(["ip", "-n", netns, "addr"], result.returncode, result.stderr)
    return parse_ip_addr(result.stdout)


def attach_netns(name: str, pid: int) -> None:
    """Name the network namespace of `pid` (`ip netns attach`): /run/netns/<name>."""
    if Path("/run/netns", name).exists():
        raise EnvironmentProblem(f"network namespace name {name!r} is already taken")
    result = subprocess.run(
        ["ip", "netns", "attach", name, str(pid)],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    if result.returncode != 0:
        raise ToolFailed(
            ["ip", "netns", "attach", name, str(pid)], result.returncode, result.stderr
        )


def detach_netns(name: str) -> bool:
    """Remove the name only: the namespace belongs to its container. False if it was gone."""
    if not Path("/run/netns", name).exists():
        return False
    result = subprocess.run(
        ["ip", "netns", "delete", name], capture_output=True, text=True, timeout=30, check=False
    )
    if result.returncode != 0:
        raise ToolFailed(["ip", "netns", "delete", name], result.returncode, result.stderr)
    return True


def docker_subnets() -> set[str]:
    """IPv4 subnets every docker network holds: a new project must not overlap them."""
    ids = daemon.docker("network", "ls", "--quiet").stdout.split()
    return set(parse_networks(daemon.inspect(*ids, kind="network"))[1].values())


def run_in(
    pid: int, argv: list[str], *, timeout: float = 60, check: bool = True
) -> subprocess.CompletedProcess[str]:
    """Run a short command (a control tool, a version probe) inside a container."""
    full = nsenter_argv(pid, argv)
    result = subprocess.run(full, capture_output=True, text=True, timeout=timeout, check=False)
    if check and result.returncode != 0:
        raise ToolFailed(full, result.returncode, result.stderr)
    return result


def check_shared(pid: int, path: Path) -> None:
    """Fail unless `path` (a folder of the driver's) is the same folder inside the container.

    Servers read configs and write logs by the paths the driver rendered: a folder that is
    not bind-mounted at the same path would make them fail in confusing ways.
    """
    marker = Path(path) / f".xfrbench-shared-{secrets.token_hex(4)}"
    marker.write_text("")
    try:
        seen = run_in(pid, ["test", "-e", str(marker)], check=False).returncode == 0
    finally:
        marker.unlink(missing_ok=True)
    if not seen:
        raise EnvironmentProblem(
            f"{path} is not shared with the container (pid {pid}) at the same path; "
            "bind-mount it at the same absolute path (see docker-compose.yml)"
        )


def leftovers(project: str) -> list[str]:
    """Containers, networks and volumes still labelled with `project`."""
    return [
        f"{kind} {ident[:12]}"
        for kind in ("container", "network", "volume")
        for ident in _ids(kind, project)
    ]


def remove_by_label(project: str) -> list[str]:
    """Remove what carries the project's label: the fallback when no compose file is left."""
    removed: list[str] = []
    for kind, argv in (
        ("container", ["rm", "--force", "--volumes"]),
        ("network", ["network", "rm"]),
        ("volume", ["volume", "rm", "--force"]),
    ):
        ids = _ids(kind, project)
        if ids:
            daemon.docker(*argv, *ids, timeout=DOWN_TIMEOUT)
            removed += [f"{kind} {ident[:12]}" for ident in ids]
    return removed


def down_project(project: str, file: Path | None, timeout: float = DOWN_TIMEOUT) -> list[str]:
    """`compose down` (containers, networks, volumes of this project only), then whatever
    still carries its label; returns what was removed. For `xfrbench clean` too."""
    check_project_name(project)
    before = leftovers(project)
    if file is not None and file.is_file():
        daemon.compose(
            project,
            file,
            "down",
            "--volumes",
            "--remove-orphans",
            "--timeout",
            "5",
            timeout=timeout,
        )
    remove_by_label(project)
    left = leftovers(project)
    if left:
        raise EnvironmentProblem(f"compose project {project}: could not remove {', '.join(left)}")
    return before


class ComposeProject:
    """A per-run compose project: `with` brings it up and always takes it down."""

    def __init__(self, spec: ProjectSpec, directory: Path) -> None:
        self.spec = spec
        self.directory = Path(directory)
        self.file = self.directory / COMPOSE_FILE
        self.deployment: Deployment | None = None
        self.removed: list[str] = []

    @property
    def name(self) -> str:
        return self.spec.name

    def write(self) -> Path:
        self.directory.mkdir(parents=True, exist_ok=True)
        for path in self.spec.shared_paths:
            Path(path).mkdir(parents=True, exist_ok=True)  # docker would create it root-owned
        self.file.write_text(json.dumps(render(self.spec), indent=2) + "\n")
        return self.file

    def up(self, timeout: float = UP_TIMEOUT) -> Deployment:
        tags = dict.fromkeys(self.spec.images.values())
        missing = [tag for tag in tags if not images.image_exists(tag)]
        if missing:
            raise EnvironmentProblem(
                f"image {', '.join(missing)} is not built (there is no registry to pull "
                "from); build it with `make compose-images` or `python -m "
                "harness.compose.images`"
            )
        self.write()
        daemon.compose(self.name, self.file, "up", "--detach", "--no-build", timeout=timeout)
        self.deployment = discover(self.name)
        return self.deployment

    def down(self, timeout: float = DOWN_TIMEOUT) -> list[str]:
        self.removed = down_project(self.name, self.file, timeout=timeout)
        self.deployment = None
        return self.removed

    def __enter__(self) -> Deployment:
        try:
            return self.up()
        except BaseException:
            self._down_quietly()
            raise

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if exc_type is None:
            self.down()
        else:
            self._down_quietly()

    def _down_quietly(self) -> None:
        """Tear down while an error propagates: report a failure, never hide the error."""
        try:
            self.down()
        except XfrbenchError as problem:
            print(f"xfrbench: warning: {problem}", file=sys.stderr)
