"""A cold start on inventory hosts, as a part of `RemoteCase` (remote/bench.py): the
secondaries start with every zone configured and none on disk, each polls all its zones
on its own host (its agent, xfr/poll_zones.py) and reads them back there for verification;
their served times are put on the controller's clock, and their logs read as the netns
backend reads them.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any

from harness import zonegen
from harness.measure.cold_start import add_references, check_copies, read_cold_start_log
from harness.measure.processes import CaseFailed
from harness.measure.protocol import ColdStartLog, Verification
from harness.plan.case import CasePlan
from harness.remote.fleet import RemoteFleet
from harness.servers import server_class
from harness.servers.binaries import ServerBinary
from harness.xfr import PullResult, XfrError
from harness.xfr.rrsum import ZoneSum


class ColdStarting:
    """The cold-start half of RemoteCase (its attributes, its clocks (Observing's) and its
    reading of a server's log are RemoteCase's)."""

    fleet: RemoteFleet
    plan: CasePlan
    pool: ThreadPoolExecutor
    running: dict[str, dict[str, Any]]
    binaries: dict[str, ServerBinary]
    generated: zonegen.GeneratedZones
    references: dict[str, ZoneSum]
    zones_seen: dict[str, dict[str, Any]]

    def wait_all_zones(
        self, hosts: list[str], zones: list[str], serial: int, deadline: float
    ) -> tuple[dict[str, dict[str, float]], dict[str, str]]:
        """Every secondary's zones polled on its own host, all hosts at once."""
        remaining = max(0.0, deadline - self.clock())

        def poll(name: str) -> dict[str, Any]:
            try:
                return self.fleet.channel(name).call(  # type: ignore[no-any-return]
                    "wait_zones", wait=remaining + 30, name=name, address=self.address(name),
                    zones=zones, serial=serial, timeout=remaining,
                    max_rate=float(self.plan.cold_start_poll),
                )  # fmt: skip
            except XfrError as exc:  # the secondary exited while its zones were polled
                raise CaseFailed(str(exc)) from None

        served: dict[str, dict[str, float]] = {}
        errors: dict[str, str] = {}
        for name, seen in zip(hosts, self.pool.map(poll, hosts), strict=True):
            self.zones_seen[name] = seen
            if seen["error"]:
                errors[name] = seen["error"]
            else:
                served[name] = {z: self.to_bench(name, at) for z, at in seen["served"].items()}
        return served, errors

    def zones_last_unserved(self, host: str) -> dict[str, float]:
        seen = self.zones_seen.get(host, {})
        return {z: self.to_bench(host, at) for z, at in seen.get("unserved", {}).items()}

    def cold_start_polling(self, host: str) -> dict[str, Any]:
        polling = self.zones_seen.get(host, {}).get("polling")
        return {"max_rate": self.plan.cold_start_poll} | polling if polling else {}

    def cold_start_log(self, host: str) -> ColdStartLog:
        """The secondary's log, read as the netns backend reads it; its stamps and its start
        are both its own host's clock."""
        started = self.running.get(host, {}).get("started_at")
        return read_cold_start_log(server_class(self.binaries[host].kind), self._log(host), started)

    def verify_zones(self, host: str, zones: list[str], serial: int) -> dict[str, Verification]:
        """The secondary's copies read back on its host, against the zone files' sums."""
        add_references(self.references, self.generated, zones)
        copies = self.fleet.channel(host).call(
            "verify_zones", wait=self.plan.timeout + 60, zones=zones, timeout=self.plan.timeout
        )
        pulled = {zone: PullResult(**copy) for zone, copy in copies.items()}
        return check_copies(self.references, pulled, zones, serial)
