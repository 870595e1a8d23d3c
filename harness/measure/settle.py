"""When the next slot may start: settled by evidence, not by a fixed pause.

A slot's trigger waits until the slot before it has left nothing behind that could bias it,
each condition read off the machine (measure/live.py looks; this module decides, pure):

- the servers' own rate limiters are idle again: each dialect says how long after its last
  NOTIFY, SOA query or reload a limiter may still hold the next one (Server.pacing; BIND
  at its default 20 a second works in 0.5 s ticks), counted from that event as the
  primary's wire or the polls saw it;
- the last transfer's connections are closed or in TIME_WAIT (sock_diag in each server's
  namespace: no socket in any other state but LISTEN);
- the link holds no packet (linkem's `queued_now` in a stats snapshot taken after the
  connections closed; netem's backlog);
- the servers are idle: their cgroups used less than IDLE_CPU of a core between two looks.

The scenario's `settle` bounds the wait, counted from the last transfer's end; a slot that
reached it starts anyway, and its record says what it was still waiting for.
`settle_fixed` waits all of it (the protocol before evidence, kept for comparisons).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

IDLE_CPU = 0.05  # share of a core below which a server counts as idle between two looks
MIN_CPU_WINDOW_S = 0.01  # looks closer than this say nothing about CPU use
LOOK_EVERY_S = 0.005  # the pause between two looks while something is still unsettled
PACING_MARGIN_S = 0.01  # a limiter's tick is a timer: allow it its own lateness


@dataclass(frozen=True)
class Look:
    """One look at the testbed, on the bench's monotonic clock.

    `ready_at`: when every server's rate limiter is idle again after the servers' own
    events (the latest of each limiter's last NOTIFY, query or reload plus its pacing),
    with what sets it (`pacing`, and the event, `paced_by`); `reconfig_ready_at`: the same
    after the harness's reconfigurations (`reconfig_pacing`): only what it adds beyond the
    servers' own is the switch's cost, since their own pacing would hold the slot until
    `ready_at` without any switch; `open_connections`: TCP
    sockets in the servers' namespaces in a state other than LISTEN, TIME_WAIT or CLOSE
    (None: could not be read); `link_queued`: packets the link emulator holds, from a
    snapshot taken at `link_at` (None: no emulator, or no snapshot); `cpu_s`: each server's
    cumulative CPU seconds (hosts whose cgroup cannot be read are left out)."""

    at: float
    ready_at: float = 0.0
    pacing: str = ""
    paced_by: str = ""  # the server's own event that sets ready_at
    reconfig_ready_at: float = 0.0
    reconfig_pacing: str = ""
    open_connections: int | None = None
    link_queued: int | None = None
    link_at: float | None = None
    cpu_s: dict[str, float] = field(default_factory=dict)


def busy_servers(before: Look, after: Look, idle: float = IDLE_CPU) -> dict[str, float]:
    """The servers that used `idle` of a core or more between two looks, with their share;
    {} when the looks are too close to tell."""
    window = after.at - before.at
    if window < MIN_CPU_WINDOW_S:
        return {}
    out = {}
    for host, cpu in after.cpu_s.items():
        if host in before.cpu_s:
            share = max(0.0, cpu - before.cpu_s[host]) / window
            if share >= idle:
                out[host] = round(share, 3)
    return out


def waiting_for(before: Look | None, look: Look, closed_at: float | None) -> list[str]:
    """What the next trigger must still wait for, given this look and an earlier one to
    judge the CPU by (`before`: None for none yet) and when the connections were first seen
    closed; [] when settled."""
    waits = []
    if look.at < look.ready_at:
        waits.append(f"pacing ({look.pacing})")
    elif look.at < look.reconfig_ready_at:
        # A limiter held past the servers' own pacing by the harness's reconfiguration.
        waits.append(f"reconfig ({look.reconfig_pacing})")
    if look.open_connections:
        waits.append(f"connections ({look.open_connections} open)")
    if look.link_queued:
        waits.append(f"link ({look.link_queued} packets queued)")
    elif look.link_queued == 0 and closed_at is not None and (look.link_at or 0) < closed_at:
        waits.append("link (no snapshot since the connections closed)")
    if before is None:
        waits.append("cpu (one look)")
    else:
        busy = busy_servers(before, look)
        if busy:
            waits.append("cpu (" + ", ".join(f"{h} {s:.0%}" for h, s in busy.items()) + ")")
        elif look.at - before.at < MIN_CPU_WINDOW_S:
            waits.append("cpu (looks too close)")
    return waits


@dataclass
class Settled:
    """How one slot's wait ended: `waited_s` from when it began to wait, `held_by` how
    long each kind of condition kept it waiting (its name: pacing, connections, link,
    cpu), `reached_max` when the scenario's `settle` cut it short, with what was left."""

    waited_s: float
    looks: int
    held_by: dict[str, float]
    reached_max: bool = False
    left: list[str] = field(default_factory=list)
    fixed: bool = False

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "waited_s": round(self.waited_s, 4),
            "looks": self.looks,
            "held_by": {k: round(v, 4) for k, v in self.held_by.items()},
        }
        if self.fixed:
            out["fixed"] = True
        if self.reached_max:
            out["reached_max"] = True
            out["left"] = self.left
        return out


def settle(
    look: Callable[[], Look],
    deadline: float,
    clock: Callable[[], float],
    sleep: Callable[[float], None],
    *,
    fixed: bool = False,
) -> Settled:
    """Look until nothing is left to wait for, or until `deadline` (the scenario's settle
    after the last transfer's end); `fixed`: sleep until the deadline, look at nothing."""
    start = clock()
    if fixed:
        sleep(max(0.0, deadline - start))
        return Settled(clock() - start, 0, {}, fixed=True)
    # Whatever the time since the last transfer, a CPU verdict needs two looks apart.
    deadline = max(deadline, start + 2 * MIN_CPU_WINDOW_S)
    held: dict[str, float] = {}
    previous: Look | None = None  # the last look, for the time each wait held
    waited: list[str] = []  # what the last look was still waiting for
    base: Look | None = None  # the look the CPU is judged from (MIN_CPU_WINDOW_S before)
    closed_at: float | None = None
    looks = 0
    while True:
        now_look = look()
        looks += 1
        if closed_at is None and not now_look.open_connections:
            closed_at = now_look.at
        waits = waiting_for(base, now_look, closed_at)
        if previous is not None:  # the time since the last look went to what it waited for
            step = now_look.at - previous.at
            for name in dict.fromkeys(wait.split(" ", 1)[0] for wait in waited):
                held[name] = held.get(name, 0.0) + step
        if not waits:
            return Settled(clock() - start, looks, held)
        if now_look.at >= deadline:
            return Settled(clock() - start, looks, held, reached_max=True, left=waits)
        previous, waited = now_look, waits
        if base is None or now_look.at - base.at >= MIN_CPU_WINDOW_S:
            base = now_look
        pause = LOOK_EVERY_S
        if waits and all(w.startswith(("pacing", "reconfig")) for w in waits):
            ready = (
                now_look.ready_at if now_look.at < now_look.ready_at else now_look.reconfig_ready_at
            )
            pause = max(LOOK_EVERY_S, min(ready, deadline) - now_look.at)
        sleep(min(pause, max(0.0, deadline - now_look.at)))
