"""Knot DNS (knotd): everything the harness knows about it.

Facts that shape transfers: tcp-io-timeout 500 ms also covers outgoing transfers;
refresh events run on the background workers; remote-pool-limit 0 (no pooling of outgoing
connections); XoT from 3.4. Knot 3.2 logs seconds and bytes of a transfer but no record count,
and names the serial only on the 'started' line of an outgoing transfer. Knot 3.4 writes the
protocol after the remote's address ("remote 198.19.31.2@53 TCP, finished, ...") and the
serial of an incoming transfer on its 'finished' line ("finished, remote serial 1, ..."):
parse_log reads both.

Failures (FAILURES): the attempt is "refresh, remote <id>, address <addr>, failed
(<reason>)", one per address tried; "remote <id> not usable" and "zone event 'refresh'
failed" follow it, and "refresh, failed (...), next retry at <time>" closes the refresh
event: that one counts as a retry. Its stamps have whole seconds only. "connection reset"
(KNOT_ECONN) stands for a refused connect, a reset part way and an ICMP host unreachable
alike (all three seen in real runs, tests/fixtures/failures/README.md): counted refused, and
`unreachable` is None, "not logged".

As a primary, Knot (3.2.6 captured; 3.4 has no transfer quota either) never refuses a
transfer for want of a slot, so it never logs a refusal: there is no outgoing-transfer quota,
one TCP worker sends a whole AXFR, and with every worker busy further connections wait in the
kernel's accept backlog, silently (tcp-max-clients only stops a worker polling for more).
An outgoing transfer that dies (its 500 ms tcp-io-timeout on a send, logged at debug level
only, or the secondary gone) leaves just "AXFR, outgoing, remote A@port, started, serial N"
with no "finished" (24 started, 1 finished with six secondaries behind 2 Mbit/s). Its only
line about such clients is the idle sweep, "notice: TCP, terminated inactive client, address
A@port". That is what a refusal count of None, "not logged", means for a Knot primary.

A secondary's copy on disk (disk_copy): its zone file, which zonefile-sync -1 keeps from being
written on a timer; `knotc -b -f zone-flush` writes it now and returns once it is written.
Knot writes one record per line with absolute names and without the class.
"""

from __future__ import annotations

import re
from dataclasses import replace
from datetime import datetime, tzinfo
from pathlib import Path
from typing import ClassVar

from harness.servers.base import TCP_TSIG_SWITCHES, PublishesByUpdate, parse_semver, zone_name
from harness.servers.capabilities import Capabilities, Footprint, Support
from harness.servers.facts import LoggedTransfer
from harness.servers.failures import FailureCategory, FailureWording
from harness.servers.fallbacks import FallbackWording
from harness.servers.snippet import Setting, indented, yaml_sections, yaml_settings
from harness.xfr.zone_copy import DiskCopy

# The remote as Knot 3.2 writes it ("remote 198.18.255.1@53, ") and 3.4 ("remote
# 198.19.31.2@53 TCP, ": the protocol after the address); the peer is the address alone.
_REMOTE = r"remote (?P<peer>[^\s,]+)(?: [A-Z]+)?,?"
_FINISHED = re.compile(
    r"^(?P<at>\S+) \w+: \[(?P<zone>[^\]]+)\] (?P<xfr>AXFR|IXFR), (?P<dir>incoming|outgoing), "
    + _REMOTE
    # 3.4 names the serial of an incoming transfer here: "finished, remote serial 1, ..."
    + r" finished,(?: remote serial (?P<remote_serial>[^,]+),)? (?P<secs>[\d.]+) seconds, "
    r"(?P<msgs>\d+) messages, (?P<bytes>\d+) bytes"
)
_STARTED = re.compile(r"\[(?P<zone>[^\]]+)\] (?P<xfr>AXFR|IXFR), (?P<dir>\w+), " + _REMOTE)
_SERIAL = re.compile(r"serial (?:\d+ -> )?(?P<serial>\d+)")
# An incoming transfer's serials are on the refresh line that follows its "finished" line.
_UPDATED = re.compile(
    r"\[(?P<zone>[^\]]+)\] refresh, remote (?P<peer>\S+?), zone updated, [\d.]+ seconds, "
    r"serial (?P<from>\d+|none) -> (?P<serial>\d+)"
)
# Its lines saying an IXFR became an AXFR (tests/fixtures/fallbacks/knot-*.log): the primary
# whose journal no longer reaches the secondary's serial, and the secondary sent a full zone.
FALLBACKS = (
    FallbackWording(
        re.compile(
            r"\[(?P<zone>[^\]]+)\] IXFR, outgoing, remote (?P<peer>\S+?), "
            r"(?P<message>incomplete history, serial \d+, fallback to AXFR)$"
        ),
        "out",
        "journal trimmed",
    ),
    FallbackWording(
        re.compile(
            r"\[(?P<zone>[^\]]+)\] IXFR, incoming, remote (?P<peer>\S+?), "
            r"(?P<message>receiving AXFR-style IXFR)$"
        ),
        "in",
        "falling back to AXFR",
    ),
)


# --- failures, in this server's own wording (harness/servers/failures.py) ---

# KNOT_LOG_TIME_FORMAT "%Y-%m-%dT%H:%M:%S%z": local time, whole seconds, with its offset.
_KNOT_STAMP = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d[+-]\d{4}) ")


def knot_timestamp(line: str, tz: tzinfo | None = None, near: float | None = None) -> float | None:
    """`tz` and `near` are unused: Knot writes its offset and year."""
    match = _KNOT_STAMP.match(line)
    if not match:
        return None
    return datetime.strptime(match[1], "%Y-%m-%dT%H:%M:%S%z").timestamp()


KNOT_ATTEMPTS = (
    # zone.c log_try_addr_error(): one line per primary address tried ("remote <id>, " is
    # left out for the zone's preferred primary).
    re.compile(r"\] refresh, (?:remote \S+, )?address \S+, failed \((?P<reason>.+)\)$"),
    # An incoming transfer that failed and is tried again at once as AXFR (a reset
    # mid-transfer: tests/fixtures/failures/knot-reset.log).
    re.compile(r"\] refresh, incoming, remote \S+, fallback to AXFR \((?P<reason>.+)\)$"),
)
KNOT_REASONS: dict[str, FailureCategory] = {
    "address is not available": "address_not_available",
    # KNOT_ECONN: Knot 3.2 reports every connect or I/O error but a timeout with this text;
    # with nothing listening on the primary it is a refused connect (the capture's case).
    "connection reset": "refused",
    "connection timeout": "timed_out",
}
KNOT_FIXED: tuple[tuple[re.Pattern[str], FailureCategory], ...] = (
    # event_refresh(): the refresh event failed and its next try is scheduled.
    (re.compile(r"\] refresh, failed \([^)]+\), next retry at \S+$"), "retry"),
)
KNOT_FOLLOW_UPS = (
    # The primary's answer to a transfer, before the address line that fails on it.
    re.compile(r"\] [AI]XFR, incoming, remote \S+, server responded with error '[^']+'$"),
    re.compile(r"\] refresh, remote \S+ not usable$"),
    re.compile(r"\] refresh, address \S+ not usable$"),
    re.compile(r"\] zone event 'refresh' failed \([^)]+\)$"),
)

FAILURES = FailureWording(
    KNOT_ATTEMPTS,
    KNOT_REASONS,
    KNOT_FIXED,
    KNOT_FOLLOW_UPS,
    knot_timestamp,
    1.0,
    # 3.2 and 3.4 say "connection reset" for an ICMP host unreachable (counted refused).
    unlogged=frozenset({"unreachable"}),
)


# Where a Knot snippet's settings go: its server section and the zones' default template.
SNIPPET_SECTIONS = ("server", "template")


class Knot(PublishesByUpdate):
    """A primary publishes by signed update (RFC 2136), a change set included: Knot applies
    it to the zone and its journal in milliseconds, where a new zone file is read and
    diffed whole (seconds at 1 M records: too slow for a stream's 200 ms intervals), and a
    zone transaction (knotc zone-set / zone-unset) costs a control round trip per record."""

    kind = "knot"
    title = "Knot"
    daemon = "knotd"
    config_name = "knot.conf"
    log_name = "knot.log"
    version_argv = ("-V",)
    # 3.2 prints "knotd (Knot DNS), version 3.2.6"; 3.4 prints "knotd, Knot DNS 3.4.6".
    version_patterns = (r"(?:Knot DNS|version) (\d+\.\d+\.\d+)",)
    options: ClassVar[dict[str, type]] = {
        "background-workers": int,
        "remote-pool-limit": int,
        "remote-retry-delay": int,
        "tcp-workers": int,
        "udp-workers": int,
        "tcp-io-timeout": int,
        "tcp-remote-io-timeout": int,
        "tcp-max-clients": int,
        # The primary's IXFR history, per zone: the journal's space ("1M") and how many
        # changesets it keeps (at least 2).
        "journal-max-usage": str,
        "journal-max-depth": int,
    }
    zone_options = frozenset({"journal-max-usage", "journal-max-depth"})
    failures = FAILURES
    # No line of a Knot primary refusing a transfer for want of a slot is captured yet
    # (servers/refusals.py): its refusals are "not logged". Set a RefusalWording here.
    refusals = None
    # `knotc reload` makes tcp <-> tcp-tsig (research-switch/REPORT.md: 17 switches). Knot 3.2
    # has no XoT and no XoT switch of a later Knot was ever run here: those restart it. Its
    # template renders AXFR and IXFR cases alike (both ask IXFR: the primary logged IXFR for
    # all 8 "axfr" and "ixfr" transfers of run 20261125T170854Z-228a6d), nothing to switch:
    # in such AXFR cases the primary withholds IXFR instead (measure/primary_ixfr.py).
    reconfig_switches = TCP_TSIG_SWITCHES
    reconfig_switches_xfr = True
    fallback_wording = FALLBACKS
    # Secondary RSS: 169 MiB at 500 k records (tld), 186 MiB for 30 k hosting zones.
    footprint = Footprint(base_mib=20, record_bytes=350, zone_bytes=1_500)
    packages = ("knot", "knot-dnsutils")
    services = ("knot",)
    keeps_disk_copy = True
    snippet_place = "into its server: section and the zones' default template:"
    snippet_owned: ClassVar[dict[str, str]] = {
        **dict.fromkeys(
            ("server.listen", "server.listen-tls", "server.cert-file", "server.key-file"),
            "it listens where the testbed put it, with the run's TLS files",
        ),
        **dict.fromkeys(
            ("server.rundir", "server.pidfile"), "its files live in the run's working folder"
        ),
        **dict.fromkeys(
            (
                "template.id",
                "template.storage",
                "template.file",
                "template.acl",
                "template.master",
                "template.notify",
                "template.zonefile-load",
                "template.provide-ixfr",
            ),
            "zones, their files and who may transfer them are set per case by the harness",
        ),
        **dict.fromkeys(
            ("template.zonefile-sync", "template.journal-content", "template.semantic-checks"),
            "the generated template sets it already (servers/knot/knot.conf.j2)",
        ),
    }

    @classmethod
    def capabilities(cls, version: str) -> Capabilities:
        xot = Support.since(
            parse_semver(version), (3, 4, 0), f"Knot {version} has no XoT (added in 3.4)"
        )
        return Capabilities(
            xot_primary=xot,
            xot_secondary=xot,
            ixfr_primary=Support(True),
            ixfr_secondary=Support(True),
            tsig=Support(True),
            # A secondary asks IXFR of a primary that provides it: Knot has no setting for
            # AXFR only (zone-retransfer forces one AXFR now, not a NOTIFY's transfer). As a
            # primary its zone's provide-ixfr, switched by `knotc reload`.
            axfr_only_secondary=Support(
                False, f"Knot {version} cannot be told to ask AXFR only: it asks IXFR"
            ),
            withholds_ixfr_primary=Support(True),
        )

    @classmethod
    def parse_log(cls, text: str) -> list[LoggedTransfer]:
        out: list[LoggedTransfer] = []
        started_serial: dict[tuple[str, str, str], int] = {}
        for line in text.splitlines():
            if ", zone updated, " in line and (updated := _UPDATED.search(line)):
                # The incoming transfer just finished from that remote brought this serial.
                for index in range(len(out) - 1, -1, -1):
                    entry = out[index]
                    if entry.direction == "in" and entry.peer == updated["peer"]:
                        if entry.serial is None and entry.zone == zone_name(updated["zone"]):
                            first = None if updated["from"] == "none" else int(updated["from"])
                            out[index] = replace(
                                entry, serial=int(updated["serial"]), from_serial=first
                            )
                        break
                continue
            if ", started" in line:
                head = _STARTED.search(line)
                serial = _SERIAL.search(line)
                if head and serial:
                    key = (head["zone"], head["dir"], head["peer"])
                    started_serial[key] = int(serial["serial"])
                continue
            match = _FINISHED.match(line)
            if not match:
                continue
            key = (match["zone"], match["dir"], match["peer"])
            serial = started_serial.pop(key, None)
            if match["remote_serial"]:
                remote = _SERIAL.search(f"serial {match['remote_serial']}")
                serial = int(remote["serial"]) if remote else serial
            out.append(
                LoggedTransfer(
                    "knot",
                    "in" if match["dir"] == "incoming" else "out",
                    zone_name(match["zone"]),
                    match["xfr"].lower(),
                    serial,
                    float(match["secs"]),
                    int(match["msgs"]),
                    None,
                    int(match["bytes"]),
                    match["at"],
                    match["peer"],
                    knot_timestamp(line),
                )
            )
        return out

    @classmethod
    def snippet_settings(cls, text: str) -> list[Setting]:
        return yaml_settings(text, SNIPPET_SECTIONS)

    @classmethod
    def snippet_sections(cls, text: str) -> dict[str, str]:
        parts = yaml_sections(text, SNIPPET_SECTIONS)
        return {name: indented(part, 4) for name, part in parts.items()}

    # Its catalog complaints, e.g. "error: [<member>.] duplicate addition/removal of the
    # member node, ignoring" (a member named twice).
    catalog_wording = re.compile(r" (warning|error): .*\b(catalog|member)\b")
    # parse_log's lines: "[zone] AXFR, incoming, ..." and "refresh, ..., zone updated, ...".
    transfer_log_words = ("XFR, ", ", zone updated, ")

    @classmethod
    def coo_problem(cls, version: str) -> str | None:
        """Knot 3.2.6's knotd holds the `version` and `group` property names but no `coo`:
        it ignores the property, so a move is a removal and an addition (the member reset)."""
        return (
            f"Knot {version} has no change of ownership (3.2.6's knotd carries no 'coo' "
            "property: a moved member would be removed and added again); use a BIND 9.18+ "
            "consumer"
        )

    @classmethod
    def catalog_consumer_problem(cls, version: str) -> str | None:
        """catalog-role interpret since 3.1 (version 2 catalogs)."""
        if parse_semver(version) < (3, 1, 0):
            return f"Knot {version} has no catalog zones; 3.1 added catalog-role: interpret"
        return None

    def check_config_argv(self) -> list[str]:
        return [self._tool("knotc"), "-c", str(self.config), "conf-check"]

    @classmethod
    def peer_is(cls, peer: str | None, address: str) -> bool:
        return (peer or "").startswith(f"{address}@")

    def folders(self) -> list[tuple[Path, int]]:
        wd = self.setup.workdir
        return [*super().folders(), (wd / "db", 0o755), (wd / "zones", 0o755)]

    def _render_files(self) -> list[Path]:
        return [self._render("knot/knot.conf.j2", self.config)]

    def argv(self) -> list[str]:
        return [str(self.binary), "-c", str(self.config)]

    def control(self, *command: str) -> list[str]:
        return [self._tool("knotc"), "-c", str(self.config), "-t", "30", *command]

    def reload_argv(self, zone: str) -> list[str]:
        return self.control("zone-reload", zone)

    def reconfig_argv(self) -> list[str]:
        return self.control("reload")

    def retransfer_argv(self, zone: str) -> list[str]:
        return self.control("zone-retransfer", zone)

    def refresh_argv(self, zone: str) -> list[str]:
        return self.control("zone-refresh", zone)

    def zone_status_argv(self, zone: str) -> list[str] | None:
        return self.control("zone-status", zone)

    def disk_copy(self, zone: str) -> DiskCopy | None:
        # -b: back once the file is written; -f: past zonefile-sync -1. No control timeout
        # (-t), as -b allows: a large zone takes longer than knotc's 30 s to write.
        argv = (self._tool("knotc"), "-c", str(self.config), "-b", "-f", "zone-flush", zone)
        return DiskCopy(self.zone_file(zone), "lines", argv, waits=True)

    def notify_argv(self, zone: str) -> list[str] | None:
        return self.control("zone-notify", zone)
