"""wait_for_zones against a real Knot serving 2 000 hosting zones in a namespace of its own."""

from __future__ import annotations

import os
import statistics
import subprocess
import threading
import time
from pathlib import Path

import pytest

from harness.xfr.poll_zones import ZonesTimeout, wait_for_zones
from harness.zonegen import ZoneFile
from tests.system.many_zones import ADDRESS, Knot, hosting_zones, prepare_knot, scratch_netns

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


def _reload_later(knot: Knot, files: list[ZoneFile], delay: float) -> threading.Thread:
    """Install new versions now and have Knot reload them `delay` s later, on a thread of
    its own, so that the poller answers the old serial for a while and is never held up."""
    knot.install(files)

    def reload() -> None:
        time.sleep(delay)
        knot.reload([item.origin for item in files])

    thread = threading.Thread(target=reload, daemon=True)
    thread.start()
    return thread


def _p90(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[int(0.9 * (len(ordered) - 1))]


# Alone (tests/conftest.py): the two halves' error bars are compared, and a busy
# neighbour during one half widens its bars as the loss does.
@pytest.mark.alone
def test_error_bars_are_small_on_a_clean_path_and_grow_on_a_lossy_one(tmp_path: Path) -> None:
    """The poller's path to the server loses 30 % of datagrams each way (iptables in the
    scratch namespace): a lost query is asked again within the round, so every zone is
    still seen, but an answer lost says nothing of when the server switched; the error
    bars (last query answered with the old serial -> first with the new) widen. Measured,
    not timed: the lossy bars against the clean ones of the same server and poller."""
    files = {serial: hosting_zones(ZONES, serial=serial) for serial in (1, 2, 3)}
    origins = [item.origin for item in files[1]]
    with scratch_netns("pollerr") as netns:
        knot = prepare_knot(netns, tmp_path, files[1])
        knot.start()
        try:
            wait_for_zones(ADDRESS, origins, 1, netns=netns, timeout=120, since=time.monotonic())
            bars = {}
            for serial, lossy in ((2, False), (3, True)):
                if lossy:
                    for way in ("--dport", "--sport"):
                        rule = ["-p", "udp", way, str(knot.port), "-m", "statistic"]
                        rule += ["--mode", "random", "--probability", "0.3", "-j", "DROP"]
                        ip = ["ip", "netns", "exec", netns, "iptables"]
                        subprocess.run([*ip, "-A", "INPUT", *rule], check=True)
                since = time.monotonic()
                reloading = _reload_later(knot, files[serial], delay=0.6)
                result = wait_for_zones(
                    ADDRESS, origins, serial, netns=netns, timeout=120, since=since
                )
                reloading.join()
                assert len(result.served) == ZONES  # every zone seen, lossy or not
                if not lossy:  # each answered serial - 1 before the reload: the bar's start
                    assert set(result.unserved) == set(origins)
                bars[lossy] = (result.errors(), result)
        finally:
            knot.stop()
    clean, lossy = bars[False][0], bars[True][0]
    assert bars[True][1].resends > bars[False][1].resends  # lost queries asked again
    # Clean: a zone's bar is about the gap between two of its queries, one round.
    assert statistics.median(clean.values()) <= 1.5 * max(bars[False][1].round_s)
    print(
        f"error bars (s): clean median {statistics.median(clean.values()):.3f} "
        f"p90 {_p90(list(clean.values())):.3f} max {max(clean.values()):.3f}; "
        f"lossy median {statistics.median(lossy.values()):.3f} "
        f"p90 {_p90(list(lossy.values())):.3f} max {max(lossy.values()):.3f}"
    )
    # The tail widens; by how much depends on the machine's load during each half (the
    # clean bars grow on a busy host too), so only the direction is asserted.
    assert _p90(list(lossy.values())) > _p90(list(clean.values()))
    assert max(lossy.values()) > max(clean.values())
