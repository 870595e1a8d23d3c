"""Knot DNS (knotd): everything the harness knows about it.

Facts that shape transfers (DESIGN.md): tcp-io-timeout 500 ms also covers outgoing transfers;
refresh events run on the background workers; remote-pool-limit 0 (no pooling of outgoing
connections); XoT from 3.4. Knot 3.2 logs seconds and bytes of a transfer but no record count,
and names the serial only on the 'started' line of an outgoing transfer.
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

_FINISHED = re.compile(
    r"^(?P<at>\S+) \w+: \[(?P<zone>[^\]]+)\] (?P<xfr>AXFR|IXFR), (?P<dir>incoming|outgoing), "
    r"remote (?P<peer>\S+?),? finished, (?P<secs>[\d.]+) seconds, (?P<msgs>\d+) messages, "
    r"(?P<bytes>\d+) bytes"
)
_STARTED = re.compile(
    r"\[(?P<zone>[^\]]+)\] (?P<xfr>AXFR|IXFR), (?P<dir>\w+), remote (?P<peer>\S+?),"
)
_SERIAL = re.compile(r"serial (?:\d+ -> )?(?P<serial>\d+)")


class Knot(Server):
    kind = "knot"
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
    }
    failure_patterns = (
        FailurePattern("address_not_available", re.compile(r"address not available")),
        FailurePattern("refused", re.compile(r"connection refused")),
        FailurePattern("timed_out", re.compile(r"timed out")),
    )

    @classmethod
    def capabilities(cls, version: str) -> Capabilities:
        xot = Support.since(
            parse_semver(version), (3, 4, 0), f"Knot {version} has no XoT (added in 3.4)"
        )
        return Capabilities(xot_primary=xot, xot_secondary=xot, ixfr_primary=Support(True))

    @classmethod
    def parse_log(cls, text: str) -> list[LoggedTransfer]:
        out: list[LoggedTransfer] = []
        started_serial: dict[tuple[str, str, str], int] = {}
        for line in text.splitlines():
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
            out.append(
                LoggedTransfer(
                    "knot",
                    "in" if match["dir"] == "incoming" else "out",
                    zone_name(match["zone"]),
                    match["xfr"].lower(),
                    started_serial.pop(key, None),
                    float(match["secs"]),
                    int(match["msgs"]),
                    None,
                    int(match["bytes"]),
                    match["at"],
                    match["peer"],
                )
            )
        return out

    @classmethod
    def peer_is(cls, peer: str | None, address: str) -> bool:
        return (peer or "").startswith(f"{address}@")

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
