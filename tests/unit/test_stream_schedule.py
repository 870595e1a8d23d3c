"""A change stream's schedule: fixed and Poisson arrivals, reproducible from the seed."""

from __future__ import annotations

import itertools
import statistics

import pytest

from harness.plan.stream import StreamPlan, stream_offsets


def _plan(**given: object) -> StreamPlan:
    values: dict[str, object] = {
        "interval": 0.2,
        "updates": 30,
        "duration": None,
        "arrival": "fixed",
        "sla": None,
        "seed": 1,
    }
    values.update(given)
    return StreamPlan(**values)  # type: ignore[arg-type]


def test_fixed_arrivals_are_due_every_interval_from_the_start() -> None:
    assert stream_offsets(_plan(), "c", 1) == pytest.approx([0.2 * k for k in range(30)])
    # A duration counts the serials due strictly before it ends (0.3 / 0.1 is not 2.99..).
    timed = _plan(updates=None, duration=0.3, interval=0.1)
    assert stream_offsets(timed, "c", 1) == pytest.approx([0.0, 0.1, 0.2])


def test_poisson_arrivals_are_seeded_per_case_and_repeat() -> None:
    plan = _plan(arrival="poisson", updates=2000, interval=5.0)
    first = stream_offsets(plan, "case-a", 1)
    assert first == stream_offsets(plan, "case-a", 1)  # the same on every run
    assert first != stream_offsets(plan, "case-a", 2)
    assert first != stream_offsets(plan, "case-b", 1)
    assert first != stream_offsets(_plan(arrival="poisson", updates=2000, seed=2), "case-a", 1)
    gaps = [b - a for a, b in itertools.pairwise(first)]
    assert first[0] == 0.0 and len(first) == 2000 and min(gaps) > 0
    # Exponential gaps: mean about the interval, and about as wide as their mean.
    assert statistics.fmean(gaps) == pytest.approx(5.0, rel=0.1)
    assert statistics.stdev(gaps) == pytest.approx(5.0, rel=0.15)


def test_poisson_arrivals_within_a_duration() -> None:
    offsets = stream_offsets(
        _plan(arrival="poisson", updates=None, duration=300.0, interval=5.0), "c", 1
    )
    assert offsets[0] == 0.0 and offsets[-1] < 300.0
    assert 30 < len(offsets) < 100  # about 60 expected
