"""The catalog flow on a fake bench with a fake clock: no root, no servers. Each consumer
serves a member a scripted time after the catalog version naming it (or never), and stops
answering for a removed one likewise."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from harness import spec
from harness.measure.catalog import Usage, catalog_repeat
from harness.measure.records import RecordContext
from harness.plan.case import CasePlan, plan_case
from harness.results.catalog import ALL, catalog_summary
from harness.results.model import TransferRecord
from harness.zonegen.catalog import Member
from tests.unit.test_flows import FakeBench


def _plan(tmp_path: Path, catalog: str, hosts: tuple[str, ...] = ("b", "k")) -> CasePlan:
    path = tmp_path / "c.toml"
    path.write_text(
        'trigger = "catalog"\nxfr = ["ixfr"]\ntimeout = "30s"\n'
        '[zones]\npreset = "hosting"\norigin = "h.example."\n'
        f"[catalog]\n{catalog}\n"
    )
    plan = plan_case(spec.load(path).cases[0])
    first = plan.secondaries[0]
    secondaries = tuple(dataclasses.replace(first, name=h, site=h) for h in hosts)
    return dataclasses.replace(plan, hosts=(plan.primary, *secondaries))


class FakeCatalogBench(FakeBench):
    """`member_s[host](zone)`: seconds from the version naming `zone` until `host` serves
    it (None: never); removals take `gone_s`; a restart re-transfers `retransfers`."""

    def __init__(self, plan: CasePlan, **script: Any) -> None:
        super().__init__(plan, **script)
        catalog = plan.catalog
        assert catalog is not None
        spec_ = plan.zone_spec
        self.members = catalog.first_members(spec_.origin, spec_.seed)
        self.member_s = script["member_s"]
        self.gone_s = script.get("gone_s", 0.5)
        self.serial = self.base_serial
        self.published: list[list[Member]] = []
        self.origin = self.now
        self.member_serials: dict[str, int] = {}
        self.waits: list[tuple[list[str], int | None]] = []
        self.named_at: dict[str, float] = {}  # zone -> when the version naming it was served
        self.sampled: list[list[str]] = []
        self.cpu = 0.0

    def catalog_members(self) -> list[Member]:
        return list(self.members)

    def catalog_serial(self) -> int:
        return self.serial

    def sleep(self, seconds: float) -> None:
        self.now += seconds

    def put_catalog(self, members: list[Member]) -> tuple[int, float]:
        self.serial += 1
        self.members = list(members)
        self.published.append(list(members))
        self.now += 0.01
        self.origin = self.now
        for member in members:
            self.named_at.setdefault(member.zone, self.now)
        return self.serial, self.now

    def start_consumers(self) -> float:
        self.calls.append(("start consumers",))
        self.origin = self.now
        self.named_at = dict.fromkeys((m.zone for m in self.members), self.now)
        return self.now

    def restart_consumer(self, host: str) -> float:
        self.calls.append(("restart", host))
        self.origin = self.now
        self.named_at = dict.fromkeys((m.zone for m in self.members), self.now)
        return self.now

    def put_member(self, zone: str) -> tuple[int, float]:
        self.member_serials[zone] = self.member_serials.get(zone, self.base_serial) + 1
        self.now += 0.01
        self.origin = self.now
        self.named_at[zone] = self.now
        self.calls.append(("put member", zone, self.member_serials[zone]))
        return self.member_serials[zone], self.now

    def wait_members(
        self, hosts: list[str], zones: list[str], deadline: float, serial: int | None = None
    ) -> dict[str, dict[str, float]]:
        self.waits.append((list(zones), serial))
        out: dict[str, dict[str, float]] = {}
        for host in hosts:
            out[host] = {}
            for zone in zones:
                after = self.member_s[host](zone)
                at = self.named_at.get(zone, self.origin) + (after or 0.0)
                if after is not None and at <= deadline:
                    out[host][zone] = at
        self.now = max([self.now, *(t for m in out.values() for t in m.values())])
        self.now = min(self.now, deadline)
        return out

    def wait_gone(
        self, hosts: list[str], zones: list[str], deadline: float
    ) -> dict[str, dict[str, float]]:
        self.now = self.origin + self.gone_s
        return {host: dict.fromkeys(zones, self.now) for host in hosts}

    def verify_zones(self, host: str, zones: list[str], serial: int) -> dict[str, Any]:
        self.sampled.append(list(zones))
        return super().verify_zones(host, zones, serial)

    def usage(self, host: str) -> Usage:
        self.cpu += 0.25  # each reading a quarter second later
        return Usage(self.cpu, 4 << 20)

    def member_transfers(self, host: str, since: float) -> int | None:
        return 0 if host == "b" else len(self.members)

    def member_failures(self, host: str, since: float) -> list[str]:
        return ["transfer of 'absent.example/IN' from 10.0.0.1#53: failed: NOTAUTH"]


def _run(plan: CasePlan, **script: Any) -> tuple[FakeCatalogBench, list[TransferRecord]]:
    bench = FakeCatalogBench(plan, **script)
    out: list[TransferRecord] = []
    catalog_repeat(bench, RecordContext("run", plan), 1, out.append, {})
    return bench, out


def _linear(step: float) -> Any:
    """The i-th zone (by name order) served i * step seconds after the version."""
    order: dict[str, int] = {}

    def after(zone: str) -> float:
        return (order.setdefault(zone, len(order)) + 1) * step

    return after


def test_each_phase_is_one_record_per_consumer_with_nearest_rank_figures(
    tmp_path: Path,
) -> None:
    plan = _plan(tmp_path, "members = 20\nadd = 1\nremove = 1\nrestart_secondary = true")
    bench, records = _run(plan, member_s={"b": _linear(0.1), "k": _linear(0.01)})
    phases = [(r.host, r.extra["catalog"]["phase"]) for r in records]
    assert phases == [
        ("b", "provision"), ("k", "provision"), ("b", "add"), ("k", "add"),
        ("b", "remove"), ("k", "remove"), ("b", "restart"), ("k", "restart"),
    ]  # fmt: skip
    assert all(r.ok and r.verified and r.trigger == "catalog" for r in records)
    b = records[0].extra["catalog"]
    assert (b["members"], b["served"]) == (20, 20)
    # Nearest rank over 20 members served at 0.1, 0.2, ... 2.0 s: the 10th and the 19th.
    assert (b["p50_s"], b["p95_s"], b["last_s"]) == (1.0, 1.9, 2.0)
    assert records[0].duration_s == 2.0
    # The add published serial 11 naming member 20 (a new zone); the removal serial 12.
    added = set(bench.published[0]) - set(bench.published[1]) or set()
    assert [r.serial for r in records if r.extra["catalog"]["phase"] == "add"] == [11, 11]
    assert len(bench.published[0]) == 21 and len(bench.published[1]) == 20
    assert added == {plan.catalog.member("h.example.", 1, 20)}  # type: ignore[union-attr]
    restarts = {r.host: r.extra["catalog"]["transfers_after_restart"] for r in records[-2:]}
    assert restarts == {"b": 0, "k": 20}
    # The consumer's CPU from its start: its cgroup's count, read once the phase ended.
    assert records[0].extra["catalog"]["consumer_cpu_s"] == 0.25


def test_a_member_never_served_is_counted_and_ranks_last(tmp_path: Path) -> None:
    plan = _plan(tmp_path, "members = 19\nadd = 0\nremove = 0\nnames = ['absent.example.']")

    def served_but_absent(zone: str) -> float | None:
        return None if zone == "absent.example." else 1.0

    _, records = _run(plan, member_s={"b": served_but_absent, "k": served_but_absent})
    for record in records:
        facts = record.extra["catalog"]
        assert (facts["members"], facts["served"]) == (20, 19)
        assert facts["not_served"] == ["absent.example."]
        # p95 of 20 is the 19th: served; the last never was ("not reached", None).
        assert facts["p95_s"] == 1.0 and facts["last_s"] is None
        assert not record.ok and record.failure == "timeout" and record.duration_s is None
        assert "served 19 of 20 members (provision)" in (record.error or "")
        assert "NOTAUTH" in (record.error or "")


def test_a_member_named_twice_fails_the_records_with_the_catalogs_problem(
    tmp_path: Path,
) -> None:
    plan = _plan(tmp_path, "members = 5\nadd = 0\nremove = 0\nnames = ['PLACEHOLDER']")
    twice = plan.catalog.member("h.example.", 1, 2).zone  # type: ignore[union-attr]
    catalog = dataclasses.replace(plan.catalog, names=(twice,))  # type: ignore[arg-type]
    plan = dataclasses.replace(plan, catalog=catalog)
    _, records = _run(plan, member_s={"b": lambda z: 0.2, "k": lambda z: 0.2})
    for record in records:
        assert not record.ok and record.failure == "verification"
        assert record.extra["catalog"]["catalog_problems"] == [
            f"member zone {twice} is named 2 times"
        ]


def test_the_summary_pools_every_consumer_and_member_never_dropping_one(
    tmp_path: Path,
) -> None:
    plan = _plan(tmp_path, "members = 19\nadd = 0\nremove = 0\nnames = ['absent.example.']")

    def fast(zone: str) -> float | None:
        return None if zone == "absent.example." else 0.1

    def slow(zone: str) -> float | None:
        return None if zone == "absent.example." else 2.0

    _, records = _run(plan, member_s={"b": fast, "k": slow})
    rows = {(r["phase"], r["consumer"]): r for r in catalog_summary(records)}
    assert set(rows) == {("provision", "b"), ("provision", "k"), ("provision", ALL)}
    pooled = rows[("provision", ALL)]
    assert (pooled["members"], pooled["served"], pooled["failed"]) == (40, 38, 2)
    # 40 pairs: 19 at 0.1 s, 19 at 2 s, 2 never served; p95 is the 38th: 2 s; the last
    # falls on a member never served: not reached.
    assert (pooled["p50_s"], pooled["p95_s"], pooled["last_s"]) == (2.0, 2.0, None)
    assert rows[("provision", "b")]["p50_s"] == 0.1


def test_versions_add_members_on_the_operators_pace_each_measured_from_its_own(
    tmp_path: Path,
) -> None:
    """Three versions of 2 members, 5 s apart, to a consumer that takes 7 s per member: each
    version is published when due, not when the one before is served, and each record's
    latencies run from its own version."""
    text = "members = 10\nadd = 2\nversions = 3\ninterval = '5s'\nremove = 0"
    plan = _plan(tmp_path, text, hosts=("k",))
    bench, records = _run(plan, member_s={"k": lambda zone: 7.0})
    adds = [r for r in records if r.extra["catalog"]["phase"].startswith("add")]
    assert [r.extra["catalog"]["phase"] for r in adds] == ["add", "add 2", "add 3"]
    assert [len(p) for p in bench.published] == [12, 14, 16]
    catalog = plan.catalog
    assert catalog is not None
    assert bench.published[2][10:16] == [catalog.member("h.example.", 1, i) for i in range(10, 16)]
    for record in adds:
        facts = record.extra["catalog"]
        assert (facts["members"], facts["served"], facts["last_s"]) == (2, 2, 7.0)
        assert record.ok and facts["consumer_cpu_s"] is not None
    serials = [r.extra["catalog"]["catalog_serial"] for r in adds]
    assert serials == [11, 12, 13]


def test_a_version_not_served_before_the_timeout_fails_its_own_record(tmp_path: Path) -> None:
    text = "members = 4\nadd = 1\nversions = 2\ninterval = '5s'\nremove = 0"
    plan = _plan(tmp_path, text, hosts=("k",))
    catalog = plan.catalog
    assert catalog is not None
    never = catalog.member("h.example.", 1, 5).zone  # the second version's member
    _, records = _run(plan, member_s={"k": lambda zone: None if zone == never else 1.0})
    by_phase = {r.extra["catalog"]["phase"]: r for r in records}
    assert by_phase["add"].ok
    assert by_phase["add 2"].failure == "timeout"
    assert "served 0 of 1 members (add 2)" in (by_phase["add 2"].error or "")


def test_a_zone_change_waits_for_the_members_next_serial_and_is_never_sampled(
    tmp_path: Path,
) -> None:
    text = "members = 6\nadd = 0\nremove = 0\nchange = 'zone'\nrestart_secondary = true"
    plan = _plan(tmp_path, text + "\nsample = 6", hosts=("k",))
    bench, records = _run(plan, member_s={"k": lambda zone: 0.3})
    assert [r.extra["catalog"]["phase"] for r in records] == ["provision", "change", "restart"]
    catalog = plan.catalog
    assert catalog is not None
    changed = catalog.member("h.example.", 1, 0).zone
    assert ("put member", changed, bench.base_serial + 1) in bench.calls
    assert ([changed], bench.base_serial + 1) in bench.waits
    change = records[1]
    assert change.serial == bench.base_serial + 1 and change.ok
    facts = change.extra["catalog"]
    assert (facts["members"], facts["last_s"], facts["member_serial"]) == (1, 0.3, change.serial)
    assert facts["verified_sample"] == 0
    assert all(changed not in zones for zones in bench.sampled) and len(bench.sampled) == 2


def test_a_rename_keeps_the_id_names_a_new_zone_and_times_the_old_ones_removal(
    tmp_path: Path,
) -> None:
    text = "members = 5\nadd = 0\nremove = 0\nchange = 'rename'"
    plan = _plan(tmp_path, text, hosts=("k",))
    bench, records = _run(plan, member_s={"k": lambda zone: 0.4})
    catalog = plan.catalog
    assert catalog is not None
    old, new = catalog.member("h.example.", 1, 0), catalog.member("h.example.", 1, 5)
    assert bench.published[0][0] == dataclasses.replace(old, zone=new.zone)
    assert bench.published[0][1:] == [catalog.member("h.example.", 1, i) for i in range(1, 5)]
    facts = records[-1].extra["catalog"]
    assert facts["phase"] == "rename" and facts["renamed_from"] == old.zone
    assert (facts["members"], facts["served"], facts["last_s"]) == (1, 1, 0.4)
    assert facts["old_gone_s"] == 0.5  # the fake's removals take gone_s
