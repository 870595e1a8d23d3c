"""A compose project's I/O: bring it up and down, read what runs, enter its containers.

    with ComposeProject(spec, run_dir) as deployment:
        attach_netns("xfb-1a2b3c-p", deployment.pid("primary"))
        subprocess.Popen(nsenter_argv(deployment.pid("primary"), ["named", ...], cwd=...))

`discover()` reads what runs from the labels every Compose version sets, so the same code
drives a per-run project and the checked-in docker-compose.yml. The containers only idle:
their file systems hold the server binaries and their network namespaces are the testbed's
hosts. The driver names each namespace with `ip netns attach` (so `ip netns exec NAME` and
`socket_in(NAME)` work as for the netns testbed) and starts servers with `nsenter` into the
container's mount, network, UTS and IPC namespaces (not its pid namespace: the pid the driver
gets is the server's own). Paths the servers share with the driver (the run folder, control
sockets) are bind-mounted at the same absolute path.
"""

from __future__ import annotations

import json
import secrets
import subprocess
import sys
from pathlib import Path
from types import TracebackType

from harness.compose import daemon, images
from harness.compose.project import (
    COMPOSE_FILE,
    DOWN_TIMEOUT,
    ENDPOINTS,
    LABEL_PROJECT,
    LINK,
    UP_TIMEOUT,
    Deployment,
    ProjectSpec,
    check_project_name,
    nsenter_argv,
    parse_containers,
    parse_ip_addr,
    parse_networks,
    render,
)
from harness.core.errors import EnvironmentProblem, ToolFailed, XfrbenchError


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


def discover(project: str, endpoints: tuple[str, ...] | list[str] = ENDPOINTS) -> Deployment:
    """The running deployment of `project` (per-run or the checked-in docker-compose.yml)."""
    check_project_name(project)
    names, subnets = parse_networks(daemon.inspect(*_ids("network", project), kind="network"))
    containers = parse_containers(daemon.inspect(*_ids("container", project)), names)
    wanted = ("primary", LINK, *(e for e in endpoints if e != "primary"))
    missing = [s for s in wanted if s not in containers or not containers[s].running]
    if missing:
        raise EnvironmentProblem(
            f"compose project {project!r} has no running {', '.join(missing)} container; "
            "start it with `docker compose up -d` (or pick the project with --compose-project)"
        )
    return Deployment(project, containers, subnets, tuple(e for e in wanted if e != LINK))


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
        self.deployment = discover(self.name, list(self.spec.networks))
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
