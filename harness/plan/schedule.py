"""In which order to run cases and repeats, and when to stop repeating: pure functions.

Why the order matters: repeats of one transfer drift (a real run measured 1.373, 1.349,
1.366, 1.598, 1.561, 1.490, 1.722 s over 7 repeats of one TCP transfer, a 25 % climb). Run
case A's repeats, then B's, and that drift becomes a difference between A and B. Run them
in passes instead, each pass every case once in a fresh random order (A B C D, C A D B,
...), and a slow stretch of time hits every case alike: drift turns into noise, which the
statistics see, instead of bias, which they cannot.

Cases that need different testbeds (another link, other servers) cannot be interleaved
packet by packet without rebuilding testbeds all the time; they run in blocks, and the order
of the blocks alternates between passes (A B C, C B A, A B C, ...): a linear drift then
adds the same total to every block over each two passes, and the block at each turn runs
twice in a row, so its testbed can stay up.

Cases of one testbed that share a server configuration (one transport, one server
variant) differ only in what the primary is asked for (AXFR or IXFR): `clustered_pass`
keeps such cases side by side within each pass, so a pass switches the secondaries'
configuration once per configuration rather than once per case, while every case still
runs once per pass in a fresh order. Two neighbours take turns being first (A B, then B A,
each order equally often), and a pass starts with the configuration the last one ended
with, which saves one switch per pass.

Repeats are numbered from 1, as in transfers.jsonl. Randomness comes from
`harness.core.seeds.derive_seed` (SHA-256), so a schedule is the same on every machine and Python
version for the same seed, and a pass's order does not depend on the other passes.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal, TypeVar

from harness.core.seeds import derive_seed
from harness.core.stats import MedianInterval, check_auto_repeats, median_interval

C = TypeVar("C", bound=Hashable)

DEFAULT_TARGET = 0.05  # relative width of the median's interval: the median within ~+-2.5 %
DEFAULT_CONFIDENCE = 0.95


def _distinct(cases: Sequence[C], what: str = "cases") -> None:
    if len(set(cases)) != len(cases):
        raise ValueError(f"{what} must be distinct: {list(cases)!r}")


def _check_repeats(repeats: int) -> None:
    if repeats < 1:
        raise ValueError(f"repeats must be at least 1, not {repeats}")


def pass_order(cases: Sequence[C], pass_index: int, seed: int, *, label: str = "pass") -> list[C]:
    """Pass number `pass_index` (from 0) of `cases` in its own random order: each case is
    ranked by derive_seed(seed, label, pass_index, its position), a uniform permutation.
    Give the cases in a fixed order (e.g. sorted names) to get the same pass again; with
    `repeats = "auto"` a pass is pass_order(sorted(needs_more(...)), k, seed)."""
    _distinct(cases)
    keys = {i: derive_seed(seed, label, str(pass_index), str(i)) for i in range(len(cases))}
    return [cases[i] for i in sorted(range(len(cases)), key=keys.__getitem__)]


ClusterKey = tuple[Hashable, ...]  # outermost first: (server variant, transport, xfr kind)


def clustered_pass(
    keys: Sequence[ClusterKey],
    pass_index: int,
    seed: int,
    *,
    label: str = "pass",
    after: ClusterKey | None = None,
) -> list[int]:
    """Pass number `pass_index` of cases whose `keys` name their configuration from the
    outermost part in: the case indices in run order. Cases that share a key's first parts
    run side by side; at each level the order of the distinct parts is a fresh random
    permutation per pass (pass_order, seeded by the level and the parts above it), except
    that two parts take turns (pass k runs them one way, pass k + 1 the other: both
    orders equally often). `after`: the key of the case the previous pass ended with; a
    part equal to its part at that level goes first, so a configuration running at a pass's
    end keeps running at the next one's start."""
    if len(set(keys)) != len(keys):
        raise ValueError(f"case keys must be distinct: {list(keys)!r}")
    return _clustered(list(range(len(keys))), keys, 0, pass_index, seed, label, after)


def _clustered(
    items: list[int],
    keys: Sequence[ClusterKey],
    level: int,
    pass_index: int,
    seed: int,
    label: str,
    after: ClusterKey | None,
) -> list[int]:
    if len(items) <= 1:
        return items
    parts: dict[Hashable, list[int]] = {}
    for item in items:
        parts.setdefault(keys[item][level], []).append(item)
    names = list(parts)
    if len(names) > 1:
        salt = f"{label}/{level}/{keys[items[0]][:level]!r}"
        if len(names) == 2:
            first = derive_seed(seed, salt) % 2  # which of the two leads in pass 0
            names = names if (pass_index + first) % 2 == 0 else names[::-1]
        else:
            names = pass_order(names, pass_index, seed, label=salt)
            if after is not None and after[level] in names:
                names.remove(after[level])
                names.insert(0, after[level])
    out: list[int] = []
    for index, name in enumerate(names):
        below = after if index == 0 and after is not None and after[level] == name else None
        out += _clustered(parts[name], keys, level + 1, pass_index, seed, label, below)
    return out


def interleaved_schedule(cases: Sequence[C], repeats: int, seed: int) -> list[tuple[C, int]]:
    """(case, repeat) in shuffled round-robin passes: pass r runs every case's repeat r once,
    in pass_order(cases, r - 1, seed). For cases that can share one testbed."""
    _check_repeats(repeats)
    return [
        (case, repeat)
        for repeat in range(1, repeats + 1)
        for case in pass_order(cases, repeat - 1, seed)
    ]


def block_schedule(
    blocks: Sequence[Sequence[C]],
    repeats: int,
    seed: int,
    *,
    passes: int | None = None,
    pass_of: Callable[[int, int], list[C]] | None = None,
) -> list[tuple[C, int]]:
    """(case, repeat) for cases grouped in blocks that each need their own testbed.

    `passes` (default: `repeats`) visits of every block: passes 1, 3, 5, ... take the blocks
    in the given order, passes 2, 4, ... in reverse. A visit runs the block's cases for
    its share of the repeats (repeats / passes, the remainder going to the first passes),
    interleaved as in `interleaved_schedule`, or as `pass_of(block, repeat)` says (a block's
    cases for that repeat, e.g. `clustered_pass`). Fewer passes mean fewer testbed changes
    and less protection against drift.
    """
    _check_repeats(repeats)
    passes = repeats if passes is None else passes
    if not 1 <= passes <= repeats:
        raise ValueError(f"passes must be between 1 and repeats ({repeats}), not {passes}")
    _distinct([case for block in blocks for case in block])
    share = [repeats // passes + (1 if k < repeats % passes else 0) for k in range(passes)]
    order: list[tuple[C, int]] = []
    done = 0  # repeats of every case before this pass
    for k in range(passes):
        visiting = range(len(blocks)) if k % 2 == 0 else reversed(range(len(blocks)))
        for b in visiting:
            for repeat in range(done + 1, done + share[k] + 1):
                block_pass = (
                    pass_of(b, repeat)
                    if pass_of is not None
                    else pass_order(blocks[b], repeat - 1, seed, label=f"block {b}")
                )
                order.extend((case, repeat) for case in block_pass)
        done += share[k]
    return order


# --- adaptive repeats ---------------------------------------------------------------------

StopReason = Literal["running", "reached target", "reached max without target"]


@dataclass(frozen=True)
class RepeatState:
    """Where a case stands under `repeats = "auto"`: `reason` is "running" while it needs
    more repeats; `interval` is its median's confidence interval (None while too few
    values)."""

    n: int
    attempts: int
    reason: StopReason
    interval: MedianInterval | None
    sentence: str

    @property
    def done(self) -> bool:
        return self.reason != "running"

    @property
    def relative_width(self) -> float | None:
        return self.interval.relative_width if self.interval else None


def repeat_states(
    durations_by_case: Mapping[C, Sequence[float]],
    target: float = DEFAULT_TARGET,
    min_repeats: int = 5,
    max_repeats: int = 30,
    confidence: float = DEFAULT_CONFIDENCE,
    attempts_by_case: Mapping[C, int] | None = None,
) -> dict[C, RepeatState]:
    """The stopping rule of `repeats = "auto"`, case by case.

    A case stops when its median's distribution-free interval (harness.core.stats.median_interval)
    is at most `target` wide relative to the median, after at least `min_repeats` verified
    transfers ("reached target"), or after `max_repeats` attempts ("reached max without
    target"). `durations_by_case` holds one verified value per repeat (a fleet's: its
    convergence time, never one per secondary: those are not independent samples, and
    16 of them would make a one-repeat interval look narrow); `attempts_by_case` the
    repeats tried, failed ones included (default: the values' count), so a case that
    keeps failing still stops. Stopping when an interval first looks narrow favours lucky
    streaks a little (optional stopping); `min_repeats` limits that. The interval assumes
    no drift: run the cases interleaved and check `harness.core.stats.drift_check`.
    """
    check_auto_repeats(min_repeats, max_repeats, target, confidence)
    states: dict[C, RepeatState] = {}
    for case, durations in durations_by_case.items():
        n = len(durations)
        attempts = attempts_by_case.get(case, n) if attempts_by_case is not None else n
        interval = median_interval(durations, confidence)
        width = interval.relative_width if interval else None
        shown = f"{width:.1%}" if width is not None else "no interval yet"
        reason: StopReason
        if n >= min_repeats and width is not None and width <= target:
            reason = "reached target"
            sentence = f"{n} repeats: median's {confidence:.0%} interval {shown} wide"
        elif attempts >= max_repeats:
            reason = "reached max without target"
            sentence = (
                f"{attempts} attempts ({n} verified), the maximum: median's "
                f"{confidence:.0%} interval {shown} wide, target {target:.1%}"
            )
        else:
            reason = "running"
            sentence = f"{n} repeats: interval {shown} wide, target {target:.1%}"
        states[case] = RepeatState(n, attempts, reason, interval, sentence)
    return states


def needs_more(
    durations_by_case: Mapping[C, Sequence[float]],
    target: float = DEFAULT_TARGET,
    min_repeats: int = 5,
    max_repeats: int = 30,
    confidence: float = DEFAULT_CONFIDENCE,
    attempts_by_case: Mapping[C, int] | None = None,
) -> set[C]:
    """The cases that need another repeat under `repeat_states`' rule."""
    states = repeat_states(
        durations_by_case, target, min_repeats, max_repeats, confidence, attempts_by_case
    )
    return {case for case, state in states.items() if not state.done}
