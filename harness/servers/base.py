"""What every server dialect provides, and the pieces they share.

A dialect (servers/bind.py, knot.py, nsd.py, pdns.py) is one `Server` subclass holding
everything the harness knows about that server: its binary and version probe, the tuning
options an operator may set, what a version can do (structured `Capabilities`, never prose
to grep), its config templates (servers/<kind>/ at the top of the repository), argv and
control commands, its transfer log lines, its failure phrases, its refusals as a primary and
how it writes a peer's address. The runner and the flows only ever talk to this interface;
adding a server is one new module plus its templates.

Rendering and parsing are pure. A dialect's I/O is writing its own working folder and, as a
primary, putting a new version of a zone on itself (`Server.publish`) through the `Reach`
the driver hands it: its address and namespace, and a way to run its control tools there.
"""

from __future__ import annotations

import base64
import re
import secrets
from abc import ABC, abstractmethod
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import ClassVar

import jinja2

from harness.core.terms import TRANSPORTS, ServerKind, TransportName
from harness.servers.capabilities import Capabilities, Footprint
from harness.servers.facts import LoggedTransfer, Pacing
from harness.servers.failures import FailureWording
from harness.servers.fallbacks import Fallback, FallbackWording, fallbacks_in, zone_name
from harness.servers.refusals import RefusalWording
from harness.servers.setup import NewVersion, Reach, ServerSetup, ZoneEntry
from harness.servers.snippet import Setting, refused
from harness.xfr.secrets import write_private_text
from harness.xfr.update import send_update, serial_update
from harness.xfr.zone_copy import DiskCopy
from harness.zonegen.cache import link_or_copy
from harness.zonegen.diff import read_diff

TEMPLATES = Path(__file__).resolve().parents[2] / "servers"


Switch = tuple[TransportName, TransportName]  # a running secondary's transport: from, to
EVERY_SWITCH: frozenset[Switch] = frozenset(
    (a, b) for a in TRANSPORTS for b in TRANSPORTS if a != b
)
TCP_TSIG_SWITCHES: frozenset[Switch] = frozenset({("tcp", "tcp-tsig"), ("tcp-tsig", "tcp")})


def parse_semver(text: str) -> tuple[int, int, int]:
    match = re.match(r"(\d+)\.(\d+)\.(\d+)", text)
    if not match:
        raise ValueError(f"not a version: {text!r}")
    major, minor, patch = (int(part) for part in match.groups())
    return major, minor, patch


_env = jinja2.Environment(
    loader=jinja2.FileSystemLoader(str(TEMPLATES)),
    undefined=jinja2.StrictUndefined,
    keep_trailing_newline=True,
    autoescape=False,
)


def _render_value(value: int | str | bool) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    return str(value)


class Server(ABC):
    """One server of a relation, in its dialect. Class attributes and classmethods hold
    what is true of the kind; an instance renders and drives one configured server."""

    kind: ClassVar[ServerKind]
    title: ClassVar[str]  # its name as people write it, in reports ("BIND", "PowerDNS")
    daemon: ClassVar[str]  # the binary's name on PATH (and in /usr/sbin of the images)
    config_name: ClassVar[str]
    log_name: ClassVar[str]
    version_argv: ClassVar[tuple[str, ...]]
    version_patterns: ClassVar[tuple[str, ...]]  # the first that matches gives X.Y.Z
    # Server tuning an operator compares; value type per option. Rendered into the config.
    options: ClassVar[dict[str, type]]
    # Those of `options` that belong to each zone (or the zones' template), not the server:
    # the IXFR history a primary keeps (journals) is a zone's.
    zone_options: ClassVar[frozenset[str]] = frozenset()
    failures: ClassVar[FailureWording]  # its failure lines, in its own words
    # As a primary, the line it writes for each transfer it refuses for want of a slot
    # (servers/refusals.py); None while no such line is known: "not logged", never 0.
    refusals: ClassVar[RefusalWording | None] = None
    # As a primary, the option that caps its outgoing transfers and its default (BIND:
    # transfers-out, 10): what its refusals are refusals against; None: no such quota.
    transfer_quota: ClassVar[tuple[str, int] | None] = None
    footprint: ClassVar[Footprint]  # its memory while it takes a zone (harness/plan/capacity.py)
    # The Debian packages of the server and the tools the harness runs with it, and the system
    # services they start (stopped: the harness runs its own). The Makefile's and the server
    # image's package lists say the same for this machine and the images.
    packages: ClassVar[tuple[str, ...]]
    services: ClassVar[tuple[str, ...]]
    # The transport switches its reconfiguration (reconfig_argv) really makes on a running
    # secondary, as real runs showed; the harness restarts it for any other. A dialect
    # declares none until runs show them.
    reconfig_switches: ClassVar[frozenset[Switch]] = frozenset()
    # Whether that reconfiguration also switches it between asking AXFR and IXFR.
    reconfig_switches_xfr: ClassVar[bool] = False
    # Whether it applies changed `options` (an A/B axis over server settings) to a running
    # server, as real runs showed; the harness restarts it otherwise.
    reconfig_applies_options: ClassVar[bool] = False
    # What in its workdir would keep a restarted secondary from transferring at once (saved
    # timers or serials it would trust over the primary's): removed before it starts again.
    restart_forgets: ClassVar[tuple[str, ...]] = ()
    # Its lines saying an IXFR became an AXFR (tests/fixtures/fallbacks/); () when it logs
    # none at the harness's log level.
    fallback_wording: ClassVar[tuple[FallbackWording, ...]] = ()
    # Whether, as a secondary, it keeps its copies where the harness can read them
    # (disk_copy): a scenario's `verify = "disk"` needs it.
    keeps_disk_copy: ClassVar[bool] = False
    # Where an operator's configuration snippet goes, in words (servers/snippet.py), and the
    # settings it may not make: name (or "section.name") -> why the harness sets it.
    snippet_place: ClassVar[str]
    snippet_owned: ClassVar[dict[str, str]] = {}
    # Words one of which is in every line parse_log reads (None: any line may be one): a
    # catalog consumer's log since its restart (300 k lines, 30 MB at 100 k members) is
    # kept to these before it is parsed (measure/live_catalog.py member_transfers).
    transfer_log_words: ClassVar[tuple[str, ...] | None] = None
    # As a catalog consumer, its lines about a catalog it could not take whole (a member
    # refused, a duplicate, a bad property), kept in its own words (measure/catalog.py).
    catalog_wording: ClassVar[re.Pattern[str]] = re.compile(
        r"\b(warning|error)\b.*(catz|catalog|member)", re.I
    )

    def __init__(self, setup: ServerSetup, binary: Path, *, in_container: bool = False) -> None:
        """`in_container`: `binary` is a path in a container's file system (compose backend),
        where the control tool sits beside it; the driver cannot check that from outside."""
        self.setup = setup
        self.binary = binary
        self.in_container = in_container
        self.control_secret = base64.b64encode(secrets.token_bytes(32)).decode()
        self._rendering: dict[Path, Iterable[str]] | None = None  # rendered()'s, while it runs

    # --- what is true of the kind ------------------------------------------------------------

    @classmethod
    def parse_version(cls, printed: str) -> str | None:
        """'X.Y.Z' from what `<daemon> <version_argv>` printed, or None."""
        for pattern in cls.version_patterns:
            match = re.search(pattern, printed)
            if match:
                return match.group(1)
        return None

    @classmethod
    @abstractmethod
    def capabilities(cls, version: str) -> Capabilities: ...

    @classmethod
    def catalog_consumer_problem(cls, version: str) -> str | None:
        """Why this version cannot be a catalog consumer the harness configures, or None
        (a dialect that configures one overrides this)."""
        return f"xfrbench does not configure {cls.title} {version} as a catalog consumer yet"

    # Its log line for a member moved between two catalogs (RFC 9432 §5.1, catalog.coo),
    # with the groups `zone` and `new` (the catalog, without the final dot), or None
    # when it writes none (measure/catalog.py then times the move by the member still
    # served after its removal from the old catalog).
    coo_log: ClassVar[re.Pattern[str] | None] = None

    @classmethod
    def coo_problem(cls, version: str) -> str | None:
        """Why this version cannot take a change of ownership between two catalogs
        (catalog.coo), or None (a dialect that can overrides this)."""
        return f"xfrbench does not know whether {cls.title} {version} implements the coo property"

    @classmethod
    def switches_by_reconfig(
        cls, started: ServerSetup, before: ServerSetup, after: ServerSetup
    ) -> bool:
        """Whether reconfig_argv switches a running secondary from `before` to `after`
        (`started`: what it was started with); False: the harness restarts it."""
        if before.transport is None or after.transport is None:
            raise ValueError("switches_by_reconfig: a secondary's setups name their transport")
        move = before.transport.switch_to(after.transport)
        if move is not None and move not in cls.reconfig_switches:
            return False
        settings = (before.options, before.config) != (after.options, after.config)
        if settings and not cls.reconfig_applies_options:
            return False
        return before.ixfr == after.ixfr or cls.reconfig_switches_xfr

    @classmethod
    @abstractmethod
    def snippet_settings(cls, text: str) -> list[Setting]:
        """The settings a configuration snippet makes (pure; SnippetError when it cannot
        go where this dialect puts it)."""

    @classmethod
    def check_snippet(cls, text: str) -> list[Setting]:
        """The snippet's settings; SnippetError, naming the line, when it sets what the
        harness owns or cannot go where this dialect puts it."""
        settings = cls.snippet_settings(text)
        error = refused(settings, cls.snippet_owned)
        if error is not None:
            raise error
        return settings

    @classmethod
    def snippet_sections(cls, text: str) -> dict[str, str]:
        """The snippet as its templates place it: section -> text (indented)."""
        return {"": text}

    def check_config_argv(self) -> list[str]:
        """argv of the server's own configuration checker on its rendered config."""
        raise NotImplementedError(f"{self.kind} has no configuration checker known here")

    @classmethod
    def primary_file(cls, source: Path, origin: str, binary: Path, version: str) -> ZoneEntry:
        """The file a primary of this kind serves a generated zone from: the text file
        itself, unless the dialect loads a format of its own much faster (then converted
        once, cached beside the source under its version). `binary`: the server's, on
        this host (its tools sit beside it)."""
        return ZoneEntry(origin, source)

    @classmethod
    def publishes_zone_files(cls, ixfr: bool, signed: bool = False) -> bool:
        """Whether this server, as a primary, takes a new version as a whole zone file (so
        the harness writes one even when only the serial changes). `ixfr`: change sets,
        not only serials, are published; `signed`: the zone carries its own DNSSEC
        records (an operator's signed zone)."""
        return True

    def publish(self, version: NewVersion, reach: Reach) -> str:
        """Put `version` on this server (a primary) the cheapest way it allows and return
        how, in a few words for the record ("reload", "dynamic update", ...). Returns once
        the server accepted it; the harness then waits until it serves the new serial and
        checks what it serves. The default: the new zone file, then the server's reload."""
        if version.change is None or version.change.zone_path is None:
            raise ValueError(f"{self.kind} publishes whole zone files: a whole zone is needed")
        target, source = self.zone_file(version.zone), version.change.zone_path
        if reach.copy_in is None:
            link_or_copy(source, target)
        else:
            reach.copy_in({target: source})
        reach.run_tool(self.reload_argv(version.zone))
        return "reload"

    @classmethod
    @abstractmethod
    def parse_log(cls, text: str) -> list[LoggedTransfer]:
        """Every transfer the log text records, in order (pure)."""

    @classmethod
    def parse_fallbacks(cls, text: str) -> list[Fallback]:
        """Every line of the log text saying an IXFR became an AXFR, in order (pure)."""
        return fallbacks_in(text, cls.kind, cls.fallback_wording, cls.failures.timestamp)

    @classmethod
    @abstractmethod
    def peer_is(cls, peer: str | None, address: str) -> bool:
        """Whether a peer as this server logs it ('1.2.3.4#53', '1.2.3.4@53') is `address`."""

    # --- one configured server -----------------------------------------------------------------

    def _tool(self, name: str) -> str:
        """The control tool `name` beside the server binary, else from PATH."""
        beside = self.binary.with_name(name)
        return str(beside) if self.in_container or beside.exists() else name

    @property
    def config(self) -> Path:
        return self.setup.workdir / self.config_name

    @property
    def log_path(self) -> Path:
        return self.setup.workdir / self.log_name

    def _context(self) -> dict[str, object]:
        s = self.setup
        return {
            "role": s.role,
            "address": s.address,
            "peers": s.peers,
            "zones": s.zones,
            "workdir": s.workdir,
            "tsig": s.tsig,
            "key": s.tsig_known or s.tsig,
            "tsig_only": s.tsig_only,
            "tls": s.tls,
            "tls_known": s.tls_known or s.tls,
            "ixfr": s.ixfr,
            "provide_ixfr": s.ixfr and s.provide_ixfr,
            "notify": s.notify,
            "options": {
                k: _render_value(v) for k, v in s.options.items() if k not in self.zone_options
            },
            "zone_options": {
                k: _render_value(v) for k, v in s.options.items() if k in self.zone_options
            },
            "port": s.port,
            "tls_port": s.tls_port,
            "control_port": s.control_port,
            "control_secret": self.control_secret,
            "control_socket": s.socket_path,
            "update_key": s.update_key,
            "snippet": self.snippet_sections(s.config) if s.config.strip() else {},
            "catalog": s.catalog,
        }

    def _render(self, template: str, target: Path) -> Path:
        return self._write(target, _env.get_template(template).generate(self._context()))

    def _write(self, target: Path, chunks: Iterable[str]) -> Path:
        if self._rendering is not None:  # rendered(): the engine's place writes it
            self._rendering[target] = chunks
            return target
        # Configs may hold the TSIG secret: owner-only, like every other secret.
        return write_private_text(target, chunks)

    def folders(self) -> list[tuple[Path, int]]:
        """The folders its files and state need, empty ones too, with their modes."""
        catalog = self.setup.catalog
        return [(self.setup.workdir, 0o755)] + ([(catalog.members_dir, 0o755)] if catalog else [])

    def rendered(self) -> dict[Path, Iterable[str]]:
        """Its config files by path, written nowhere: measure/processes.py `put_config`
        writes them on its place (a dialect's state, such as PowerDNS's database rows, is
        rendered as a script its start applies on the host)."""
        self._rendering = {}
        try:
            self._render_files()
            return self._rendering
        finally:
            self._rendering = None

    def render(self) -> list[Path]:
        """Write the config files into the workdir on this machine; returns them."""
        for folder, mode in self.folders():
            folder.mkdir(mode=mode, parents=True, exist_ok=True)
        return self._render_files()

    @abstractmethod
    def _render_files(self) -> list[Path]: ...

    @property
    def control_path(self) -> Path:
        """What a stopped server leaves of its control channel, removed after each stop."""
        return self.setup.socket_path

    @abstractmethod
    def argv(self) -> list[str]:
        """The server in the foreground, logging to its workdir."""

    @abstractmethod
    def control(self, *command: str) -> list[str]:
        """argv of the server's control tool with its per-run channel."""

    @abstractmethod
    def reload_argv(self, zone: str) -> list[str]: ...

    @abstractmethod
    def reconfig_argv(self) -> list[str]:
        """Re-read the configuration the server was started with (after render())."""

    @abstractmethod
    def retransfer_argv(self, zone: str) -> list[str]:
        """Force a full transfer (AXFR) now."""

    @abstractmethod
    def refresh_argv(self, zone: str) -> list[str]:
        """Check the primary's SOA now and transfer incrementally when it changed."""

    @classmethod
    def cold_zones_per_s(cls, options: Mapping[str, object]) -> float:
        """Zones a second it takes as a cold-starting secondary with these `options`: what
        the plan's wall-time estimate assumes. Knot's 1750 (bench/README-scale) for a
        dialect not measured."""
        return 1750.0

    def pacing(self) -> tuple[Pacing, ...]:
        """Its rate limiters a trigger must find idle, as configured now (none by default:
        a server that acts on every NOTIFY and transfer at once)."""
        return ()

    def disk_copy(self, zone: str) -> DiskCopy | None:
        """As a secondary: its copy of `zone` as a file and how to make it current; None
        when it keeps none the harness can read (`keeps_disk_copy` False)."""
        return None

    def zone_file(self, zone: str) -> Path:
        """Where the setup keeps `zone`: the file a primary serves, a secondary's copy."""
        return next(z.file for z in self.setup.zones if z.origin == zone_name(zone))

    # Faults (harness/measure/faults.py): a dialect that cannot do these returns None, and
    # the record says "not supported by <kind>" where the server's words would be.

    def zone_status_argv(self, zone: str) -> list[str] | None:
        """The server's own account of a zone (its serial, refresh and transfer state)."""
        return None

    def notify_argv(self, zone: str) -> list[str] | None:
        """As a primary: send NOTIFY for `zone` to its secondaries again, now."""
        return None


class PublishesByUpdate(Server):
    """A primary that takes a new version as one signed dynamic update (RFC 2136): the new
    SOA, and the change set when there is one. It costs milliseconds at any zone size, where
    reading the whole file again costs seconds to minutes. The harness sets such a primary
    up with the per-run update key (`ServerSetup.update_key`); its dialect renders that key
    as the only one allowed to update."""

    @classmethod
    def publishes_zone_files(cls, ixfr: bool, signed: bool = False) -> bool:
        return False

    def publish(self, version: NewVersion, reach: Reach) -> str:
        key = self.setup.update_key
        assert key is not None, f"a {self.kind} primary is set up with an update key"
        deleted, added = (
            read_diff(version.change.diff_path, version.zone) if version.change else ([], [])
        )
        update = serial_update(
            version.zone, version.soa, version.serial, key, deleted=deleted, added=added
        )
        send_update(update, reach.address, netns=reach.netns, timeout=reach.timeout,
                    exchange=reach.exchange)  # fmt: skip
        return "dynamic update"
