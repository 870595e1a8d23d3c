"""The run's schedule: which case's repeat runs next, on which testbed, and when to stop.

Cases of one group share a testbed and run interleaved (harness/plan/schedule.py: every
case once per pass, those sharing a server configuration side by side: clustered_pass)
with `order = "interleaved"`, in a fresh order of all cases every pass with
`order = "shuffled"` (more configuration switches); with `order = "blocks"` every case is a
block of its own. Blocks run in passes whose order alternates (A B C, C B A, ...), so a
slow drift of the machine adds alike to every case. Consecutive slots of one group share one
session (one testbed, one set of servers). `repeats = "auto"` keeps adding passes over the
cases whose median is not yet known well enough (schedule.needs_more).

Pure but for the sessions it is handed: tests run it with fake ones.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Protocol

from harness.plan.schedule import (
    ClusterKey,
    block_schedule,
    clustered_pass,
    needs_more,
    pass_order,
)
from harness.spec import AutoRepeats

Key = tuple[int, int]  # (group, case within the group)


@dataclass(frozen=True)
class Slot:
    group: int
    case: int
    repeat: int
    pass_index: int


def fixed_slots(
    sizes: list[int],
    repeats: int,
    order: str,
    passes: int,
    seed: int,
    keys: list[list[ClusterKey]] | None = None,
) -> list[Slot]:
    """Every (group, case, repeat) of a run with a fixed number of repeats, in run order.
    `sizes`: the number of cases of each group; `keys`: each case's configuration key
    (plan/schedule.py clustered_pass), which "interleaved" keeps side by side within a
    pass ("shuffled": a fresh order of all cases every pass, whatever their keys)."""
    if order in ("interleaved", "shuffled"):
        blocks = [[(g, c) for c in range(size)] for g, size in enumerate(sizes)]
    else:
        blocks = [[(g, c)] for g, size in enumerate(sizes) for c in range(size)]
    passes = max(1, min(passes, repeats))
    share = [repeats // passes + (1 if k < repeats % passes else 0) for k in range(passes)]
    ends = [sum(share[: k + 1]) for k in range(passes)]
    clustered = None
    if order == "interleaved" and keys is not None:
        clustered = _clustered_orders(blocks, keys, seed)
    slots = []
    for (g, c), repeat in block_schedule(blocks, repeats, seed, passes=passes, pass_of=clustered):
        pass_index = next(k for k, end in enumerate(ends) if repeat <= end)
        slots.append(Slot(g, c, repeat, pass_index))
    return slots


def _clustered_orders(
    blocks: list[list[Key]], keys: list[list[ClusterKey]], seed: int
) -> Callable[[int, int], list[Key]]:
    """block_schedule's order for interleaved groups: each repeat's pass of a block by
    clustered_pass, starting where the block's previous pass ended."""
    last: dict[int, ClusterKey] = {}

    def order(block: int, repeat: int) -> list[Key]:
        cases = blocks[block]
        mine = [keys[g][c] for g, c in cases]
        ran = clustered_pass(mine, repeat - 1, seed, label=f"group {block}", after=last.get(block))
        last[block] = mine[ran[-1]]
        return [cases[i] for i in ran]

    return order


def auto_slots(
    sizes: list[int],
    auto: AutoRepeats,
    order: str,
    seed: int,
    observed: Callable[[], tuple[dict[Key, list[float]], dict[Key, int]]],
    case_keys: list[list[ClusterKey]] | None = None,
) -> Iterator[Slot]:
    """Passes until every case reached its target or its maximum (`repeats = "auto"`).
    `observed()` gives, per case, its verified values so far, one per repeat (a fleet's
    convergence time, not one per secondary), and its repeats tried; it is asked before
    every pass."""
    keys = [(g, c) for g, size in enumerate(sizes) for c in range(size)]
    pass_index = 0
    while True:
        durations, attempts = observed()
        running = needs_more(
            {key: durations.get(key, []) for key in keys},
            auto.target / 100,
            auto.min,
            auto.max,
            auto.confidence / 100,
            {key: attempts.get(key, 0) for key in keys},
        )
        if not running:
            return
        groups = range(len(sizes)) if pass_index % 2 == 0 else reversed(range(len(sizes)))
        for g in groups:
            cases = sorted(c for (group, c) in running if group == g)
            if order == "interleaved" and case_keys is not None:
                mine = [case_keys[g][c] for c in cases]
                cases = [cases[i] for i in clustered_pass(mine, pass_index, seed,
                                                          label=f"group {g}")]  # fmt: skip
            elif order in ("interleaved", "shuffled"):
                cases = pass_order(cases, pass_index, seed, label=f"group {g}")
            for c in cases:
                yield Slot(g, c, attempts.get((g, c), 0) + 1, pass_index)
        pass_index += 1


class Session(Protocol):
    """One group's testbed and servers, while its slots run."""

    def run(self, case: int, repeat: int, position: int, pass_index: int) -> None: ...


def execute(
    slots: Iterable[Slot],
    open_session: Callable[[int, int], contextlib.AbstractContextManager[Session]],
) -> int:
    """Run the slots in order; consecutive slots of one group share a session (opened with
    the group and the visit's number). Returns how many slots ran."""
    position = 0
    with contextlib.ExitStack() as stack:
        current: int | None = None
        session: Session | None = None
        visits = 0
        for slot in slots:
            if slot.group != current or session is None:
                stack.close()
                session = stack.enter_context(open_session(slot.group, visits))
                current, visits = slot.group, visits + 1
            position += 1
            session.run(slot.case, slot.repeat, position, slot.pass_index)
    return position
