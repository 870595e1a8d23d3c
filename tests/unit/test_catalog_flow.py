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
        return self.serial, self.now

    def start_consumers(self) -> float:
        self.calls.append(("start consumers",))
        self.origin = self.now
        return self.now

    def restart_consumer(self, host: str) -> float:
        self.calls.append(("restart", host))
        self.origin = self.now
        return self.now

    def wait_members(
        self, hosts: list[str], zones: list[str], deadline: float
    ) -> dict[str, dict[str, float]]:
        out: dict[str, dict[str, float]] = {}
        for host in hosts:
            out[host] = {}
            for zone in zones:
                after = self.member_s[host](zone)
                if after is not None and self.origin + after <= deadline:
                    out[host][zone] = self.origin + after
        self.now = max([self.now, *(t for m in out.values() for t in m.values())])
        return out

    def wait_gone(
        self, hosts: list[str], zones: list[str], deadline: float
    ) -> dict[str, dict[str, float]]:
        self.now = self.origin + self.gone_s
        return {host: dict.fromkeys(zones, self.now) for host in hosts}

    def usage(self, host: str) -> Usage:
        return Usage(1.5, 4 << 20)

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
    assert records[0].extra["catalog"]["consumer_cpu_s"] == 1.5


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
