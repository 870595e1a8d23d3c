"""What `xfrbench run --backend compose` decides before any case runs: which image each role
runs, which server version is inside it, and whether the scenario can run on this backend.

    backend = Backend("compose")                      # per-run projects
    backend = Backend("compose", project="xfrbench")  # a running project's containers
    image = backend.image_for("secondary", spec)      # xfrbench/server:trixie
    binary = backend.binary("secondary", spec, scenario_path)   # a versioned ServerBinary
    provider = backend.provider({"primary": ..., "secondary": ...}, shared)  # for a Testbed

Versions come from the binary in the image (`docker run --rm IMAGE knotd -V`, parsed by the
server's dialect as for a host binary), cached per image id: capability checks (XoT) must
judge what runs, not what the driver has installed.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from harness.compose import daemon, deploy, images
from harness.compose.provider import ComposeProvider, ComposeSetup
from harness.core.errors import EnvironmentProblem, UserInputError
from harness.core.terms import ROLES, Role, ServerKind
from harness.servers import server_class
from harness.servers.binaries import ServerBinary, host_binary, probe_version
from harness.spec import DEFAULT_SUITE, LoadedScenario, ServerSpec
from harness.testbed.hosts import HostProvider, NetnsProvider

BackendName = Literal["netns", "compose"]
_VERSIONS: dict[tuple[str, str, str], str] = {}  # (image id, kind, binary) -> version


@dataclass(frozen=True)
class Backend:
    """The testbed backend of a run. `project`: static compose mode (a running project);
    `running`: service -> image tag of that project's containers (filled by `prepare`)."""

    name: BackendName = "netns"
    project: str | None = None
    running: dict[str, str] = field(default_factory=dict)

    @property
    def compose(self) -> bool:
        return self.name == "compose"

    def image_for(self, role: str, spec: ServerSpec) -> str | None:
        """The image a role's server runs from (None: the driver's own file system)."""
        if not self.compose:
            return None
        if self.project is not None:
            return self.running[role]
        return images.server_tag(spec.suite)

    def link_image(self, secondary: ServerSpec) -> str:
        """The link container shares the secondary's Debian release: no extra image needed
        (its tc, iptables and linkem run from the driver's file system anyway)."""
        return images.link_tag(images.check_variant(secondary.suite).suite)

    def binary(self, role: Role, spec: ServerSpec, scenario: Path | str) -> ServerBinary:
        """The server binary a role runs, versioned where it runs (host or image)."""
        image = self.image_for(role, spec)
        if image is None:
            return host_binary(spec.kind, spec.binary, scenario, role)
        version, image_id = image_version(spec.kind, spec.binary, image)
        return ServerBinary(
            spec.kind, binary_in_image(spec.kind, spec.binary), version, image, image_id
        )

    def provider(
        self, servers: Mapping[str, tuple[Role, ServerSpec]], shared: tuple[Path, ...]
    ) -> HostProvider:
        """Where one testbed's hosts come from. `servers`: host name -> (role, its server);
        `shared`: driver folders the servers must see at the same path."""
        if not self.compose:
            return NetnsProvider()
        if self.project is not None:
            return ComposeProvider(ComposeSetup(project=self.project, shared=shared))
        wanted = {name: self.image_for(role, spec) for name, (role, spec) in servers.items()}
        secondary = next(spec for role, spec in servers.values() if role == "secondary")
        setup = ComposeSetup(
            images={name: str(image) for name, image in wanted.items()}
            | {"link": self.link_image(secondary)},
            shared=shared,
        )
        return ComposeProvider(setup)

    def describe(self) -> dict[str, str | None]:
        return {"backend": self.name, "compose_project": self.project}


def binary_in_image(kind: ServerKind, binary: Path | None) -> Path:
    """The server binary inside a server image: Debian installs the daemons in /usr/sbin."""
    return Path(binary) if binary is not None else Path("/usr/sbin") / server_class(kind).daemon


def suite_of_tag(tag: str) -> str | None:
    """xfrbench/server:trixie -> trixie (None for an image not built by images.py)."""
    prefix = images.server_tag("")
    return tag[len(prefix) :] if tag.startswith(prefix) else None


def check_scenario(loaded: LoadedScenario, backend: Backend) -> None:
    """Refuse what the backend cannot run, naming the key and the fix (before any work)."""
    if backend.compose and loaded.scenario.faults:
        raise UserInputError(
            "faults need the netns backend: linkem's control socket and the servers' processes "
            "are the driver's own there",
            file=loaded.path,
            key="faults",
            fix="run with --backend netns (the default), or remove the [[faults]] tables",
        )
    for case in loaded.cases:
        for role in ROLES:
            spec: ServerSpec = getattr(case.scenario.servers, role)
            key = f"servers.{role}.suite"
            if not backend.compose and spec.suite != DEFAULT_SUITE:
                raise UserInputError(
                    f"suite {spec.suite!r} needs server images; the netns backend runs the "
                    "servers installed on this host",
                    file=loaded.path,
                    key=key,
                    fix="run with --backend compose (or remove the key)",
                )
            if backend.project is not None and spec.suite != DEFAULT_SUITE:
                running = suite_of_tag(backend.running.get(role, ""))
                if running != spec.suite:
                    raise UserInputError(
                        f"suite {spec.suite!r}, but the {role} container of compose project "
                        f"{backend.project} runs {backend.running.get(role)}",
                        file=loaded.path,
                        key=key,
                        fix=f"start the project with {role.upper()}_SUITE={spec.suite}, or run "
                        "without --compose-project (a per-run project per case)",
                    )


def prepare(loaded: LoadedScenario, backend: Backend) -> Backend:
    """Start dockerd if none answers, read a static project's images, check the scenario
    and that every image it needs exists."""
    if not backend.compose:
        check_scenario(loaded, backend)
        return backend
    daemon.ensure_dockerd()
    if backend.project is not None:
        deployment = deploy.discover(deploy.check_project_name(backend.project))
        backend = Backend(
            backend.name,
            backend.project,
            {service: c.image for service, c in deployment.containers.items()},
        )
    check_scenario(loaded, backend)
    if backend.project is None:
        wanted: dict[str, str] = {}
        for case in loaded.cases:
            servers = case.scenario.servers
            for role in ROLES:
                spec: ServerSpec = getattr(servers, role)
                wanted[images.server_tag(spec.suite)] = f"--servers {spec.suite}"
            link = backend.link_image(servers.secondary)
            wanted[link] = f"--link-suite {link.rpartition(':')[2]}"
        missing = [tag for tag in wanted if not images.image_exists(tag)]
        if missing:
            flags = " ".join(dict.fromkeys(wanted[tag] for tag in missing))
            raise EnvironmentProblem(
                f"image {', '.join(missing)} is not built (there is no registry to pull from); "
                f"build it with `python -m harness.compose.images {flags}` "
                "(`make compose-images` builds them all)"
            )
    return backend


def image_version(kind: ServerKind, binary: Path | None, image: str) -> tuple[str, str]:
    """(version of the server binary in `image`, the image id); probed once per image id."""
    image_id = images.image_id(image)
    if image_id is None:
        raise EnvironmentProblem(f"image {image} is not built; build it with `make compose-images`")
    path = binary_in_image(kind, binary)
    key = (image_id, kind, str(path))
    if key not in _VERSIONS:

        def run(argv: list[str]) -> str:
            result = daemon.docker(
                "run", "--rm", "--network", "none", "--entrypoint", argv[0], image_id, *argv[1:],
                check=False,
                timeout=60,
            )  # fmt: skip
            return result.stdout + result.stderr

        _VERSIONS[key] = probe_version(kind, path, run, where=f" in image {image}")
    return _VERSIONS[key], image_id
