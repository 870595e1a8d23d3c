"""What the case engine hands a dialect: the server to render (`ServerSetup`, its zones and
a catalog it consumes), a new version of a zone to publish, and how to reach the primary it
runs as (`Reach`). Plain values: the engine fills them, a dialect only reads them."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import dns.rrset

from harness.core.terms import Role
from harness.core.transport import DNS_PORT, XOT_PORT, Transport
from harness.xfr import TsigKey
from harness.xfr.secrets import TlsFiles
from harness.zonegen.model import ChangeSet


@dataclass(frozen=True)
class ZoneEntry:
    origin: str
    file: Path  # primary: the file it serves; secondary: where it keeps its copy
    format: str = "text"  # a primary's file: "text", or its dialect's own (BIND's "raw")


@dataclass(frozen=True)
class CatalogConsumer:
    """A secondary that provisions its member zones from a catalog (RFC 9432): the catalog
    is one of its `zones`; its members come and go as the catalog says, their copies kept
    in `members_dir`."""

    zone: str
    members_dir: Path
    # Further catalogs it consumes (a change of ownership moves members between them:
    # catalog.coo); their members share `members_dir`.
    others: tuple[str, ...] = ()

    @property
    def zones(self) -> tuple[str, ...]:
        """Every catalog it consumes, the first one first."""
        return (self.zone, *self.others)


@dataclass
class ServerSetup:
    """Everything a dialect needs to render one server of the relation.

    `peers`: a primary's secondaries (it notifies them and lets them transfer); a
    secondary's primary (one address).
    """

    role: Role
    address: str
    peers: tuple[str, ...]
    zones: list[ZoneEntry]
    workdir: Path
    # A secondary's transport (its case's): the secrets below that it uses follow from it
    # (Transport.secrets). None for a primary, which serves every transport of its group.
    transport: Transport | None = None
    # A secondary signs its queries and transfers with `tsig`; a primary accepts transfers
    # signed with it and signs its NOTIFYs. `tsig_known`: a key defined without being used
    # (a secondary switched to a case without TSIG still checks signed NOTIFYs);
    # `tsig_only`: a primary refuses unsigned transfers (False when some cases of its
    # group transfer without TSIG).
    tsig: TsigKey | None = None
    tsig_known: TsigKey | None = None
    tsig_only: bool = True
    tls: TlsFiles | None = None
    # A secondary's TLS settings while it transfers over TCP, in a group with XoT cases: a
    # server that applies them only at start (NSD) can then be switched to XoT later.
    tls_known: TlsFiles | None = None
    ixfr: bool = True  # primary: serve IXFR from differences; secondary: ask for IXFR
    # A primary keeping IXFR history (`ixfr`) that answers an IXFR request with the whole
    # zone: in an AXFR case whose secondaries cannot be told to ask AXFR only.
    provide_ixfr: bool = True
    notify: bool = True  # primary: send NOTIFY to its secondaries on every new serial
    options: dict[str, int | str | bool] = field(default_factory=dict)
    port: int = DNS_PORT
    tls_port: int = XOT_PORT
    control_port: int = 953
    # The per-run key a primary accepts dynamic updates with (dialects that publish new
    # versions by update: see Server.publish).
    update_key: TsigKey | None = None
    # A unix socket path must fit in 108 bytes, which a run folder's path may not: the
    # runner gives a short one under /run/xfrbench.
    control_socket: Path | None = None
    # The operator's own configuration snippet ([servers.<role>] config), verbatim; the
    # dialect puts it at its documented place (Server.snippet_sections).
    config: str = ""
    # A secondary consuming a catalog (trigger "catalog"); None otherwise.
    catalog: CatalogConsumer | None = None
    # Zones with their own DNSSEC records: a secondary keeps and serves them as transferred.
    signed: bool = False

    @property
    def socket_path(self) -> Path:
        return self.control_socket or self.workdir / "control.sock"

    @property
    def primary(self) -> str:
        """A secondary's primary."""
        return self.peers[0]


@dataclass(frozen=True)
class NewVersion:
    """A new version of a zone to put on a primary: its SOA (the serving SOA with the new
    serial), and the change set that leads to it, None when only the serial changes. The
    change set's zone file holds the whole new version."""

    zone: str
    soa: dns.rrset.RRset
    change: ChangeSet | None

    @property
    def serial(self) -> int:
        (rdata,) = list(self.soa)
        return int(rdata.serial)


@dataclass(frozen=True)
class Reach:
    """How a dialect reaches the primary it runs as: its address and network namespace,
    the step timeout, and its host's way of running a control tool there (namespaces or a
    container: the dialect never knows which); `exchange`, when its host sends a DNS
    message for the harness (an agent: xfr/update.py send_update)."""

    address: str
    netns: str | None
    timeout: float
    run_tool: Callable[[list[str]], Any]
    exchange: Callable[[bytes], bytes] | None = None
    # Its host's way of taking files of this machine ({path there: file here}): a whole
    # new version of a zone; None: the files are this machine's (linked).
    copy_in: Callable[[dict[Path, Path]], None] | None = None
