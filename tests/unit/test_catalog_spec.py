"""[catalog] as a user writes it: what it plans, what it refuses (exit 2, naming the key
and the fix), and what each dialect renders for a consumer."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness import spec
from harness.core.errors import ScenarioError
from harness.plan.case import plan_case
from harness.run.runner import check_catalog_consumers
from harness.servers import server_class
from harness.servers.binaries import ServerBinary
from harness.servers.setup import CatalogConsumer, ServerSetup, ZoneEntry

HEAD = 'trigger = "catalog"\nxfr = ["ixfr"]\nrepeats = 3\n'
HOSTING = '[zones]\npreset = "hosting"\norigin = "h.example."\n'


def _load(tmp_path: Path, text: str) -> spec.LoadedScenario:
    path = tmp_path / "c.toml"
    path.write_text(text)
    return spec.load(path)


def test_the_pool_holds_every_member_each_repeat_adds(tmp_path: Path) -> None:
    loaded = _load(tmp_path, HEAD + HOSTING + "[catalog]\nmembers = 100\nadd = 2\n")
    plan = plan_case(loaded.cases[0])
    assert plan.zone_spec.zones == 100 + 2 * 3
    assert plan.catalog is not None and plan.catalog.phases() == ("provision", "add", "remove")
    assert plan.notify and plan.transfers() == 3 * 3  # one secondary, 3 phases, 3 repeats


@pytest.mark.parametrize(
    ("text", "words"),
    [
        (HEAD + HOSTING, "needs a [catalog] table"),
        (HEAD + "[catalog]\nmembers = 10\n", "zones.preset: a catalog's members are hosting"),
        (HEAD + HOSTING + "zones = 5\n[catalog]\nmembers = 10\n", "zones.zones"),
        (HEAD + HOSTING + "[catalog]\nmembers = 2\nadd = 0\nremove = 3\n", "catalog.remove"),
        (HEAD + HOSTING + "[catalog]\nmembers = 10\nadd = 5000\n", "catalog.add"),
        ('trigger = "notify"\n' + HOSTING + "[catalog]\nmembers = 10\n", "applies to trigger"),
        (HEAD + HOSTING + '[catalog]\nmembers = 10\nversion = "2 \\"x"\n', "catalog.version"),
        (HEAD + HOSTING + "[catalog]\nmembers = 10\nversion = 2\n", "catalog.version"),
        (HEAD + HOSTING + '[catalog]\nmembers = 10\nsecond_target = "a b"\n', "second_target"),
        (
            HEAD + HOSTING + '[catalog]\nmembers = 10\nchange = "member"\n',
            "catalog.change: 'member'",
        ),
        (HEAD + HOSTING + "[catalog]\nmembers = 10\nchange = 1\n", "catalog.change"),
        (HEAD + HOSTING + "[catalog]\nmembers = 10\nversions = 3\nadd = 0\n", "set add = 1"),
        (HEAD + HOSTING + "[catalog]\nmembers = 10\nversions = 0\n", "catalog.versions"),
        (
            HEAD.replace("3", "20")
            + HOSTING
            + "[catalog]\nmembers = 1000\nversions = 100\nadd = 1000\n",
            "catalog.versions: the primary would load 2,001,000",
        ),
    ],
)
def test_a_catalog_that_cannot_run_is_refused_naming_its_key(
    tmp_path: Path, text: str, words: str
) -> None:
    with pytest.raises(ScenarioError) as caught:
        _load(tmp_path, text)
    assert words in str(caught.value)
    assert caught.value.exit_status == 2


def test_versions_and_a_change_are_planned_as_phases_with_zones_of_their_own(
    tmp_path: Path,
) -> None:
    text = "[catalog]\nmembers = 100\nadd = 2\nversions = 3\nchange = 'rename'\n"
    plan = plan_case(_load(tmp_path, HEAD + HOSTING + text).cases[0])
    catalog = plan.catalog
    assert catalog is not None
    assert catalog.phases() == ("provision", "add", "add 2", "add 3", "remove", "rename")
    # Each repeat takes 2 x 3 added zones and one for the rename: 7, after the 100 members.
    assert plan.zone_spec.zones == 100 + 7 * 3
    assert [catalog.added_index(2, v) for v in (1, 2, 3)] == [107, 109, 111]
    assert catalog.renamed_index(3) == 100 + 7 * 2 + 6
    assert plan.transfers() == 6 * 3


@pytest.mark.parametrize(("written", "planned"), [(None, "2"), ('"99"', "99"), ('""', None)])
def test_the_catalog_version_is_planned_as_written(
    tmp_path: Path, written: str | None, planned: str | None
) -> None:
    given = "" if written is None else f"version = {written}\n"
    loaded = _load(tmp_path, HEAD + HOSTING + "[catalog]\nmembers = 10\n" + given)
    catalog = plan_case(loaded.cases[0]).catalog
    assert catalog is not None and catalog.version == planned


def test_a_second_target_goes_to_the_first_member_only(tmp_path: Path) -> None:
    text = HEAD + HOSTING + '[catalog]\nmembers = 3\nsecond_target = "Other.Example"\n'
    catalog = plan_case(_load(tmp_path, text).cases[0]).catalog
    assert catalog is not None and catalog.second_target == "other.example."
    first = catalog.first_members("h.example.", 1)
    assert [m.second_target for m in first] == ["other.example.", None, None]


def test_nsd_46_as_a_consumer_is_refused_before_any_server_starts(tmp_path: Path) -> None:
    loaded = _load(
        tmp_path,
        HEAD + HOSTING + '[servers.primary]\nkind = "bind"\n[servers.secondary]\nkind = "nsd"\n'
        "[catalog]\nmembers = 10\n",
    )
    plans = [plan_case(case) for case in loaded.cases]
    binaries = {
        p.name: {
            "primary": ServerBinary("bind", Path("/usr/sbin/named"), "9.18.49"),
            "secondary": ServerBinary("nsd", Path("/usr/sbin/nsd"), "4.6.1"),
        }
        for p in plans
    }
    with pytest.raises(ScenarioError) as caught:
        check_catalog_consumers(plans, binaries, loaded.path)
    assert "secondary (nsd 4.6.1) cannot be a catalog consumer" in str(caught.value)
    assert "NSD 4.6.1 has no catalog zones" in str(caught.value)
    assert caught.value.exit_status == 2
    for kind, version in (("bind", "9.18.49"), ("knot", "3.2.6")):
        assert server_class(kind).catalog_consumer_problem(version) is None
    assert server_class("pdns").catalog_consumer_problem("4.7.3") is None
    assert server_class("nsd").catalog_consumer_problem("4.12.0") is None  # trixie's


def _rendered(kind: str, tmp_path: Path) -> str:
    setup = ServerSetup(
        role="secondary",
        address="10.0.0.2",
        peers=("10.0.0.1",),
        zones=[ZoneEntry("catalog.invalid.", tmp_path / "catalog.invalid.zone")],
        workdir=tmp_path,
        catalog=CatalogConsumer("catalog.invalid.", tmp_path / "members"),
    )
    server = server_class(kind)(setup, Path("/usr/sbin/x"))
    (config,) = [p for p in server.render() if p.suffix == ".conf" and "key" not in p.name
                 and "rndc" not in p.name]  # fmt: skip
    assert (tmp_path / "members").is_dir()
    return config.read_text()


def test_bind_and_knot_render_their_consumers(tmp_path: Path) -> None:
    bind = _rendered("bind", tmp_path / "bind")
    assert 'catalog-zones {\n        zone "catalog.invalid."' in bind
    assert "default-primaries { 10.0.0.1 port 53; }" in bind
    assert "allow-new-zones yes;" in bind
    knot = _rendered("knot", tmp_path / "knot")
    assert "catalog-role: interpret\n    catalog-template: catalog_member" in knot
    assert "- id: catalog_member" in knot


@pytest.mark.parametrize(
    ("kind", "line", "kept"),
    [
        ("bind", "2026-11-28T15:19:43.676 general: warning: catz: catz_addmodzone_taskaction: "
         "zone 'a.example' will not be added because another catalog zone already contains "
         "an entry with that zone", True),
        ("bind", "2026-11-28T15:19:43.672 general: info: catz: catalog.invalid: reload start",
         False),
        ("knot", "2026-11-28T15:19:43+0000 error: [a.example.] duplicate addition/removal of "
         "the member node, ignoring", True),
        ("knot", "2026-11-28T15:19:43+0000 info: [catalog.invalid.] failed to parse zone file "
         "'/x/catalog.invalid.zone' (not exists)", False),
        ("pdns", "Nov 28 14:57:37 AXFR-in zone: 'catalog.invalid', primary: '198.18.8.2', "
         "Catalog-Zone PDNSException Database error trying to delete domain 'a.example': "
         "Error while retrieving SQLite query results: database is locked (5)", True),
        ("pdns", "Nov 28 14:50:04 IXFR-in zone 'catalog.invalid', primary '198.19.134.2', "
         "can't determine backend, not configured as slave", True),
        ("pdns", "Nov 28 14:49:56 AXFR-in zone: 'catalog.invalid', primary: '198.19.134.2', "
         "Catalog-Zone create zone 'a.example'", False),
        ("pdns", "Nov 28 15:50:19 AXFR-in zone: 'catalog.invalid', primary: '198.18.192.2', "
         'Catalog-Zone zone \'catalog.invalid\', unsupported catalog zone schema version "99", '
         "aborting", True),
        ("pdns", "Nov 28 15:53:37 AXFR-in zone: 'catalog.invalid', primary: '198.18.115.2', "
         "Catalog-Zone zone 'catalog.invalid', catalog zone schema version missing, aborting",
         True),
        ("bind", "2026-11-28T15:50:19.564 general: warning: catz: zone 'catalog.invalid' "
         "unsupported version '99'", True),
        ("bind", "2026-11-28T15:53:37.764 general: error: catz: zone 'catalog.invalid' has no "
         "'version' record (partial match)", True),
        ("knot", "2026-11-28T15:50:19+0000 error: [catalog.invalid.] failed to process catalog "
         "zone (invalid zone file)", True),
        ("bind", "2026-11-28T16:03:31.520 general: warning: catz: member zone PTR RRset contains "
         "more than one record, which is invalid", True),
        ("pdns", "Nov 28 16:03:31 AXFR-in zone: 'catalog.invalid', primary: '198.19.233.2', "
         "Catalog-Zone zone 'catalog.invalid', duplicate unique 'm0'", True),
    ],
)  # fmt: skip
def test_each_dialect_keeps_its_catalog_complaints_in_its_words(
    kind: str, line: str, kept: bool
) -> None:
    """Lines captured from the runs of docs/catalog.md."""
    assert bool(server_class(kind).catalog_wording.search(line)) is kept


def test_members_share_the_pools_names_and_never_take_a_wrong_one(tmp_path: Path) -> None:
    text = HEAD + HOSTING + "[catalog]\nmembers = 3\n"
    catalog = plan_case(_load(tmp_path, text).cases[0]).catalog
    assert catalog is not None
    alone = catalog.first_members("h.example.", 1)
    pool = ["".join(m.zone) for m in alone]  # equal strings, other objects
    shared = catalog.first_members("h.example.", 1, pool)
    assert shared == alone
    assert all(m.zone is name for m, name in zip(shared, pool, strict=True))
    shuffled = catalog.first_members("h.example.", 1, pool[::-1])  # not in index order
    assert [m.zone for m in shuffled] == [m.zone for m in alone]
