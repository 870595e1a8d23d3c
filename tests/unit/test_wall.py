"""Where a run's wall time goes (harness/measure/wall.py)."""

from __future__ import annotations

import pytest

from harness.measure.wall import WallClock, describe, split_of


def test_time_no_phase_covers_is_the_harnesss() -> None:
    split = split_of({"transfer": 25.0, "verify": 30.0, "settle": 1.0, "generate": 2.0}, 70.0)
    assert split.servers_s == 25.0 and split.settle_s == 1.0
    assert split.unaccounted_s == pytest.approx(12.0)
    assert split.harness_s == pytest.approx(30.0 + 2.0 + 12.0)
    line = describe(split)
    assert line.startswith("wall 70.0 s; servers 25.0 s (36%: transfer 25.0)")
    assert "harness 44.0 s (63%: verify 30.0, generate 2.0, other 12.0)" in line


def test_phases_add_up_and_unknown_names_are_refused() -> None:
    now = [0.0]
    clock = WallClock(clock=lambda: now[0])
    for seconds in (1.5, 2.5):
        with clock.phase("transfer") as span:
            now[0] += seconds
        assert span.seconds == seconds
    clock.add("verify", 0.25)
    now[0] += 0.25
    assert clock.seconds == {"transfer": 4.0, "verify": 0.25}
    assert clock.split().total_s == 4.25 and clock.split().unaccounted_s == 0.0
    with (
        pytest.raises(ValueError, match="unknown wall-time phase 'transfers'"),
        clock.phase("transfers"),
    ):
        pass


def test_a_phase_inside_another_counts_for_itself_only() -> None:
    now = [0.0]
    clock = WallClock(clock=lambda: now[0])
    with clock.phase("verify") as verify:
        now[0] += 1.0
        with clock.phase("flush") as flush:
            now[0] += 4.0
        now[0] += 2.0
    assert (verify.seconds, flush.seconds) == (3.0, 4.0)
    assert clock.seconds == {"verify": 3.0, "flush": 4.0}
    split = clock.split()
    assert (split.servers_s, split.harness_s) == (4.0, 3.0)
