"""What the hosts of an inventory observe of their own servers and links, relayed to the
engine (harness/place/ `Places.sampling`, `path_counts`, the link): each host's agent
samples the servers it spawned (their cgroups and /proc are its host's), the primary's agent
counts its connections' retransmits (remote/pathwatch.py), and each secondary host's
linkem counts the packets of its site's link (remote/hostlink.py). Their times are put on
the controller's clock with the channel's measured offset.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, NamedTuple

from harness.observe.sampler import Target
from harness.observe.tcp_states import PortRange
from harness.remote.channel import AgentChannel, ClockReading
from harness.remote.hostlink import host_directions
from harness.spec import DirectionSpec, LinkSpec
from harness.xfr.follow import SerialChange


@dataclass(frozen=True)
class HostClock:
    """A host's unix time against the controller's monotonic clock, by its latest reading."""

    reading: Callable[[], ClockReading]

    def to_bench(self, at: float) -> float:
        return at - self.reading().offset_s - (time.time() - time.monotonic())

    def to_host(self, at: float) -> float:
        return at + self.reading().offset_s + (time.time() - time.monotonic())

    def to_wall(self, at: float) -> float:
        """A host's unix time as the controller's unix time."""
        return at - self.reading().offset_s

    def from_wall(self, at: float) -> float:
        """The controller's unix time as this host's."""
        return at + self.reading().offset_s


class Relayed(NamedTuple):
    """A host's agent, as the relays ask it."""

    name: str
    channel: AgentChannel
    clock: Callable[[], ClockReading]


def on_controller(lines: list[dict[str, Any]], offset_s: float) -> list[dict[str, Any]]:
    """A host's sample lines with their unix times on the controller's clock (pure)."""
    return [line | {"t": round(line["t"] - offset_s, 6)} for line in lines]


def sample_target(target: Target) -> dict[str, Any]:
    """A server to sample, as its host's agent takes it: by the pid it spawned."""
    return {"pid": target.pid, "role": target.role, "server": target.server,
            "host": target.host, "site": target.site}  # fmt: skip


class RelayedSampler:
    """The run's sampler for servers on inventory hosts: each host's agent samples its own
    (op_sample_watch), its lines written into the run's samples.jsonl here (and passed on
    to the run's exporter unless the host serves them to Prometheus itself)."""

    def __init__(
        self, sampler: Any, hosts: Iterable[Relayed], serving: Collection[str] = ()
    ) -> None:
        self.sampler = sampler  # the run's (observe/sampler.py), writing samples.jsonl
        self.hosts = list(hosts)
        self.serving = serving  # hosts whose agent serves its samples to Prometheus

    def _each(self, op: str, args: Callable[[Relayed], dict[str, Any]]) -> None:
        def call(host: Relayed) -> list[dict[str, Any]]:
            return host.channel.call(op, wait=30, **args(host))  # type: ignore[no-any-return]

        with ThreadPoolExecutor(max_workers=max(1, len(self.hosts))) as pool:
            answers = list(pool.map(call, self.hosts))
        for host, lines in zip(self.hosts, answers, strict=True):
            if lines:
                shifted = on_controller(lines, host.clock().offset_s)
                self.sampler.record(shifted, passed_on=host.name not in self.serving)

    def watch(
        self,
        case: str,
        targets: list[Target],
        link_counters: Callable[[], dict[str, Any]] | None,
        ranges: dict[str, PortRange] | None = None,
    ) -> None:
        """Every host samples its servers among `targets` from now on (none: it stops)."""
        interval = self.sampler.interval
        chosen = {h.name: [sample_target(t) for t in targets if t.host == h.name]
                  for h in self.hosts}  # fmt: skip

        def args(host: Relayed) -> dict[str, Any]:
            return {"case": case, "targets": chosen[host.name], "interval": interval}

        self._each("sample_watch", args)

    def mark(self, event: str, repeat: int) -> None:
        self._each("sample_mark", lambda h: {"event": event, "repeat": repeat})

    def note(self, case: str, lines: list[dict[str, Any]]) -> None:
        self.sampler.note(case, lines)


class HostDirection(NamedTuple):
    """A direction of a site's link a secondary host emulates (as link/'s directions)."""

    name: str  # "<host> forward", "<host> reverse"
    endpoint: str  # the host
    spec: DirectionSpec


def directions_of(links: dict[str, LinkSpec], every: bool = False) -> list[HostDirection]:
    """The impaired directions of each secondary host's link (`every`: all, for faults)
    (pure)."""
    return [
        HostDirection(name, host, spec)
        for host, link in links.items()
        for name, _, spec in host_directions(host, link, every)
    ]


def stamped_directions(stats: dict[str, Any], offset_s: float) -> dict[str, Any]:
    """A host's linkem snapshot per direction, each with the snapshot's time on the
    controller's clock (`updated_at_unix`, as the netns testbed's counters carry it) (pure).
    Without it the engine's wait for counters written after the transfers ended
    (measure/watch.py `_fresh_counters`) ran its whole second at every repeat."""
    at = stats.get("updated_at_unix")
    stamp = {} if not isinstance(at, int | float) else {"updated_at_unix": at - offset_s}
    return {
        name: dict(counters) | stamp
        for name, counters in stats.get("directions", {}).items()
        if isinstance(counters, dict)
    }


def link_counters(hosts: Iterable[Relayed]) -> dict[str, Any]:
    """Each linked host's linkem counters now, by direction name."""
    chosen = list(hosts)
    with ThreadPoolExecutor(max_workers=max(1, len(chosen))) as pool:
        stats = list(pool.map(lambda h: h.channel.call("link_stats", wait=10), chosen))
    return {
        name: counters
        for host, s in zip(chosen, stats, strict=True)
        for name, counters in stamped_directions(s, host.clock().offset_s).items()
    }


class AgentFollower:
    """A change stream's serials followed on the hosts: each host's agent runs a poller
    over its own servers (xfr/follow.py `SerialFollower`, op_follow_start), its changes put
    on the controller's clock here; `SerialFollower`'s methods over all of them."""

    def __init__(
        self,
        hosts: dict[str, tuple[Relayed, dict[str, str], HostClock]],
        zone: str,
        interval: float,
    ) -> None:
        self.hosts = hosts  # host -> (its agent, {name: address} followed there, its clock)
        self.zone = zone
        self.interval = interval
        self._queries: dict[str, dict[str, int]] = {}
        self._pool = ThreadPoolExecutor(max_workers=max(1, len(hosts)))

    def _each(self, op: str, wait: float = 10.0, **args: Any) -> dict[str, Any]:
        def call(item: tuple[str, tuple[Relayed, dict[str, str], HostClock]]) -> Any:
            name, (agent, targets, _) = item
            extra = {"targets": targets, "zone": self.zone, "interval": self.interval}
            return agent.channel.call(op, wait=wait, **(extra if op == "follow_start" else args))

        items = list(self.hosts.items())
        return dict(zip(self.hosts, self._pool.map(call, items), strict=True))

    def __enter__(self) -> AgentFollower:
        self._each("follow_start")
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            self._each("follow_stop")
        finally:
            self._pool.shutdown(wait=False)

    def expect(self, serial: int) -> None:
        self._each("follow_expect", serial=serial)

    def take(self, timeout: float) -> list[SerialChange]:
        """What every host saw since the last call: asked without waiting first, then, when
        none saw anything, waiting up to `timeout` on each."""
        changes = self._take(0.0)
        return changes or self._take(timeout)

    def _take(self, timeout: float) -> list[SerialChange]:
        out = []
        for host, answer in self._each("follow_take", wait=timeout + 10, timeout=timeout).items():
            to_bench = self.hosts[host][2].to_bench
            self._queries[host] = answer["queries"]
            out += [SerialChange(name, serial, to_bench(at), None if before is None
                                 else to_bench(before))
                    for name, serial, at, before in answer["changes"]]  # fmt: skip
        return sorted(out, key=lambda change: change.at)

    def queries(self) -> dict[str, int]:
        return {name: n for per in self._queries.values() for name, n in per.items()}
