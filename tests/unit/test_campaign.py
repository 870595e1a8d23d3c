"""The run's schedule (harness/run/campaign.py): interleaved passes within a group,
alternating blocks between groups, sessions kept across consecutive slots of one group, and
repeats = "auto" stopping each case at its target or its maximum. No root, fake sessions."""

from __future__ import annotations

import contextlib
import random
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.plan.schedule import needs_more
from harness.results import RunStore, TransferRecord
from harness.run.campaign import Slot, auto_slots, execute, fixed_slots
from harness.run.runner import Tally
from harness.spec import AutoRepeats


def test_interleaved_cases_alternate_within_each_pass() -> None:
    slots = fixed_slots([4], repeats=3, order="interleaved", passes=1, seed=7)
    assert len(slots) == 12
    for repeat in (1, 2, 3):
        pass_cases = [s.case for s in slots if s.repeat == repeat]
        assert sorted(pass_cases) == [0, 1, 2, 3]  # every case once per pass
    orders = {tuple(s.case for s in slots if s.repeat == r) for r in (1, 2, 3)}
    assert len(orders) > 1  # shuffled, not the same order every pass
    again = fixed_slots([4], repeats=3, order="interleaved", passes=1, seed=7)
    assert again == slots  # reproducible from the seed
    assert fixed_slots([4], 3, "interleaved", 1, seed=8) != slots


def test_blocks_run_each_case_in_a_row_and_alternate_between_passes() -> None:
    one_pass = fixed_slots([2, 1], repeats=3, order="blocks", passes=1, seed=1)
    assert [(s.group, s.case) for s in one_pass] == [(0, 0)] * 3 + [(0, 1)] * 3 + [(1, 0)] * 3
    two = fixed_slots([2, 1], repeats=4, order="blocks", passes=2, seed=1)
    first = [(s.group, s.case) for s in two if s.pass_index == 0]
    second = [(s.group, s.case) for s in two if s.pass_index == 1]
    assert first == [(0, 0), (0, 0), (0, 1), (0, 1), (1, 0), (1, 0)]
    assert second == list(reversed(first))


def test_groups_alternate_even_when_interleaved() -> None:
    slots = fixed_slots([2, 2], repeats=2, order="interleaved", passes=2, seed=3)
    groups = [s.group for s in slots]
    assert groups == [0, 0, 1, 1, 1, 1, 0, 0]  # A B, then B A: B's testbed stays up


def test_consecutive_slots_of_one_group_share_a_session() -> None:
    opened: list[tuple[int, int]] = []
    ran: list[tuple[int, int, int, int]] = []

    class Fake:
        def __init__(self, group: int) -> None:
            self.group = group

        def run(self, case: int, repeat: int, position: int, pass_index: int) -> None:
            ran.append((self.group, case, repeat, position))

    @contextlib.contextmanager
    def open_session(group: int, visit: int) -> Iterator[Fake]:
        opened.append((group, visit))
        yield Fake(group)
        opened.append((-1, visit))  # closed

    slots = fixed_slots([2, 2], repeats=2, order="interleaved", passes=2, seed=3)
    assert execute(slots, open_session) == 8
    # Visits: group 0, then group 1 (kept across the turn), then group 0 again.
    assert opened == [(0, 0), (-1, 0), (1, 1), (-1, 1), (0, 2), (-1, 2)]
    assert [position for *_, position in ran] == list(range(1, 9))


def test_auto_repeats_stop_each_case_at_its_target_or_its_maximum() -> None:
    rng = random.Random(5)
    steady = [1.0 + rng.uniform(-0.002, 0.002) for _ in range(40)]
    noisy = [1.0 + rng.uniform(-0.5, 0.5) for _ in range(40)]
    durations: dict[tuple[int, int], list[float]] = {(0, 0): [], (0, 1): []}
    attempts = {(0, 0): 0, (0, 1): 0}

    def observed() -> tuple[dict[tuple[int, int], list[float]], dict[tuple[int, int], int]]:
        return durations, attempts

    auto = AutoRepeats(min=6, max=12, target=5.0)
    slots: list[Slot] = []
    for slot in auto_slots([2], auto, "interleaved", 1, observed):
        slots.append(slot)
        key = (slot.group, slot.case)
        series = steady if slot.case == 0 else noisy
        durations[key].append(series[attempts[key]])
        attempts[key] += 1
    steady_runs = [s for s in slots if s.case == 0]
    noisy_runs = [s for s in slots if s.case == 1]
    assert len(steady_runs) == 6  # narrow at once: stops at the minimum
    assert len(noisy_runs) == 12  # never narrow enough: stops at the maximum
    assert [s.repeat for s in noisy_runs] == list(range(1, 13))


def fleet_record(host: str, repeat: int, duration: float | None) -> TransferRecord:
    return TransferRecord(
        run_id="r", case="fleet", repeat=repeat, primary_kind="bind", secondary_kind="bind",
        host=host, site="edge", transport="tcp", xfr="axfr", zone="example.", serial=repeat,
        records=10, bytes=1000, messages=1, duration_s=duration, started_at=1.0,
        ok=duration is not None, verified=duration is not None,
        error=None if duration is not None else "timeout after 20 s",
        trigger="notify", phases={"notify_sent": 0.0},
    )  # fmt: skip


def test_auto_repeats_of_a_fleet_count_repeats_not_secondaries(tmp_path: Path) -> None:
    """Eight secondaries served within a millisecond of each other are one repeat, not
    eight independent samples: pooled, they made the median's interval look narrow and
    stopped the case after one repeat."""
    with RunStore.create(tmp_path, "r", None, {}) as store:
        tally = Tally(store, lambda case: None)
        for index in range(8):
            tally.emit(fleet_record(f"edge-{index}", 1, 1.0 + 0.0001 * index))
        assert tally.values("fleet") == [pytest.approx(1.0007)]  # its last secondary
        values, tried = {(0, 0): tally.values("fleet")}, {(0, 0): len(tally.repeats["fleet"])}
        assert needs_more(values, 0.05, 5, 30, 0.95, tried) == {(0, 0)}  # one repeat: more
        # A repeat that did not converge has no value, but counts as tried.
        for index in range(8):
            tally.emit(fleet_record(f"edge-{index}", 2, None if index == 3 else 1.0))
        assert len(tally.values("fleet")) == 1 and tally.repeats["fleet"] == {1, 2}
