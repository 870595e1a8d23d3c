"""A fleet measures the secondaries that can be measured (issue 28): one that never gets its
first copy (or the warm-up) is left out of the visit's measured set and recorded as missing
in its server's words every repeat, while the others are measured and counted. Fake bench
(tests/unit/test_flows.py) and a visit's session on it; no root, no servers."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from harness.measure import first_copies, flows, protocol
from harness.measure.logged import Logged
from harness.measure.measured import FIRST_COPY, WARMUP, Missing, NoneServed
from harness.measure.records import RecordContext
from harness.measure.switch_proof import prove_switch
from harness.plan.case import CasePlan, GroupPlan
from harness.results.fleet import fleet_repeats
from harness.results.model import TransferRecord
from harness.run.session import GroupSession, RunContext
from tests.unit.test_flows import FakeBench, _plan

GONE_SAID = (
    "2026-11-28T09:02:54.307 general: info: zone example/IN: refresh: retry limit for primary "
    "198.19.234.2#53 exceeded (source 0.0.0.0#0)"
)


class Bench(FakeBench):
    """FakeBench that keeps which hosts each wait polled and when each log was read from,
    and whose servers' logs say `said[host]` as their first failure line since their start
    (nothing in a repeat: a secondary behind total loss hears no NOTIFY)."""

    def __init__(self, plan: CasePlan, said: dict[str, str] | None = None, **script: Any):
        super().__init__(plan, **script)
        self.said = said or {}
        self.waited: list[tuple[int, list[str]]] = []
        self.read_from: list[tuple[str, float]] = []
        self.started: float | None = None

    def select(self, case: CasePlan) -> dict[str, str]:
        return {}  # one case: nothing to switch

    def start_secondaries(self) -> None:
        self.started = self.wall()
        super().start_secondaries()

    def wait_served(
        self,
        hosts: list[str],
        zone: str,
        serial: int,
        deadline: float,
        straggle: float | None = None,
    ) -> dict[str, float]:
        self.waited.append((serial, list(hosts)))
        return super().wait_served(hosts, zone, serial, deadline, straggle)

    def logged(self, host: str, zone: str, serial: int, since: float) -> Logged:
        self.read_from.append((host, since))
        logged = super().logged(host, zone, serial, since)
        failures: dict[str, Any] = {"timed_out": 0, "first_failure_line": None}
        if host in self.said and since == self.started:
            failures = {"timed_out": 2, "first_failure_line": self.said[host]}
        return Logged(logged.secondary, logged.primary, failures, {}, [])


def fleet(tmp_path: Path, text: str = 'repeats = 2\ntimeout = "30s"\n') -> CasePlan:
    return _plan(tmp_path, "" + text, secondaries=3)


def run(bench: FakeBench) -> list[TransferRecord]:
    records: list[TransferRecord] = []
    flows.run_flows(bench, RecordContext("run-1", bench.plan), records.append)
    return records


def test_a_secondary_without_its_first_copy_is_missing_and_the_others_are_counted(
    tmp_path: Path,
) -> None:
    plan = fleet(tmp_path)
    bench = Bench(plan, {"site-2": GONE_SAID}, serve_after={"site-0": 1.0, "site-1": 1.5})
    records = run(bench)
    assert [(r.repeat, r.host, r.ok) for r in records] == [
        (1, "site-0", True), (1, "site-1", True), (1, "site-2", False),
        (2, "site-0", True), (2, "site-1", True), (2, "site-2", False),
    ]  # fmt: skip
    # The first copies waited for all three up to their deadline; from then on only the
    # measured two are polled (the warm-up 11, the repeats 12 and 13).
    assert bench.waited == [
        (10, ["site-0", "site-1", "site-2"]),
        (11, ["site-0", "site-1"]),
        (12, ["site-0", "site-1"]),
        (13, ["site-0", "site-1"]),
    ]
    gone = [r for r in records if r.host == "site-2"]
    for record in gone:
        assert record.failure == "timeout" and record.duration_s is None and not record.verified
        assert record.error == (
            "missing: never got its first copy: timeout 30 s after another secondary's copy: "
            "the site-2 never served example. serial 10"
        )
        # Its words since its start, and (as every record) the repeat's own counts.
        said = record.extra["missing"]
        assert said["why"] == FIRST_COPY and said["since"] == bench.started
        assert said["secondary_failures"]["first_failure_line"] == GONE_SAID
        assert record.server_logged["secondary_failures"]["timed_out"] == 0
        # The primary's NOTIFY to it is kept: the fleet's origin counts every NOTIFY.
        assert record.phases == pytest.approx({"primary_reload": 0.2, "notify_sent": 0.3})
    assert [r.serial for r in gone] == [12, 13]
    # k of N: the fleet did not converge, in the gone secondary's words; the others count.
    for repeat in fleet_repeats(records):
        assert repeat.served_of == "2 of 3 served" and not repeat.converged
        assert repeat.last_s is None and repeat.p95_s is None
        assert repeat.p50_s == pytest.approx(1.5)
        (missing,) = repeat.missing
        assert missing["host"] == "site-2" and missing["server_said"] == GONE_SAID


def test_a_first_copy_that_comes_late_does_not_join_the_measured_set(tmp_path: Path) -> None:
    """Right after a first copy a secondary answers the next NOTIFY late (the warm-up's
    reason): one that got its copy after the deadline would be measured from another
    baseline, so it stays out for the visit, never polled, never verified."""
    plan = fleet(tmp_path, 'repeats = 3\ntimeout = "30s"\n')
    # site-2 would serve 160 s after its start: 10 s past the first copies' deadline, and
    # before any of the repeats (the fake serves every later serial as soon as polled).
    bench = Bench(plan, serve_after={"site-0": 1.0, "site-1": 1.0, "site-2": 160.0})
    records = run(bench)
    assert all("site-2" not in hosts for _, hosts in bench.waited[1:])
    late = [r for r in records if r.host == "site-2"]
    assert [(r.repeat, r.ok, r.extra["missing"]["why"]) for r in late] == [
        (1, False, FIRST_COPY), (2, False, FIRST_COPY), (3, False, FIRST_COPY),
    ]  # fmt: skip
    assert sum(r.ok for r in records) == 2 * 3


def test_a_secondary_that_misses_the_warm_up_is_missing_too(tmp_path: Path) -> None:
    plan = fleet(tmp_path, 'repeats = 1\ntimeout = "30s"\n')
    bench = Bench(plan, {"site-1": GONE_SAID})
    wait = bench.wait_served

    def site_1_lost_after_its_copy(
        hosts: list[str], zone: str, serial: int, deadline: float, straggle: float | None = None
    ) -> dict[str, float]:
        got = wait(hosts, zone, serial, deadline, straggle)
        return {h: at for h, at in got.items() if serial == 10 or h != "site-1"}

    bench.wait_served = site_1_lost_after_its_copy  # type: ignore[method-assign]
    records = run(bench)
    assert [(r.host, r.ok) for r in records] == [
        ("site-0", True), ("site-1", False), ("site-2", True),
    ]  # fmt: skip
    missing = records[1]
    assert missing.error == (
        "missing: never served the warm-up serial: timeout after 30 s: the site-1 never "
        "served example. serial 11"
    )
    assert missing.extra["missing"]["why"] == WARMUP
    assert missing.extra["missing"]["secondary_failures"]["first_failure_line"] == GONE_SAID


def test_when_no_secondary_got_its_first_copy_the_visit_fails_in_every_ones_words(
    tmp_path: Path,
) -> None:
    plan = fleet(tmp_path)
    said = {f"site-{i}": f"{GONE_SAID} ({i})" for i in range(3)}
    bench = Bench(plan, said, serve_after={})
    with pytest.raises(NoneServed) as raised:
        first_copies.prepare_updates(bench)
    assert str(raised.value) == (
        "timeout after 150 s: the site-0, site-1, site-2 never served example. serial 10"
    )
    assert isinstance(raised.value, protocol.XfrTimeout)  # the session's failed visit
    assert {h: s["secondary_failures"]["first_failure_line"] for h, s in
            raised.value.said.items()} == said  # fmt: skip
    assert [c for c in bench.calls if c[0] == "publish"] == []  # no warm-up published


def test_the_session_records_every_secondarys_words_when_none_got_its_copy(
    tmp_path: Path,
) -> None:
    plan = fleet(tmp_path)
    said = {f"site-{i}": f"{GONE_SAID} ({i})" for i in range(3)}
    records: list[TransferRecord] = []
    ctx = RunContext("run-1", records.append, {plan.name: {}}, backend=None)  # type: ignore[arg-type]
    session = GroupSession(GroupPlan((plan,)), tmp_path / "visit", ctx)
    session.live = Bench(plan, said, serve_after={})  # type: ignore[assignment]
    session.run(0, 1, 1, 0)
    session.run(0, 2, 2, 0)
    assert [(r.repeat, r.failure) for r in records] == [(1, "timeout")] * 3 + [(2, "timeout")] * 3
    first, later = records[:3], records[3:]
    assert [r.server_logged["secondary_failures"]["first_failure_line"] for r in first] == [
        said[f"site-{i}"] for i in range(3)
    ]
    # The next slots say the same error; the words are in the first slot only, so that
    # the report's sums over records count each logged line once.
    assert all(r.error == first[0].error and r.server_logged == {} for r in later)
    (repeat, _) = fleet_repeats(records)
    assert repeat.served_of == "0 of 3 served"
    assert [m["server_said"] for m in repeat.missing] == list(said.values())


def test_the_session_keeps_the_missing_secondary_out_of_every_slot(tmp_path: Path) -> None:
    plan = fleet(tmp_path)
    records: list[TransferRecord] = []
    ctx = RunContext("run-1", records.append, {plan.name: {}}, backend=None)  # type: ignore[arg-type]
    session = GroupSession(GroupPlan((plan,)), tmp_path / "visit", ctx)
    bench = Bench(plan, {"site-0": GONE_SAID}, serve_after={"site-1": 1.0, "site-2": 1.0})
    session.live = bench  # type: ignore[assignment]
    session.run(0, 1, 1, 0)
    session.run(0, 2, 2, 0)
    assert session.broken is None and list(session.missing) == ["site-0"]
    assert [(r.repeat, r.host, r.ok) for r in records] == [
        (1, "site-0", False), (1, "site-1", True), (1, "site-2", True),
        (2, "site-0", False), (2, "site-1", True), (2, "site-2", True),
    ]  # fmt: skip


def test_retransfer_commands_go_to_the_measured_secondaries_only(tmp_path: Path) -> None:
    plan = fleet(tmp_path, 'repeats = 1\ntrigger = "retransfer"\n')
    bench = Bench(plan, serve_after={"site-0": 1.0, "site-2": 1.0})
    records = run(bench)
    controls = [c[1] for c in bench.calls if c[0] == "control"]
    assert controls == ["site-0", "site-2"] * 2  # the warm-up's refresh, the repeat's
    assert [(r.host, r.ok) for r in records] == [
        ("site-0", True), ("site-1", False), ("site-2", True),
    ]  # fmt: skip
    assert records[1].phases == {}  # no NOTIFY, no command: nothing was sent to it


def test_a_switch_is_proven_on_the_measured_secondaries(tmp_path: Path) -> None:
    plan = fleet(tmp_path, 'transports = ["xot"]\ntimeout = "60s"\n')
    bench = Bench(plan, serve_after={"site-0": 1.0, "site-1": 1.0, "site-2": None})
    gone = {"site-2": Missing(FIRST_COPY, "missing: never got its first copy", 0.0)}
    proof = prove_switch(bench, 21, 20, restarted=["site-1", "site-2"], missing=gone)
    assert proof.ok and sorted(proof.seen) == ["site-0", "site-1"]
    # The restarted one that is measured is waited for; the missing one is not.
    assert bench.waited == [(20, ["site-1"]), (21, ["site-0", "site-1"])]
    # Without it missing, the same secondary fails the proof, as any measured one would.
    unproven = prove_switch(Bench(plan, serve_after=bench.serve_after), 21, 20, [])
    assert unproven.problems == {"site-2": "it did not serve serial 21 within 60 s"}
