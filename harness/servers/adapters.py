"""One adapter per server kind: render its config, its argv, and its control commands.

The relation is always the same (a primary serving zones to one secondary over a transport);
each adapter renders it in its server's dialect from templates under servers/<kind>/. Starting
and probing happen in the runner, through the testbed, so adapters stay free of I/O except
for writing their own folder.
"""

from __future__ import annotations

import base64
import secrets
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar, Literal

import jinja2

from harness.secrets import TlsFiles, write_private
from harness.servers.catalog import ServerKind
from harness.xfr import TsigKey

TEMPLATES = Path(__file__).resolve().parents[2] / "servers"
Role = Literal["primary", "secondary"]


@dataclass(frozen=True)
class ZoneEntry:
    origin: str
    file: Path  # primary: the file it serves; secondary: where it keeps its copy


@dataclass
class ServerSetup:
    """Everything an adapter needs to render one server of the relation."""

    role: Role
    address: str
    peer: str
    zones: list[ZoneEntry]
    workdir: Path
    tsig: TsigKey | None = None
    tls: TlsFiles | None = None
    ixfr: bool = True  # primary: serve IXFR from differences; secondary: ask for IXFR
    notify: bool = True  # primary: send NOTIFY to the secondary on every new serial
    options: dict[str, int | str | bool] = field(default_factory=dict)
    port: int = 53
    tls_port: int = 853
    control_port: int = 953
    # A unix socket path must fit in 108 bytes, which a run folder's path may not: the
    # runner gives a short one under /run/xfrbench (see control_socket_path).
    control_socket: Path | None = None

    @property
    def socket_path(self) -> Path:
        return self.control_socket or self.workdir / "control.sock"


_env = jinja2.Environment(
    loader=jinja2.FileSystemLoader(str(TEMPLATES)),
    undefined=jinja2.StrictUndefined,
    keep_trailing_newline=True,
    autoescape=False,
)


class Server(ABC):
    kind: ClassVar[ServerKind]
    config_name: ClassVar[str]

    def __init__(self, setup: ServerSetup, binary: Path, *, in_container: bool = False) -> None:
        """`in_container`: `binary` is a path in a container's file system (compose backend),
        where the control tool sits beside it; the driver cannot check that from outside."""
        self.setup = setup
        self.binary = binary
        self.in_container = in_container
        self.control_secret = base64.b64encode(secrets.token_bytes(32)).decode()

    def _tool(self, name: str) -> str:
        """The control tool `name` beside the server binary, else from PATH."""
        beside = self.binary.with_name(name)
        return str(beside) if self.in_container or beside.exists() else name

    @property
    def config(self) -> Path:
        return self.setup.workdir / self.config_name

    @property
    @abstractmethod
    def log_path(self) -> Path: ...

    def _context(self) -> dict[str, object]:
        s = self.setup
        return {
            "role": s.role,
            "address": s.address,
            "peer": s.peer,
            "zones": s.zones,
            "workdir": s.workdir,
            "tsig": s.tsig,
            "tls": s.tls,
            "ixfr": s.ixfr,
            "notify": s.notify,
            "options": {k: _render_value(v) for k, v in s.options.items()},
            "port": s.port,
            "tls_port": s.tls_port,
            "control_port": s.control_port,
            "control_secret": self.control_secret,
            "control_socket": s.socket_path,
        }

    def _render(self, template: str, target: Path) -> Path:
        # Configs may hold the TSIG secret: owner-only, like every other secret.
        return write_private(target, _env.get_template(template).render(self._context()))

    def render(self) -> list[Path]:
        """Write the config files into the workdir; returns them."""
        self.setup.workdir.mkdir(parents=True, exist_ok=True)
        return self._render_files()

    @abstractmethod
    def _render_files(self) -> list[Path]: ...

    @abstractmethod
    def argv(self) -> list[str]:
        """The server in the foreground, logging to its workdir."""

    @abstractmethod
    def control(self, *command: str) -> list[str]:
        """argv of the server's control tool with its per-run channel."""

    @abstractmethod
    def reload_argv(self, zone: str) -> list[str]: ...

    @abstractmethod
    def retransfer_argv(self, zone: str) -> list[str]:
        """Force a full transfer (AXFR) now."""

    @abstractmethod
    def refresh_argv(self, zone: str) -> list[str]:
        """Check the primary's SOA now and transfer incrementally when it changed."""


def _render_value(value: int | str | bool) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    return str(value)


class Bind(Server):
    kind = "bind"
    config_name = "named.conf"

    @property
    def log_path(self) -> Path:
        return self.setup.workdir / "named.log"

    def _render_files(self) -> list[Path]:
        wd = self.setup.workdir
        return [
            self._render("bind/keys.conf.j2", wd / "keys.conf"),
            self._render("bind/rndc.conf.j2", wd / "rndc.conf"),
            self._render("bind/named.conf.j2", self.config),
        ]

    def argv(self) -> list[str]:
        # -g would log to stderr only; -f keeps the configured log channel.
        return [str(self.binary), "-f", "-u", "root", "-n", "2", "-c", str(self.config)]

    def control(self, *command: str) -> list[str]:
        return [self._tool("rndc"), "-c", str(self.setup.workdir / "rndc.conf"), *command]

    def reload_argv(self, zone: str) -> list[str]:
        return self.control("reload", zone)

    def retransfer_argv(self, zone: str) -> list[str]:
        return self.control("retransfer", zone)

    def refresh_argv(self, zone: str) -> list[str]:
        return self.control("refresh", zone)


class Knot(Server):
    kind = "knot"
    config_name = "knot.conf"

    @property
    def log_path(self) -> Path:
        return self.setup.workdir / "knot.log"

    def _render_files(self) -> list[Path]:
        (self.setup.workdir / "db").mkdir(exist_ok=True)
        (self.setup.workdir / "zones").mkdir(exist_ok=True)
        return [self._render("knot/knot.conf.j2", self.config)]

    def argv(self) -> list[str]:
        return [str(self.binary), "-c", str(self.config)]

    def control(self, *command: str) -> list[str]:
        return [self._tool("knotc"), "-c", str(self.config), "-t", "30", *command]

    def reload_argv(self, zone: str) -> list[str]:
        return self.control("zone-reload", zone)

    def retransfer_argv(self, zone: str) -> list[str]:
        return self.control("zone-retransfer", zone)

    def refresh_argv(self, zone: str) -> list[str]:
        return self.control("zone-refresh", zone)


class Nsd(Server):
    kind = "nsd"
    config_name = "nsd.conf"

    @property
    def log_path(self) -> Path:
        return self.setup.workdir / "nsd.log"

    def _render_files(self) -> list[Path]:
        (self.setup.workdir / "xfr").mkdir(exist_ok=True)
        return [self._render("nsd/nsd.conf.j2", self.config)]

    def argv(self) -> list[str]:
        return [str(self.binary), "-d", "-c", str(self.config)]

    def control(self, *command: str) -> list[str]:
        return [self._tool("nsd-control"), "-c", str(self.config), *command]

    def reload_argv(self, zone: str) -> list[str]:
        return self.control("reload", zone)

    def retransfer_argv(self, zone: str) -> list[str]:
        return self.control("force_transfer", zone)

    def refresh_argv(self, zone: str) -> list[str]:
        return self.control("transfer", zone)


ADAPTERS: dict[ServerKind, type[Server]] = {"bind": Bind, "knot": Knot, "nsd": Nsd}


def make_server(
    kind: ServerKind, setup: ServerSetup, binary: Path, *, in_container: bool = False
) -> Server:
    return ADAPTERS[kind](setup, binary, in_container=in_container)
