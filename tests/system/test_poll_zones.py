"""wait_for_zones against a real Knot serving 2 000 hosting zones in a namespace of its own."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from harness.xfr.poll_zones import ZonesTimeout, wait_for_zones
from tests.system.many_zones import ADDRESS, hosting_zones, prepare_knot, scratch_netns

pytestmark = [
    pytest.mark.root,
    pytest.mark.netns,
    pytest.mark.servers,
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root for namespaces"),
]

ZONES = 2000


def test_polling_from_before_the_server_starts_reports_every_zone(tmp_path: Path) -> None:
    files = hosting_zones(ZONES)
    origins = [item.origin for item in files]
    with scratch_netns("poll") as netns:
        knot = prepare_knot(netns, tmp_path, files)
        launched: list[float] = []
        calls: list[int] = []

        def start_on_second_round(served: int, total: int) -> None:
            calls.append(served)
            if knot.proc is None:
                assert served == 0, "zones served before the server started"
                if len(calls) == 2:  # round 1 went out to nobody
                    launched.append(time.monotonic())
                    knot.start()
            else:
                assert knot.proc.poll() is None, knot.log()[-2000:]

        since = time.monotonic()
        try:
            result = wait_for_zones(
                ADDRESS,
                origins,
                files[0].serial,
                netns=netns,
                timeout=120,
                since=since,
                between_rounds=start_on_second_round,
            )
        finally:
            knot.stop()
    done = time.monotonic()
    assert list(result.served) == origins  # every zone, in the order given
    started = launched[0]
    assert all(started < t <= done for t in result.served.values())
    # Round 1 (before the server) went unanswered: every zone was asked at least twice.
    assert result.rounds >= 2 and result.queries >= 2 * ZONES
    dist = result.distribution()
    assert 0 < dist["first"] <= dist["p50"] <= dist["p95"] <= dist["last"] <= done - since
    curve = result.curve(20)
    assert curve[-1] == [round(dist["last"], 6), ZONES]


def test_zones_given_a_new_serial_later_are_reported_later(tmp_path: Path) -> None:
    old, new = hosting_zones(ZONES, serial=1), hosting_zones(ZONES, serial=2)
    origins = [item.origin for item in old]
    # Interleaved halves: the order zones are polled in says nothing about their group.
    early, late = new[0::2], new[1::2]
    marks: dict[str, float] = {}

    def reload_in_two_steps(served: int, total: int) -> None:
        if "early" not in marks:
            marks["early"] = time.monotonic()
            knot.install(early)
            knot.reload([item.origin for item in early])
        elif "late" not in marks and served == len(early):
            marks["late"] = time.monotonic()
            knot.install(late)
            knot.reload([item.origin for item in late])

    with scratch_netns("poll") as netns:
        knot = prepare_knot(netns, tmp_path, old)
        knot.start()
        try:
            since = time.monotonic()
            first = wait_for_zones(ADDRESS, origins, 1, netns=netns, timeout=120, since=since)
            assert len(first.served) == ZONES
            since = time.monotonic()
            result = wait_for_zones(
                ADDRESS,
                origins,
                2,
                netns=netns,
                timeout=120,
                since=since,
                between_rounds=reload_in_two_steps,
            )
        finally:
            knot.stop()
    assert len(result.served) == ZONES
    early_names = {item.origin for item in early}
    by_time = sorted(result.served, key=result.served.__getitem__)
    # Zones still at serial 1 were answered every round but never counted: the first half
    # in time is exactly the early group, and nobody counts before its reload began.
    assert set(by_time[: len(early)]) == early_names
    assert all(result.served[name] > marks["early"] for name in early_names)
    assert all(result.served[name] > marks["late"] for name in by_time[len(early) :])


def test_timeout_names_the_zone_the_server_refuses(tmp_path: Path) -> None:
    files = hosting_zones(ZONES)
    origins = [item.origin for item in files]
    absent = "absent.hosting.example."
    with scratch_netns("poll") as netns:
        knot = prepare_knot(netns, tmp_path, files)
        knot.start()
        try:
            since = time.monotonic()
            wait_for_zones(ADDRESS, origins, 1, netns=netns, timeout=120, since=since)
            with pytest.raises(ZonesTimeout) as caught:
                wait_for_zones(
                    ADDRESS, [*origins, absent], 1, netns=netns, timeout=2, since=time.monotonic()
                )
        finally:
            knot.stop()
    message = str(caught.value)
    assert f"1 of {ZONES + 1} zones" in message and absent in message
    assert "last answer: REFUSED" in message or "last answer: NOTAUTH" in message
    assert len(caught.value.result.served) == ZONES
