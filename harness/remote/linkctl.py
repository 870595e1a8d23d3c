"""linkem's runtime control on the hosts of an inventory (faults, measure/live_faults.py):
each secondary host runs a linkem of its own for its site's link (remote/hostlink.py), its
directions named "<host> forward" and "<host> reverse" as on netns, and its agent relays
commands to its control socket (op_link_control). Here the one control the fault flows
know (`harness.link.linkem.LinkControl`) is spread over them: a command goes to the host
whose direction it names, stats are every host's merged, and linkem's times (its host's
unix clock) are put on this machine's unix clock, so that the flows read them as they
read a local linkem's.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from harness.link.linkem import LinkemControlError, checked
from harness.remote.channel import AgentChannel, AgentError
from harness.xfr import XfrError

UNIX_KEYS = ("at_unix", "updated_at_unix")  # linkem's times, in answers, stats and events
CALL_WAIT = 10.0  # seconds: linkem answers once its worker took the command


def owner(direction: str, hosts: Collection[str]) -> str:
    """The host whose linkem has `direction` ("ns3 forward" -> "ns3") (pure)."""
    host = direction.rsplit(" ", 1)[0]
    if host not in hosts:
        linked = ", ".join(sorted(hosts)) or "none"
        raise LinkemControlError(f"no host's linkem has the direction {direction!r} "
                                 f"(hosts with a linkem: {linked})")  # fmt: skip
    return host


def on_wall(found: dict[str, Any], to_wall: Callable[[float], float]) -> dict[str, Any]:
    """An answer or a stats snapshot of a host's linkem with its times, and its events',
    on this machine's unix clock (pure)."""
    out = {k: to_wall(float(v)) if k in UNIX_KEYS and v is not None else v
           for k, v in found.items()}  # fmt: skip
    if isinstance(found.get("events"), list):
        out["events"] = [on_wall(event, to_wall) for event in found["events"]]
    return out


def merged(per_host: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The hosts' stats snapshots as one linkem's: their directions (each named after its
    host) together, their events in time order, the oldest snapshot's time (pure)."""
    directions: dict[str, Any] = {}
    events: list[dict[str, Any]] = []
    for stats in per_host.values():
        directions |= stats.get("directions", {})
        events += stats.get("events", [])
    times = [s["updated_at_unix"] for s in per_host.values() if "updated_at_unix" in s]
    out: dict[str, Any] = {
        "directions": directions,
        "events": sorted(events, key=lambda e: float(e.get("at_unix", 0.0))),
        "events_dropped": sum(int(s.get("events_dropped", 0)) for s in per_host.values()),
    }
    return out | ({"updated_at_unix": min(times)} if times else {})


class HostsLinkControl:
    """linkem's control over each linked host's agent (`hosts`: name -> its channel and
    the conversion of its unix times to this machine's)."""

    def __init__(self, hosts: dict[str, tuple[AgentChannel, Callable[[float], float]]]) -> None:
        self.hosts = hosts

    def _ask(self, host: str, command: dict[str, Any]) -> dict[str, Any]:
        channel, to_wall = self.hosts[host]
        try:
            answer = channel.call("link_control", command=command, wait=CALL_WAIT)
        except (AgentError, XfrError) as exc:
            raise LinkemControlError(f"linkem on {host}: {exc}") from None
        return on_wall(answer, to_wall)

    def send(self, command: dict[str, Any]) -> dict[str, Any]:
        """The answer of the linkem whose direction `command` names; raises
        LinkemControlError when it refused it or could not be reached."""
        host = owner(str(command.get("direction", "")), self.hosts)
        return checked(command, self._ask(host, command))

    def stats(self) -> dict[str, Any]:
        """Every linked host's counters and events now, as one linkem's."""
        names = list(self.hosts)
        with ThreadPoolExecutor(max_workers=max(1, len(names))) as pool:
            found = list(pool.map(lambda h: self._ask(h, {"cmd": "stats"}), names))
        return merged(dict(zip(names, found, strict=True)))
