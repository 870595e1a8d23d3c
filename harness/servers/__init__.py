"""Server dialects: one module per server kind holding all the harness knows about it.

    server_class("knot").capabilities("3.2.6").xot_primary   # Support(ok=False, reason=...)
    make_server("bind", setup, Path("/usr/sbin/named"))      # render, argv, control commands

A new kind is one module (a `Server` subclass, see base.py) and one line in DIALECTS.
"""

from __future__ import annotations

from datetime import tzinfo
from pathlib import Path
from typing import Literal

from harness.core.terms import ServerKind
from harness.servers.base import Server
from harness.servers.bind import Bind
from harness.servers.capabilities import Capabilities, Support
from harness.servers.facts import LoggedTransfer
from harness.servers.failures import FailureCategory, FailureCounts
from harness.servers.failures import classify as _classify
from harness.servers.failures import count_failures as _count_failures
from harness.servers.knot import Knot
from harness.servers.nsd import Nsd
from harness.servers.pdns import Pdns
from harness.servers.refusals import RefusalCount
from harness.servers.refusals import count_refusals as _count_refusals
from harness.servers.setup import ServerSetup, ZoneEntry

DIALECTS: dict[ServerKind, type[Server]] = {"bind": Bind, "knot": Knot, "nsd": Nsd, "pdns": Pdns}

__all__ = [
    "DIALECTS",
    "Bind",
    "Capabilities",
    "FailureCounts",
    "Knot",
    "LoggedTransfer",
    "Nsd",
    "Pdns",
    "RefusalCount",
    "Server",
    "ServerSetup",
    "Support",
    "ZoneEntry",
    "classify",
    "count_failures",
    "count_refusals",
    "make_server",
    "server_class",
]


def server_class(kind: ServerKind) -> type[Server]:
    return DIALECTS[kind]


def make_server(
    kind: ServerKind, setup: ServerSetup, binary: Path, *, in_container: bool = False
) -> Server:
    return DIALECTS[kind](setup, binary, in_container=in_container)


def count_failures(
    kind: ServerKind, log_text: str, started_at: float | None, *, tz: tzinfo | None = None
) -> FailureCounts:
    """Failed attempts by category in a `kind` server's log since `started_at` (unix)."""
    return _count_failures(kind, DIALECTS[kind].failures, log_text, started_at, tz=tz)


def classify(kind: ServerKind, line: str) -> FailureCategory | Literal["follow-up"] | None:
    return _classify(DIALECTS[kind].failures, line)


def count_refusals(
    kind: ServerKind,
    log_text: str,
    since: float,
    until: float | None = None,
    *,
    tz: tzinfo | None = None,
) -> RefusalCount:
    """Transfers a `kind` primary refused for want of a slot, in its log from `since` to
    `until` (unix); refusals None where its dialect has no refusal wording (not logged)."""
    return _count_refusals(kind, DIALECTS[kind].refusals, log_text, since, until, tz=tz)
