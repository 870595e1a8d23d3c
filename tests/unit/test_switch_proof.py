"""A switch is proven by an unrecorded update over the new transport before a measured one;
a switch that fails is the harness's error, never a transfer result. Fake bench, and a
visit's session on it; no root, no servers."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from harness import spec
from harness.measure.live import Switched
from harness.measure.protocol import START_TIMEOUT, PublishFailed
from harness.measure.switch_proof import prove_switch
from harness.plan.case import CasePlan, GroupPlan, plan_case
from harness.results.model import TransferRecord
from harness.run.session import GroupSession, RunContext
from tests.unit.test_flows import FakeBench, _plan


def test_a_switch_is_proven_by_one_unrecorded_update(tmp_path: Path) -> None:
    plan = _plan(tmp_path, 'transports = ["xot-tsig"]\n')
    bench = FakeBench(plan, signed={"secondary": True})
    proof = prove_switch(bench, 21, 20, restarted=[])
    assert proof.ok and proof.serial == 21
    assert [c for c in bench.calls if c[0] in ("publish", "wait", "check_primary")] == [
        ("publish", 21),
        ("wait", 21),
        ("check_primary", 21),
    ]
    assert proof.for_host("secondary") == {
        "serial": 21,
        "seconds": pytest.approx(1.3),  # its NOTIFY 0.3 s after the reload, served 1.0 s later
        "seen": {"transport": "xot-tsig", "ports": [853], "signed": True,
                 "signed_said_by": "primary"},
    }  # fmt: skip


def test_a_secondary_still_on_its_old_transport_fails_the_proof(tmp_path: Path) -> None:
    # The NSD of issue 18 after `nsd-control reconfig`: a plain AXFR query to port 853.
    plan = _plan(tmp_path, 'transports = ["tcp"]\n')
    proof = prove_switch(FakeBench(plan, ports={"secondary": [853]}), 21, 20, [])
    assert not proof.ok
    assert proof.reason("tcp") == (
        "the switch to tcp was not proven by serial 21: secondary: the secondary connected "
        "to the primary's port 853, not 53 (tcp)"
    )
    unsigned = prove_switch(FakeBench(plan, signed={"secondary": True}), 21, 20, [])
    assert unsigned.problems == {
        "secondary": "the primary's log says the transfer was signed; tcp is unsigned"
    }


def test_a_secondary_that_never_takes_the_update_fails_the_proof(tmp_path: Path) -> None:
    plan = _plan(tmp_path, 'transports = ["xot"]\ntimeout = "60s"\n', secondaries=2)
    bench = FakeBench(plan, serve_after={"site-0": 1.0, "site-1": None})
    proof = prove_switch(bench, 21, 20, [])
    assert proof.problems == {"site-1": "it did not serve serial 21 within 60 s"}
    assert "site-0" in proof.seen and "site-1" not in proof.seen


def test_a_restarted_secondary_first_serves_what_the_primary_serves(tmp_path: Path) -> None:
    plan = _plan(tmp_path, 'transports = ["xot"]\ntimeout = "60s"\n')
    bench = FakeBench(plan)
    deadlines: list[tuple[int, float]] = []
    wait = bench.wait_served

    def watched(hosts: list[str], zone: str, serial: int, deadline: float) -> dict[str, float]:
        deadlines.append((serial, deadline - bench.now))
        return wait(hosts, zone, serial, deadline)

    bench.wait_served = watched  # type: ignore[method-assign]
    assert prove_switch(bench, 21, 20, restarted=["secondary"]).ok
    # Its start's transfer of serial 20 may take a start's time; then the proof's update.
    assert deadlines == [(20, START_TIMEOUT + 60.0), (21, 60.0)]


def test_retransfer_cases_refresh_and_a_wrong_primary_is_a_publish_error(tmp_path: Path) -> None:
    plan = _plan(tmp_path, 'trigger = "retransfer"\n')
    bench = FakeBench(plan)
    assert prove_switch(bench, 21, 20, []).ok
    assert ("control", "secondary", "refresh") in bench.calls
    wrong = FakeBench(plan, primary_wrong={21: "the primary serves serial 20, not 21"})
    with pytest.raises(PublishFailed, match="at the switch's serial 21: the primary serves"):
        prove_switch(wrong, 21, 20, [])


# --- a visit's slots ------------------------------------------------------------------------


class FakeLive(FakeBench):
    """The bench of a group: select() switches the secondary to the case's transport, by
    `how`; `stuck_on`: a transport the secondary never really switches to (it keeps the
    port of the previous case)."""

    def __init__(self, group: GroupPlan, how: Switched, stuck_on: str | None) -> None:
        super().__init__(group.first)
        self.how, self.stuck_on = how, stuck_on
        self.port = group.first.transport.port

    def select(self, case: CasePlan) -> dict[str, Switched]:
        if case is self.plan:
            return {}
        if case.transport.name != self.stuck_on:
            self.port = case.transport.port
        self.plan = case
        return {"secondary": self.how}

    def connect_ports(self, host: str, since: float) -> list[int]:
        return [self.port]


def _visit(tmp_path: Path, how: Switched, stuck_on: str | None) -> list[TransferRecord]:
    path = tmp_path / "s.toml"
    path.write_text('repeats = 2\ntransports = ["tcp", "xot"]\norder = "interleaved"\n')
    group = GroupPlan(tuple(plan_case(case) for case in spec.load(path).cases))
    records: list[TransferRecord] = []
    run = RunContext("run-1", records.append, {group.first.name: {}}, backend=None)  # type: ignore[arg-type]
    session = GroupSession(group, tmp_path / "visit", run)
    session.live = FakeLive(group, how, stuck_on)  # type: ignore[assignment]
    for position, case in enumerate([0, 1, 0, 1], start=1):
        session.run(case, (position + 1) // 2, position, 0)
    return records


def test_records_say_how_their_secondary_was_switched_and_what_proved_it(
    tmp_path: Path,
) -> None:
    records = _visit(tmp_path, "restart", stuck_on=None)
    assert [(r.transport, r.ok) for r in records] == [("tcp", True), ("xot", True)] * 2
    first, second = records[0].extra["schedule"], records[1].extra["schedule"]
    assert first["switched"] is False and "switched_by" not in first  # the start transport
    assert second["switched"] is True and second["switched_by"] == "restart"
    assert second["switch_s"] >= 0 and second["proof"]["seen"]["ports"] == [853]
    # Each switch publishes an unrecorded serial of its own: 11 the warm-up, 12 measured,
    # 13 the proof of xot, 14 measured, ...
    assert [r.serial for r in records] == [12, 14, 16, 18]


def test_a_failed_switch_is_a_harness_error_for_the_rest_of_the_visit(tmp_path: Path) -> None:
    records = _visit(tmp_path, "reconfig", stuck_on="xot")
    assert [(r.transport, r.failure) for r in records] == [
        ("tcp", None),
        ("xot", "harness"),  # never a timeout or a slow XoT transfer
        ("tcp", None),  # the switch back is proven in its turn
        ("xot", "harness"),
    ]
    failed, later = records[1], records[3]
    assert failed.error == (
        "the switch to xot was not proven by serial 13: secondary: the secondary connected "
        "to the primary's port 53, not 853 (xot)"
    )
    assert failed.duration_s is None and failed.extra["schedule"]["switched_by"] == "reconfig"
    assert later.error == f"not measured: {failed.error} (earlier in this visit)"


def test_select_failing_outright_is_a_switch_failure(tmp_path: Path) -> None:
    from harness.core.errors import ToolFailed

    class Broken(FakeLive):
        def select(self, case: CasePlan) -> dict[str, Switched]:
            if case is not self.plan:
                raise ToolFailed(["nsd-control", "reconfig"], 1, "error: could not SSL_read")
            return {}

    path = tmp_path / "s.toml"
    path.write_text('repeats = 1\ntransports = ["tcp", "xot"]\n')
    group = GroupPlan(tuple(plan_case(case) for case in spec.load(path).cases))
    records: list[TransferRecord] = []
    run: Any = RunContext("run-1", records.append, {group.first.name: {}}, backend=None)  # type: ignore[arg-type]
    session = GroupSession(group, tmp_path / "visit", run)
    session.live = Broken(group, "reconfig", None)  # type: ignore[assignment]
    session.run(0, 1, 1, 0)
    session.run(1, 1, 2, 0)
    assert [r.failure for r in records] == [None, "harness"]
    assert records[1].error == (
        "the switch to xot failed: nsd-control exited with 1: error: could not SSL_read"
    )
