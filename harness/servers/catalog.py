"""What each server kind is: its binaries, the tuning options the harness renders, and what a
given version can do (XoT as primary or secondary). Pure data and pure functions; probing a
binary for its version is the only I/O, in `probe_version`.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

ServerKind = Literal["bind", "knot", "nsd"]
SERVER_KINDS: tuple[ServerKind, ...] = ("bind", "knot", "nsd")


@dataclass(frozen=True)
class KindInfo:
    kind: ServerKind
    daemon: str  # default binary name on PATH
    version_argv: tuple[str, ...]
    version_re: str
    # Server tuning an operator compares; value type per option. Rendered into the config.
    options: dict[str, type]


KINDS: dict[ServerKind, KindInfo] = {
    "bind": KindInfo(
        kind="bind",
        daemon="named",
        version_argv=("-v",),
        version_re=r"BIND (\d+\.\d+\.\d+)",
        options={
            "transfers-in": int,
            "transfers-out": int,
            "transfers-per-ns": int,
            "serial-query-rate": int,
            "tcp-clients": int,
            "max-transfer-time-in": int,
            "max-transfer-idle-in": int,
            "transfer-format": str,
            "min-refresh-time": int,
            "min-retry-time": int,
        },
    ),
    "knot": KindInfo(
        kind="knot",
        daemon="knotd",
        version_argv=("-V",),
        version_re=r"(?:Knot DNS|version) (\d+\.\d+\.\d+)",
        options={
            "background-workers": int,
            "remote-pool-limit": int,
            "remote-retry-delay": int,
            "tcp-workers": int,
            "udp-workers": int,
            "tcp-io-timeout": int,
            "tcp-remote-io-timeout": int,
            "tcp-max-clients": int,
        },
    ),
    "nsd": KindInfo(
        kind="nsd",
        daemon="nsd",
        version_argv=("-v",),
        version_re=r"NSD version (\d+\.\d+\.\d+)",
        options={
            "xfrd-tcp-max": int,
            "xfrd-tcp-pipeline": int,
            "tcp-count": int,
            "server-count": int,
            "xfrd-reload-timeout": int,
            "tcp-timeout": int,
        },
    ),
}


@dataclass(frozen=True)
class Capabilities:
    """What one installed version can do; `reasons` explains each missing capability."""

    xot_primary: bool
    xot_secondary: bool
    ixfr_primary: bool
    reasons: tuple[str, ...]


def parse_version(text: str) -> tuple[int, int, int]:
    match = re.match(r"(\d+)\.(\d+)\.(\d+)", text)
    if not match:
        raise ValueError(f"not a version: {text!r}")
    major, minor, patch = (int(part) for part in match.groups())
    return major, minor, patch


def capabilities(kind: ServerKind, version: str) -> Capabilities:
    """XoT and IXFR support by kind and version (see DESIGN.md, 'XoT support')."""
    v = parse_version(version)
    reasons: list[str] = []
    if kind == "bind":
        # BIND added XoT (both directions, with the "dot" ALPN) in 9.17.x; 9.18 is the first stable.
        xot = v >= (9, 18, 0)
        if not xot:
            reasons.append(f"BIND {version} has no XoT (added in 9.18)")
        return Capabilities(xot, xot, True, tuple(reasons))
    if kind == "knot":
        xot = v >= (3, 4, 0)
        if not xot:
            reasons.append(f"Knot {version} has no XoT (added in 3.4)")
        return Capabilities(xot, xot, True, tuple(reasons))
    # NSD: XoT as secondary since 4.3.7; as primary it sends no ALPN before 4.11.1, so BIND
    # (which requires "dot") refuses it. IXFR out from zone-file differences (create-ixfr)
    # since 4.6.0.
    xot_secondary = v >= (4, 3, 7)
    xot_primary = v >= (4, 11, 1)
    if not xot_secondary:
        reasons.append(f"NSD {version} has no XoT (added in 4.3.7)")
    if not xot_primary:
        reasons.append(f"NSD {version} serves XoT without the 'dot' ALPN (fixed in 4.11.1)")
    ixfr_primary = v >= (4, 6, 0)
    if not ixfr_primary:
        reasons.append(f"NSD {version} cannot serve IXFR from zone-file differences (needs 4.6)")
    if (4, 0, 0) <= v < (4, 7, 0):
        reasons.append(f"NSD {version} has a known XoT IXFR hang on lossy links (fixed in 4.7.0)")
    return Capabilities(xot_primary, xot_secondary, ixfr_primary, tuple(reasons))


def find_binary(kind: ServerKind, binary: str | Path | None = None) -> Path | None:
    """The server binary given by path, or the kind's daemon found on PATH (and in sbin)."""
    if binary is not None:
        path = Path(binary)
        return path if path.is_file() else None
    name = KINDS[kind].daemon
    found = shutil.which(name) or shutil.which(name, path="/usr/sbin:/usr/local/sbin:/sbin")
    return Path(found) if found else None


def probe_version(kind: ServerKind, binary: Path) -> str:
    """Run the binary's version flag and return 'X.Y.Z'; raises ValueError when unparsable."""
    info = KINDS[kind]
    proc = subprocess.run(
        [str(binary), *info.version_argv], capture_output=True, text=True, timeout=10, check=False
    )
    match = re.search(info.version_re, proc.stdout + proc.stderr)
    if not match:
        printed = (proc.stdout + proc.stderr)[:200]
        raise ValueError(f"{binary} printed no {kind} version: {printed!r}")
    return match.group(1)
