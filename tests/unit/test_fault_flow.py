"""The faulted repeat on a fake bench with a fake clock: when a fault begins and ends, how
healing, stuck secondaries and a new NOTIFY are measured, and that cleanup always runs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from harness.measure.faults import Account, FaultAct, fault_repeat
from harness.measure.live_faults import resets_unsent
from harness.measure.protocol import PublishFailed
from harness.measure.records import RecordContext
from harness.plan.case import CasePlan
from harness.results.model import TransferRecord
from harness.spec import FaultSpec
from tests.unit.test_flows import FakeBench, _plan

FLEET = """
repeats = 1
timeout = "60s"
trigger = "notify"
[[secondaries]]
name = "near"
kind = "bind"
[[secondaries]]
name = "far"
kind = "nsd"
"""


class FaultFake(FakeBench):
    """Scripted servers under a fault. Untargeted hosts serve `serve_after` seconds after the
    trigger. A targeted host serves then too if that is before the fault begins; otherwise
    `heal_after[host]` seconds after the fault ends (None: stuck), and `freed_after[host]`
    seconds after a new NOTIFY (None: never). A killed host forgets what it served."""

    def __init__(self, plan: CasePlan, **script: Any) -> None:
        # The primary's NOTIFYs leave as it serves the serial: the fault clock's zero.
        hosts = [h.name for h in plan.secondaries]
        script.setdefault("notify_after", dict.fromkeys(hosts, 0.2))
        super().__init__(plan, **script)
        self.heal_after: dict[str, float | None] = script.get("heal_after", {})
        self.freed_after: dict[str, float | None] = script.get("freed_after", {})
        self.bytes_per_s = script.get("bytes_per_s", 1000)
        self.fire_after_bytes = script.get("fire", True)
        self.publish_raises = script.get("publish_raises", False)
        # linkem's refusals and failures, as its answers and events carry them.
        self.arm_error: str | None = script.get("arm_error")
        self.begin_error: str | None = script.get("begin_error")
        self.fires_on: tuple[str, ...] = script.get("fires_on", ("near", "far"))
        self.unsent: dict[str, str] = script.get("unsent", {})
        self.log: list[tuple[Any, ...]] = []
        self.began: float | None = None
        self.ended: float | None = None
        self.renotified: float | None = None

    def _serves_at(self, host: str) -> float | None:
        plain = self._trigger_at + self.serve_after[host]
        fault = self.plan.fault
        targeted = fault is not None and (fault.target is None or fault.target == host)
        before = not targeted or self.began is None or plain < self.began
        restarted = targeted and fault and fault.kind == "secondary-kill" and self.ended
        if before and not restarted:
            return plain
        if self.ended is None:
            return None
        heal = self.heal_after.get(host, 0.5)
        if heal is not None:
            return self.ended + heal
        freed = self.freed_after.get(host)
        if self.renotified is not None and freed is not None:
            return self.renotified + freed
        return None

    def wait_served(
        self, hosts: list[str], zone: str, serial: int, deadline: float
    ) -> dict[str, float]:
        self.log.append(("wait", tuple(hosts), round(deadline - self._trigger_at, 3)))
        got = {}
        for host in hosts:
            at = self._serves_at(host)
            if at is not None and at <= deadline:
                got[host] = max(at, self.now)
        self.now = max([self.now, *got.values()]) if len(got) == len(hosts) else deadline
        self._served = got
        return got

    def publish(self, serial: int) -> Any:
        if self.publish_raises:
            raise PublishFailed("the primary did not take serial 12")
        return super().publish(serial)

    # --- FaultBench ---
    def fault_arm(self, fault: FaultSpec, hosts: list[str]) -> FaultAct:
        self.log.append(("arm", fault.kind, tuple(hosts)))
        return FaultAct(None, {"armed": True}, self.arm_error)

    def fault_fired(self, fault: FaultSpec, hosts: list[str]) -> FaultAct | None:
        assert fault.after_bytes is not None
        carried = (self.now - self._trigger_at) * self.bytes_per_s
        if self.fire_after_bytes and carried >= fault.after_bytes:
            self.began = self._trigger_at + fault.after_bytes / self.bytes_per_s
            self.ended = self.began  # a reset is one event
            # It fires on "far" 0.2 s after "near" (its link carried the bytes later).
            where = {"near": self.began, "far": self.began + 0.2}
            fired = {h: t for h, t in where.items() if t <= self.now and h in self.fires_on}
            unsent = {h: why for h, why in self.unsent.items() if h in fired}
            return FaultAct(self.began, {"event": "reset"}, hosts=fired, failed=unsent)
        return None

    def fault_begin(self, fault: FaultSpec, hosts: list[str]) -> FaultAct:
        if self.begin_error is not None:  # linkem refused every command: nothing began
            self.log.append(("refused", fault.kind))
            return FaultAct(None, {"linkem": "refused"}, self.begin_error)
        self.began = self.now
        if fault.kind == "reset":  # one event: its end is its beginning
            self.ended = self.now
        self.log.append(("begin", fault.kind, tuple(hosts), round(self.now - self._trigger_at, 3)))
        return FaultAct(self.now, {"did": "begin"})

    def fault_end(self, fault: FaultSpec, hosts: list[str]) -> FaultAct:
        self.ended = self.now
        self.log.append(("end", fault.kind, round(self.now - self._trigger_at, 3)))
        return FaultAct(self.now, {"did": "end"})

    def fault_cleanup(self, fault: FaultSpec, hosts: list[str]) -> dict[str, Any]:
        self.log.append(("cleanup", fault.kind))
        return {"restored": list(hosts)}

    def sleep_until(self, at: float) -> None:
        self.now = max(self.now, at)

    def link_bytes(self, hosts: list[str]) -> dict[str, int]:
        carried = max(0.0, self.now - self._trigger_at) * self.bytes_per_s
        return {h: int(carried) for h in hosts}

    def timeline_start(self, hosts: list[str]) -> None:
        self.log.append(("timeline",))

    def timeline_stop(self) -> dict[str, list[list[float]]]:
        return {"far": [[self._trigger_at, 0], [self._trigger_at + 1, 1000]]}

    def account(self, host: str, zone: str, since: float, *, stuck: bool) -> Account:
        return Account(
            failures={"timed_out": 1},
            failure_lines=["xfrd: failed"],
            marks=[(since + 0.5, "timed_out")],
            # While stuck it has not transferred yet.
            transfers=[] if stuck else [{"side": "primary", "xfr": "axfr"}],
            retry_xfr=None if stuck else "axfr",
            retry_xfr_from=None if stuck else "primary log",
            status="state: refreshing" if stuck else None,
            log=["line"] if stuck else [],
        )

    def renotify(self, zone: str) -> FaultAct:
        self.renotified = self.now
        self.log.append(("renotify", round(self.now - self._trigger_at, 3)))
        return FaultAct(self.now, {"argv": ["rndc", "notify", zone]})


def faulted(tmp_path: Path, fault: str, text: str = FLEET) -> CasePlan:
    plan = _plan(tmp_path, text + "[[faults]]\n" + fault + "\n")
    assert plan.fault is not None
    return plan


def run(bench: FaultFake) -> list[TransferRecord]:
    records: list[TransferRecord] = []
    fault_repeat(bench, bench, RecordContext("run-1", bench.plan), 1, 12, records.append, {})
    return records


def by_host(records: list[TransferRecord]) -> dict[str, TransferRecord]:
    return {r.host: r for r in records}


def test_link_down_heals_after_its_end(tmp_path: Path) -> None:
    plan = faulted(tmp_path, 'kind = "link-down"\nat = "1s"\nduration = "10s"\ntarget = "far"')
    bench = FaultFake(plan, serve_after={"near": 0.5, "far": 3.0}, heal_after={"far": 2.5})
    got = by_host(run(bench))
    steps = [e[0] for e in bench.log]
    assert steps.index("begin") < steps.index("end") < steps.index("cleanup")
    assert ("begin", "link-down", ("far",), 1.0) in bench.log  # at 1 s after the trigger
    assert ("end", "link-down", 11.0) in bench.log
    far = got["far"].extra["fault"]
    assert (far["began_s"], far["ended_s"], far["heal_s"]) == (1.0, 11.0, 2.5)
    assert far["served_s"] == pytest.approx(13.5)
    assert far["targeted"] and not far["stuck"] and not far["unaffected"]
    assert far["bytes"] == {"before": 1000, "during": 10_000, "after": 2500}
    assert far["evidence"]["begin"] == {"did": "begin"} and far["kind"] == "link-down"
    assert far["server"]["retry_xfr"] == "axfr" and far["marks"] == [[1.5, "timed_out"]]
    assert far["timeline"] == [[0.0, 0], [1.0, 1000]]
    assert got["far"].counts and got["far"].duration_s == pytest.approx(13.5)  # from its NOTIFY
    near = got["near"].extra["fault"]
    assert near["unaffected"] and not near["targeted"] and near["heal_s"] == 0.0
    assert got["near"].counts


def test_a_stuck_secondary_keeps_its_account_and_gets_one_new_notify(tmp_path: Path) -> None:
    plan = faulted(tmp_path, 'kind = "link-down"\nat = "0s"\nduration = "5s"')
    bench = FaultFake(
        plan,
        serve_after={"near": 2.0, "far": 2.0},
        heal_after={"near": 1.0, "far": None},
        freed_after={"far": None},
    )
    got = by_host(run(bench))
    far = got["far"]
    assert far.failure == "timeout" and not far.ok and far.duration_s is None
    assert "stuck" in (far.error or "") and "new NOTIFY" in (far.error or "")
    fault = far.extra["fault"]
    assert fault["stuck"] and not fault["freed_by_notify"] and fault["heal_s"] is None
    assert fault["account"] == {"status": "state: refreshing", "log": ["line"]}
    assert fault["renotify"]["freed"] is False and fault["renotify"]["sent_s"] == 65.0
    # One new NOTIFY, to the stuck only, waited for as long as the timeout.
    assert [e for e in bench.log if e[0] == "renotify"] == [("renotify", 65.0)]
    assert ("wait", ("far",), 125.0) in bench.log
    assert got["near"].counts and got["near"].extra["fault"]["heal_s"] == 1.0


def test_a_new_notify_that_frees_a_stuck_secondary_is_recorded(tmp_path: Path) -> None:
    plan = faulted(tmp_path, 'kind = "link-down"\nat = "0s"\nduration = "5s"\ntarget = "far"')
    bench = FaultFake(
        plan,
        serve_after={"near": 0.2, "far": 2.0},
        heal_after={"far": None},
        freed_after={"far": 0.4},
    )
    far = by_host(run(bench))["far"]
    fault = far.extra["fault"]
    assert fault["stuck"] and fault["freed_by_notify"]
    assert fault["renotify"]["served_after_s"] == pytest.approx(0.4)
    # Its account while stuck, and the transfer that freed it as logged afterwards.
    assert fault["account"]["status"] == "state: refreshing"
    assert fault["server"]["retry_xfr"] == "axfr"
    # Freed is still not healed on its own: a timeout, with a verified copy.
    assert far.failure == "timeout" and far.verified and not far.counts
    assert "a new NOTIFY freed it" in (far.error or "")


def test_a_killed_secondary_counts_only_what_it_serves_after_its_restart(tmp_path: Path) -> None:
    plan = faulted(tmp_path, 'kind = "secondary-kill"\nat = "2s"\nduration = "3s"\ntarget = "far"')
    bench = FaultFake(plan, serve_after={"near": 0.5, "far": 0.5}, heal_after={"far": 1.5})
    far = by_host(run(bench))["far"].extra["fault"]
    # It served at 0.5 s, was killed at 2 s, started again at 5 s and served 1.5 s later.
    assert far["served_s"] == pytest.approx(6.5) and far["heal_s"] == 1.5
    assert not far["unaffected"]


def test_an_armed_reset_begins_when_linkem_fires_it(tmp_path: Path) -> None:
    plan = faulted(tmp_path, 'kind = "reset"\nafter_bytes = 2500')
    bench = FaultFake(plan, serve_after={"near": 9.0, "far": 9.0}, bytes_per_s=1000)
    got = by_host(run(bench))
    assert ("arm", "reset", ("near", "far")) in bench.log
    fault = got["far"].extra["fault"]
    assert fault["began_s"] == pytest.approx(2.5) and fault["ended_s"] == fault["began_s"]
    assert not any(e[0] == "begin" for e in bench.log)  # linkem began it, not the harness
    # Each link's own reset: far's fired 0.2 s later; its healing counts from there.
    assert fault["fired_s"] == pytest.approx(2.7)
    assert got["near"].extra["fault"]["fired_s"] == pytest.approx(2.5)
    assert fault["heal_s"] == pytest.approx(0.3)
    assert got["near"].extra["fault"]["heal_s"] == pytest.approx(0.5)


def test_an_armed_fault_that_never_fires_fails_its_records_with_its_own_error(
    tmp_path: Path,
) -> None:
    """The secondaries served before the link carried the bytes: ordinary transfers, not a
    fault's, so no record counts as "no fault" and each says why first."""
    plan = faulted(tmp_path, 'kind = "reset"\nafter_bytes = "1MB"')
    bench = FaultFake(plan, serve_after={"near": 1.0, "far": 1.5}, fire=False)
    got = by_host(run(bench))
    for host in ("near", "far"):
        record, fault = got[host], got[host].extra["fault"]
        assert fault["began_s"] is None and "never began" in fault["error"]
        assert "every secondary served the serial" in fault["error"]
        assert fault["heal_s"] is None and not record.counts and not record.ok
        assert record.failure == "harness" and record.verified  # the copy itself was right
        assert (record.error or "").startswith(
            "the reset fault did not happen as asked: never began: every secondary served"
        )
        assert fault["not_as_asked"] == record.error
    assert ("cleanup", "reset") in bench.log


def test_a_fault_linkem_refused_fails_every_record_with_linkems_words(tmp_path: Path) -> None:
    plan = faulted(tmp_path, 'kind = "link-down"\nat = "0.5s"\nduration = "2s"')
    why = "linkem refused {...}: no direction named 'far forward'; linkem has forward"
    bench = FaultFake(plan, serve_after={"near": 1.0, "far": 1.5}, begin_error=why)
    got = run(bench)
    assert ("refused", "link-down") in bench.log and not any(e[0] == "end" for e in bench.log)
    assert [r.failure for r in got] == ["harness", "harness"] and not any(r.counts for r in got)
    for record in got:
        assert record.error == f"the link-down fault did not happen as asked: {why}"
        assert record.extra["fault"]["error"] == why


def test_an_arming_linkem_refused_is_kept_whatever_happened_next(tmp_path: Path) -> None:
    plan = faulted(tmp_path, 'kind = "reset"\nafter_bytes = 2500')
    why = "direction 'far forward' does not inspect packet headers"
    bench = FaultFake(plan, serve_after={"near": 9.0, "far": 9.0}, arm_error=why)
    got = by_host(run(bench))
    # It fired on the links that took it; what linkem refused is still this fault's error.
    assert got["near"].extra["fault"]["began_s"] == pytest.approx(2.5)
    for record in got.values():
        assert record.failure == "harness" and not record.counts
        assert f"did not happen as asked: arming it: {why}" in (record.error or "")


def test_a_reset_that_never_fired_on_a_targets_link_fails_that_target(tmp_path: Path) -> None:
    plan = faulted(tmp_path, 'kind = "reset"\nafter_bytes = 2500')
    bench = FaultFake(plan, serve_after={"near": 9.0, "far": 9.0}, fires_on=("near",))
    got = by_host(run(bench))
    assert got["near"].counts and got["near"].extra["fault"]["not_as_asked"] is None
    far = got["far"]
    assert far.failure == "harness" and not far.counts
    assert far.error == (
        "the reset fault did not happen as asked: it never fired on far's link (armed for "
        "after 2,500 bytes)"
    )


def test_a_reset_whose_resets_were_not_sent_fails_that_target(tmp_path: Path) -> None:
    plan = faulted(tmp_path, 'kind = "reset"\nafter_bytes = 2500')
    why = "linkem cut 10.0.0.1:53 > 10.0.1.2:40000 on far forward but sent 0 of its 2 resets"
    bench = FaultFake(plan, serve_after={"near": 9.0, "far": 9.0}, unsent={"far": why})
    got = by_host(run(bench))
    assert got["near"].counts
    assert got["far"].failure == "harness" and not got["far"].counts
    assert got["far"].error == f"the reset fault did not happen as asked on far's link: {why}"


def test_a_stuck_secondary_of_a_fault_not_as_asked_says_the_fault_first(tmp_path: Path) -> None:
    plan = faulted(tmp_path, 'kind = "reset"\nafter_bytes = 2500\ntarget = "far"')
    bench = FaultFake(
        plan,
        serve_after={"near": 0.5, "far": 9.0},
        heal_after={"far": None},
        fires_on=("near",),
    )
    far = by_host(run(bench))["far"]
    assert far.failure == "harness"
    assert (far.error or "").startswith(
        "the reset fault did not happen as asked: it never fired on far's link"
    )
    assert "stuck: far never served" in (far.error or "")


def test_linkems_reset_events_are_held_to_the_resets_they_wanted() -> None:
    """The event's shape as linkem/src/worker.rs writes it."""
    event = {
        "event": "reset",
        "direction": "k forward",
        "at_unix": 1.0,
        "detail": {
            "connection": "10.0.0.1:53 > 10.0.1.3:40000",
            "resets": [{"to": "10.0.1.3:40000 > 10.0.0.1:53", "seq": 9}],
            "wanted": 2,
            "failed": ["to 10.0.0.1:53 > 10.0.1.3:40000: Network is unreachable (os error 101)"],
        },
    }
    assert resets_unsent(event) == (
        "linkem cut 10.0.0.1:53 > 10.0.1.3:40000 on k forward but sent 1 of its 2 resets "
        "(to 10.0.0.1:53 > 10.0.1.3:40000: Network is unreachable (os error 101))"
    )
    whole = {**event, "detail": {**event["detail"], "resets": [{}, {}], "failed": []}}
    assert resets_unsent(whole) is None
    # An event that lists no reset at all told no end, whatever else it says.
    bare = {**event, "detail": {"connection": "c", "resets": []}}
    assert "sent 0 of its 2 resets (linkem gave no reason)" in (resets_unsent(bare) or "")


def test_a_server_fault_after_bytes_begins_on_the_link_counters(tmp_path: Path) -> None:
    plan = faulted(tmp_path, 'kind = "primary-restart"\nafter_bytes = 3000')
    bench = FaultFake(plan, serve_after={"near": 9.0, "far": 9.0}, bytes_per_s=1000)
    fault = by_host(run(bench))["near"].extra["fault"]
    assert fault["began_s"] == pytest.approx(3.0, abs=0.06)
    assert ("end", "primary-restart", pytest.approx(3.0, abs=0.06)) in bench.log


def test_a_failed_publish_still_cleans_up(tmp_path: Path) -> None:
    plan = faulted(tmp_path, 'kind = "reset"\nafter_bytes = 10')
    bench = FaultFake(plan, serve_after={"near": 1.0, "far": 1.0}, publish_raises=True)
    records: list[TransferRecord] = []
    with pytest.raises(PublishFailed):
        fault_repeat(bench, bench, RecordContext("run-1", plan), 1, 12, records.append, {})
    assert [r.failure for r in records] == ["publish", "publish"]
    assert ("cleanup", "reset") in bench.log
    assert ("mark", "transfer-end", 1) in bench.calls


def test_where_a_faulted_repeats_wall_time_went(tmp_path: Path) -> None:
    plan = faulted(tmp_path, 'kind = "link-down"\nat = "1s"\nduration = "4s"')
    bench = FaultFake(plan, serve_after={"near": 0.5, "far": 3.0}, verify_s=0.7)
    run(bench)
    split = bench.spent.split()
    # Each secondary's copy verified, the harness's; nothing left out of a phase.
    assert split.phases["verify"] == pytest.approx(2 * 0.7)
    assert split.unaccounted_s == pytest.approx(0.0)
