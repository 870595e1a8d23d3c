"""BIND 9 (named): everything the harness knows about it.

Facts that shape transfers (DESIGN.md): transfers-in 10, transfers-per-ns 2, transfers-out 10,
serial-query-rate 20/s (paces a cold start), each inbound transfer on its own TCP
connection; XoT both ways since 9.18 with the "dot" ALPN.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import ClassVar

from harness.servers.base import (
    Capabilities,
    FailurePattern,
    LoggedTransfer,
    Server,
    Support,
    parse_semver,
    zone_name,
)

_IN = re.compile(
    r"^(?P<at>\S+) xfer-in: \w+: transfer of '(?P<zone>[^/]+)/IN' from (?P<peer>\S+): "
    r"Transfer completed: (?P<msgs>\d+) messages, (?P<recs>\d+) records, (?P<bytes>\d+) bytes, "
    r"(?P<secs>[\d.]+) secs .*\(serial (?P<serial>\d+)\)"
)
_OUT = re.compile(
    r"^(?P<at>\S+) xfer-out: \w+: client \S+ (?P<peer>\S+) \([^)]*\): transfer of "
    r"'(?P<zone>[^/]+)/IN': (?P<xfr>AXFR|IXFR) ended: (?P<msgs>\d+) messages, (?P<recs>\d+) "
    r"records, (?P<bytes>\d+) bytes, (?P<secs>[\d.]+) secs .*\(serial (?P<serial>\d+)\)"
)


class Bind(Server):
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
    }
    failure_patterns = (
        FailurePattern("address_not_available", re.compile(r"address not available")),
        FailurePattern("refused", re.compile(r"connection refused")),
        FailurePattern("timed_out", re.compile(r"timed out")),
    )

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
        for line in text.splitlines():
            match = _IN.match(line)
            direction, xfr = "in", None
            if not match:
                match = _OUT.match(line)
                direction = "out"
                if not match:
                    continue
                xfr = match["xfr"].lower()
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

    def retransfer_argv(self, zone: str) -> list[str]:
        return self.control("retransfer", zone)

    def refresh_argv(self, zone: str) -> list[str]:
        return self.control("refresh", zone)
