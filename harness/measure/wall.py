"""Where a run's wall time goes: the servers' work, the harness's own, or a deliberate pause.

A serious benchmark knows whether it measured the servers or itself. Every phase of a run
is timed under a name (``WallClock.phase``); each name belongs to one side:

- servers: what the servers under test spend (loading the primary's zone, the first
  copies and the warm-up update, publishing a serial, the timed transfers, client pulls);
- harness: what xfrbench spends around them (generating zones, building and tearing down
  the testbed, verifying copies, reading logs and sockets after a transfer);
- settle: the quiet time before each repeat (``settle`` in the scenario), idle by design.

What a repeat waits for before its trigger (measure/settle.py) is split by its cause: the
servers' own rate limiters pacing their last NOTIFY or SOA query ("pacing", the servers':
BIND at its default 20 a second lets one through per 0.5 s tick), what a limiter the
harness's reconfiguration set going adds beyond that ("switch", the harness's: without the
switch the servers' own pacing would still hold the slot), and the rest ("settle").

Whatever no phase covers (starting up, resolving binaries, writing results) is the
harness's too: ``WallSplit.unaccounted_s``. A phase inside another (a secondary's flush
inside the verification that asked for it) counts for itself only: the outer phase's time
is what is left of it. The split goes into run.json (``wall``) and the
run's summary; each repeat's record carries its own (``extra.wall``).
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

SERVERS = "servers"
HARNESS = "harness"
SETTLE = "settle"

PHASES: dict[str, str] = {
    "start": HARNESS,  # checking the backend, finding and versioning the server binaries
    "generate": HARNESS,  # zone files and the sum of a single zone (cached between runs)
    "testbed": HARNESS,  # namespaces, links, sysctls; or compose services
    "primary_load": SERVERS,  # the primary starts and serves its zones
    "first_copies": SERVERS,  # secondaries start and take their first copy
    "warmup": SERVERS,  # the unrecorded warm-up update
    "publish": SERVERS,  # a new serial on the primary (update, transaction or reload)
    "transfer": SERVERS,  # trigger to the last secondary serving the serial
    "cold_start": SERVERS,  # secondaries started from nothing until every zone is served
    "client_pull": SERVERS,  # a client's timed pull from the primary
    "verify": HARNESS,  # reading each copy back (or its file) and checking its records
    # A secondary writing its copy to disk when asked (rndc sync, knotc zone-flush, ...), and
    # the harness waiting for that file: the server's own work after the transfer.
    "flush": SERVERS,
    "observe": HARNESS,  # server logs, socket and link counters after a transfer
    "switch": HARNESS,  # reconfiguring secondaries between interleaved cases of a group
    "settle": SETTLE,  # quiet before a repeat
    "pacing": SERVERS,  # waiting out the servers' own rate limiters before a repeat
    "teardown": HARNESS,  # stopping servers, removing the testbed
}


@dataclass
class Span:
    """One timed phase; ``seconds`` is set when it ends: its own, without the phases timed
    inside it (``inner``)."""

    name: str
    seconds: float = 0.0
    inner: float = 0.0


@dataclass
class WallClock:
    """Seconds per phase name, summed over the run. ``clock`` is injectable (tests)."""

    clock: Callable[[], float] = time.monotonic
    seconds: dict[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.started = self.clock()
        self._open: dict[int, list[Span]] = {}  # per thread: the phases entered, innermost last

    @contextlib.contextmanager
    def phase(self, name: str) -> Iterator[Span]:
        if name not in PHASES:
            raise ValueError(f"unknown wall-time phase {name!r}")
        span = Span(name)  # the phase's own seconds, for the record of a repeat
        stack = self._open.setdefault(threading.get_ident(), [])
        stack.append(span)
        start = self.clock()
        try:
            yield span
        finally:
            elapsed = self.clock() - start
            stack.pop()
            if stack:
                stack[-1].inner += elapsed
            span.seconds = max(0.0, elapsed - span.inner)
            self.seconds[name] = self.seconds.get(name, 0.0) + span.seconds

    def add(self, name: str, seconds: float) -> None:
        """Seconds timed elsewhere (a pull's own duration inside a longer call)."""
        if name not in PHASES:
            raise ValueError(f"unknown wall-time phase {name!r}")
        self.seconds[name] = self.seconds.get(name, 0.0) + max(0.0, seconds)

    def shift(self, source: str, target: str, seconds: float) -> None:
        """Move `seconds` timed under `source` to `target` (a wait timed as one phase whose
        parts turned out to have other causes); never more than `source` holds."""
        moved = min(max(0.0, seconds), self.seconds.get(source, 0.0))
        if moved:
            self.seconds[source] -= moved
            self.add(target, moved)

    def split(self) -> WallSplit:
        return split_of(self.seconds, self.clock() - self.started)


@dataclass(frozen=True)
class WallSplit:
    total_s: float
    phases: dict[str, float]
    servers_s: float
    harness_s: float  # the phases of the harness and what no phase covers
    settle_s: float
    unaccounted_s: float

    def to_json(self) -> dict[str, object]:
        return {
            "total_s": round(self.total_s, 3),
            "servers_s": round(self.servers_s, 3),
            "harness_s": round(self.harness_s, 3),
            "settle_s": round(self.settle_s, 3),
            "unaccounted_s": round(self.unaccounted_s, 3),
            "phases": {name: round(s, 3) for name, s in self.phases.items()},
        }


def split_of(phases: dict[str, float], total_s: float) -> WallSplit:
    """The split of `total_s` given the seconds per phase (a pure function)."""
    side = {SERVERS: 0.0, HARNESS: 0.0, SETTLE: 0.0}
    for name, seconds in phases.items():
        side[PHASES[name]] += seconds
    unaccounted = max(0.0, total_s - sum(side.values()))
    return WallSplit(
        total_s=total_s,
        phases=dict(phases),
        servers_s=side[SERVERS],
        harness_s=side[HARNESS] + unaccounted,
        settle_s=side[SETTLE],
        unaccounted_s=unaccounted,
    )


def describe(split: WallSplit) -> str:
    """One line for the terminal: the total, each side, the largest phases of each."""

    def top(kind: str) -> str:
        named = sorted(
            ((s, n) for n, s in split.phases.items() if PHASES[n] == kind and s >= 0.05),
            reverse=True,
        )
        return ", ".join(f"{n.replace('_', ' ')} {s:.1f}" for s, n in named[:4])

    total = split.total_s or 1.0
    parts = [f"wall {split.total_s:.1f} s"]
    parts.append(f"servers {split.servers_s:.1f} s ({split.servers_s / total:.0%}: {top(SERVERS)})")
    ours = top(HARNESS)
    if split.unaccounted_s >= 0.05:
        ours = ", ".join(p for p in (ours, f"other {split.unaccounted_s:.1f}") if p)
    parts.append(f"harness {split.harness_s:.1f} s ({split.harness_s / total:.0%}: {ours})")
    if split.settle_s:
        parts.append(f"settle {split.settle_s:.1f} s")
    return "; ".join(parts)
