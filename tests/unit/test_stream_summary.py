"""A change stream's figures (results/stream.py) from records the stream flow wrote on its
fake fleet: load times by RSSAC002's definition, latency by nearest rank, the SLA share,
each secondary's transfers, fallbacks and lag."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.measure.records import RecordContext
from harness.measure.stream import stream_repeat
from harness.results.model import TransferRecord
from harness.results.stream import (
    FLEET,
    lag_series,
    load_time,
    nearest_rank,
    stream_summary,
    wilson_interval,
)
from tests.unit.test_stream_flow import FakeStreamBench, _plan

HOSTS = ["near-1", "near-2", "far-1"]


def _records(tmp_path: Path, **script: object) -> list[TransferRecord]:
    plan = _plan(tmp_path, HOSTS, 'interval = "200ms"\nupdates = 20\nsla = "300ms"')
    bench = FakeStreamBench(plan, **script)  # type: ignore[arg-type]
    records: list[TransferRecord] = []
    stream_repeat(bench, RecordContext("run-1", plan), 1, 11, records.append, {})
    return records


def test_load_time_is_when_ceil_95_percent_served() -> None:
    assert load_time([1.0, 2.0, 3.0]) == 3.0  # ceil(2.85) = 3 of 3
    latencies = [float(i) for i in range(1, 21)]
    assert load_time(latencies) == 19.0  # ceil(19.0) = 19 of 20
    assert load_time([*latencies[:19], None]) == 19.0  # one never served: still 19
    assert load_time([*latencies[:18], None, None]) is None  # only 18 of 20 ever did
    assert nearest_rank([5.0, 1.0, 3.0, 2.0, 4.0], 50) == 3.0
    assert nearest_rank([float(i) for i in range(1, 21)], 95) == 19.0


def test_summary_of_a_stream_with_a_slow_site(tmp_path: Path) -> None:
    records = _records(tmp_path, transfer_s={"near-1": 0.05, "near-2": 0.08, "far-1": 0.5})
    summary = stream_summary(records)
    (case,) = summary
    figures = summary[case]
    assert figures["serials"] == 20 and figures["late_publishes"] == 0
    assert figures["sla_s"] == 0.3
    assert figures["percentiles"] == "nearest rank over every pair; the never served rank last"
    rows = {row["site"]: row for row in figures["latency"]}
    assert set(rows) == {FLEET, "near", "far"}
    near_latencies = sorted(r.duration_s for r in records if r.site == "near")
    assert rows["near"]["p50_s"] == nearest_rank(near_latencies, 50)
    assert rows["near"]["max_s"] == near_latencies[-1] and rows["near"]["n"] == 40
    # Three secondaries: ceil(0.95 * 3) = 3, so the fleet's load time is its slowest.
    fleet_loads = [x for x in figures["loads"] if x["site"] == FLEET]
    assert len(fleet_loads) == 20
    for load in fleet_loads:
        mine = [r.duration_s for r in records if r.serial == load["serial"]]
        assert load["load_s"] == max(mine) == load["all_s"]
        assert load["slowest_host"] == "far-1"
    # far-1 takes 0.5 s a transfer: no serial reaches the whole fleet within 300 ms; the
    # near site alone meets it every time.
    assert rows[FLEET]["sla_share"] == 0.0 and rows["near"]["sla_share"] == 1.0
    assert figures["sla"] == (
        "95 % of the fleet served 0.0 % of serials within 0.3 s (0 of 20; 95 % interval "
        "0.0 % to 16.1 %, Wilson)"
    )
    far = next(f for f in figures["secondaries"] if f["host"] == "far-1")
    assert far["serials"] == 20 and far["served"] == 20
    assert far["transfers"] < 20 and far["condensed"] >= 1 and far["ixfr"] == far["transfers"]
    assert far["max_behind_serials"] >= 2 and far["max_behind_s"] >= 0.5
    near = next(f for f in figures["secondaries"] if f["host"] == "near-1")
    assert near["transfers"] == 20 and near["max_behind_serials"] == 1
    assert near["failures"] == {"timed_out": 1} and near["soa_queries"] == 3


def test_fallbacks_are_listed_with_their_reason(tmp_path: Path) -> None:
    reason = "incomplete history, serial 12, fallback to AXFR"
    records = _records(
        tmp_path,
        transfer_s={"near-1": 0.05, "near-2": 0.05, "far-1": 0.05},
        axfr={"far-1": {14: reason}},
    )
    (figures,) = stream_summary(records).values()
    far = next(f for f in figures["secondaries"] if f["host"] == "far-1")
    assert far["axfr"] == 1 and far["ixfr"] == 19
    assert far["fallbacks"] == [
        {"serial": 14, "fallback_kind": None, "fallback": reason, "fallback_by": None}
    ]


def test_lag_series_counts_what_is_published_and_not_served(tmp_path: Path) -> None:
    records = _records(tmp_path, transfer_s={"near-1": 0.05, "near-2": 0.05, "far-1": 0.5})
    far = sorted((r for r in records if r.host == "far-1"), key=lambda r: r.serial or 0)
    series = lag_series(far)
    assert series[0] == (0.0, 0, 0.0) and series[1] == (0.0, 1, 0.0)  # the first publish
    times = [t for t, _, _ in series]
    # In order, each instant at most twice (just before and after): the serials a
    # condensed transfer brought drop together.
    assert times == sorted(times) and all(times.count(t) <= 2 for t in times)
    assert series[-1][1:] == (0, 0.0)  # caught up at the end
    assert max(n for _, n, _ in series) >= 2
    # Just before far-1 first serves serial 11, it has been published for its latency.
    first = next(r for r in far if r.serial == 11)
    served = first.extra["stream"]["served_s"]
    before = next(p for p in series if p[0] == served)
    assert before[2] == pytest.approx(served) and before[1] >= 1


def test_no_stream_no_section() -> None:
    assert stream_summary([]) == {}
    with pytest.raises(ValueError):
        nearest_rank([], 50)


def test_only_a_publish_over_50_ms_after_its_slot_is_late(tmp_path: Path) -> None:
    # Each publish takes 0.3 s at 0.2 s intervals: from the second on, each starts later.
    records = _records(tmp_path, transfer_s=dict.fromkeys(HOSTS, 0.05), put_s=0.3)
    (figures,) = stream_summary(records).values()
    lates = sorted({r.serial: r.phases["publish_late"] for r in records}.values())
    assert lates[0] == 0.0 and lates[1] == pytest.approx(0.1)
    assert figures["late_publishes"] == 19 and figures["late_tolerance_s"] == 0.05
    assert figures["max_late_s"] == pytest.approx(0.1 * 19)


def test_pairs_never_served_rank_last_in_every_percentile(tmp_path: Path) -> None:
    """far-1 never transfers: a third of the pairs were never served. Its serials are not
    left out of the percentiles (the survivors' p95 would be near-2's): p95 and the
    maximum are not reached, the median is the served ones' median over all pairs."""
    records = _records(tmp_path, transfer_s={"near-1": 0.05, "near-2": 0.08, "far-1": None})
    (figures,) = stream_summary(records).values()
    rows = {row["site"]: row for row in figures["latency"]}
    fleet = rows[FLEET]
    assert (fleet["pairs"], fleet["never_served"], fleet["n"]) == (60, 20, 40)
    assert fleet["p95_s"] is None and fleet["max_s"] is None  # 33 % never served
    served = sorted(r.duration_s for r in records if r.counts or r.unchecked)
    assert fleet["p50_s"] == served[30 - 1]  # rank ceil(0.5 x 60) = 30 of all 60 pairs
    assert rows["near"]["p95_s"] == nearest_rank(served, 95)  # near served every serial
    assert rows["far"]["p50_s"] is None and rows["far"]["never_served"] == 20
    # Two of three serve each serial: ceil(0.95 x 3) = 3 never do.
    assert fleet["load_p95_s"] is None and fleet["sla_share"] == 0.0


def test_one_pair_in_twenty_never_served_still_reaches_p95(tmp_path: Path) -> None:
    records = _records(tmp_path, transfer_s=dict.fromkeys(HOSTS, 0.05))
    kept = [r for r in records if not (r.host == "far-1" and r.serial == 12)]
    missing = next(r for r in records if r.host == "far-1" and r.serial == 12)
    never = TransferRecord.from_dict(
        missing.to_dict()
        | {"ok": False, "verified": False, "duration_s": None, "failure": "timeout",
           "error": "timeout after 10 s from the last publish: far-1 never served serial 12"}
    )  # fmt: skip
    (figures,) = stream_summary([*kept, never]).values()
    fleet = next(row for row in figures["latency"] if row["site"] == FLEET)
    assert fleet["never_served"] == 1 and fleet["pairs"] == 60  # 1.7 %: p95 is reached
    served = sorted(r.duration_s for r in kept)
    assert fleet["p95_s"] == served[57 - 1]  # rank ceil(0.95 x 60) = 57 of 60, 59 served
    assert fleet["max_s"] is None


def test_load_times_carry_bounds_from_the_records_error_bars(tmp_path: Path) -> None:
    records = _records(tmp_path, transfer_s={"near-1": 0.05, "near-2": 0.08, "far-1": 0.5})
    (figures,) = stream_summary(records).values()
    for load in (x for x in figures["loads"] if x["site"] == FLEET):
        mine = [r for r in records if r.serial == load["serial"]]
        # The 3rd of 3 (ceil(0.95 x 3)): the largest of the earliest ends.
        earliest = max(max(0.0, r.duration_s - r.duration_error_s) for r in mine)
        assert load["load_earliest_s"] == pytest.approx(earliest)
        assert load["load_earliest_s"] < load["load_s"]  # each poll gap is an error
    fleet = next(row for row in figures["latency"] if row["site"] == FLEET)
    earliest = sorted(x["load_earliest_s"] for x in figures["loads"] if x["site"] == FLEET)
    assert fleet["load_p95_earliest_s"] == nearest_rank(earliest, 95)
    assert fleet["load_p95_earliest_s"] <= fleet["load_p95_s"]


def test_the_sla_share_has_a_wilson_interval(tmp_path: Path) -> None:
    # Known values (Wilson score, z = 1.96): 0 of 20 -> [0, 0.161], 20 of 20 -> [0.839, 1],
    # 99 of 100 -> [0.9455, 0.9982].
    assert wilson_interval(0, 20) == (0.0, pytest.approx(0.16113, abs=1e-5))
    assert wilson_interval(20, 20) == (pytest.approx(0.83887, abs=1e-5), 1.0)
    low, high = wilson_interval(99, 100) or (0, 0)
    assert (low, high) == (pytest.approx(0.9455, abs=1e-4), pytest.approx(0.9982, abs=1e-4))
    assert wilson_interval(0, 0) is None
    records = _records(tmp_path, transfer_s={"near-1": 0.05, "near-2": 0.08, "far-1": 0.5})
    (figures,) = stream_summary(records).values()
    near = next(row for row in figures["latency"] if row["site"] == "near")
    assert near["sla_met"] == 20 and near["sla_share"] == 1.0
    assert (near["sla_low"], near["sla_high"]) == wilson_interval(20, 20)


def test_failed_attempts_are_counts_per_category_not_the_logs_other_facts() -> None:
    """A secondary's log facts carry its stamps' resolution and first failing line beside
    the counts; the failed-attempts cell shows only categories that happened."""
    from harness.results.stream import SecondaryFacts

    logged = {"server": "bind", "address_not_available": 0, "refused": 2, "timed_out": 0,
              "retry": None, "failing_lines": 3, "first_failure_s": 1.5,
              "resolution_s": 0.001}  # fmt: skip
    facts = SecondaryFacts(case="c", repeat=1, host="seoul", site="seoul", kind="bind",
                           serials=2, served=2, verified=1, transfers=2, ixfr=2, axfr=0,
                           unknown=0, condensed=0, fallbacks=[], failures=logged)  # fmt: skip
    assert facts.failure_counts == {"refused": 2}
