"""Server dialects: one module per server kind holding all the harness knows about it.

    server_class("knot").capabilities("3.2.6").xot_primary   # Support(ok=False, reason=...)
    make_server("bind", setup, Path("/usr/sbin/named"))      # render, argv, control commands

A new kind is one module (a `Server` subclass, see base.py) and one line in DIALECTS.
"""

from __future__ import annotations

from pathlib import Path

from harness.servers.base import (
    Capabilities,
    LoggedTransfer,
    Server,
    ServerSetup,
    Support,
    ZoneEntry,
)
from harness.servers.bind import Bind
from harness.servers.knot import Knot
from harness.servers.nsd import Nsd
from harness.terms import ServerKind

DIALECTS: dict[ServerKind, type[Server]] = {"bind": Bind, "knot": Knot, "nsd": Nsd}

__all__ = [
    "DIALECTS",
    "Capabilities",
    "LoggedTransfer",
    "Server",
    "ServerSetup",
    "Support",
    "ZoneEntry",
    "make_server",
    "server_class",
]


def server_class(kind: ServerKind) -> type[Server]:
    return DIALECTS[kind]


def make_server(
    kind: ServerKind, setup: ServerSetup, binary: Path, *, in_container: bool = False
) -> Server:
    return DIALECTS[kind](setup, binary, in_container=in_container)
