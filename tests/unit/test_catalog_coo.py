"""A change of ownership (catalog.coo, RFC 9432 §5.1) as a user writes it: the three
versions the two catalogs go through, what a scenario may ask, which consumers are refused
before any server starts, and what each dialect renders for two catalogs."""

from __future__ import annotations

from pathlib import Path

import dns.name
import dns.rdatatype
import pytest

from harness import spec
from harness.core.errors import ScenarioError
from harness.measure.catalog import catalog_repeat
from harness.measure.records import RecordContext
from harness.plan.case import CasePlan, plan_case
from harness.results.model import TransferRecord
from harness.run.runner import check_catalog_consumers
from harness.servers import server_class
from harness.servers.binaries import ServerBinary
from harness.servers.pdns import database_sql
from harness.servers.setup import CatalogConsumer, ServerSetup, ZoneEntry
from harness.zonegen.catalog import Member, coo_versions, member_id, write_catalog
from harness.zonegen.diff import load_zone
from tests.unit.test_catalog_flow import FakeCatalogBench, _plan

HEAD = 'trigger = "catalog"\nxfr = ["ixfr"]\nrepeats = 2\n'
HOSTING = '[zones]\npreset = "hosting"\norigin = "h.example."\n'
A, B = "catalog.invalid.", "catalog2.invalid."


def _load(tmp_path: Path, text: str) -> spec.LoadedScenario:
    path = tmp_path / "c.toml"
    path.write_text(text)
    return spec.load(path)


def _ptrs(path: Path, catalog: str, kind: str = "") -> dict[str, str]:
    """Owner -> PTR target of the catalog's member nodes (kind "coo.": their coo PTRs)."""
    zone = load_zone(path, catalog)
    out = {}
    for name, node in zone.nodes.items():
        rdataset = node.get_rdataset(1, dns.rdatatype.PTR)
        owner = str(name.derelativize(dns.name.from_text(catalog)))
        wanted = owner.startswith(kind) and (kind or not owner.startswith("coo."))
        if rdataset is not None and wanted and f".zones.{catalog}" in owner:
            out[owner] = str(next(iter(rdataset)).target)
    return out


def test_a_move_marks_the_old_catalog_then_adds_to_the_new_then_removes(tmp_path: Path) -> None:
    old = [Member(member_id(i), f"z{i}.example.") for i in range(4)]
    marked, moved, kept = coo_versions(old, [], 2, B)
    write_catalog(tmp_path / "a1.zone", A, 2, marked)
    write_catalog(tmp_path / "b1.zone", B, 2, moved)
    write_catalog(tmp_path / "a2.zone", A, 3, kept)
    # The old catalog: every member still there, the two moving ones with a coo PTR to B.
    assert _ptrs(tmp_path / "a1.zone", A, "coo.") == {
        f"coo.m0.zones.{A}": B,
        f"coo.m1.zones.{A}": B,
    }
    assert len(_ptrs(tmp_path / "a1.zone", A)) == 4
    # The new catalog names them under the same ids, without a coo of its own.
    assert _ptrs(tmp_path / "b1.zone", B) == {
        f"m0.zones.{B}": "z0.example.",
        f"m1.zones.{B}": "z1.example.",
    }
    assert _ptrs(tmp_path / "b1.zone", B, "coo.") == {}
    # Then the old one without them.
    assert _ptrs(tmp_path / "a2.zone", A) == {
        f"m2.zones.{A}": "z2.example.",
        f"m3.zones.{A}": "z3.example.",
    }
    text = (tmp_path / "a1.zone").read_text()
    assert f"coo.m0.zones.{A}\t0\tIN\tPTR\t{B}\n" in text


def test_a_second_move_adds_to_what_the_new_catalog_names_already() -> None:
    old = [Member(member_id(i), f"z{i}.example.") for i in range(5, 8)]
    there = [Member("m0", "z0.example.")]
    _, moved, kept = coo_versions(old, there, 1, B)
    assert [m.id for m in moved] == ["m0", "m5"]
    assert [m.id for m in kept] == ["m6", "m7"]


def test_coo_is_planned_as_a_phase_before_the_restart(tmp_path: Path) -> None:
    text = "[catalog]\nmembers = 50\ncoo = 5\nrestart_secondary = true\n"
    catalog = plan_case(_load(tmp_path, HEAD + HOSTING + text).cases[0]).catalog
    assert catalog is not None
    assert catalog.phases() == ("provision", "add", "remove", "coo", "restart")
    assert catalog.coo == 5 and catalog.catalogs == (A, B)
    plain = plan_case(_load(tmp_path, HEAD + HOSTING + "[catalog]\nmembers = 5\n").cases[0])
    assert plain.catalog is not None and plain.catalog.catalogs == (A,)


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("coo = 0\n", "catalog.coo"),
        ("coo = -2\n", "catalog.coo"),
        ('coo = "five"\n', "catalog.coo"),
        ("coo = 2.5\n", "catalog.coo"),
        # 10 members, one added, one removed: 10 when they move.
        ("coo = 11\n", "catalog.coo: 11 members cannot move: the catalog names 10"),
        ('coo = 2\ncoo_zone = "Catalog.invalid"\n', "catalog.coo_zone: the members move"),
    ],
)
def test_a_coo_that_cannot_run_is_refused_naming_its_key(
    tmp_path: Path, text: str, words: str
) -> None:
    with pytest.raises(ScenarioError) as caught:
        _load(tmp_path, HEAD + HOSTING + "[catalog]\nmembers = 10\n" + text)
    assert words in str(caught.value)
    assert caught.value.exit_status == 2
    assert "c.toml" in str(caught.value)


@pytest.mark.parametrize(
    ("kind", "version", "words"),
    [
        ("knot", "3.2.6", "Knot 3.2.6 has no change of ownership (3.2.6's knotd carries no 'coo'"),
        ("nsd", "4.12.0", "NSD 4.12.0 consumes one catalog only"),
    ],
)
def test_a_consumer_without_coo_is_refused_before_any_server_starts(
    tmp_path: Path, kind: str, version: str, words: str
) -> None:
    text = (
        HEAD + HOSTING + '[servers.primary]\nkind = "bind"\n[servers.secondary]\n'
        f'kind = "{kind}"\n[catalog]\nmembers = 10\ncoo = 2\n'
    )
    loaded = _load(tmp_path, text)
    plans = [plan_case(case) for case in loaded.cases]
    binaries = {
        p.name: {
            "primary": ServerBinary("bind", Path("/usr/sbin/named"), "9.18.49"),
            "secondary": ServerBinary(kind, Path("/usr/sbin/x"), version),
        }
        for p in plans
    }
    with pytest.raises(ScenarioError) as caught:
        check_catalog_consumers(plans, binaries, loaded.path)
    said = str(caught.value)
    assert f"c.toml: catalog.coo: secondary ({kind} {version}) cannot move members" in said
    assert words in said
    assert "remove catalog.coo" in said and caught.value.exit_status == 2
    # The same consumer without coo is let through.
    plans = [plan_case(c) for c in _load(tmp_path, text.replace("coo = 2\n", "")).cases]
    check_catalog_consumers(plans, binaries, loaded.path)


def test_bind_and_pdns_take_a_change_of_ownership() -> None:
    assert server_class("bind").coo_problem("9.18.49") is None
    assert server_class("bind").coo_problem("9.16.1") is not None
    assert server_class("pdns").coo_problem("4.7.3") is None


@pytest.mark.parametrize(
    ("kind", "line"),
    [
        ("bind", "2026-11-28T19:33:58.017 general: info: catz: adding zone "
         "'hezavolebuj.hosting.example' from catalog 'catalog2.invalid' - success"),
        ("pdns", "Nov 28 19:33:58 AXFR-in zone: 'catalog2.invalid', primary: '198.19.18.2', "
         "Catalog-Zone zone 'hezavolebuj.hosting.example' owner change without state reset, "
         "old catalog 'catalog.invalid', new catalog 'catalog2.invalid'"),
    ],
)  # fmt: skip
def test_each_dialect_logs_the_move_in_words_its_pattern_reads(kind: str, line: str) -> None:
    """Lines captured from tests/system/test_catalog.py's coo run."""
    pattern = server_class(kind).coo_log
    assert pattern is not None
    found = pattern.search(line)
    assert found is not None
    assert (found["zone"], found["new"]) == ("hezavolebuj.hosting.example", B[:-1])
    assert server_class("knot").coo_log is None


def _two_catalogs(tmp_path: Path) -> ServerSetup:
    """A consumer of both catalogs."""
    return ServerSetup(
        role="secondary",
        address="10.0.0.2",
        peers=("10.0.0.1",),
        zones=[ZoneEntry(A, tmp_path / f"{A}zone"), ZoneEntry(B, tmp_path / f"{B}zone")],
        workdir=tmp_path,
        catalog=CatalogConsumer(A, tmp_path / "members", (B,)),
    )


def _rendered(kind: str, tmp_path: Path) -> str:
    server = server_class(kind)(_two_catalogs(tmp_path), Path("/usr/sbin/x"))
    return "\n".join(p.read_text() for p in server.render() if p.suffix in (".conf", ".sql"))


def test_every_consumer_is_configured_with_both_catalogs(tmp_path: Path) -> None:
    bind = _rendered("bind", tmp_path / "bind")
    assert f'        zone "{A}"' in bind and f'        zone "{B}"' in bind
    assert bind.count('zone-directory "') == 2
    knot = _rendered("knot", tmp_path / "knot")
    assert knot.count("catalog-role: interpret") == 2
    sql = database_sql(_two_catalogs(tmp_path))
    for catalog in (A, B):
        assert f"VALUES ('{catalog[:-1]}', 'CONSUMER')" in sql


class CooBench(FakeCatalogBench):
    """Two catalogs; consumer "b" logs each move 0.3 s after the new catalog is served,
    "k" logs none; hosts in `drops` stop answering for the moved members once the old
    catalog drops them; "k" transfers each moved member again."""

    def __init__(self, plan: CasePlan, drops: tuple[str, ...] = ()) -> None:
        super().__init__(plan, member_s={"b": lambda z: 0.1, "k": lambda z: 0.2})
        self.other: list[Member] = []
        self.moved_at = 0.0
        self.drops = drops
        self.versions: list[tuple[str, list[Member]]] = []

    def catalog_members(self, zone: str | None = None) -> list[Member]:
        return list(self.other if zone == B else self.members)

    def put_catalog(self, members: list[Member], zone: str | None = None) -> tuple[int, float]:
        self.versions.append((zone or A, list(members)))
        if zone != B:
            return super().put_catalog(members)
        self.other = list(members)
        self.now += 0.01
        self.moved_at = self.now
        return 2, self.now

    def wait_gone(
        self, hosts: list[str], zones: list[str], deadline: float
    ) -> dict[str, dict[str, float]]:
        self.now = deadline
        return {h: (dict.fromkeys(zones, deadline - 1) if h in self.drops else {}) for h in hosts}

    def ownership_changes(self, host: str, to: str, since: float) -> dict[str, float] | None:
        if host == "k":
            return None
        return {m.zone: self.wall() - self.now + self.moved_at + 0.3 for m in self.other}

    def member_transfers(
        self, host: str, since: float, zones: list[str] | None = None
    ) -> int | None:
        return 0 if host == "b" else len(zones or [])


def test_each_moved_member_is_timed_by_the_consumers_log_or_its_staying_served(
    tmp_path: Path,
) -> None:
    plan = _plan(tmp_path, "members = 6\nadd = 0\nremove = 0\ncoo = 2\ninterval = '5s'")
    bench = CooBench(plan)
    out: list[TransferRecord] = []
    catalog_repeat(bench, RecordContext("run", plan), 1, out.append, {})
    # Marked in the old catalog, named in the new, dropped from the old: in that order.
    zones = [(catalog, [m.id for m in members]) for catalog, members in bench.versions]
    assert zones == [
        (A, [f"m{i}" for i in range(6)]),
        (B, ["m0", "m1"]),
        (A, ["m2", "m3", "m4", "m5"]),
    ]
    assert [m.coo for m in bench.versions[0][1]] == [B, B, None, None, None, None]
    coo = {r.host: r for r in out if r.extra["catalog"]["phase"] == "coo"}
    b, k = coo["b"].extra["catalog"], coo["k"].extra["catalog"]
    assert coo["b"].ok and coo["k"].ok
    assert b["members"] == b["served"] == 2 and b["last_s"] == pytest.approx(0.3)
    assert b["moved_by"] == "its log" and b["retransfers"] == 0
    # Without a log line: served throughout the interval after the old catalog dropped them
    # (published 5 s after the new one was served), so 10 s.
    assert k["moved_by"] == "served after the removal" and k["last_s"] == pytest.approx(10.01)
    assert k["still_served"] == 2 and k["retransfers"] == 2
    assert b["coo_to"] == B and coo["b"].serial == 2


def test_a_member_the_consumer_drops_after_the_move_is_not_reached(tmp_path: Path) -> None:
    plan = _plan(tmp_path, "members = 4\nadd = 0\nremove = 0\ncoo = 2\ninterval = '5s'")
    bench = CooBench(plan, drops=("b",))
    out: list[TransferRecord] = []
    catalog_repeat(bench, RecordContext("run", plan), 1, out.append, {})
    coo = {r.host: r for r in out if r.extra["catalog"]["phase"] == "coo"}
    facts = coo["b"].extra["catalog"]
    assert not coo["b"].ok and coo["b"].failure == "timeout"
    assert facts["served"] == 0 and facts["still_served"] == 0 and len(facts["dropped"]) == 2
    assert coo["k"].ok
