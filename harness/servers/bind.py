"""BIND 9 (named): everything the harness knows about it.

Facts that shape transfers: transfers-in 10, transfers-per-ns 2, transfers-out 10,
serial-query-rate 20/s (paces a cold start), each inbound transfer on its own TCP
connection; XoT both ways since 9.18 with the "dot" ALPN.

Failures (FAILURES): the attempt is "transfer of '<zone>' from <addr>: failed to connect:
<reason>" (its "Transfer status: <reason>" and "Transfer completed: 0 messages" lines follow),
and for the SOA query before it "refresh: failure trying primary ...: <reason>" or "refresh:
retry limit for primary ... exceeded" (a query that timed out). BIND tries the transfer over
TCP even after the SOA query of a zone with no data failed, so one refresh can count two
failed attempts: a UDP query and a TCP connect. 9.18 logs its retries only at debug level,
so its `retry` count is 0 because the log is silent, not because nothing was retried.
"""

from __future__ import annotations

import re
from datetime import tzinfo
from pathlib import Path
from typing import ClassVar

from harness.servers.base import (
    Capabilities,
    FallbackWording,
    Footprint,
    LoggedTransfer,
    PublishesByUpdate,
    Support,
    parse_semver,
    zone_name,
)
from harness.servers.failures import FailureCategory, FailureWording, local_epoch

_IN = re.compile(
    r"^(?P<at>\S+) xfer-in: \w+: transfer of '(?P<zone>[^/]+)/IN' from (?P<peer>\S+): "
    r"Transfer completed: (?P<msgs>\d+) messages, (?P<recs>\d+) records, (?P<bytes>\d+) bytes, "
    r"(?P<secs>[\d.]+) secs .*\(serial (?P<serial>\d+)\)"
)
# "AXFR-style IXFR": a full zone sent in answer to an IXFR request (an AXFR in effect).
_OUT = re.compile(
    r"^(?P<at>\S+) xfer-out: \w+: client \S+ (?P<peer>\S+) \([^)]*\): transfer of "
    r"'(?P<zone>[^/]+)/IN': (?P<xfr>AXFR-style IXFR|AXFR|IXFR) ended: (?P<msgs>\d+) messages, "
    r"(?P<recs>\d+) records, (?P<bytes>\d+) bytes, (?P<secs>[\d.]+) secs .*\(serial "
    r"(?P<serial>\d+)\)"
)
_OUT_STARTED = re.compile(
    r"xfer-out: \w+: client \S+ (?P<peer>\S+) \([^)]*\): transfer of '(?P<zone>[^/]+)/IN': "
    r"IXFR started \(serial (?P<from>\d+) -> \d+\)"
)
# Every transfer ends with "Transfer completed", a failed one too: its status line says.
_STATUS = re.compile(
    r"transfer of '(?P<zone>[^/]+)/IN' from (?P<peer>\S+): Transfer status: (?P<status>.+)$"
)
_CLIENT = r"xfer-out: \w+: client \S+ (?P<peer>\S+) \([^)]*\): transfer of '(?P<zone>[^/]+)/IN': "
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


def bind_timestamp(line: str, tz: tzinfo | None = None) -> float | None:
    match = _BIND_STAMP.match(line)
    return local_epoch(match[1], "%Y-%m-%dT%H:%M:%S.%f", tz) if match else None


BIND_ATTEMPTS = (
    # xfrin.c xfrin_fail(): "<what>: <isc_result_totext>" at error severity, once per failed
    # transfer; <what> is "failed to connect" in every capture, but any stage may fail.
    re.compile(r"xfer-in: error: transfer of '[^']+' from \S+: [^:]+: (?P<reason>.+)$"),
    # The SOA query before a transfer (UDP; an ICMP port unreachable reads "refused").
    re.compile(r"refresh: failure trying primary \S+ \(source \S+\): (?P<reason>.+)$"),
)
BIND_REASONS: dict[str, FailureCategory] = {
    "address not available": "address_not_available",
    "connection refused": "refused",
    "timed out": "timed_out",
}
BIND_FIXED: tuple[tuple[re.Pattern[str], FailureCategory], ...] = (
    # The SOA query went unanswered through all its UDP retries: a timeout.
    (re.compile(r"refresh: retry limit for primary \S+ exceeded \(source \S+\)$"), "timed_out"),
    # No connect at all: an earlier timeout put the primary in the unreachable cache.
    (
        re.compile(
            r"got_transfer_quota: skipping zone transfer as primary \S+ \(source \S+\) "
            r"is unreachable \(cached\)$"
        ),
        "other_failure",
    ),
)
BIND_FOLLOW_UPS = (
    # "Transfer status: success" is the only status that is not a failure.
    re.compile(r"transfer of '[^']+' from \S+: Transfer status: (?!success$).+$"),
    # A failed transfer still ends with "Transfer completed", empty.
    re.compile(r"transfer of '[^']+' from \S+: Transfer completed: 0 messages, "),
)

FAILURES = FailureWording(
    BIND_ATTEMPTS, BIND_REASONS, BIND_FIXED, BIND_FOLLOW_UPS, bind_timestamp, 0.001
)


class Bind(PublishesByUpdate):
    """A primary publishes by signed update: `rndc reload` reads the whole file (about a
    minute at 14 M records)."""

    kind = "bind"
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
    fallback_wording = FALLBACKS
    # Secondary RSS: 250 MiB at 500 k records (tld), 627 MiB for 30 k hosting zones.
    footprint = Footprint(base_mib=32, record_bytes=500, zone_bytes=14_000)

    @classmethod
    def capabilities(cls, version: str) -> Capabilities:
        # XoT (both directions, with the "dot" ALPN) came in 9.17.x; 9.18 is the first stable.
        xot = Support.since(
            parse_semver(version), (9, 18, 0), f"BIND {version} has no XoT (added in 9.18)"
        )
        return Capabilities(xot_primary=xot, xot_secondary=xot, ixfr_primary=Support(True))

    @classmethod
    def parse_log(cls, text: str) -> list[LoggedTransfer]:
        out: list[LoggedTransfer] = []
        status: dict[tuple[str, str], str] = {}  # (zone, primary) -> its last transfer status
        started: dict[tuple[str, str], int] = {}  # (zone, client) -> the IXFR's first serial
        for line in text.splitlines():
            if "Transfer status: " in line and (found := _STATUS.search(line)):
                status[(found["zone"], found["peer"])] = found["status"]
                continue
            if "IXFR started (serial " in line and (found := _OUT_STARTED.search(line)):
                started[(found["zone"], found["peer"])] = int(found["from"])
                continue
            match = _IN.match(line)
            direction, xfr, first = "in", None, None
            if match:
                # A failed transfer ends with "Transfer completed" too (empty, or with what
                # arrived before it failed): its status line came first.
                if (
                    match["msgs"] == "0"
                    or status.get((match["zone"], match["peer"]), "success") != "success"
                ):
                    continue
            else:
                match = _OUT.match(line)
                direction = "out"
                if not match:
                    continue
                xfr = "axfr" if match["xfr"] == "AXFR-style IXFR" else match["xfr"].lower()
                first = started.pop((match["zone"], match["peer"]), None) if xfr == "ixfr" else None
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
                    first,
                )
            )
        return out

    @classmethod
    def peer_is(cls, peer: str | None, address: str) -> bool:
        return (peer or "").startswith(f"{address}#")

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
