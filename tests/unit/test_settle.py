"""Settling by evidence (harness/measure/settle.py): what a slot still waits for, how long
each cause held it, the scenario's settle as a maximum. Pure, with a fake clock."""

from __future__ import annotations

import pytest

from harness.measure.settle import (
    IDLE_CPU,
    MIN_CPU_WINDOW_S,
    Look,
    busy_servers,
    settle,
    waiting_for,
)
from harness.measure.wall import WallClock
from harness.servers.bind import Bind, rate_tick
from harness.servers.nsd import Nsd
from harness.servers.pdns import Pdns
from harness.servers.setup import ServerSetup


def test_a_quiet_testbed_is_settled_after_one_cpu_window() -> None:
    before = Look(at=1.0, open_connections=0, link_queued=0, link_at=1.0, cpu_s={"p": 2.0})
    after = Look(at=1.02, open_connections=0, link_queued=0, link_at=1.01, cpu_s={"p": 2.0001})
    assert waiting_for(before, after, closed_at=1.0) == []
    assert waiting_for(None, after, closed_at=1.0) == ["cpu (one look)"]


def test_each_cause_is_named() -> None:
    look = Look(
        at=5.0,
        ready_at=5.3,
        pacing="bind primary: notify-rate 20: a tick every 0.5 s",
        paced_by="notify",
        open_connections=2,
        link_queued=7,
        link_at=4.99,
        cpu_s={"secondary": 1.5},
    )
    before = Look(at=4.9, cpu_s={"secondary": 1.4})
    waits = waiting_for(before, look, closed_at=None)
    assert waits == [
        "pacing (bind primary: notify-rate 20: a tick every 0.5 s)",
        "connections (2 open)",
        "link (7 packets queued)",
        "cpu (secondary 100%)",
    ]
    reconfigured = Look(at=5.0, reconfig_ready_at=5.3, reconfig_pacing="bind secondary: ...")
    assert waiting_for(None, reconfigured, None)[0] == "reconfig (bind secondary: ...)"


def test_a_reconfig_holds_only_what_it_adds_to_the_servers_own_pacing() -> None:
    """A secondary queried at 0.0 (its limiter busy until 0.5) and reconfigured at 0.2
    (until 0.7): 0.5 s of the wait is the servers' own, 0.2 s the switch's."""
    fake = FakeTime()

    def look() -> Look:
        return Look(
            at=fake.now,
            ready_at=0.5,
            pacing="bind secondary: serial-query-rate 20",
            paced_by="query",
            reconfig_ready_at=0.7,
            reconfig_pacing="bind secondary: serial-query-rate 20",
            open_connections=0,
            cpu_s={"s": 0.0},
        )

    settled = settle(look, deadline=2.0, clock=fake.clock, sleep=fake.sleep)
    assert settled.waited_s == pytest.approx(0.7, abs=0.02)
    assert settled.held_by["pacing"] == pytest.approx(0.5, abs=0.02)
    assert settled.held_by["reconfig"] == pytest.approx(0.2, abs=0.02)
    assert settled.looks <= 5


def test_a_link_snapshot_older_than_the_close_is_no_evidence() -> None:
    look = Look(at=2.0, open_connections=0, link_queued=0, link_at=1.5, cpu_s={})
    assert "link (no snapshot since the connections closed)" in waiting_for(
        Look(at=1.9), look, closed_at=1.6
    )


def test_busy_servers_needs_a_window() -> None:
    a = Look(at=0.0, cpu_s={"p": 0.0, "s": 0.0})
    b = Look(at=MIN_CPU_WINDOW_S / 2, cpu_s={"p": 1.0, "s": 0.0})
    assert busy_servers(a, b) == {}  # too close to tell
    c = Look(at=0.1, cpu_s={"p": 0.1 * IDLE_CPU * 2, "s": 0.1 * IDLE_CPU / 2})
    assert busy_servers(a, c) == {"p": pytest.approx(2 * IDLE_CPU, abs=1e-3)}


class FakeTime:
    def __init__(self) -> None:
        self.now = 0.0

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def test_pacing_is_slept_out_and_accounted() -> None:
    fake = FakeTime()

    def look() -> Look:
        return Look(
            at=fake.now,
            ready_at=0.4,
            pacing="bind primary",
            paced_by="notify",
            open_connections=0,
            cpu_s={"p": 0.0},
        )

    settled = settle(look, deadline=1.0, clock=fake.clock, sleep=fake.sleep)
    assert not settled.reached_max
    assert settled.waited_s == pytest.approx(0.4, abs=0.02)
    assert settled.held_by["pacing"] == pytest.approx(0.4, abs=0.02)
    assert settled.looks <= 4  # no busy loop while only a limiter is waited for


def test_the_maximum_cuts_the_wait_and_says_what_was_left() -> None:
    fake = FakeTime()

    def look() -> Look:
        return Look(at=fake.now, open_connections=1, cpu_s={"p": fake.now})  # busy, open

    settled = settle(look, deadline=0.2, clock=fake.clock, sleep=fake.sleep)
    assert settled.reached_max
    assert settled.waited_s == pytest.approx(0.2, abs=0.01)
    assert any(left.startswith("connections") for left in settled.left)
    assert settled.to_json()["reached_max"] is True


def test_a_deadline_in_the_past_still_takes_a_cpu_window() -> None:
    fake = FakeTime()
    fake.now = 10.0

    def look() -> Look:
        return Look(at=fake.now, open_connections=0, cpu_s={"p": 0.0})

    settled = settle(look, deadline=5.0, clock=fake.clock, sleep=fake.sleep)
    assert not settled.reached_max
    assert settled.looks >= 2


def test_fixed_waits_it_all_and_looks_at_nothing() -> None:
    fake = FakeTime()

    def look() -> Look:
        raise AssertionError("a fixed settle looks at nothing")

    settled = settle(look, deadline=1.0, clock=fake.clock, sleep=fake.sleep, fixed=True)
    assert settled.fixed and settled.waited_s == pytest.approx(1.0)


def test_bind_rate_ticks_as_its_zone_manager_sets_them() -> None:
    assert rate_tick(20) == pytest.approx(0.5)  # the default: 10 per tick, every 0.5 s
    assert rate_tick(1000) == pytest.approx(0.01)
    assert rate_tick(5) == pytest.approx(0.2)
    assert rate_tick(1) == rate_tick(0) == 1.0


def _setup(role: str, **options: int) -> ServerSetup:
    from pathlib import Path

    return ServerSetup(role, "198.18.0.2", ("198.18.0.3",), [], Path("/nonexistent"),
                       options=dict(options))  # type: ignore[arg-type]  # fmt: skip


def test_each_dialect_declares_its_pacing() -> None:
    from pathlib import Path

    primary = Bind(_setup("primary"), Path("/usr/sbin/named")).pacing()
    assert [(p.after, p.seconds) for p in primary] == [(("notify",), 0.5)]
    secondary = Bind(_setup("secondary", **{"serial-query-rate": 100}), Path("x")).pacing()
    assert [(p.after, p.seconds) for p in secondary] == [(("query", "reconfig"), 0.1)]
    assert Nsd(_setup("secondary"), Path("x")).pacing()[0].seconds == 1.0
    assert Nsd(_setup("secondary", **{"xfrd-reload-timeout": -1}), Path("x")).pacing() == ()
    assert Nsd(_setup("primary"), Path("x")).pacing() == ()
    assert [(p.after, p.seconds) for p in Pdns(_setup("secondary"), Path("x")).pacing()] == [
        (("served",), 1.0)
    ]


def test_wait_time_moves_to_its_cause() -> None:
    spent = WallClock(clock=lambda: 0.0)
    spent.add("settle", 1.0)
    spent.shift("settle", "pacing", 0.7)
    spent.shift("settle", "switch", 0.5)  # more than is left: what is left
    assert spent.seconds == {"settle": 0.0, "pacing": 0.7, "switch": pytest.approx(0.3)}
