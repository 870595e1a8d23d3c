"""The capacity search against a fake bench: a monotone load, a noisy one and one that never
fails."""

from __future__ import annotations

import random

import pytest

from harness.capacity.search import StepOutcome, next_load, search


class FakeBench:
    """A fleet whose SLA figure grows with the load: `limit` is the last load within
    `sla`; loads in `noisy` straddle the SLA on a first attempt (and on every attempt when
    `stays_noisy`)."""

    def __init__(
        self, limit: float, sla: float = 30.0, noisy: set[float] = frozenset(),  # type: ignore[assignment]
        stays_noisy: bool = False, seed: int = 1,
    ) -> None:  # fmt: skip
        self.limit, self.sla, self.noisy, self.stays_noisy = limit, sla, noisy, stays_noisy
        self.calls: list[tuple[float, int]] = []
        self.random = random.Random(seed)

    def __call__(self, load: float, attempt: int) -> StepOutcome:
        self.calls.append((load, attempt))
        figure = self.sla * load / self.limit
        if load in self.noisy and (attempt == 0 or self.stays_noisy):
            low, high = figure * 0.5, figure * 1.5 + self.sla
            return StepOutcome(load, "noisy", figure, low, high, repeats=3)
        spread = self.random.uniform(0.0, 0.01) * figure
        verdict = "pass" if figure <= self.sla else "fail"
        return StepOutcome(load, verdict, figure, figure - spread, figure + spread, 3)


def test_a_monotone_load_is_found_exactly_by_stepping_up_then_bisecting() -> None:
    bench = FakeBench(limit=48)
    result = search(bench, start=1, maximum=1000)
    assert (result.capacity, result.first_fail, result.reached_max) == (48, 49, False)
    loads = [load for load, _ in bench.calls]
    assert loads[:7] == [1, 2, 4, 8, 16, 32, 64]  # geometric, then bisection in (32, 64)
    assert loads[7:] == [48, 56, 52, 50, 49]
    assert result.noisy == []


def test_the_step_up_stops_at_the_maximum_and_says_so_when_nothing_fails() -> None:
    bench = FakeBench(limit=10_000)
    result = search(bench, start=3, maximum=40)
    assert [load for load, _ in bench.calls] == [3, 6, 12, 24, 40]
    assert result.reached_max and result.capacity == 40 and result.first_fail is None


def test_a_first_load_that_fails_is_no_capacity() -> None:
    result = search(FakeBench(limit=2), start=4, maximum=100)
    assert result.capacity is None and result.first_fail == 4 and len(result.steps) == 1


def test_a_noisy_step_is_run_again_and_called_on_its_second_attempt() -> None:
    bench = FakeBench(limit=20, noisy={16})
    result = search(bench, start=1, maximum=100)
    assert (16, 0) in bench.calls and (16, 1) in bench.calls
    assert result.capacity == 20 and result.first_fail == 21
    assert result.noisy == []  # the retry called it


def test_a_step_that_stays_noisy_counts_as_not_passing_and_is_named() -> None:
    bench = FakeBench(limit=20, noisy={16}, stays_noisy=True)
    result = search(bench, start=1, maximum=100)
    # 16 could not be called twice: the search stays below it, and says so.
    assert result.capacity == 15 and result.first_fail == 16
    assert result.noisy == [16]
    assert result.outcome(16) is not None and result.outcome(16).verdict == "noisy"  # type: ignore[union-attr]


def test_a_fractional_load_bisects_to_its_resolution() -> None:
    bench = FakeBench(limit=3.3)
    result = search(bench, start=0.5, maximum=100, integer=False, resolution=0.1)
    assert result.capacity is not None and result.first_fail is not None
    assert result.capacity <= 3.3 < result.first_fail
    assert result.first_fail - result.capacity <= 0.1


def test_whole_loads_always_step_up_by_at_least_one() -> None:
    assert next_load(1, 1.2, integer=True) == 2
    assert next_load(10, 1.5, integer=True) == 15


@pytest.mark.parametrize(("start", "maximum", "factor"), [(0, 10, 2.0), (5, 4, 2.0), (1, 4, 1.0)])
def test_impossible_searches_are_refused(start: float, maximum: float, factor: float) -> None:
    with pytest.raises(ValueError):
        search(FakeBench(limit=3), start=start, maximum=maximum, factor=factor)
