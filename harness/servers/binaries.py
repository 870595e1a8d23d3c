"""Which server binary a run uses and its version, found on this host or inside an image.

The version decides the capabilities (servers/<kind>.py), so it is always read from the
binary that will run: the host's, or the one in the role's image (compose backend). Both go
through `probe_version` with the dialect's own flag and parser; only the way the command is
run differs.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.core.errors import EnvironmentProblem, ScenarioError
from harness.core.terms import ServerKind
from harness.servers import server_class
from harness.servers.capabilities import Capabilities


@dataclass(frozen=True)
class ServerBinary:
    kind: ServerKind
    path: Path  # in the image's file system when `image` is set
    version: str
    image: str | None = None  # compose backend: the image the server runs from
    image_id: str | None = None

    @property
    def capabilities(self) -> Capabilities:
        return server_class(self.kind).capabilities(self.version)

    def describe(self) -> dict[str, Any]:
        out: dict[str, Any] = {"kind": self.kind, "version": self.version}
        if self.image:
            out |= {"image": self.image, "image_id": self.image_id}
        return out


def find_binary(kind: ServerKind, binary: str | Path | None = None) -> Path | None:
    """The server binary given by path, or the kind's daemon found on PATH (and in sbin)."""
    if binary is not None:
        path = Path(binary)
        return path if path.is_file() else None
    name = server_class(kind).daemon
    found = shutil.which(name) or shutil.which(name, path="/usr/sbin:/usr/local/sbin:/sbin")
    return Path(found) if found else None


def run_on_host(argv: list[str]) -> str:
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=10, check=False)
    return proc.stdout + proc.stderr


def probe_version(
    kind: ServerKind, binary: Path, run: Callable[[list[str]], str] = run_on_host, where: str = ""
) -> str:
    """'X.Y.Z' of `binary` (its version flag run by `run`); EnvironmentProblem if unparsable."""
    dialect = server_class(kind)
    printed = run([str(binary), *dialect.version_argv])
    version = dialect.parse_version(printed)
    if version is None:
        raise EnvironmentProblem(
            f"{binary}{where} printed no {kind} version: {printed.strip()[:200]!r}"
        )
    return version


def host_binary(
    kind: ServerKind, binary: Path | None, scenario: Path | str, role: str = "secondary"
) -> ServerBinary:
    """The host's binary for one server of a scenario, versioned. A configured `binary`
    that is missing, not a program, or not that kind's server is the scenario's error (file,
    key, fix); the kind's daemon missing from the host is an EnvironmentProblem."""
    daemon = server_class(kind).daemon
    if binary is None:
        found = find_binary(kind)
        if found is None:
            raise EnvironmentProblem(
                f"{scenario}: servers.{role}.kind: no {kind} server ({daemon}) on PATH or "
                f"in /usr/sbin; install it (make setup), or set servers.{role}.binary"
            )
        key, path = f"servers.{role}.kind", found
    else:
        key, path = f"servers.{role}.binary", Path(binary)
        fix = (
            f"give the path of an installed {daemon} (e.g. /usr/sbin/{daemon}), or remove "
            f"the key to use the {daemon} on PATH"
        )
        if not path.exists():
            raise ScenarioError(f"{path} does not exist", file=scenario, key=key, fix=fix)
        if not path.is_file() or not os.access(path, os.X_OK):
            raise ScenarioError(f"{path} is not a program", file=scenario, key=key, fix=fix)
    try:
        version = probe_version(kind, path)
    except (EnvironmentProblem, OSError, subprocess.SubprocessError) as exc:
        raise ScenarioError(
            f"{path} is not a {kind} server that says its version: {exc}",
            file=scenario,
            key=key,
            fix=f"point servers.{role}.binary at a {daemon}, or set servers.{role}.kind to "
            "the server it is",
        ) from None
    return ServerBinary(kind, path, version)


def check_host_binaries(
    servers: Iterable[tuple[str, ServerKind, Path | None]], scenario: Path | str
) -> dict[tuple[ServerKind, str | None], ServerBinary]:
    """Every host binary of (role, kind, binary) triples, found and versioned once per
    (kind, binary as configured); needs no root (the dry run calls it)."""
    found: dict[tuple[ServerKind, str | None], ServerBinary] = {}
    for role, kind, binary in servers:
        key = (kind, str(binary) if binary else None)
        if key not in found:
            found[key] = host_binary(kind, binary, scenario, role)
    return found
