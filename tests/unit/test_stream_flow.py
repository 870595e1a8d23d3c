"""The stream flow on a fake bench with a fake clock: no root, no servers.

The fake is a small simulation of a fleet: the primary serves each serial a moment after it
was put there; a secondary, when idle and behind the primary, starts a transfer that takes
its own time and brings the primary's serial of that instant (so a slow one condenses
several serials into one transfer, as real servers do).
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from harness import spec
from harness.measure.protocol import PublishFailed, Verification
from harness.measure.records import RecordContext
from harness.measure.stream import Put, StreamTransfer, stream_repeat
from harness.measure.stream_records import PRIMARY
from harness.plan.case import CasePlan, plan_case
from harness.results.model import TransferRecord
from harness.xfr.follow import SerialChange
from tests.unit.test_flows import FakeBench

POLL = 0.005  # the fake follower's poll gap


def _plan(tmp_path: Path, hosts: list[str], stream: str, extra: str = "") -> CasePlan:
    path = tmp_path / "s.toml"
    path.write_text(f'trigger = "stream"\nxfr = ["ixfr"]\ntimeout = "10s"\n{extra}\n'
                    f"[stream]\n{stream}\n")  # fmt: skip
    plan = plan_case(spec.load(path).cases[0])
    first = plan.secondaries[0]
    secondaries = tuple(dataclasses.replace(first, name=h, site=h.split("-")[0]) for h in hosts)
    return dataclasses.replace(plan, hosts=(plan.primary, *secondaries))


class FakeStreamBench(FakeBench):
    """`transfer_s[host]`: how long one of its transfers takes (None: it never transfers);
    `put_s`: how long a publish takes; `serve_s`: from the publish's return until the
    primary serves it; `ahead`: host -> (time into the stream, serial it jumps to);
    `axfr`: host -> {serial: the reason its transfer to that serial was an AXFR}."""

    def __init__(self, plan: CasePlan, **script: Any) -> None:
        super().__init__(plan, **script)
        self.transfer_s: dict[str, float | None] = script["transfer_s"]
        self.put_s = script.get("put_s", 0.002)
        self.serve_s = script.get("serve_s", 0.003)
        self.ahead = script.get("ahead", {})
        self.axfr = script.get("axfr", {})
        self.put_fails = script.get("put_fails", set())
        self.primary_queue: list[tuple[float, int]] = []
        self.primary_serial = self.base_serial
        self.serial = dict.fromkeys(self.transfer_s, self.base_serial)
        self.busy: dict[str, tuple[float, int] | None] = dict.fromkeys(self.transfer_s)
        self.made: dict[str, list[StreamTransfer]] = {h: [] for h in self.transfer_s}
        self.lags: list[dict[str, tuple[int, float]]] = []
        self.changes: list[SerialChange] = []
        self.seen_changes: list[SerialChange] = []  # every change, for the tests
        self.start = 0.0

    def prepare_stream(self, serials: list[int]) -> None:
        self.calls.append(("prepare_stream", serials[0], serials[-1]))

    def put_serial(self, serial: int) -> Put:
        self.calls.append(("put", serial, round(self.now - self.start, 6)))
        if serial in self.put_fails:
            raise PublishFailed(f"the primary did not take serial {serial}: REFUSED")
        issued = self.now
        self.advance(self.now + self.put_s)
        self.primary_queue.append((self.now + self.serve_s, serial))
        return Put(issued, self.now, "dynamic update")

    @contextlib.contextmanager
    def follow(self, hosts: list[str]) -> Iterator[FakeStreamBench]:
        self.start = self.now
        self.calls.append(("follow", tuple(hosts)))
        yield self

    def expect(self, serial: int) -> None:
        pass

    def take(self, timeout: float) -> list[SerialChange]:
        self.advance(self.now + timeout)
        out, self.changes = self.changes, []
        return out

    def advance(self, end: float) -> None:
        """Run the simulated fleet until `end`."""
        while True:
            events: list[tuple[float, str]] = []
            if self.primary_queue:
                events.append((self.primary_queue[0][0], PRIMARY))
            events += [(busy[0], host) for host, busy in self.busy.items() if busy]
            events += [(self.start + at, f"ahead:{h}") for h, (at, _) in self.ahead.items()]
            due = [e for e in events if e[0] <= end]
            if not due:
                self.now = max(self.now, end)
                return
            at, who = min(due)
            self.now = max(self.now, at)
            if who == PRIMARY:
                _, self.primary_serial = self.primary_queue.pop(0)
                self.changes.append(SerialChange(PRIMARY, self.primary_serial, at, at - POLL))
            elif who.startswith("ahead:"):
                host = who.removeprefix("ahead:")
                _, serial = self.ahead.pop(host)
                self.serial[host] = serial
                self.changes.append(SerialChange(host, serial, at, at - POLL))
            else:
                _, serial = self.busy[who] or (0, 0)
                self.busy[who] = None
                reason = self.axfr.get(who, {}).get(serial)
                self.made[who].append(
                    StreamTransfer(
                        serial, "axfr" if reason else "ixfr", self.serial[who], fallback=reason
                    )
                )
                self.serial[who] = serial
                self.changes.append(SerialChange(who, serial, at, at - POLL))
            self.seen_changes.append(self.changes[-1])
            for host, took in self.transfer_s.items():
                if (
                    took is not None
                    and not self.busy[host]
                    and self.serial[host] < self.primary_serial
                ):
                    self.busy[host] = (self.now + took, self.primary_serial)

    def verify(self, host: str, zone: str, serial: int) -> Verification:
        self.calls.append(("verify", host, serial))
        return super().verify(host, zone, serial)

    def queries(self) -> dict[str, int]:
        return {PRIMARY: 7} | dict.fromkeys(self.transfer_s, 3)

    def stream_transfers(self, host: str, since: float) -> list[StreamTransfer]:
        return list(self.made[host])

    def stream_lag(self, case: str, lag: dict[str, tuple[int, float]]) -> None:
        self.lags.append(dict(lag))


def _stream(bench: FakeStreamBench) -> tuple[list[TransferRecord], int]:
    records: list[TransferRecord] = []
    last = stream_repeat(bench, RecordContext("run-1", bench.plan), 1, 11, records.append, {})
    return records, last


HOSTS = ["near-1", "near-2", "far-1"]


def test_every_serial_on_schedule_with_latencies_from_the_primary(tmp_path: Path) -> None:
    plan = _plan(tmp_path, HOSTS, 'interval = "200ms"\nupdates = 30')
    bench = FakeStreamBench(plan, transfer_s={"near-1": 0.05, "near-2": 0.08, "far-1": 0.5})
    records, last = _stream(bench)
    assert last == 40
    puts = [c for c in bench.calls if c[0] == "put"]
    assert [c[1] for c in puts] == list(range(11, 41))
    assert [c[2] for c in puts] == pytest.approx([0.2 * k for k in range(30)])  # on schedule
    assert len(records) == 30 * 3
    assert all(r.ok and r.trigger == "stream" and r.failure is None for r in records)
    # Only the final serial's copy was read: the serials before it say "not verified".
    final = [r for r in records if r.serial == 40]
    assert all(r.verified and r.counts and not r.unchecked for r in final)
    before = [r for r in records if r.serial != 40]
    assert all(not r.verified and r.unchecked and not r.counts for r in before)
    assert before[0].extra["unchecked"] == (
        f"not verified: only the final serial's copy is checked ({before[0].host}'s at "
        "serial 40 was)"
    )
    assert "zone_records" not in before[0].extra
    near = [r for r in records if r.host == "near-1"]
    assert [r.serial for r in near] == list(range(11, 41))
    # From the primary serving s (3 ms after the 2 ms publish) to near-1 serving it.
    assert all(r.duration_s == pytest.approx(0.05) for r in near)
    assert all(r.phases["publish_late"] == 0.0 for r in near)
    assert all(r.phases["primary_served"] == pytest.approx(0.005) for r in near)
    assert all(r.duration_error_s == pytest.approx(POLL) for r in near)
    assert all(r.server_logged["transfer"]["carried"] == 1 for r in near)
    assert all(r.extra["stream"]["due_s"] == pytest.approx(r.extra["stream"]["issued_s"])
               for r in near)  # fmt: skip
    # far-1 takes 0.5 s a transfer at 0.2 s intervals: it condenses, and each serial's
    # latency runs to the transfer that brought it or a later one.
    far = {r.serial: r for r in records if r.host == "far-1"}
    transfers = {r.server_logged["transfer"]["serial"]: r.server_logged["transfer"]
                 for r in far.values()}  # fmt: skip
    assert len(transfers) < 30 and sum(t["carried"] for t in transfers.values()) == 30
    assert any(t["condensed"] for t in transfers.values())
    for serial, record in far.items():
        brought = record.server_logged["transfer"]["serial"]
        assert brought >= serial
        assert record.duration_s >= 0.5 - 1e-9
    # The live view saw far-1 behind, and nobody behind at the end.
    assert max(lag["far-1"][0] for lag in bench.lags) >= 2
    assert bench.lags[-1] == dict.fromkeys(HOSTS, (0, 0.0))
    calls = [c[0] for c in bench.calls]
    assert calls.index("prepare_stream") < calls.index("follow") < calls.index("put")
    assert ("check_primary", 40) in bench.calls
    # The secondary's failed attempts (its log, FakeBench.logged) go with the final serial.
    finals = [r for r in records if r.serial == 40]
    assert all(r.server_logged["secondary_failures"] == {"timed_out": 1} for r in finals)
    assert not any("secondary_failures" in r.server_logged for r in records if r.serial != 40)
    # ...and what following it cost: the harness's SOA queries to it and to the primary.
    assert all(r.extra["stream"]["soa_queries"] == 3 for r in finals)
    assert all(r.extra["stream"]["primary_soa_queries"] == 7 for r in finals)
    # far-1 went straight past serials its transfers condensed: the poller saw it too.
    jumped = [r for r in far.values() if "served_serial" in r.extra["stream"]]
    assert jumped and all(r.extra["stream"]["served_serial"] > r.serial for r in jumped)


def test_a_publish_slower_than_the_interval_is_late_not_skipped(tmp_path: Path) -> None:
    plan = _plan(tmp_path, HOSTS[:1], 'interval = "200ms"\nupdates = 5')
    bench = FakeStreamBench(plan, transfer_s={"near-1": 0.05}, put_s=0.3)
    records, _ = _stream(bench)
    late = [r.phases["publish_late"] for r in records]
    assert late == pytest.approx([0.0, 0.1, 0.2, 0.3, 0.4])
    assert all(r.ok for r in records)


def test_a_secondary_ahead_of_the_primary_is_caught(tmp_path: Path) -> None:
    plan = _plan(tmp_path, HOSTS[:2], 'interval = "200ms"\nupdates = 5')
    bench = FakeStreamBench(
        plan, transfer_s={"near-1": 0.05, "near-2": 0.05}, ahead={"near-2": (0.41, 99)}
    )
    records, _ = _stream(bench)
    bad = [r for r in records if r.host == "near-2"]
    assert all(not r.ok and r.failure == "verification" for r in bad)
    assert "served serial 99, which the primary had not been given (the newest published " \
        "then: 13)" in bad[0].error  # fmt: skip
    assert all(r.ok for r in records if r.host == "near-1")


def test_a_secondary_that_goes_back_is_caught_with_what_was_seen(tmp_path: Path) -> None:
    """near-2 serves 13 by 0.45 s, then answers 11 at 0.5 s (a copy rolled back): every
    record of it fails, with the serials and the times, though it catches up again."""
    plan = _plan(tmp_path, HOSTS[:2], 'interval = "200ms"\nupdates = 5')
    bench = FakeStreamBench(
        plan, transfer_s={"near-1": 0.05, "near-2": 0.05}, ahead={"near-2": (0.5, 11)}
    )
    records, _ = _stream(bench)
    bad = [r for r in records if r.host == "near-2"]
    assert all(not r.ok and not r.counts and r.failure == "verification" for r in bad)
    reached = next(c.at for c in bench_changes(bench, "near-2") if c.serial == 13)
    assert bad[0].error == (
        "near-2 went back to serial 11 0.500 s into the stream, after serving serial 13 from "
        f"{reached - bench.start:.3f} s"
    )
    assert all(r.ok for r in records if r.host == "near-1")


def bench_changes(bench: FakeStreamBench, host: str) -> list[SerialChange]:
    return [c for c in bench.seen_changes if c.host == host]


def test_a_secondary_that_never_transfers_times_out_alone(tmp_path: Path) -> None:
    plan = _plan(tmp_path, HOSTS[:2], 'interval = "200ms"\nupdates = 3')
    bench = FakeStreamBench(plan, transfer_s={"near-1": 0.05, "near-2": None})
    records, _ = _stream(bench)
    stuck = [r for r in records if r.host == "near-2"]
    assert [r.failure for r in stuck] == ["timeout"] * 3
    assert "near-2 never served serial 11 (it serves 10)" in stuck[0].error
    assert all(r.ok for r in records if r.host == "near-1")
    # It waited the plan's timeout (10 s) after the last publish, not forever.
    assert bench.now - bench.start == pytest.approx(0.4 + 0.002 + 10, abs=1.1)
    assert [c for c in bench.calls if c[0] == "verify"] == [("verify", "near-1", 13)]


def test_an_axfr_fallback_is_in_the_record_of_the_serials_it_brought(tmp_path: Path) -> None:
    plan = _plan(tmp_path, HOSTS[:1], 'interval = "200ms"\nupdates = 4')
    reason = "IXFR, incoming, remote 198.18.0.1@53, fallback to AXFR (malformed data)"
    bench = FakeStreamBench(plan, transfer_s={"near-1": 0.05}, axfr={"near-1": {13: reason}})
    records, _ = _stream(bench)
    by_serial = {r.serial: r.server_logged["transfer"] for r in records}
    assert by_serial[13]["xfr"] == "axfr" and by_serial[13]["fallback"] == reason
    assert by_serial[12]["xfr"] == "ixfr" and "fallback" not in by_serial[12]


def test_a_refused_publish_stops_the_stream_and_says_so(tmp_path: Path) -> None:
    plan = _plan(tmp_path, HOSTS[:1], 'interval = "200ms"\nupdates = 5')
    bench = FakeStreamBench(plan, transfer_s={"near-1": 0.05}, put_fails={13})
    records: list[TransferRecord] = []
    with pytest.raises(PublishFailed) as caught:
        stream_repeat(bench, RecordContext("run-1", plan), 1, 11, records.append, {})
    assert caught.value.recorded
    assert [r.ok for r in records] == [True, True, False, False, False]
    assert all(r.failure == "publish" and "REFUSED" in (r.error or "") for r in records[2:])
    assert ("check_primary", 12) in bench.calls  # held to what it took


def test_a_primary_serving_something_else_fails_every_record(tmp_path: Path) -> None:
    plan = _plan(tmp_path, HOSTS[:1], 'interval = "200ms"\nupdates = 3')
    bench = FakeStreamBench(
        plan, transfer_s={"near-1": 0.05}, primary_wrong={13: "the primary serves serial 12"}
    )
    records: list[TransferRecord] = []
    with pytest.raises(PublishFailed, match="serves serial 12"):
        stream_repeat(bench, RecordContext("run-1", plan), 1, 11, records.append, {})
    assert [r.failure for r in records] == ["publish"] * 3
