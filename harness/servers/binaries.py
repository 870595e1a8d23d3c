"""Which server binary a run uses and its version, found on this host or inside an image.

The version decides the capabilities (servers/<kind>.py), so it is always read from the
binary that will run: the host's, or the one in the role's image (compose backend). Both go
through `probe_version` with the dialect's own flag and parser; only the way the command is
run differs.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.errors import EnvironmentProblem
from harness.servers import server_class
from harness.servers.base import Capabilities
from harness.terms import ServerKind


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


def host_binary(kind: ServerKind, binary: Path | None, scenario: Path | str) -> ServerBinary:
    """The host's binary for a server spec, versioned; names the fix when it is missing."""
    path = find_binary(kind, binary)
    if path is None:
        where = f"at {binary}" if binary else "on PATH"
        raise EnvironmentProblem(
            f"no {kind} server binary {where}; install it (make setup) or set "
            f"servers.*.binary in {scenario}"
        )
    return ServerBinary(kind, path, probe_version(kind, path))
