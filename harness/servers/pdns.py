"""PowerDNS Authoritative (pdns_server, gsqlite3 backend): everything the harness knows about it.

Written for Debian 12's 4.7.3 from real runs (tests/fixtures/, and the research notes these
facts come from). The gsqlite3 backend serves both roles: zones are `domains` rows, TSIG keys
and per-zone settings (who may transfer, whom to NOTIFY, IXFR, the update key) are rows of
pdns.sqlite3, which the dialect renders as an SQL script (database_sql) that start.sh, or a
switch's reconfig_argv, applies on the server's host; the database is made from the
packaged schema (servers/pdns/schema.sqlite3.sql).
The bind backend is not used: it logs an IXFR as committed and keeps serving the old serial.

Facts that shape transfers:
- One communicator thread works on a 1 s loop: a NOTIFY leaves 0-1 s after the change that
  queues it, a secondary starts its SOA check 0-1 s after a NOTIFY arrives, and the primary's
  own change check and the secondary's SOA checks and retries run every xfr-cycle-interval
  (default 60 s; rendered 1 s). A NOTIFY carries no serial.
- retrieval-threads 2 (two inbound transfers at once); max-tcp-connections 20 (the accept
  loop blocks there: a 21st client waits in the backlog); axfr-fetch-timeout 10 s (connect
  and idle); xfr-max-received-mbytes 100 by default, about 3.3 M records of the tld preset
  (rendered 0: no limit). The primary builds the whole zone in memory for each AXFR out.
- IXFR out: none. An IXFR query is answered with the whole zone, AXFR style, so the harness
  records IXFR cases with a PowerDNS primary as unsupported (capabilities()). IXFR in: with
  the zone's IXFR metadata, rendered when the case asks for IXFR, and only for a zone
  without DNSSEC (the secondary's transfer code asks IXFR only when the zone is not a
  secured one): a signed zone is always taken by AXFR, so such IXFR cases are unsupported.
- A zone that carries its own DNSSEC records (setup.signed: an operator's signed zone)
  needs the DNSSEC tables (gsqlite3-dnssec=yes, rendered only then) and the zone's
  PRESIGNED metadata, else the transfer keeps none of its RRSIGs, DNSKEYs and NSEC3s and
  serves what is left. With them the RRSIGs and DNSKEYs are rows as transferred, and the
  NSEC3PARAM goes to the zone's metadata. No NSEC3 is kept: it makes the NSEC3 chain again
  whenever it serves the zone, from the zone's names and the owners of the RRSIGs over
  NSEC3, with the SOA minimum as TTL (the NSEC3PARAM's too), which is the primary's chain
  when that is well formed (no orphan signature; zones/examples/own/make-sample).
  As a primary of such a zone (unsupported, capabilities()) it would need the file loaded
  without its NSEC3s and NSEC3PARAM, the NSEC3PARAM as metadata, and glue marked not
  authoritative, which `pdnsutil rectify-zone` refuses on a PRESIGNED zone: tried by hand
  (load, set-nsec3, rectify, then PRESIGNED), its AXFR equals the file; a new version
  loaded that way would serve a moment unsigned or with glue in the chain.
- No XoT in 4.7 (no TLS setting at all). TSIG both ways; NOTIFYs are signed with the
  zone's transfer key.
- New serials as a primary: a signed dynamic update (PublishesByUpdate), 2-4 ms at 1 M
  records; with NOTIFY-DNSUPDATE it NOTIFYs by itself. A primary's zone files are loaded
  into the database before the start (start.sh): `pdnsutil load-zone` per zone for a few,
  zone2sql in one transaction for many (11.5 ms a zone with pdnsutil).
- Control: pdns_control through a socket directory, with a fixed 7 s wait for an answer.
  `retrieve ZONE` transfers now without an SOA check (AXFR when the zone has no IXFR
  metadata; 4.7 has no command that forces an AXFR). A retrieve that reaches the other
  retrieval thread while the zone's last transfer is still finishing (it serves the new
  serial before that ends) is dropped without a word: the harness's settle keeps repeats
  apart (seen at 100 k records when a repeat followed its warm-up at once). There is no
  refresh command: a NOTIFY from 127.0.0.1, a trusted-notification-proxy, starts an SOA
  check (pdns_notify).

A secondary's copy on disk (disk_copy): the zone's rows in pdns.sqlite3, which it serves
from (no cache) and which an incoming transfer replaces in one transaction. `pdnsutil
list-zone` prints them from the database ($ORIGIN ., one record a line, sorted by name); the
harness keeps that output as the copy's file. A signed zone's rows lack its NSEC3 chain and
NSEC3PARAM (made when served): its copy is read back instead.

Log (stderr with disable-syslog, kept as stderr.log): loglevel 5 has every transfer and
failure line; stamps are "Nov 25 16:09:02", local time, whole seconds and no year. Nothing
logs a transfer's bytes, records, messages or duration; the commit line of an incoming
transfer names its serial, an outgoing transfer names only its client.

Failures (FAILURES, from tests/fixtures/failures/pdns-*.log): the attempt is "XFR-in zone:
'<zone>', primary: '<addr>', unable to xfr zone (<exception>): <reason> (This was attempt
number N. Excluding zone from slave-checks until <time>)". With no ephemeral port left it
fails to bind before it connects ("Address already in use"). SOA queries are checked in
rounds: one answered with an error rcode writes "While checking domain freshness: ...
(RCode: Query Refused)", and the round ends with "Received serial number updates for N
zones, had M timeouts", which counts every query without a usable answer within 3 s: the
unanswered, those answered by ICMP (port or host unreachable: PowerDNS says timeout), and
those answered with an error rcode again (left out there). "Unable to retrieve SOA for
<zone>, this was the first time" follows per zone (then only every 10th time). No connect is
tried without an SOA answer; a failed transfer is tried again on the next tick, and retries
are not logged as such. As a primary it refuses no transfer for want of a slot (the accept
loop waits at max-tcp-connections): `refusals` stays None.
"""

from __future__ import annotations

import re
import shlex
import time
from datetime import tzinfo
from pathlib import Path
from typing import ClassVar

from harness.servers.base import TEMPLATES, PublishesByUpdate, parse_semver, zone_name
from harness.servers.capabilities import Capabilities, Footprint, Support
from harness.servers.facts import LoggedTransfer, Pacing
from harness.servers.failures import FailureCategory, FailureWording, local_epoch
from harness.servers.setup import ServerSetup
from harness.servers.snippet import Setting, assignment_settings
from harness.xfr.zone_copy import DiskCopy

SCHEMA = TEMPLATES / "pdns" / "schema.sqlite3.sql"  # the 4.7.3 package's gsqlite3 schema
DATABASE = "pdns.sqlite3"
# Up to this many zones a primary loads each with `pdnsutil load-zone` (the faster for a
# large zone: 9 s at 1 M records against 12 s through zone2sql); more in one transaction.
LOAD_EACH_UP_TO = 10

# --- log lines ---------------------------------------------------------------------------

_STAMP = re.compile(r"^([A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d) ")
_AT = r"^(?P<at>[A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d) "
# "AXFR-in zone: 'tld', primary: '192.0.2.1', zone committed with serial 3",
# "IXFR-in zone: 'tld', primary: '192.0.2.1', got 1 delta, zone committed with serial 101"
_IN = re.compile(
    _AT + r"(?P<xfr>[AI])XFR-in zone: '(?P<zone>[^']+)', primary: '(?P<peer>[^']+)', "
    r"(?:got (?P<deltas>\d+) deltas?, )?zone committed with serial (?P<serial>\d+)$"
)
# "AXFR-out zone 'tld', client '192.0.2.2', AXFR finished" (after "transfer initiated");
# "IXFR-out zone 'tld', client '192.0.2.2', IXFR finished": the client was up to date and
# got the SOA alone. An IXFR answered with the whole zone logs "IXFR fallback to AXFR" and
# then the AXFR-out lines: it counts once, as the AXFR it was on the wire.
_OUT = re.compile(
    _AT + r"[AI]XFR-out zone '(?P<zone>[^']+)', client '(?P<peer>[^':]+)', "
    r"(?P<xfr>[AI])XFR finished$"
)


def pdns_timestamp(line: str, tz: tzinfo | None = None, near: float | None = None) -> float | None:
    """Unix time of a stamp ("Nov 25 16:09:02", local time in `tz`, None: this host's). It
    has no year: the one that puts it nearest to `near` (the server's start; None: now)."""
    match = _STAMP.match(line)
    return year_less_epoch(match[1], tz, near) if match else None


def year_less_epoch(text: str, tz: tzinfo | None, near: float | None) -> float | None:
    """The unix time of "Mon DD HH:MM:SS" in the year, of the one before or after the year
    of `near` (None: now), that lies nearest to `near`."""
    near = time.time() if near is None else near
    year = time.localtime(near).tm_year
    candidates = []
    for guess in (year - 1, year, year + 1):
        try:
            candidates.append(local_epoch(f"{guess} {text}", "%Y %b %d %H:%M:%S", tz))
        except ValueError:  # Feb 29 outside a leap year
            continue
    return min(candidates, key=lambda at: abs(at - near), default=None)


# --- failures, in this server's own wording (harness/servers/failures.py) ---

# An SOA query of a round of checks answered with an error rcode (resolver.cc).
_SOA_RCODE = re.compile(
    r"While checking domain freshness: Query to '\S+' for SOA of '[^']+' produced no "
    r"results \((?P<reason>RCode: [^)]+)\)$"
)
PDNS_ATTEMPTS = (
    # slavecommunicator.cc suck(): the transfer failed (connect, or the primary's answer).
    re.compile(
        r"XFR-in zone: '[^']+', primary: '[^']+', unable to xfr zone \([\w:]+\): (?P<reason>.+?)"
        r"(?: \(This was attempt number \d+\. Excluding zone from slave-checks until \d+\))?$"
    ),
    _SOA_RCODE,
)
PDNS_REASONS: dict[str, FailureCategory] = {
    # No ephemeral port left: it binds the TCP socket (query-local-address, unset here)
    # before it connects, and the bind fails.
    "Resolver binding to local TCP socket on '0.0.0.0': Address already in use": (
        "address_not_available"
    ),
    "Error connecting: Connection refused": "refused",
    "RCode: Query Refused": "refused",
    # The kernel gave the connect up (tcp_syn_retries) before axfr-fetch-timeout did...
    "Error connecting: Connection timed out": "timed_out",
    # ...or axfr-fetch-timeout (10 s) came first.
    "Timeout connecting to server": "timed_out",
}
PDNS_FIXED: tuple[tuple[re.Pattern[str], FailureCategory], ...] = (
    # One line per round of SOA checks: `count` queries (one per zone) got no usable answer
    # within 3 s. That includes a query answered with an error rcode, logged on its own line
    # (_SOA_RCODE) and counted there; and an ICMP port or host unreachable is a timeout here.
    (re.compile(r"Received serial number updates for \d+ zones?, had (?P<count>[1-9]\d*) "
                r"timeouts?$"), "timed_out"),
)  # fmt: skip
PDNS_FOLLOW_UPS = (
    re.compile(r"Unable to retrieve SOA for \S+, this was the "),
    re.compile(r"IXFR-in zone '[^']+', primary '[^']+', got exception "),
)

FAILURES = FailureWording(
    PDNS_ATTEMPTS,
    PDNS_REASONS,
    PDNS_FIXED,
    PDNS_FOLLOW_UPS,
    pdns_timestamp,
    1.0,
    # A failed transfer is tried again on the next tick, with no line of its own; an ICMP
    # host unreachable reads as a timeout.
    unlogged=frozenset({"retry", "unreachable"}),
    recounted=(_SOA_RCODE,),
)


# --- the database: zones, keys and per-zone settings --------------------------------------

# Metadata kinds the dialect owns; a re-render replaces exactly these.
_KINDS = (
    "PRESIGNED",
    "ALLOW-AXFR-FROM",
    "ALSO-NOTIFY",
    "AXFR-MASTER-TSIG",
    "IXFR",
    "NOTIFY-DNSUPDATE",
    "TSIG-ALLOW-AXFR",
    "TSIG-ALLOW-DNSUPDATE",
)


def zone_metadata(setup: ServerSetup) -> list[tuple[str, str]]:
    """(kind, content) rows every zone of this server gets."""
    # Its own DNSSEC records kept as transferred (or loaded), never signed here.
    rows: list[tuple[str, str]] = [("PRESIGNED", "1")] if setup.signed else []
    if setup.role == "primary":
        if setup.tsig:
            rows.append(("TSIG-ALLOW-AXFR", setup.tsig.name))
        if not (setup.tsig and setup.tsig_only):
            rows += [("ALLOW-AXFR-FROM", f"{peer}/32") for peer in setup.peers]
        if setup.notify:
            rows += [("ALSO-NOTIFY", peer) for peer in setup.peers]
        if setup.update_key:
            rows.append(("TSIG-ALLOW-DNSUPDATE", setup.update_key.name))
            rows.append(("NOTIFY-DNSUPDATE", "1" if setup.notify else "0"))
    else:
        if setup.tsig:
            rows.append(("AXFR-MASTER-TSIG", setup.tsig.name))
        if setup.ixfr:
            rows.append(("IXFR", "1"))
    return rows


def _sql(value: str | None) -> str:
    """A string (or NULL) as an SQL literal."""
    return "NULL" if value is None else "'" + value.replace("'", "''") + "'"


def database_sql(setup: ServerSetup) -> str:
    """Zones, TSIG keys and their settings as one SQL transaction, for the sqlite3 tool on
    the server's own host (start.sh before the server starts, reconfig_argv while it runs).

    A primary's database is new at each start (start.sh removes it and loads its records).
    A secondary's is created once and then only its keys and settings are replaced, while it
    runs: its copies stay, and the server reads the rows at each use (zone-metadata-cache-ttl
    0), the old rows or the new, never a mix."""
    kind = "MASTER" if setup.role == "primary" else "SLAVE"
    master = None if setup.role == "primary" else setup.primary
    lines = [".timeout 30000", ".bail on", "BEGIN;"]
    for zone in setup.zones:
        name = _sql(zone.origin.rstrip("."))
        # A catalog a secondary consumes is a CONSUMER zone (4.7+): its members are created
        # as SLAVE zones of the same primary as the catalog names them.
        consumes = setup.catalog is not None and zone.origin in setup.catalog.zones
        kind_of = _sql("CONSUMER" if consumes else kind)
        lines.append(f"INSERT OR IGNORE INTO domains (name, type) VALUES ({name}, {kind_of});")
        lines.append(
            f"UPDATE domains SET type = {kind_of}, master = {_sql(master)} WHERE name = {name};"
        )
    lines.append("DELETE FROM tsigkeys;")
    keys = {k.name: k for k in (setup.tsig_known or setup.tsig, setup.update_key) if k}
    for key in keys.values():
        values = ", ".join(_sql(v) for v in (key.name.rstrip("."), key.algorithm, key.secret))
        lines.append(f"INSERT INTO tsigkeys (name, algorithm, secret) VALUES ({values});")
    kinds = ", ".join(_sql(k) for k in _KINDS)
    lines.append(f"DELETE FROM domainmetadata WHERE kind IN ({kinds});")
    for meta, content in zone_metadata(setup):
        lines.append(
            "INSERT INTO domainmetadata (domain_id, kind, content) "
            f"SELECT id, {_sql(meta)}, {_sql(content)} FROM domains;"
        )
    # 4.7.3 takes a consumer zone by AXFR only: an IXFR of it ends "can't determine backend,
    # not configured as slave" and "got 0 deltas, zone committed with serial 0", and the
    # catalog's change never reaches its members (seen here).
    lines.append(
        "DELETE FROM domainmetadata WHERE kind = 'IXFR' AND domain_id IN "
        "(SELECT id FROM domains WHERE type = 'CONSUMER');"
    )
    lines.append("COMMIT;")
    return "\n".join(lines) + "\n"


# --- the dialect -------------------------------------------------------------------------


class Pdns(PublishesByUpdate):
    kind = "pdns"
    title = "PowerDNS"
    daemon = "pdns_server"
    config_name = "pdns.conf"
    # disable-syslog: the log is stderr, which the runner keeps in the workdir.
    log_name = "stderr.log"
    version_argv = ("--version",)  # printed on stderr, exit status 99
    version_patterns = (r"PowerDNS Authoritative Server (\d+\.\d+\.\d+)",)
    options: ClassVar[dict[str, type]] = {
        "max-tcp-connections": int,
        "max-tcp-connections-per-client": int,
        "retrieval-threads": int,
        "receiver-threads": int,
        "distributor-threads": int,
        "axfr-fetch-timeout": int,
        "tcp-idle-timeout": int,
        "xfr-cycle-interval": int,
        "xfr-max-received-mbytes": int,
    }
    failures = FAILURES
    # gsqlite3 secondary: 62 MiB idle, VmHWM 278-284 MB taking 1 M records of the tld
    # preset (~230 B a record); per zone not separable at 1000 hosting zones.
    # Its catalog lines ("Catalog-Zone create zone ...") and an IXFR of a consumer zone
    # that it cannot apply, in its words; a catalog it rejects whole says e.g. "Catalog-Zone
    # zone 'catalog.invalid', unsupported catalog zone schema version "99", aborting".
    catalog_wording = re.compile(
        r"(Catalog-Zone|catalog).*(error|fail|exception|duplicat|conflict|reject|can't|"
        r"not configured|unsupported|missing|aborting)",
        re.I,
    )
    footprint = Footprint(base_mib=62, record_bytes=230, zone_bytes=3_000)
    packages = ("pdns-server", "pdns-backend-sqlite3", "pdns-tools", "sqlite3")
    services = ("pdns",)
    keeps_disk_copy = True
    snippet_place = "among its settings (pdns.conf lines)"
    snippet_owned: ClassVar[dict[str, str]] = {
        **dict.fromkeys(
            (
                "local-address",
                "local-port",
                "launch",
                "gsqlite3-database",
                "config-dir",
                "socket-dir",
                "daemon",
                "guardian",
            ),
            "it runs where, and from the files, the testbed gave it",
        ),
        **dict.fromkeys(
            ("disable-syslog", "log-timestamp", "loglevel"), "the harness parses its log"
        ),
        "gsqlite3-dnssec": "the harness sets it when the zone carries its own DNSSEC records",
        **dict.fromkeys(
            (
                "primary",
                "secondary",
                "master",
                "slave",
                "only-notify",
                "allow-axfr-ips",
                "allow-notify-from",
                "trusted-notification-proxy",
                "dnsupdate",
                "allow-dnsupdate-from",
            ),
            "its role and who may transfer, notify and update are set per case by the harness",
        ),
        **dict.fromkeys(
            (
                "cache-ttl",
                "query-cache-ttl",
                "negquery-cache-ttl",
                "zone-metadata-cache-ttl",
                "security-poll-suffix",
            ),
            "the generated settings set it already (servers/pdns/pdns.conf.j2)",
        ),
        **dict.fromkeys(
            ("xfr-cycle-interval", "xfr-max-received-mbytes"),
            "the harness gives it a default: set it in [servers.<role>] options instead",
        ),
    }

    @classmethod
    def capabilities(cls, version: str) -> Capabilities:
        name = f"PowerDNS Authoritative {version}"
        no_xot = Support(False, f"{name} has no XoT")
        return Capabilities(
            xot_primary=no_xot,
            xot_secondary=no_xot,
            ixfr_primary=Support(
                False, f"{name} serves no IXFR: it answers one with the whole zone"
            ),
            ixfr_secondary=Support(True),
            ixfr_signed_secondary=Support(
                False,
                f"{name} asks no IXFR for a zone with DNSSEC records: it takes a signed "
                "zone by AXFR whatever its IXFR setting",
            ),
            signed_primary=Support(
                False,
                f"{name} as the primary of a zone with its own DNSSEC records is not done "
                "here: loaded as is, it serves the file's NSEC3s beside the chain it makes",
            ),
            tsig=Support(True),
            # A secondary without the zone's IXFR metadata asks AXFR; as a primary it
            # provides no IXFR at all.
            axfr_only_secondary=Support(True),
            withholds_ixfr_primary=Support(True),
            caveats=(
                f"{name} works off a 1 s loop: a secondary starts a transfer 0-1 s after the "
                "NOTIFY, and a primary sends its NOTIFY 0-1 s after the change",
            ),
        )

    @classmethod
    def parse_log(cls, text: str, near: float | None = None) -> list[LoggedTransfer]:
        """Transfers as logged; `near`: a unix time the log was written near (its stamps
        have no year; None: now). An up-to-date IXFR asked for by `retrieve` ("got 0
        deltas, zone committed with serial 0") is no transfer."""
        out: list[LoggedTransfer] = []
        for line in text.splitlines():
            if match := _IN.match(line):
                if match["deltas"] == "0" and match["serial"] == "0":
                    continue
                direction, serial = "in", int(match["serial"])
            elif match := _OUT.match(line):
                direction, serial = "out", None
            else:
                continue
            out.append(
                LoggedTransfer(
                    "pdns",
                    direction,
                    zone_name(match["zone"]),
                    f"{match['xfr'].lower()}xfr",
                    serial,
                    None,
                    None,
                    None,
                    None,
                    match["at"],
                    match["peer"],
                    pdns_timestamp(line, None, near),
                )
            )
        return out

    @classmethod
    def snippet_settings(cls, text: str) -> list[Setting]:
        return assignment_settings(text)

    # A member moved to another catalog, as 4.7.3 logs it (to the second: its log's stamps).
    coo_log = re.compile(
        r"Catalog-Zone zone '(?P<zone>[^']+)' owner change without state reset, old catalog "
        r"'(?P<old>[^']+)', new catalog '(?P<new>[^']+)'"
    )

    @classmethod
    def coo_problem(cls, version: str) -> str | None:
        """4.7's consumer reads the coo property ("update coo for zone" in its binary)."""
        return cls.catalog_consumer_problem(version)

    @classmethod
    def catalog_consumer_problem(cls, version: str) -> str | None:
        """Consumer zones (a domains row of type CONSUMER) since 4.7."""
        if parse_semver(version) < (4, 7, 0):
            return f"PowerDNS {version} has no catalog zones; 4.7 added consumer zones"
        return None

    def check_config_argv(self) -> list[str]:
        return [str(self.binary), f"--config-dir={self.setup.workdir}", "--config=check"]

    @classmethod
    def peer_is(cls, peer: str | None, address: str) -> bool:
        # Transfer lines name a bare address; "allowed:" and NOTIFY lines add ":port".
        return (peer or "") == address or (peer or "").startswith(f"{address}:")

    # --- one configured server -------------------------------------------------------------

    @property
    def database(self) -> Path:
        return self.setup.workdir / DATABASE

    @property
    def database_script(self) -> Path:
        """The rows the database must hold (database_sql), applied on the server's host."""
        return self.setup.workdir / "database.sql"

    @property
    def schema_script(self) -> Path:
        """The package's schema, which start.sh makes a new database from."""
        return self.setup.workdir / "schema.sql"

    @property
    def socket_dir(self) -> Path:
        """pdns_server and pdns_control take a directory, where the server puts
        pdns.controlsocket and pdns.pid: one of its own beside the runner's short path."""
        return self.setup.socket_path.with_suffix("")

    def _tool(self, name: str) -> str:
        # PowerDNS's tools are in bin/, beside the sbin/ of pdns_server.
        beside = self.binary.parent.parent / "bin" / name
        return str(beside) if self.in_container or beside.exists() else name

    def _context(self) -> dict[str, object]:
        return super()._context() | {
            "binary": self.binary,
            "database": self.database,
            "database_script": self.database_script,
            "schema": self.schema_script,
            "socket_dir": self.socket_dir,
            "pdnsutil": self._tool("pdnsutil"),
            "zone2sql": self._tool("zone2sql"),
            "load_each": len(self.setup.zones) <= LOAD_EACH_UP_TO,
            "dnssec": self.setup.signed,
        }

    def folders(self) -> list[tuple[Path, int]]:
        return [*super().folders(), (self.socket_dir, 0o700)]

    def _render_files(self) -> list[Path]:
        wd = self.setup.workdir
        files = [
            self._render("pdns/pdns.conf.j2", self.config),
            self._render("pdns/start.sh.j2", wd / "start.sh"),
        ]
        if self.setup.role == "primary" and len(self.setup.zones) > LOAD_EACH_UP_TO:
            files.append(self._render("pdns/zones.conf.j2", wd / "zones.conf"))
        files.append(self._write(self.schema_script, [SCHEMA.read_text()]))
        return [*files, self._write(self.database_script, [database_sql(self.setup)])]

    def argv(self) -> list[str]:
        # start.sh loads a primary's zones, then execs pdns_server (the same pid).
        return ["/bin/bash", str(self.setup.workdir / "start.sh")]

    def control(self, *command: str) -> list[str]:
        return [
            self._tool("pdns_control"),
            f"--config-dir={self.setup.workdir}",
            f"--socket-dir={self.socket_dir}",
            *command,
        ]

    @property
    def control_path(self) -> Path:
        return self.socket_dir

    def reload_argv(self, zone: str) -> list[str]:
        # No file to re-read: the zone is loaded again (an atomic replace; 9 s at 1 M).
        entry = next(z for z in self.setup.zones if z.origin == zone_name(zone))
        return [
            self._tool("pdnsutil"),
            f"--config-dir={self.setup.workdir}",
            "load-zone",
            entry.origin,
            str(entry.file),
        ]

    def disk_copy(self, zone: str) -> DiskCopy | None:
        if self.setup.signed:  # no NSEC3 chain among the rows: read back what it serves
            return None
        origin = zone_name(zone)
        argv = (self._tool("pdnsutil"), f"--config-dir={self.setup.workdir}", "list-zone", origin)
        path = self.setup.workdir / "disk-copy" / f"{origin}zone"
        return DiskCopy(path, "master", argv, waits=True, prints=True)

    def reconfig_argv(self) -> list[str]:
        # What a case switches (TSIG, IXFR, NOTIFY) is in rows, read at each use: the
        # rendered rows are applied on the server's host, then `rping` checks that the server
        # still answers.
        # Quoted by shlex: a run folder's path may hold spaces or quotes.
        database, script = shlex.quote(str(self.database)), shlex.quote(str(self.database_script))
        return [
            "/bin/sh",
            "-c",
            f"sqlite3 {database} < {script} && {shlex.join(self.control('rping'))}",
        ]

    def retransfer_argv(self, zone: str) -> list[str]:
        # A transfer now, without an SOA check: an AXFR, since the zone has no IXFR
        # metadata in an AXFR case.
        return self.control("retrieve", zone_name(zone))

    def refresh_argv(self, zone: str) -> list[str]:
        # An SOA check now: a NOTIFY from 127.0.0.1 (trusted-notification-proxy), sent in
        # the secondary's namespace; it transfers only when the primary's serial is newer.
        return [self._tool("pdns_notify"), "127.0.0.1", zone_name(zone)]

    def pacing(self) -> tuple[Pacing, ...]:
        """A secondary drops a `pdns_control retrieve` that arrives while its last transfer
        is still finishing after it served the new serial (seen here: the repeat after a
        warm-up never came); its communicator's 1 s loop finishes it within a second."""
        if self.setup.role != "secondary":
            return ()
        return (Pacing(("served",), 1.0, "its communicator's 1 s loop"),)
