"""How late a served time may be: the pollers' error bars, their retry timer, and a TCP
retry of a truncated answer that never holds up the other zones (against the UDP/TCP
responder of test_xfr_poll, on loopback)."""

from __future__ import annotations

import time

import pytest

from harness.xfr.poll import wait_for_serial, wait_for_serials
from harness.xfr.poll_zones import RetryTimer, wait_for_zones
from harness.xfr.served_times import error_summary, served_error
from tests.unit.test_xfr_poll import Responder, _zones


def test_served_error_runs_back_to_the_last_known_unserved_moment() -> None:
    assert served_error(10.0, 9.5, 8.0) == 0.5  # the last query answered the old serial
    assert served_error(10.0, None, 8.0) == 2.0  # none did: back to the trigger
    assert served_error(10.0, 7.0, 8.0) == 2.0  # an answer before the trigger adds nothing
    assert served_error(10.0, 10.5, 8.0) == 0.0  # never negative
    assert error_summary([0.3, 0.1, 0.2, 0.9]) == {"median": 0.2, "max": 0.9}
    assert error_summary([]) == {}


def test_retry_timer_follows_the_round_trips_within_its_bounds() -> None:
    timer = RetryTimer(initial=0.1, floor=0.02, ceiling=0.2)
    assert timer.timeout == 0.1
    for _ in range(50):
        timer.sample(0.0005)  # a local server
    assert timer.timeout == 0.02
    for _ in range(50):
        timer.sample(0.040)
    assert 0.040 < timer.timeout < 0.2
    timer.sample(5.0)
    assert timer.timeout == 0.2
    backing = RetryTimer(initial=0.03, floor=0.02, ceiling=0.2)
    backing.back_off()
    assert backing.timeout == 0.06  # a query unanswered: wait twice as long for the next
    for _ in range(5):
        backing.back_off()
    assert backing.timeout == 0.2
    assert RetryTimer(initial=1.0, floor=0.02, ceiling=0.2).timeout == 0.2


def test_each_zone_error_bar_spans_its_last_unserved_answer_to_its_first_served() -> None:
    zones = _zones(40)
    with Responder(dict.fromkeys(zones, 5), drop_first=False, old_answers=3, old_serial=4) as s:
        since = time.monotonic()
        result = wait_for_zones(
            "127.0.0.1", zones, 5, port=s.port, timeout=30, since=since, interval=0.05
        )
    assert set(result.served) == set(zones) and set(result.unserved) == set(zones)
    errors = result.errors()
    for zone in zones:
        answers = s.log[zone]
        last_old = max(t for t, serial in answers if serial == 4)
        first_new = min(t for t, serial in answers if serial == 5)
        # The server switched between those two answers; the bar covers that span.
        assert since < result.unserved[zone] <= last_old < first_new <= result.served[zone]
        assert errors[zone] == result.served[zone] - result.unserved[zone]
    assert result.errors(origin=since + 1000) == dict.fromkeys(zones, 0.0)


def test_a_truncated_answer_is_asked_over_tcp_without_holding_up_the_others() -> None:
    slow, other = "slow.example.", "other.example."
    serials = {slow: 5, other: 5}
    with Responder(serials, drop_first=False, truncate=frozenset({slow}), tcp_delay=0.3) as s:
        since = time.monotonic()
        result = wait_for_zones(
            "127.0.0.1", [slow, other], 5, port=s.port, timeout=30, since=since, interval=0.05
        )
    (tcp_answer, _), *_ = s.log[slow]
    # The other zone's answer was read while the TCP question waited for its answer.
    assert result.served[other] < tcp_answer <= result.served[slow]


def test_wait_for_serial_reads_a_truncated_answer_over_tcp() -> None:
    zone = "slow.example."
    with Responder({zone: 5}, drop_first=False, truncate=frozenset({zone})) as s:
        since = time.monotonic()
        served = wait_for_serial("127.0.0.1", zone, 5, port=s.port, timeout=10, since=since)
    (tcp_answer, serial), *_ = s.log[zone]
    assert serial == 5 and since < tcp_answer <= served


def test_wait_for_serials_keeps_the_last_query_answered_with_the_old_serial() -> None:
    zone = "fleet.example."
    with Responder({zone: 5}, drop_first=False, old_answers=20, old_serial=4) as s:
        since = time.monotonic()
        seen = wait_for_serials(
            {"near-1": ("127.0.0.1", None)}, zone, 5, port=s.port, deadline=since + 10
        )
    answers = s.log[zone]
    last_old = max(t for t, serial in answers if serial == 4)
    first_new = min(t for t, serial in answers if serial == 5)
    assert since < seen.unserved["near-1"] <= last_old < first_new <= seen.served["near-1"]
    assert served_error(seen.served["near-1"], seen.unserved["near-1"], since) == pytest.approx(
        seen.served["near-1"] - seen.unserved["near-1"]
    )


def test_a_fleet_poll_stops_asking_a_secondary_once_it_served() -> None:
    # One secondary serves the serial at once, the other only after 40 answers: the first
    # is asked once more at most (a query already in flight), not every 5 ms until the other.
    zone = "fleet.example."
    quick = Responder({zone: 5}, drop_first=False)
    slow = Responder(
        {zone: 5}, drop_first=False, old_answers=40, old_serial=4, address="127.0.0.2",
        port=quick.port,
    )  # fmt: skip
    with quick, slow:
        since = time.monotonic()
        targets = {"quick": ("127.0.0.1", None), "slow": ("127.0.0.2", None)}
        seen = wait_for_serials(targets, zone, 5, port=quick.port, deadline=since + 10)
    assert set(seen.served) == {"quick", "slow"}
    assert seen.served["quick"] < seen.served["slow"]
    assert len(quick.log[zone]) <= 2 and len(slow.log[zone]) > 40


# Alone (tests/conftest.py): the wait ends 0.3 s +- 0.1 s after a serve, by the clock.
@pytest.mark.alone
def test_a_straggler_gets_straggle_more_once_another_served() -> None:
    # The first copies of a fleet: one secondary serves at once, another never does (a host
    # down from the start). With straggle, the wait ends that long after the first served,
    # not at the deadline (issue 28: a dead host held a fleet's first copies for 140 s).
    zone = "fleet.example."
    quick = Responder({zone: 5}, drop_first=False)
    never = Responder(
        {zone: 4}, drop_first=False, address="127.0.0.2", port=quick.port
    )  # fmt: skip
    with quick, never:
        since = time.monotonic()
        targets = {"quick": ("127.0.0.1", None), "never": ("127.0.0.2", None)}
        seen = wait_for_serials(
            targets, zone, 5, port=quick.port, deadline=since + 10, straggle=0.3
        )
        ended = time.monotonic()
    assert set(seen.served) == {"quick"}
    assert ended - seen.served["quick"] == pytest.approx(0.3, abs=0.1)
    assert ended - since < 2
