"""Looking at the places of a case for what the last transfer may have left behind: the servers'
rate limiters (from their last events on the primary's wire and in the polls), their open
connections (sock_diag), the link emulator's queue and the servers' CPU (their cgroups).
measure/settle.py decides from these looks when the next slot may start."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable

from harness.measure.processes import RunningServer
from harness.measure.settle import PACING_MARGIN_S, Look
from harness.observe.sockdiag import SockDiagRefused
from harness.place import Places
from harness.xfr.wire_watch import WireWatch


def looker(
    places: Places,
    running: list[RunningServer],
    wire: WireWatch | None,
    moments: dict[tuple[str, str], float],
    stack: contextlib.ExitStack,
) -> Callable[[], Look]:
    """A function that takes one look (on time.monotonic()'s clock); the connection counts
    it keeps open between looks (a sock_diag socket, or an agent's) are closed by
    `stack`. `moments`: (host, event) -> when the driver last saw it happen ("served": the
    polls' view of an NSD reload; "reconfig": the harness reconfigured it)."""
    counts = []
    for server in running:
        setup = server.server.setup
        try:
            count = server.place.connection_count({setup.port, setup.tls_port})
        except SockDiagRefused:
            continue  # its connections are not counted: the look says None
        counts.append(stack.enter_context(count))
    cgroups = {s.name: s.place.cgroup_of(s.proc) for s in running if s.proc is not None}
    pacings = [(s, pacing) for s in running for pacing in s.server.pacing()]
    unix_offset = time.time() - time.monotonic()

    def last(server: RunningServer, after: str) -> float | None:
        if after in ("served", "reconfig"):
            return moments.get((server.name, after))
        if wire is None:
            return None
        if after == "notify":  # a primary's NOTIFY to any secondary
            return wire.last(("notify",))
        return wire.last(("soa_query", "connect"), server.place.address)

    def look() -> Look:
        now = time.monotonic()
        # (ready at, why, event): after the servers' own events, after the harness's reconfig
        own, switch = (0.0, "", ""), (0.0, "", "")
        for server, pacing in pacings:
            for after in pacing.after:
                at = last(server, after)
                if at is None:
                    continue
                ready = at + pacing.seconds + PACING_MARGIN_S
                why = f"{server.server.kind} {server.plan.role}: {pacing.why}"
                if after == "reconfig" and ready > switch[0]:
                    switch = (ready, why, after)
                elif after != "reconfig" and ready > own[0]:
                    own = (ready, why, after)
        opened = None
        if counts:
            opened = sum(count() for count in counts)
        queued = places.link_queued()
        cpu = {}
        for name, group in cgroups.items():
            if group is not None:
                usage = group.read()
                cpu[name] = usage.cpu_user_s + usage.cpu_system_s
        return Look(
            at=now,
            ready_at=own[0],
            pacing=own[1],
            paced_by=own[2],
            reconfig_ready_at=switch[0],
            reconfig_pacing=switch[1],
            open_connections=opened,
            link_queued=None if queued is None else queued[0],
            link_at=None if queued is None else queued[1] - unix_offset,
            cpu_s=cpu,
        )

    return look
