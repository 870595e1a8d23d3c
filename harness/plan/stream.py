"""A change stream's schedule (pure): when each new serial is due, from the stream's start.

With `arrival = "fixed"` serial k is due at k * interval; with "poisson" the gaps are
exponential with the interval as their mean (a registry's changes arrive when registrants
make them), drawn from a stream of random numbers derived from the scenario's
`schedule_seed`, the case's name and the repeat (core/seeds.py): the same scenario gives
the same schedule on any machine, and adding a case to the matrix changes no other case's.
The first serial is due at once.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from typing import Literal

from harness.core.seeds import derive_seed


@dataclass(frozen=True)
class StreamPlan:
    interval: float  # seconds between serials (the mean with poisson arrivals)
    updates: int | None  # how many serials, or None: as many as fit in `duration`
    duration: float | None  # seconds
    arrival: Literal["fixed", "poisson"]
    sla: float | None  # seconds: the load time a serial should meet
    seed: int  # the scenario's schedule_seed

    def offsets(self, case: str, repeat: int) -> list[float]:
        """Seconds from the stream's start at which each new serial is due."""
        return stream_offsets(self, case, repeat)


def stream_offsets(plan: StreamPlan, case: str, repeat: int) -> list[float]:
    """When each serial of one repeat's stream is due (see the module docstring)."""
    if plan.arrival == "fixed":
        count = plan.updates
        if count is None:
            assert plan.duration is not None
            # Due strictly before the end: a 5 min stream every 5 s publishes 60 serials
            # (round: 0.3 / 0.1 is 2.9999999999999996).
            count = max(1, math.ceil(round(plan.duration / plan.interval, 9)))
        return [k * plan.interval for k in range(count)]
    rng = random.Random(derive_seed(plan.seed, "stream", case, f"repeat {repeat}"))
    out = [0.0]
    while True:
        if plan.updates is not None and len(out) >= plan.updates:
            return out
        due = out[-1] + rng.expovariate(1.0 / plan.interval)
        if plan.duration is not None and due >= plan.duration:
            return out
        out.append(due)
