"""What the inventory backend observes around a repeat's transfers, as a part of
`RemoteCase` (remote/bench.py): the hosts' samples relayed into the run's samples.jsonl,
the primary's wire (NOTIFY, SOA queries, connects) read by its agent and put on the
controller's clock, the real path's counts from the primary's connections
(remote/pathwatch.py), and the counters of the linkem each secondary host runs for its
site's link (remote/hostlink.py), as a netns record's `link` (measure/watch.link_delta).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from harness.link import linkem
from harness.measure.watch import link_delta, wire_facts
from harness.plan.case import CasePlan, HostPlan
from harness.remote.fleet import RemoteFleet
from harness.remote.hostlink import host_directions
from harness.servers.binaries import ServerBinary
from harness.xfr.wire_watch import WireEvent

# linkem rewrites its stats file this often: after the transfers, a wait of a few of its
# intervals makes the snapshot include their last packets.
FRESH_STATS_S = 3 * linkem.FAST_STATS_INTERVAL_MS / 1000
# A host's time put on the controller's clock and back is off by float round-off (~1e-6 s
# at unix times): packets read in one batch with the NOTIFY share its time exactly, and
# would fall out of a window that starts at the NOTIFY.
ROUND_OFF_S = 1e-4


def wire_window(t0: float, served: float, to_host: Callable[[float], float]) -> tuple[float, float]:
    """The primary's wire events of a transfer, [t0, served] on the controller's clock, as
    the primary's host times to ask its agent for, widened by the conversions' round-off."""
    return to_host(t0) - ROUND_OFF_S, to_host(served) + ROUND_OFF_S


def on_bench(
    events: list[dict[str, Any]], t0: float, to_bench: Callable[[float], float]
) -> list[WireEvent]:
    """The agent's wire events on the controller's clock, none before t0 (the NOTIFY
    they were read with)."""
    return [
        WireEvent(max(t0, to_bench(e["at"])), e["kind"], e["peer"], e["serial"], e["port"])
        for e in events
    ]


class Observing:
    """The observation half of RemoteCase (its attributes and clocks are RemoteCase's)."""

    fleet: RemoteFleet
    plan: CasePlan
    sampler: Any
    pool: ThreadPoolExecutor
    running: dict[str, dict[str, Any]]
    binaries: dict[str, ServerBinary]
    paths: dict[str, dict[str, Any]]
    poll_gaps: dict[str, float]
    _quiet_from: float
    _observing: tuple[float, float] | None
    _link_before: dict[str, dict[str, Any]]
    _link_after: dict[str, dict[str, Any]]

    def clock(self) -> float:
        return time.monotonic()

    def to_bench(self, host: str, at: float) -> float:
        """A host's unix time on the controller's monotonic clock (its measured offset)."""
        offset = self.fleet.clock(host).offset_s
        return at - offset - (time.time() - time.monotonic())

    def to_host(self, host: str, at: float) -> float:
        offset = self.fleet.clock(host).offset_s
        return at + offset + (time.time() - time.monotonic())

    def address(self, name: str) -> str:
        return self.fleet.inventory.host(name).address

    def _host(self, name: str) -> HostPlan:
        return next(h for h in self.plan.hosts if h.name == name)

    # --- observation -----------------------------------------------------------------------

    def _relay(self, op: str, **args: Any) -> None:
        """Sample lines from every host's agent into the run's samples.jsonl."""
        names = list(self.fleet.channels)
        for name, lines in zip(
            names,
            self.pool.map(lambda n: self.fleet.channel(n).call(op, **args), names),
            strict=True,
        ):
            self._record(name, lines)

    def _record(self, host: str, lines: list[dict[str, Any]]) -> None:
        """A host's sample lines, their times put on the controller's clock (not passed to
        the run's exporter when the host's agent serves them to Prometheus itself)."""
        if self.sampler is None or not lines:
            return
        offset = self.fleet.clock(host).offset_s
        shifted = [line | {"t": round(line["t"] - offset, 6)} for line in lines]
        self.sampler.record(shifted, passed_on=host not in self.fleet.metrics)

    def mark(self, event: str, repeat: int) -> None:
        if event == "transfer-end":
            self._quiet_from = self.clock()
        if self.sampler is not None:
            self._relay("sample_mark", event=event, repeat=repeat)

    def between_repeats(self) -> None:
        wait = self._quiet_from + self.plan.settle - self.clock()
        if wait > 0:
            time.sleep(wait)
        list(self.pool.map(lambda n: self.fleet.channel(n).call("flush_metrics"),
                           list(self.fleet.channels)))  # fmt: skip

    def begin_observation(self) -> None:
        """The primary's host watches its connections to the secondaries (the real path's
        retransmits, see remote/pathwatch.py)."""
        self._observing = (self.clock(), 0.0)
        self.paths = {}
        peers = [self.address(h.name) for h in self.plan.secondaries]
        port = self.plan.transport.port
        self.fleet.channel(self.plan.primary.name).call("paths_start", peers=peers, port=port)
        self._link_before = self._link_stats()

    def _linked(self) -> dict[str, dict[str, Any]]:
        """Secondaries that emulate their site's link: {host: {direction name: spec}}."""
        out = {}
        for host in self.plan.secondaries:
            found = host_directions(host.name, host.link)
            if found:
                out[host.name] = {name: spec for name, _, spec in found}
        return out

    def _link_stats(self) -> dict[str, dict[str, Any]]:
        """Each linked host's linkem counters now, per direction."""
        names = list(self._linked())
        stats = self.pool.map(lambda n: self.fleet.channel(n).call("link_stats"), names)
        return {name: s.get("directions", {}) for name, s in zip(names, stats, strict=True)}

    def finish_observation(self) -> None:
        if self._linked():
            time.sleep(FRESH_STATS_S)
        self._link_after = self._link_stats()
        counts = self.fleet.channel(self.plan.primary.name).call("paths_stop")
        by_address = {self.address(h.name): h.name for h in self.plan.secondaries}
        self.paths = {by_address[a]: c for a, c in counts.items() if a in by_address}

    def observation(self, host: str, t0: float, served: float) -> dict[str, Any]:
        primary = self.plan.primary.name
        since, until = wire_window(t0, served, lambda at: self.to_host(primary, at))
        events = self.fleet.channel(primary).call(
            "wire_events", peer=self.address(host), since=since, until=until
        )
        seen = on_bench(events, t0, lambda at: self.to_bench(primary, at))
        facts: dict[str, Any] = {"wire": wire_facts(seen, t0)}
        if host in self.paths:
            facts["path"] = self.paths[host]  # the repeat's, seen by the primary's TCP
        if host in self.poll_gaps:
            facts["poll_max_gap_s"] = round(self.poll_gaps[host], 6)
        specs = self._linked().get(host)
        after = self._link_after.get(host)
        if specs and after:
            before = self._link_before.get(host, {})
            if delta := link_delta(before, after, specs):
                facts["link"] = delta
        return facts

    def connect_ports(self, host: str, since: float) -> list[int]:
        """The primary's ports `host` connected to from `since` (the bench's clock) until
        now, as the primary's host saw its SYNs: 53 for TCP, 853 for XoT."""
        primary = self.plan.primary.name
        events = self.fleet.channel(primary).call(
            "wire_events", peer=self.address(host), since=self.to_host(primary, since)
        )
        return [e["to_port"] for e in events if e["kind"] == "connect" and e.get("to_port")]

    def link_counters(self) -> dict[str, Any]:
        """Every linked host's linkem counters now, by direction ("<host> forward")."""
        return {name: c for per in self._link_stats().values() for name, c in per.items()}

    def _watch(self) -> None:
        """Point each host's sampler at its server, under the selected case (all at once)."""
        if self.sampler is None:
            return

        def watch(name: str) -> list[dict[str, Any]]:
            host = self._host(name)
            target = {"name": name, "role": host.role, "server": self.binaries[name].kind,
                      "host": name, "site": host.site if self.plan.is_fleet else ""}  # fmt: skip
            return self.fleet.channel(name).call(  # type: ignore[no-any-return]
                "sample_watch", case=self.plan.name, targets=[target],
                interval=self.sampler.interval,
            )  # fmt: skip

        names = list(self.running)
        for name, lines in zip(names, self.pool.map(watch, names), strict=True):
            self._record(name, lines)
