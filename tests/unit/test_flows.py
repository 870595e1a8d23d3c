"""The measurement protocol on a fake bench with a fake clock: no root, no servers.

The fake scripts what real servers would do (when the primary serves a serial, when its
NOTIFY to each secondary leaves, when each secondary serves it) and records every call, so
the tests check what the flows measure and in which order, not how servers behave.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

from harness import spec
from harness.measure import first_copies, flows, protocol
from harness.measure.cold_start import logged_sum
from harness.measure.protocol import (
    ColdStartLog,
    Logged,
    Publication,
    Pulled,
    Verification,
)
from harness.measure.records import RecordContext
from harness.measure.wall import WallClock, describe
from harness.plan.case import CasePlan, HostPlan, plan_case
from harness.results.model import TransferRecord
from harness.xfr import XfrTimeout


class FakeBench:
    """Scripted servers. `serve_after[host]`: seconds from the trigger until `host` serves
    a new serial (None: never); `notify_after[host]`: seconds from the reload command until
    the primary's NOTIFY to it leaves."""

    def __init__(self, plan: CasePlan, **script: Any) -> None:
        self.plan = plan
        self.first_zone = "example."
        self.zones = script.get("zones", ["example."])
        self.base_serial = 10
        self.now = 1000.0
        self.calls: list[tuple[Any, ...]] = []
        hosts = [h.name for h in plan.secondaries]
        self.reload_s = script.get("reload_s", 0.2)
        self.notify_after = script.get("notify_after", dict.fromkeys(hosts, 0.3))
        self.serve_after = script.get("serve_after", dict.fromkeys(hosts, 1.0))
        self.control_s = script.get("control_s", 0.05)
        self.verified = script.get("verified", {})
        self.publish_fails = script.get("publish_fails", set())
        self.primary_wrong = script.get("primary_wrong", {})  # serial -> what differs
        self.zone_times = script.get("zone_times", {})
        self.verify_s = script.get("verify_s", 0.0)  # what reading a copy back takes
        self.read_s = script.get("read_s")  # of which the secondary sending it (None: unknown)
        # Verified from the secondary's file instead: its flush takes this long (None: read back)
        self.flush_s = script.get("flush_s")
        # Seconds before a host served (or a zone was served) that the last SOA query it
        # answered without the serial went out; missing: it answered none so.
        self.unserved_before = script.get("unserved_before", {})
        self.zone_unserved_before = script.get("zone_unserved_before", {})
        self._served: dict[str, float] = {}
        self._zones_served: dict[str, dict[str, float]] = {}
        # What the wire and the primary's log show of each host's transfers: by default the
        # selected case's port, and a log that does not say whether it was signed.
        self.ports = script.get("ports", {})
        self.signed = script.get("signed", {})
        # The kind the primary's log says it sent each host (missing: its log does not say),
        # and the fallback lines logged (base.Fallback.to_json()).
        self.sent = script.get("sent", {})
        self.fallbacks = script.get("fallbacks", [])
        self._trigger_at = self.now
        self.spent = WallClock(clock=self.clock)

    # clocks
    def clock(self) -> float:
        return self.now

    def wall(self) -> float:
        return 1_700_000_000.0 + self.now

    # servers
    def prepare_secondaries(self) -> None:
        self.calls.append(("prepare",))

    def start_secondaries(self) -> None:
        self.calls.append(("start",))
        self._trigger_at = self.now

    def stop_secondaries(self) -> None:
        self.calls.append(("stop",))

    def wait_served(
        self,
        hosts: list[str],
        zone: str,
        serial: int,
        deadline: float,
        straggle: float | None = None,
    ) -> dict[str, float]:
        self.calls.append(("wait", serial))
        if straggle is not None:  # the others get `straggle` more after the first served
            afters = [self.serve_after[h] for h in hosts if self.serve_after.get(h) is not None]
            if afters:
                deadline = min(deadline, self._trigger_at + min(afters) + straggle)
        got = {}
        for host in hosts:
            after = self.serve_after.get(host)
            if after is not None and self._trigger_at + after <= deadline:
                got[host] = self._trigger_at + after
        self.now = max([self.now, *got.values()])
        self._served = got
        return got

    def last_unserved(self, host: str) -> float | None:
        before = self.unserved_before.get(host)
        return None if before is None or host not in self._served else self._served[host] - before

    def wait_all_zones(
        self, hosts: list[str], zones: list[str], serial: int, deadline: float
    ) -> tuple[dict[str, dict[str, float]], dict[str, str]]:
        served, errors = {}, {}
        for host in hosts:
            times = self.zone_times.get(host)
            if times is None:
                errors[host] = f"timeout: {len(zones)} of {len(zones)} zones not served"
                continue
            served[host] = dict(zip(zones, (self._trigger_at + t for t in times), strict=True))
            self.now = max(self.now, *served[host].values())
        self._zones_served = served
        return served, errors

    def zones_last_unserved(self, host: str) -> dict[str, float]:
        before = self.zone_unserved_before.get(host, {})
        at = self._zones_served.get(host, {})
        return {zone: at[zone] - b for zone, b in before.items() if zone in at}

    def publish(self, serial: int) -> Publication:
        self.calls.append(("publish", serial))
        if serial in self.publish_fails:
            raise XfrTimeout(f"timeout after 30 s: the primary never served serial {serial}")
        issued = self.now
        served = issued + self.reload_s
        self._notified = {h: issued + s for h, s in self.notify_after.items() if s is not None}
        self.now = served
        if self.plan.notify:
            self._trigger_at = min(self._notified.values(), default=served)
        return Publication(issued, served)

    def check_primary(self, serial: int) -> str | None:
        self.calls.append(("check_primary", serial))
        return self.primary_wrong.get(serial)

    def notifications(self, serial: int, since: float, wait: float) -> dict[str, float]:
        self.calls.append(("notifications", serial))
        return {h: at for h, at in self._notified.items() if at >= since}

    def control(self, host: str, action: str, zone: str) -> None:
        if self.calls[-1][0] != "control":  # the first command of a trigger starts it
            self._trigger_at = self.now
        self.calls.append(("control", host, action))
        self.now += self.control_s

    def verify(self, host: str, zone: str, serial: int) -> Verification:
        self.now += self.verify_s
        ok = self.verified.get(host, True)
        problem = None if ok else "digest differs: primary 1234…"
        if self.flush_s is None:
            return Verification(ok, problem, 42, read_s=self.read_s)
        with self.spent.phase("flush"):  # as disk_copy.from_disk times the server's part
            self.now += self.flush_s
        return Verification(ok, problem, 42, by="disk+sample", sample=32, flush_s=self.flush_s)

    def verify_zones(self, host: str, zones: list[str], serial: int) -> dict[str, Verification]:
        return {zone: self.verify(host, zone, serial) for zone in zones}

    def logged(self, host: str, zone: str, serial: int, since: float) -> Logged:
        primary: dict[str, Any] = {"records": 43}
        if host in self.signed:
            primary["signed"] = self.signed[host]
        if host in self.sent:
            primary["xfr"] = self.sent[host]
        secondary = {"bytes": 4000, "messages": 2}
        return Logged(secondary, primary, {"timed_out": 1}, {}, list(self.fallbacks))

    def connect_ports(self, host: str, since: float) -> list[int]:
        self.calls.append(("connect_ports", host))
        return self.ports.get(host, [self.plan.transport.port])

    def cold_start_log(self, host: str) -> ColdStartLog:
        return ColdStartLog(len(self.zones), 100, 5, {"address_not_available": 0}, 2.49, 0.001)

    def mark(self, event: str, repeat: int) -> None:
        self.calls.append(("mark", event, repeat))

    def between_repeats(self) -> None:
        self.calls.append(("flush",))

    def link_counters(self) -> dict[str, Any]:
        return {"forward": {"passed": 7}}

    def begin_observation(self) -> None:
        self.calls.append(("observe",))

    def finish_observation(self) -> None:
        self.calls.append(("observed",))

    def observation(self, host: str, t0: float, served: float) -> dict[str, Any]:
        # What the wire showed: the SOA query 0.02 s and the connect 0.05 s after t0.
        wire = {"soa_queries": 1, "connects": 1, "soa_query_s": 0.02, "connect_s": 0.05}
        return {"wire": wire, "tcp": {"rcv_wnd_max": 65_535}}

    def cold_start_polling(self, host: str) -> dict[str, Any]:
        return {"rounds": 3}

    def pull(self, method: str, host: str) -> Pulled:
        return Pulled(True, None, 12, 43, 4000, 2, 0.5, self.wall(), {"connect": 0.01},
                      digest_matches=method == "own")  # fmt: skip


def _plan(tmp_path: Path, text: str, secondaries: int = 1) -> CasePlan:
    path = tmp_path / "s.toml"
    path.write_text(text)
    plan = plan_case(spec.load(path).cases[0])
    if secondaries > 1:
        first = plan.secondaries[0]
        hosts = tuple(
            dataclasses.replace(first, name=f"site-{i}", site="site") for i in range(secondaries)
        )
        plan = dataclasses.replace(plan, hosts=(plan.primary, *hosts))
    return plan


def _run(bench: FakeBench) -> list[TransferRecord]:
    records: list[TransferRecord] = []
    flows.run_flows(bench, RecordContext("run-1", bench.plan), records.append)
    return records


def test_notify_measures_from_each_notify_after_an_unrecorded_warm_up(tmp_path: Path) -> None:
    plan = _plan(tmp_path, 'repeats = 2\ntrigger = "notify"\n')
    bench = FakeBench(plan)
    records = _run(bench)
    publishes = [c[1] for c in bench.calls if c[0] == "publish"]
    assert publishes == [11, 12, 13]  # the warm-up (11) is published but never recorded
    assert [r.serial for r in records] == [12, 13] and [r.repeat for r in records] == [1, 2]
    first = records[0]
    # t0 = the NOTIFY leaving (0.3 s after the reload command); served 1.0 s after it.
    assert first.duration_s == pytest.approx(1.0)
    assert first.phases == pytest.approx(
        {"primary_reload": 0.2, "notify_sent": 0.3, "soa_query": 0.02, "connect": 0.05,
         "served": 1.0}
    )  # fmt: skip
    # The advertised window tightens the window bound only where a bound is known.
    assert first.extra["tcp"] == {"rcv_wnd_max": 65_535} and first.bound == {}
    assert first.ok and first.verified and first.trigger == "notify"
    assert (first.bytes, first.messages, first.records) == (4000, 2, 43)
    assert first.extra["link_counters"] == {"forward": {"passed": 7}}
    assert first.server_logged["secondary_failures"] == {"timed_out": 1}
    # Sampled around each transfer, the end before verification.
    marks = [c for c in bench.calls if c[0] == "mark"]
    assert marks == [
        ("mark", "transfer-start", 1),
        ("mark", "transfer-end", 1),
        ("mark", "transfer-start", 2),
        ("mark", "transfer-end", 2),
    ]


def test_retransfer_measures_from_the_control_command(tmp_path: Path) -> None:
    plan = _plan(tmp_path, 'repeats = 1\ntrigger = "retransfer"\nxfr = ["ixfr"]\n')
    bench = FakeBench(plan, serve_after={"secondary": 0.8})
    (record,) = _run(bench)
    controls = [c for c in bench.calls if c[0] == "control"]
    # The warm-up refreshes; the measured repeat of an IXFR case refreshes too.
    assert controls == [("control", "secondary", "refresh")] * 2
    assert "notify_sent" not in record.phases
    assert record.phases["control_returned"] == pytest.approx(0.05)
    assert record.duration_s == pytest.approx(0.8) and record.xfr == "ixfr"


def test_axfr_retransfer_forces_a_full_transfer(tmp_path: Path) -> None:
    plan = _plan(tmp_path, 'repeats = 1\ntrigger = "retransfer"\n')
    bench = FakeBench(plan)
    _run(bench)
    assert [c[2] for c in bench.calls if c[0] == "control"] == ["refresh", "retransfer"]


def test_a_secondary_that_never_serves_is_a_failed_record_with_the_reason(
    tmp_path: Path,
) -> None:
    plan = _plan(tmp_path, 'repeats = 2\ntimeout = "30s"\n', secondaries=2)
    bench = FakeBench(plan, serve_after={"site-0": 1.0, "site-1": 1.0})
    hosts_seen: list[str] = []

    def late(
        hosts: list[str], zone: str, serial: int, deadline: float, straggle: float | None = None
    ) -> dict[str, float]:
        bench.now += 1.0
        hosts_seen.append(",".join(hosts))
        if serial == 13:  # the second repeat: site-1 never serves it
            return {"site-0": bench.now}
        return dict.fromkeys(hosts, bench.now)

    bench.wait_served = late  # type: ignore[method-assign]
    records = _run(bench)
    assert [(r.repeat, r.host, r.ok) for r in records] == [
        (1, "site-0", True),
        (1, "site-1", True),
        (2, "site-0", True),
        (2, "site-1", False),
    ]
    failed = records[-1]
    assert failed.duration_s is None and not failed.verified
    assert failed.error == "timeout after 30 s: the site-1 never served example. serial 13"
    assert all(r.site == "site" for r in records)


def test_a_secondary_that_never_serves_keeps_its_notify_and_the_servers_words(
    tmp_path: Path,
) -> None:
    """A fleet's origin is the first NOTIFY to any secondary, the missing ones' included,
    and who is missing is said in the servers' own words: the failed record keeps both."""
    plan = _plan(tmp_path, 'repeats = 1\ntimeout = "20s"\n', secondaries=2)
    bench = FakeBench(plan, notify_after={"site-0": 0.3, "site-1": 0.1})
    wait = bench.wait_served

    def site_1_lost(
        hosts: list[str], zone: str, serial: int, deadline: float, straggle: float | None = None
    ) -> dict:
        got = wait(hosts, zone, serial, deadline, straggle)
        return {h: at for h, at in got.items() if serial != 12 or h != "site-1"}

    bench.wait_served = site_1_lost  # type: ignore[method-assign]
    served, missing = _run(bench)
    assert served.ok and not missing.ok and missing.failure == "timeout"
    assert missing.phases == pytest.approx({"primary_reload": 0.2, "notify_sent": 0.1})
    assert missing.server_logged["secondary_failures"] == {"timed_out": 1}


def test_a_publication_that_times_out_is_a_publish_error_that_ends_the_case(
    tmp_path: Path,
) -> None:
    plan = _plan(tmp_path, "repeats = 3\n", secondaries=3)
    bench = FakeBench(
        plan, publish_fails={13}, notify_after={f"site-{i}": 0.3 for i in range(3)},
        serve_after={f"site-{i}": 1.0 + i for i in range(3)},
    )  # fmt: skip
    records: list[TransferRecord] = []
    with pytest.raises(protocol.PublishFailed) as raised:
        flows.run_flows(bench, RecordContext("run-1", plan), records.append)
    assert raised.value.recorded  # the session records the later slots, not these again
    assert [(r.repeat, r.ok, r.failure) for r in records] == [(1, True, None)] * 3 + [
        (2, False, "publish")
    ] * 3
    assert all("never served serial 13" in (r.error or "") for r in records[3:])
    # Each secondary's own time: from its own NOTIFY to its own first answer.
    assert [r.duration_s for r in records[:3]] == pytest.approx([1.0, 2.0, 3.0])


def test_a_primary_that_serves_another_version_is_a_publish_error_not_a_copy_failure(
    tmp_path: Path,
) -> None:
    """The demo's tiny zone: the primary kept the NS the update deleted. Its secondaries'
    exact copies must not be blamed: every record of the repeat is a publish error."""
    plan = _plan(tmp_path, "repeats = 2\n", secondaries=2)
    wrong = "the primary's own copy: RRSUM differs: expected 2 records, the copy has 3"
    bench = FakeBench(plan, primary_wrong={12: wrong})
    records: list[TransferRecord] = []
    with pytest.raises(protocol.PublishFailed):
        flows.run_flows(bench, RecordContext("run-1", plan), records.append)
    assert [(r.repeat, r.failure, r.verified) for r in records] == [(1, "publish", False)] * 2
    assert all(r.error == f"publish error at serial 12: {wrong}" for r in records)
    # Asked after the transfers (it delays no secondary's polling), before verification.
    calls = [c[0] for c in bench.calls]
    assert calls.index("check_primary") > calls.index("wait", calls.index("publish", 2))


def test_the_warm_up_is_held_to_the_primary_too(tmp_path: Path) -> None:
    plan = _plan(tmp_path, "repeats = 1\n")
    bench = FakeBench(plan, primary_wrong={11: "the primary serves serial 10, not 11"})
    with pytest.raises(protocol.PublishFailed, match="warm-up serial 11") as raised:
        first_copies.prepare_updates(bench)
    assert not raised.value.recorded


def test_secondaries_are_polled_before_the_notifies_are_read(tmp_path: Path) -> None:
    # A server paces its NOTIFYs (BIND: 20 a second): waiting for the last one before
    # polling would find the first secondaries already served and date them late.
    plan = _plan(tmp_path, "repeats = 1\n", secondaries=3)
    bench = FakeBench(plan, notify_after={"site-0": 0.3, "site-1": 0.8, "site-2": 1.3})
    records = _run(bench)
    order = [c[0] for c in bench.calls if c[0] in ("publish", "wait", "notifications")]
    assert order[-3:] == ["publish", "wait", "notifications"]
    phases = {r.host: r.phases["notify_sent"] for r in records}
    assert phases == pytest.approx({"site-0": 0.3, "site-1": 0.8, "site-2": 1.3})


def test_a_missing_notify_is_a_failure_not_a_guess(tmp_path: Path) -> None:
    plan = _plan(tmp_path, 'repeats = 1\ntimeout = "30s"\n')
    (record,) = _run(FakeBench(plan, notify_after={"secondary": None}))
    assert not record.ok and record.duration_s is None
    assert record.error == (
        "timeout after 30 s: the primary sent no NOTIFY for serial 12 to secondary"
    )


def test_a_copy_that_does_not_verify_never_counts(tmp_path: Path) -> None:
    plan = _plan(tmp_path, "repeats = 1\n")
    bench = FakeBench(plan, verified={"secondary": False})
    (record,) = _run(bench)
    assert not record.ok and not record.verified and not record.counts
    assert record.error is not None and "digest differs" in record.error
    assert record.duration_s == pytest.approx(1.0)  # measured, kept, never summarised


def test_cold_start_is_timed_to_the_last_zone_and_reports_the_log(tmp_path: Path) -> None:
    plan = _plan(
        tmp_path, 'repeats = 2\ntrigger = "cold-start"\n[zones]\npreset = "hosting"\nzones = 3\n'
    )
    zones = ["a.example.", "b.example.", "c.example."]
    bench = FakeBench(plan, zones=zones, zone_times={"secondary": [0.5, 2.5, 1.0]})
    records = _run(bench)
    assert [r.duration_s for r in records] == pytest.approx([2.5, 2.5])
    assert records[0].zone == "3 zones" and records[0].records == 3 * 42
    assert records[0].server_logged == {
        "secondary_transfers": 3,
        "secondary_failures": {"address_not_available": 0},
        "secondary_last_transfer_s": 2.49,  # the server's own view, beside the harness's
        "stamp_resolution_s": 0.001,
    }
    # Prepared (rendered, old copy removed) before t0, started after it, stopped at the end.
    kinds = [c[0] for c in bench.calls if c[0] in ("prepare", "start", "stop", "mark")]
    assert kinds == ["prepare", "start", "mark", "mark", "stop"] * 2


def test_served_times_carry_their_error_bars(tmp_path: Path) -> None:
    plan = _plan(tmp_path, 'repeats = 1\ntrigger = "notify"\n', secondaries=2)
    # site-0 answered the old serial 0.05 s before it served: that is its error bar. site-1
    # answered none after its NOTIFY (its answers were lost, say): back to the NOTIFY.
    bench = FakeBench(plan, unserved_before={"site-0": 0.05, "site-1": 5.0})
    by_host = {r.host: r for r in _run(bench)}
    assert by_host["site-0"].duration_error_s == pytest.approx(0.05)
    assert by_host["site-1"].duration_error_s == pytest.approx(by_host["site-1"].duration_s)
    zones = ["a.example.", "b.example.", "c.example."]
    cold = _plan(
        tmp_path, 'repeats = 1\ntrigger = "cold-start"\n[zones]\npreset = "hosting"\nzones = 3\n'
    )
    bench = FakeBench(
        cold,
        zones=zones,
        zone_times={"secondary": [0.5, 2.5, 1.0]},
        # a: 0.2 s; b (the last served): 0.4 s; c never answered unserved: all of its 1.0 s
        zone_unserved_before={"secondary": {"a.example.": 0.2, "b.example.": 0.4}},
    )
    (record,) = _run(bench)
    assert record.duration_error_s == pytest.approx(0.4)  # duration runs to the last zone
    assert record.extra["served_error_s"] == pytest.approx({"median": 0.4, "max": 1.0})


def test_cold_start_timeout_is_recorded(tmp_path: Path) -> None:
    plan = _plan(tmp_path, 'repeats = 1\ntrigger = "cold-start"\n')
    bench = FakeBench(plan)  # no zone times: the secondary never serves
    (record,) = _run(bench)
    assert not record.ok and record.error and record.error.startswith("timeout")
    # Why it timed out is in the secondary's log: its failures are kept with the record.
    assert record.server_logged["secondary_failures"] == {"address_not_available": 0}
    assert record.extra["zones"] == 1 and record.extra["polling"] == {"rounds": 3}


def test_client_pulls_verify_against_the_primary(tmp_path: Path) -> None:
    plan = _plan(tmp_path, 'repeats = 1\nclient_pulls = ["own", "kdig"]\n')
    records = _run(FakeBench(plan))
    pulls = [r for r in records if r.method != "server-to-server"]
    assert [(r.method, r.ok) for r in pulls] == [
        ("client-pull-own", True),
        ("client-pull-kdig", False),
    ]
    assert pulls[1].error == "the pulled zone's digest differs from the primary's"
    assert pulls[1].duration_s == 0.5 and pulls[0].phases == {"connect": 0.01}


def test_records_name_their_secondary_only_in_a_fleet(tmp_path: Path) -> None:
    single = _run(FakeBench(_plan(tmp_path, "repeats = 1\n")))
    assert (single[0].host, single[0].site) == ("secondary", None)
    plan = _plan(tmp_path, "repeats = 1\n", secondaries=2)
    assert isinstance(plan.secondaries[0], HostPlan)
    assert plan.transfers() == 2


def test_each_repeat_says_where_its_wall_time_went(tmp_path: Path) -> None:
    plan = _plan(tmp_path, 'repeats = 2\ntrigger = "notify"\n', secondaries=2)
    bench = FakeBench(plan, verify_s=0.7)
    records = _run(bench)
    wall = records[0].extra["wall"]
    # The repeat: the reload returns after 0.2 s; the NOTIFY leaves 0.3 s after the reload
    # command and the secondaries serve 1.0 s after it, 1.1 s after the reload returned.
    assert wall["publish_s"] == pytest.approx(0.2)
    assert wall["transfer_s"] == pytest.approx(1.1)
    assert wall["verify_s"] == pytest.approx(0.7)  # each secondary's copy, its own
    split = bench.spent.split()
    assert split.phases["verify"] == pytest.approx(4 * 0.7)  # 2 repeats x 2 secondaries
    assert split.phases["transfer"] == pytest.approx(2 * 1.1)
    assert split.phases["warmup"] == pytest.approx(0.2 + 1.1)
    # Verification is the harness's; publishing and transfers are the servers'.
    assert split.harness_s == pytest.approx(4 * 0.7)
    servers = split.phases["first_copies"] + 1.3 + 2 * 0.2 + 2 * 1.1
    assert split.servers_s == pytest.approx(servers)
    assert "verify 2.8" in describe(split)
    assert "verify_read_s" not in wall  # the bench did not say how long the read took


def test_each_repeat_says_how_long_the_secondary_took_to_send_its_copy_back(
    tmp_path: Path,
) -> None:
    records = _run(FakeBench(_plan(tmp_path, "repeats = 2\n"), verify_s=0.7, read_s=0.6))
    assert [r.extra["wall"]["verify_read_s"] for r in records] == [0.6, 0.6]


def test_each_record_says_how_its_copy_was_verified_and_the_flush_is_the_servers(
    tmp_path: Path,
) -> None:
    read = _run(FakeBench(_plan(tmp_path, "repeats = 1\n"), verify_s=0.7))
    assert read[0].extra["verified_by"] == "served" and "verify_sample" not in read[0].extra
    bench = FakeBench(_plan(tmp_path, "repeats = 2\n"), verify_s=0.3, flush_s=2.0)
    records = _run(bench)
    for record in records:
        assert (record.extra["verified_by"], record.extra["verify_sample"]) == ("disk+sample", 32)
        wall = record.extra["wall"]
        assert (wall["verify_s"], wall["flush_s"]) == (pytest.approx(0.3), pytest.approx(2.0))
    split = bench.spent.split()
    assert split.phases["flush"] == pytest.approx(4.0) and split.harness_s == pytest.approx(0.6)


def test_sizes_no_log_says_stay_unknown() -> None:
    # A cold start's transfers summed as the secondary logged them: NSD 4.6 and PowerDNS
    # log no sizes, and a sum of 0 bytes would print as a throughput of 0 bit/s.
    assert logged_sum([4000, 250]) == 4250
    assert logged_sum([None, None]) is None
    assert logged_sum([4000, None]) is None  # never a sum of some
    assert logged_sum([]) is None
