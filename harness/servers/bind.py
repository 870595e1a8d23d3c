"""BIND 9 (named): everything the harness knows about it.

Facts that shape transfers: transfers-in 10, transfers-per-ns 2, transfers-out 10,
serial-query-rate 20/s (paces a cold start), each inbound transfer on its own TCP
connection; XoT both ways since 9.18 with the "dot" ALPN. A request beyond transfers-out is
answered SERVFAIL and logged "... request denied: quota reached" (REFUSALS).

Failures (FAILURES): the attempt is "transfer of '<zone>' from <addr>: failed to connect:
<reason>" (its "Transfer status: <reason>" and "Transfer completed: 0 messages" lines follow),
and for the SOA query before it "refresh: failure trying primary ...: <reason>", "refresh:
unexpected rcode (<RCODE>) from primary ..." or "refresh: retry limit for primary ...
exceeded" (a query that timed out). BIND tries the transfer over TCP even after the SOA query
of a zone with no data failed, so one refresh can count two failed attempts: a UDP query and a
TCP connect (or a REFUSED query and a NOTAUTH transfer). A primary that failed to connect
twice is held as unreachable for 10 minutes: every transfer due then is skipped, "... is
unreachable (cached)", one `unreachable` line each. 9.18 logs its retries only at debug level,
so its `retry` count is None, "not logged": 0 would say nothing was retried.

A secondary's copy on disk (disk_copy): its zone file, written `masterfile-style full` (one
record per line, absolute names: what the zone-file sum reads). BIND writes it at once after
each AXFR (zone.c zone_needdump(zone, 0)) and keeps an IXFR's changes in the journal until
its dump timer; `rndc sync` dumps them now (dns_zone_flush) and returns before the file is
written. Either dump goes to a temporary file renamed over the zone file, so the file holds
one whole version: the harness waits until its SOA carries the serial.
"""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Mapping
from datetime import tzinfo
from pathlib import Path
from typing import ClassVar

from harness.servers.base import EVERY_SWITCH, PublishesByUpdate, Server, parse_semver, zone_name
from harness.servers.capabilities import Capabilities, Footprint, Support
from harness.servers.facts import LoggedTransfer, Pacing
from harness.servers.failures import FailureCategory, FailureWording, local_epoch
from harness.servers.fallbacks import FallbackWording
from harness.servers.refusals import RefusalWording
from harness.servers.setup import NewVersion, Reach, ZoneEntry
from harness.servers.snippet import Setting, braced_statements, indented
from harness.xfr.zone_copy import DiskCopy

_IN = re.compile(
    r"^(?P<at>\S+) xfer-in: \w+: transfer of '(?P<zone>[^/]+)/IN' from (?P<peer>\S+): "
    r"Transfer completed: (?P<msgs>\d+) messages, (?P<recs>\d+) records, (?P<bytes>\d+) bytes, "
    r"(?P<secs>[\d.]+) secs .*\(serial (?P<serial>\d+)\)"
)
# xfrin.c logs each incoming transfer's end as "Transfer status: <result>" and then "Transfer
# completed: ..." with what it received, failed or not.
_STATUS = re.compile(
    r"^\S+ xfer-in: \w+: transfer of '(?P<zone>[^/]+)/IN' from (?P<peer>\S+): "
    r"Transfer status: (?P<status>.+)$"
)
# "transferred serial N" ends in ": TSIG '<key>'" for a signed transfer; "Transfer completed"
# (logged right after it) does not say.
_TRANSFERRED = re.compile(
    r"xfer-in: \w+: zone (?P<zone>[^/]+)/IN: transferred serial (?P<serial>\d+)(?P<tsig>: TSIG )?"
)
# "client @0x... 198.18.10.130#55471 (tld):", or with TSIG "... 198.18.10.130#55471/key
# xfrbench-xfr (tld):"; "AXFR-style IXFR" is a full zone sent in answer to an IXFR request
# (an AXFR in effect).
_OUT = re.compile(
    r"^(?P<at>\S+) xfer-out: \w+: client \S+ (?P<peer>[^\s/]+)(?:/key (?P<key>\S+))? "
    r"\([^)]*\): transfer of '(?P<zone>[^/]+)/IN': (?P<xfr>AXFR-style IXFR|AXFR|IXFR) ended: "
    r"(?P<msgs>\d+) messages, (?P<recs>\d+) records, (?P<bytes>\d+) bytes, (?P<secs>[\d.]+) secs "
    r".*\(serial (?P<serial>\d+)\)"
)
_CLIENT = (
    r"xfer-out: \w+: client \S+ (?P<peer>[^\s/]+)(?:/key \S+)? \([^)]*\): "
    r"transfer of '(?P<zone>[^/]+)/IN': "
)
_OUT_STARTED = re.compile(_CLIENT + r"IXFR started \(serial (?P<from>\d+) -> \d+\)")
# Its lines saying an IXFR went out as an AXFR (tests/fixtures/fallbacks/bind-*.log). 9.18
# says why at info level only for max-ixfr-ratio; "IXFR version not in journal, falling back
# to AXFR" is a debug(4) line, so a trimmed journal shows as "AXFR-style IXFR" alone. A BIND
# secondary logs nothing at info when it is sent a full zone.
FALLBACKS = (
    FallbackWording(
        re.compile(
            _CLIENT + r"(?P<message>IXFR delta size \(\d+ bytes\) exceeds the maximum ratio to "
            r"database size \(\d+ bytes\), falling back to AXFR)$"
        ),
        "out",
        "delta too large",
    ),
    FallbackWording(
        re.compile(_CLIENT + r"(?P<message>AXFR-style IXFR) started"), "out", "falling back to AXFR"
    ),
)


# --- failures, in this server's own wording (harness/servers/failures.py) ---

# print-time iso8601 (servers/bind/named.conf.j2): local time, milliseconds, no offset.
_BIND_STAMP = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}) ")


def bind_timestamp(line: str, tz: tzinfo | None = None, near: float | None = None) -> float | None:
    """`near` is unused: the stamp has its year."""
    match = _BIND_STAMP.match(line)
    return local_epoch(match[1], "%Y-%m-%dT%H:%M:%S.%f", tz) if match else None


BIND_ATTEMPTS = (
    # xfrin.c xfrin_fail(): "<what>: <isc_result_totext>" at error severity, once per failed
    # transfer; <what> is "failed to connect" in every capture, but any stage may fail.
    re.compile(r"xfer-in: error: transfer of '[^']+' from \S+: [^:]+: (?P<reason>.+)$"),
    # The SOA query before a transfer (UDP; an ICMP port unreachable reads "refused").
    re.compile(r"refresh: failure trying primary \S+ \(source \S+\): (?P<reason>.+)$"),
    # zone.c refresh_callback(): the SOA query was answered with an error rcode, e.g.
    # "refresh: unexpected rcode (REFUSED) from primary 198.18.111.2#53 (source 0.0.0.0#0)"
    # (category general). BIND then tries the transfer anyway, a second attempt.
    re.compile(r"refresh: unexpected rcode \((?P<reason>[^)]+)\) from primary \S+ \(source \S+\)$"),
)
BIND_REASONS: dict[str, FailureCategory] = {
    "address not available": "address_not_available",
    "connection refused": "refused",
    "timed out": "timed_out",
    # The primary's answer: the SOA query REFUSED, the transfer NOTAUTH (a primary that does
    # not serve the zone). A SERVFAIL (what a BIND primary at its transfers-out quota answers)
    # or an "end of file" (the primary closed mid-transfer) is other_failure.
    "REFUSED": "refused",
    "NOTAUTH": "refused",
    # The TCP connect answered by ICMP host unreachable. (An SOA query over UDP that meets
    # one is not told: it runs out of retries, "retry limit ... exceeded", a timeout.)
    "host unreachable": "unreachable",
}
BIND_FIXED: tuple[tuple[re.Pattern[str], FailureCategory], ...] = (
    # The SOA query went unanswered through all its UDP retries: a timeout.
    (re.compile(r"refresh: retry limit for primary \S+ exceeded \(source \S+\)$"), "timed_out"),
    # No connect at all: the primary is in BIND's unreachable cache, where a connect that
    # failed (refused, timed out, host unreachable: counted under their own reason) puts it
    # from the second failure on, for 10 minutes, and only a successful connect takes it out.
    # BIND's own word, unreachable, whatever put it there; logged when a transfer is due
    # ("got_transfer_quota: ..."), or by the refresh itself ("refresh: ...", category
    # general), also for `rndc retransfer` once the fault is gone.
    (
        re.compile(
            r"(?:got_transfer_quota|refresh): skipping zone transfer as primary \S+ "
            r"\(source \S+\) is unreachable \(cached\)$"
        ),
        "unreachable",
    ),
)
BIND_FOLLOW_UPS = (
    # "Transfer status: success" is the only status that is not a failure.
    re.compile(r"transfer of '[^']+' from \S+: Transfer status: (?!success$).+$"),
    # A failed transfer still ends with "Transfer completed", empty.
    re.compile(r"transfer of '[^']+' from \S+: Transfer completed: 0 messages, "),
)

FAILURES = FailureWording(
    BIND_ATTEMPTS,
    BIND_REASONS,
    BIND_FIXED,
    BIND_FOLLOW_UPS,
    bind_timestamp,
    0.001,
    # 9.18 logs its retries only at debug level ("timeout retrying without EDNS", "retrying
    # with AXFR ..."): a retry shows only as the next "Transfer started.".
    unlogged=frozenset({"retry"}),
)

# --- refusals as a primary (harness/servers/refusals.py) ---

# xfrout.c: a request beyond transfers-out, answered SERVFAIL, one line per request (its
# mnemonic is the type asked for: a Knot secondary's IXFR and then its AXFR fallback are two),
# naming no client: "2026-11-25T16:21:51.086 xfer-out: warning: AXFR request denied: quota
# reached" (tests/fixtures/refusals/bind-primary-quota.log).
REFUSALS = RefusalWording(
    re.compile(r" xfer-out: \w+: (?:AXFR|IXFR) request denied: quota reached$"),
    bind_timestamp,
    0.001,
)


def rate_tick(rate: int) -> float:
    """Seconds between the ticks of a BIND rate limiter set to `rate` a second (setrl() in
    lib/dns/zonemgr.c: 1 s for 1, 1/rate up to 10, else 10 per tick every 10/rate s). An
    idle limiter lets an event through at once and ticks once more before it is idle again:
    an event within a tick of the last one waits for that tick."""
    rate = max(rate, 1)
    if rate == 1:
        return 1.0
    return 1.0 / rate if rate <= 10 else 10.0 / rate


DEFAULT_RATE = 20  # notify-rate and serial-query-rate
# A primary serves zone files from this size in BIND's raw format: loading 14 M records
# takes it about 80 s from text and half that from raw (1 M: 3.15 s against 1.40 s).
RAW_FROM_BYTES = 64 * 2**20


def compilezone_argv(tool: str, origin: str, source: Path, target: Path) -> list[str]:
    """named-compilezone writing `source` (text) as raw: no integrity checks (the zone is
    generated; -i none also keeps it from looking names up, which stalled it)."""
    return [tool, "-q", "-f", "text", "-F", "raw", "-i", "none", "-k", "ignore", "-n", "ignore",
            "-o", str(target), origin, str(source)]  # fmt: skip


class Bind(PublishesByUpdate):
    """A primary publishes by signed update: `rndc reload` reads the whole file (about a
    minute at 14 M records). Except a zone that carries its own DNSSEC records (an
    operator's signed zone): BIND refuses updates to them ("explicit NSEC3 updates are not
    allowed in secure zones"), so such a zone is published as a file and reloaded, with
    ixfr-from-differences computing its IXFR."""

    kind = "bind"
    title = "BIND"
    daemon = "named"
    config_name = "named.conf"
    log_name = "named.log"
    version_argv = ("-v",)
    version_patterns = (r"BIND (\d+\.\d+\.\d+)",)
    options: ClassVar[dict[str, type]] = {
        "transfers-in": int,
        "transfers-out": int,
        "transfers-per-ns": int,
        "serial-query-rate": int,
        "notify-rate": int,
        # The NOTIFYs of every zone a primary loads at its start (20/s by default: 50 s
        # for a 1,000-member catalog's pool, each NOTIFY a check at every secondary).
        "startup-notify-rate": int,
        "tcp-clients": int,
        "max-transfer-time-in": int,
        "max-transfer-idle-in": int,
        "transfer-format": str,
        "min-refresh-time": int,
        "min-retry-time": int,
        # The primary's IXFR history: the journal's size ("64k", "unlimited"), and whether
        # a reloaded zone file's differences go into it (rendered "yes" for IXFR cases).
        "max-journal-size": str,
        "ixfr-from-differences": bool,
        # An IXFR larger than this share of the zone goes out as an AXFR ("100%" default).
        "max-ixfr-ratio": str,
    }
    failures = FAILURES
    refusals = REFUSALS
    transfer_quota = ("transfers-out", 10)
    fallback_wording = FALLBACKS
    # `rndc reconfig` makes every transport switch (research-switch/REPORT.md: all 12 from
    # each start, 76 switches, each seen on the wire and in the primary's log) and switches
    # between asking AXFR and IXFR (the primary's xfer-out kinds, run 20261125T170854Z-228a6d).
    reconfig_switches = EVERY_SWITCH
    reconfig_switches_xfr = True
    # `rndc reconfig` applies changed options: transfer-format one-answer took effect on a
    # running primary (tests/system/test_ab.py: its xfer-out lines, one record a message).
    reconfig_applies_options = True
    # Secondary RSS: 250 MiB at 500 k records (tld), 627 MiB for 30 k hosting zones.
    footprint = Footprint(base_mib=32, record_bytes=500, zone_bytes=14_000)
    packages = ("bind9", "bind9-utils", "bind9-dnsutils")
    services = ("named", "bind9")
    keeps_disk_copy = True
    snippet_place = "inside options { }"
    snippet_owned: ClassVar[dict[str, str]] = {
        **dict.fromkeys(("listen-on", "listen-on-v6"), "it listens where the testbed put it"),
        **dict.fromkeys(
            ("directory", "pid-file", "session-keyfile", "managed-keys-directory"),
            "its files live in the run's working folder",
        ),
        **dict.fromkeys(
            (
                "notify",
                "notify-delay",
                "also-notify",
                "allow-notify",
                "allow-transfer",
                "allow-update",
                "provide-ixfr",
                "request-ixfr",
            ),
            "the harness triggers transfers and sets who may take them, per case",
        ),
        **dict.fromkeys(
            ("zone", "key", "controls", "logging", "tls", "include", "options"),
            "zones, keys, its control channel and the log the harness parses are the harness's",
        ),
        **dict.fromkeys(
            ("recursion", "dnssec-validation", "minimal-responses"),
            "the generated options set it already (servers/bind/named.conf.j2)",
        ),
    }

    @classmethod
    def capabilities(cls, version: str) -> Capabilities:
        # XoT (both directions, with the "dot" ALPN) came in 9.17.x; 9.18 is the first stable.
        xot = Support.since(
            parse_semver(version), (9, 18, 0), f"BIND {version} has no XoT (added in 9.18)"
        )
        return Capabilities(
            xot_primary=xot,
            xot_secondary=xot,
            ixfr_primary=Support(True),
            ixfr_secondary=Support(True),
            tsig=Support(True),
            # request-ixfr no; provide-ixfr no (options), both switched by `rndc reconfig`
            # (tests/system/test_xfr_kinds.py: the primary's xfer-out kind, serial by serial).
            axfr_only_secondary=Support(True),
            withholds_ixfr_primary=Support(True),
        )

    @classmethod
    def primary_file(cls, source: Path, origin: str, binary: Path, version: str) -> ZoneEntry:
        """A large zone in raw format (RAW_FROM_BYTES), converted once by the
        named-compilezone beside `binary` and kept beside the source under this version
        (raw files of other versions may differ)."""
        if source.stat().st_size < RAW_FROM_BYTES:
            return ZoneEntry(origin, source)
        target = source.with_name(f"{source.name}.bind-{version}.raw")
        if not target.exists() or target.stat().st_mtime < source.stat().st_mtime:
            beside = binary.with_name("named-compilezone")
            tool = str(beside) if beside.exists() else "named-compilezone"
            partial = target.with_name(target.name + ".partial")
            subprocess.run(compilezone_argv(tool, origin, source, partial), check=True,
                           capture_output=True, text=True)  # fmt: skip
            os.replace(partial, target)
        return ZoneEntry(origin, target, "raw")

    @classmethod
    def parse_log(cls, text: str) -> list[LoggedTransfer]:
        """Transfers that completed, in and out. An incoming transfer whose "Transfer
        status" was a failure ends with "Transfer completed" too, with what it received
        before it failed (an aborted AXFR: "8 messages, 3787 records ... (serial 1)"): not a
        transfer."""
        out: list[LoggedTransfer] = []
        status: dict[tuple[str, str], str] = {}  # (zone, primary) -> its last transfer status
        started: dict[tuple[str, str], int] = {}  # (zone, client) -> the IXFR's first serial
        signed_in: dict[tuple[str, int], bool] = {}  # (zone, serial) -> signed, incoming
        for line in text.splitlines():
            if "Transfer status: " in line and (found := _STATUS.match(line)):
                status[(found["zone"], found["peer"])] = found["status"]
                continue
            if "IXFR started (serial " in line and (found := _OUT_STARTED.search(line)):
                started[(found["zone"], found["peer"])] = int(found["from"])
                continue
            if "transferred serial " in line and (said := _TRANSFERRED.search(line)):
                signed_in[(said["zone"], int(said["serial"]))] = said["tsig"] is not None
                continue
            match = _IN.match(line)
            direction, xfr, first = "in", None, None
            if match:
                # A failed transfer ends with "Transfer completed" too (empty, or with what
                # arrived before it failed): its status line came first.
                if (
                    match["msgs"] == "0"
                    or status.pop((match["zone"], match["peer"]), "success") != "success"
                ):
                    continue
            else:
                match = _OUT.match(line)
                direction = "out"
                if not match:
                    continue
                xfr = "axfr" if match["xfr"] == "AXFR-style IXFR" else match["xfr"].lower()
                first = started.pop((match["zone"], match["peer"]), None) if xfr == "ixfr" else None
            key = (match["zone"], int(match["serial"]))
            signed = signed_in.pop(key, None) if direction == "in" else bool(match["key"])
            out.append(
                LoggedTransfer(
                    "bind",
                    direction,
                    zone_name(match["zone"]),
                    xfr,
                    int(match["serial"]),
                    float(match["secs"]),
                    int(match["msgs"]),
                    int(match["recs"]),
                    int(match["bytes"]),
                    match["at"],
                    match["peer"],
                    bind_timestamp(line),
                    signed,
                    first,
                )
            )
        return out

    @classmethod
    def peer_is(cls, peer: str | None, address: str) -> bool:
        return (peer or "").startswith(f"{address}#")

    @classmethod
    def publishes_zone_files(cls, ixfr: bool, signed: bool = False) -> bool:
        return signed

    def publish(self, version: NewVersion, reach: Reach) -> str:
        if self.setup.update_key is None:  # a signed zone of the operator's: by file
            return Server.publish(self, version, reach)
        return super().publish(version, reach)

    @classmethod
    def snippet_settings(cls, text: str) -> list[Setting]:
        return braced_statements(text)

    @classmethod
    def snippet_sections(cls, text: str) -> dict[str, str]:
        return {"options": indented(text, 4)}

    # Its catalog complaints are catz lines at warning or error severity, e.g. "warning:
    # catz: catz_addmodzone_taskaction: zone '...' will not be added because another
    # catalog zone already contains an entry with that zone" (a member named twice).
    catalog_wording = re.compile(r" (warning|error): catz: ")
    # parse_log's lines are all in the xfer-in and xfer-out categories.
    transfer_log_words = (" xfer-in: ", " xfer-out: ")

    # A member moved to another catalog (RFC 9432 §5.1). 9.18.49's "change of ownership"
    # line is not written at the default severity; what it writes is the member deleted
    # from the old catalog and added from the new one (the zone deleted and transferred
    # again: seen in tests/system/test_catalog.py), so the move is timed by the addition.
    coo_log = re.compile(r"catz: adding zone '(?P<zone>[^']+)' from catalog '(?P<new>[^']+)'")

    @classmethod
    def coo_problem(cls, version: str) -> str | None:
        """9.18 implements the coo property (its libdns logs the change of ownership)."""
        return cls.catalog_consumer_problem(version)

    @classmethod
    def catalog_consumer_problem(cls, version: str) -> str | None:
        """catalog-zones since 9.11, schema version 2 since 9.18 (the harness's catalogs are
        version 2)."""
        if parse_semver(version) < (9, 18, 0):
            return f"BIND {version} reads catalog schema version 1 only; 9.18 reads version 2"
        return None

    def check_config_argv(self) -> list[str]:
        return [self._tool("named-checkconf"), str(self.config)]

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

    def reconfig_argv(self) -> list[str]:
        return self.control("reconfig")

    def retransfer_argv(self, zone: str) -> list[str]:
        return self.control("retransfer", zone)

    def refresh_argv(self, zone: str) -> list[str]:
        return self.control("refresh", zone)

    def zone_status_argv(self, zone: str) -> list[str] | None:
        return self.control("zonestatus", zone)

    def disk_copy(self, zone: str) -> DiskCopy | None:
        return DiskCopy(self.zone_file(zone), "lines", tuple(self.control("sync", zone)))

    def notify_argv(self, zone: str) -> list[str] | None:
        return self.control("notify", zone)

    @classmethod
    def cold_zones_per_s(cls, options: Mapping[str, object]) -> float:
        """A cold start's SOA queries go through serial-query-rate (bench/README-transfers:
        20 zones a second by default)."""
        rate = options.get("serial-query-rate")
        return float(rate) if isinstance(rate, int) else float(DEFAULT_RATE)

    def pacing(self) -> tuple[Pacing, ...]:
        """A primary's NOTIFYs go through notify-rate's limiter, a secondary's refreshes
        through serial-query-rate's (20 a second: ticks of 0.5 s). Measured here (run
        fast4, bind->bind): a NOTIFY published 0.1 s after the last one left 0.5 s after
        it; and an `rndc reconfig` of a secondary (request-ixfr changed) passed something
        through its limiter: the next NOTIFY's transfer started 0.50-0.52 s after the
        reconfig, not at once."""
        if self.setup.role == "primary":
            key, after = "notify-rate", ("notify",)
        else:
            key, after = "serial-query-rate", ("query", "reconfig")
        rate = int(self.setup.options.get(key, DEFAULT_RATE))
        tick = rate_tick(rate)
        return (Pacing(after, tick, f"{key} {rate}: a tick every {tick:g} s"),)
