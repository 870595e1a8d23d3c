"""Catalog zones on real servers: a BIND primary publishes a 1,000-member catalog (RFC 9432
v2) to a BIND, a Knot and a PowerDNS consumer; every member's SOA serial is checked at each
consumer and a sample read back whole; a one-member add and a one-member removal are measured, and a
consumer restart counts what it transferred again. Bad input written by hand (a member
named twice, a member the primary does not serve, a catalog version property a consumer
must reject) is reported in the servers' words and the run exits 1.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness import spec
from harness.results.folder import read_run
from harness.results.model import TransferRecord
from harness.run.runner import run_scenario
from harness.zonegen.small import hosting_zone_name

pytestmark = [
    pytest.mark.root,
    pytest.mark.netns,
    pytest.mark.servers,
    pytest.mark.slow,
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root for namespaces"),
]

# A BIND primary, a BIND and a Knot consumer; each scenario adds its name, timeout, [catalog].
SERVERS = """
name = "{name}"
timeout = "{timeout}"
repeats = 1
trigger = "catalog"
xfr = ["ixfr"]
[zones]
preset = "hosting"
origin = "hosting.example."
[servers.primary]
kind = "bind"
{primary}
[[secondaries]]
name = "berlin"
kind = "bind"
{berlin}
[[secondaries]]
name = "prague"
kind = "knot"
"""


def servers(name: str, timeout: str, primary: str = "", berlin: str = "") -> str:
    """SERVERS with its name and timeout, and lines for the primary's and berlin's tables."""
    return SERVERS.format(name=name, timeout=timeout, primary=primary, berlin=berlin)


# BIND paces a start through rates of 20 a second by default: the primary's NOTIFYs of the
# 1,001 zones it loads (50 s, each one a check at every secondary, whose writes raced
# PowerDNS's member removal into "database is locked"), and the BIND consumer's SOA queries
# for 1,000 new members (serial-query-rate: 50 s). Raised, as an operator of a catalog this
# size would: the test is about what each consumer provisions, not BIND's pacing.
FAST_PRIMARY = "options = { startup-notify-rate = 1000, notify-rate = 1000 }"
FAST_BERLIN = "options = { serial-query-rate = 1000 }"

THOUSAND = """
[[secondaries]]
name = "lisbon"
kind = "pdns"
[catalog]
members = 1000
add = 1
remove = 1
interval = "1s"
restart_secondary = true
sample = 16
"""

BAD = """
[catalog]
members = 20
add = 0
remove = 0
names = ["{twice}", "absent.example."]
"""


REJECTED = """
[[secondaries]]
name = "lisbon"
kind = "pdns"
[catalog]
members = 5
add = 0
remove = 0
{bad}
"""

# What each consumer wrote when it rejected the whole catalog (captured from these runs):
# an unsupported version, none at all, a member node with two PTR targets.
REJECTIONS = {
    'version = "99"': {
        "berlin": "catz: zone 'catalog.invalid' unsupported version '99'",
        "prague": "[catalog.invalid.] failed to process catalog zone (invalid zone file)",
        "lisbon": 'unsupported catalog zone schema version "99", aborting',
    },
    'version = ""': {
        "berlin": "catz: zone 'catalog.invalid' has no 'version' record",
        "prague": "[catalog.invalid.] failed to process catalog zone (invalid zone file)",
        "lisbon": "catalog zone schema version missing, aborting",
    },
    'second_target = "other.example"': {
        "berlin": "catz: member zone PTR RRset contains more than one record, which is invalid",
        "prague": "[catalog.invalid.] failed to process catalog zone (such record already "
        "exists in zone)",
        "lisbon": "Catalog-Zone zone 'catalog.invalid', duplicate unique 'm0'",
    },
}
PROBLEM = {
    'version = "99"': 'version property is "99", not "2"',
    'version = ""': "the catalog has no version property",
    'second_target = "other.example"': "has two PTR targets",
}


def _run_cli(path: Path, results: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "harness", "run", str(path), "--results", str(results)],
        capture_output=True,
        text=True,
        env=os.environ | {"COLUMNS": "200"},
        timeout=600,
    )


def _phase(record: TransferRecord) -> str:
    return str(record.extra["catalog"]["phase"])


def test_a_bind_primary_provisions_1000_members_at_bind_and_knot(tmp_path: Path) -> None:
    path = tmp_path / "scenario.toml"
    path.write_text(servers("catalog-1000", "180s", FAST_PRIMARY, FAST_BERLIN) + THOUSAND)
    run_dir = run_scenario(spec.load(path), results_root=tmp_path / "results")
    records = read_run(run_dir)[1]
    by = {(r.host, _phase(r)): r for r in records}
    hosts = ("berlin", "prague", "lisbon")
    assert set(by) == {
        (host, phase) for host in hosts for phase in ("provision", "add", "remove", "restart")
    }
    for record in records:
        assert record.trigger == "catalog" and record.zone == "catalog.invalid."
        if (record.host, _phase(record)) == ("lisbon", "remove") and not record.ok:
            # PowerDNS 4.7.3 on sqlite may fail to delete a member: in its own words.
            said = " ".join(record.extra["catalog"]["failures"])
            assert "database is locked" in said and "Catalog-Zone" in said, said
            continue
        assert record.ok and record.verified, (record.host, _phase(record), record.error)
    for host in hosts:
        provision = by[(host, "provision")].extra["catalog"]
        # Every member's SOA served at its serial; 16 of them read back whole and verified.
        assert provision["members"] == provision["served"] == 1000
        assert provision["verified_sample"] == 16
        assert 0 < provision["p50_s"] <= provision["p95_s"] <= provision["last_s"]
        assert provision["consumer_peak_bytes"] > 0 and provision["consumer_cpu_s"] > 0
        for phase in ("add", "remove"):
            if not by[(host, phase)].ok:
                continue  # (PowerDNS's removal, above)
            figures = by[(host, phase)].extra["catalog"]
            assert figures["members"] == figures["served"] == 1
            assert figures["origin"] == "primary served"
        # The add and the removal were published as versions 2 and 3 of the catalog.
        assert by[(host, "add")].serial == 2 and by[(host, "remove")].serial == 3
        restart = by[(host, "restart")].extra["catalog"]
        assert restart["served"] == 1000
        assert isinstance(restart["transfers_after_restart"], int)
    # BIND keeps its members' files and the catalog: a restart transfers nothing again.
    assert by[("berlin", "restart")].extra["catalog"]["transfers_after_restart"] == 0


def test_a_duplicate_and_an_absent_member_are_reported_and_exit_1(tmp_path: Path) -> None:
    twice = hosting_zone_name("hosting.example.", 1, 3)
    path = tmp_path / "scenario.toml"
    # The absent member is never served: the run waits out its timeout, so a short one (the
    # other 20 are served within 2 s, and the refusal is logged at the first attempt).
    path.write_text(servers(name="catalog-bad", timeout="10s") + BAD.format(twice=twice))
    results = tmp_path / "results"
    done = _run_cli(path, results)
    assert done.returncode == 1, done.stdout[-3000:] + done.stderr[-3000:]
    (run_dir,) = results.iterdir()
    records = read_run(run_dir)[1]
    assert {r.host for r in records} == {"berlin", "prague"}
    for record in records:
        facts = record.extra["catalog"]
        assert not record.ok
        assert f"member zone {twice} is named 2 times" in facts["catalog_problems"]
        # The absent member was never served: counted, not dropped.
        assert facts["members"] == 21 and facts["served"] == 20
        assert facts["not_served"] == ["absent.example."]
        assert record.failure == "timeout"
        assert "served 20 of 21 members (provision)" in (record.error or ""), record.error
        # ...and the consumer said why, in its own words: the primary refused the absent
        # zone, and the duplicate was not added twice.
        said = " ".join(facts["failures"])
        assert "absent.example" in said, said
        duplicate = {
            "berlin": f"zone '{twice.rstrip('.')}' will not be added because another catalog "
            "zone already contains an entry with that zone",
            "prague": f"[{twice}] duplicate addition/removal of the member node, ignoring",
        }
        assert duplicate[record.host] in said, said


@pytest.mark.parametrize("bad", list(REJECTIONS))
def test_a_catalog_the_consumers_reject_is_reported_in_their_words(
    tmp_path: Path, bad: str
) -> None:
    """An unsupported version, none at all (RFC 9432 §4.2.1: a consumer must not process
    the catalog), a member node with two PTR targets (§4.1: exactly one): every consumer
    refuses the whole catalog, says so in its log, and the run exits 1."""
    path = tmp_path / "scenario.toml"
    # No member is ever served: the run waits out its timeout, so a short one (each consumer
    # rejects the catalog at its first transfer, within a second of its start).
    text = servers(name="catalog-rejected", timeout="8s")
    path.write_text(text + REJECTED.format(bad=bad))
    results = tmp_path / "results"
    done = _run_cli(path, results)
    assert done.returncode == 1, done.stdout[-3000:] + done.stderr[-3000:]
    (run_dir,) = results.iterdir()
    records = read_run(run_dir)[1]
    assert {r.host for r in records} == {"berlin", "prague", "lisbon"}
    for record in records:
        facts = record.extra["catalog"]
        assert not record.ok and record.failure == "timeout"
        assert facts["served"] == 0 and facts["members"] == 5
        (problem,) = facts["catalog_problems"]
        assert PROBLEM[bad] in problem, problem
        said = " ".join(facts["failures"])
        assert REJECTIONS[bad][record.host] in said, said
        assert "it said: " in (record.error or ""), record.error


VERSIONS_AND_CHANGE = """
[catalog]
members = 200
add = 2
versions = 3
interval = "2s"
remove = 0
change = "zone"
sample = 4
"""


def test_versions_every_interval_and_a_members_new_serial_are_each_measured(
    tmp_path: Path,
) -> None:
    """Three versions adding 2 members each, 2 s apart (BIND batches catalog updates
    within its min-update-interval, 5 s), then one member's zone at its next serial."""
    path = tmp_path / "scenario.toml"
    path.write_text(servers(name="catalog-versions", timeout="60s") + VERSIONS_AND_CHANGE)
    run_dir = run_scenario(spec.load(path), results_root=tmp_path / "results")
    records = read_run(run_dir)[1]
    by = {(r.host, _phase(r)): r for r in records}
    phases = ("provision", "add", "add 2", "add 3", "change")
    assert set(by) == {(host, phase) for host in ("berlin", "prague") for phase in phases}
    for record in records:
        assert record.ok and record.verified, (record.host, _phase(record), record.error)
    changed = hosting_zone_name("hosting.example.", 1, 0)
    for host in ("berlin", "prague"):
        # Each version is measured from its own catalog serial: 2, 3, 4.
        for serial, phase in enumerate(("add", "add 2", "add 3"), start=2):
            facts = by[(host, phase)].extra["catalog"]
            assert by[(host, phase)].serial == facts["catalog_serial"] == serial
            assert facts["members"] == facts["served"] == 2
            assert facts["origin"] == "primary served" and facts["last_s"] >= 0
            assert facts["consumer_cpu_s"] is not None
        change = by[(host, "change")]
        facts = change.extra["catalog"]
        # The member's own zone went from serial 1 to 2; the catalog did not change.
        assert change.serial == facts["member_serial"] == 2
        assert facts["catalog_serial"] == 4
        assert facts["members"] == facts["served"] == 1 and facts["last_s"] >= 0
        assert facts["verified_sample"] == 0
        assert changed not in facts.get("not_served", [])


RENAME = """
[catalog]
members = 40
add = 0
remove = 0
change = "rename"
sample = 4
"""


def test_a_renamed_member_is_served_under_its_new_name_and_knot_drops_the_old(
    tmp_path: Path,
) -> None:
    path = tmp_path / "scenario.toml"
    path.write_text(servers(name="catalog-rename", timeout="20s") + RENAME)
    run_dir = run_scenario(spec.load(path), results_root=tmp_path / "results")
    records = read_run(run_dir)[1]
    by = {(r.host, _phase(r)): r for r in records}
    assert set(by) == {(h, p) for h in ("berlin", "prague") for p in ("provision", "rename")}
    old = hosting_zone_name("hosting.example.", 1, 0)
    gone = {}
    for host in ("berlin", "prague"):
        rename = by[(host, "rename")]
        assert rename.ok, (host, rename.error)
        facts = rename.extra["catalog"]
        assert facts["members"] == facts["served"] == 1
        assert facts["renamed_from"] == old
        assert rename.serial == 2
        gone[host] = facts["old_gone_s"]
    # Knot purges the old name ("zone purged") once it serves the new one; BIND 9.18.49
    # adds the new zone ("catz: adding zone ...") and keeps answering for the old one
    # until the timeout: it never said it deleted it (seen here).
    assert gone["prague"] is not None and gone["prague"] >= 0
    assert gone["berlin"] is None


COO = """
[[secondaries]]
name = "lisbon"
kind = "pdns"
[catalog]
members = 50
add = 0
remove = 0
coo = 5
interval = "6s"
sample = 4
restart_secondary = true
"""


def test_members_moved_to_a_second_catalog_stay_served(tmp_path: Path) -> None:
    """Change of ownership (RFC 9432 §5.1): 5 of 50 members get a coo PTR in the first
    catalog, then the second catalog names them (same ids), then the first drops them,
    6 s apart (BIND's min-update-interval is 5 s)."""
    path = tmp_path / "scenario.toml"
    text = servers("catalog-coo", "60s")
    path.write_text(text.replace('[[secondaries]]\nname = "prague"\nkind = "knot"\n', "") + COO)
    run_dir = run_scenario(spec.load(path), results_root=tmp_path / "results")
    records = read_run(run_dir)[1]
    by = {(r.host, _phase(r)): r for r in records}
    hosts = ("berlin", "lisbon")
    assert set(by) == {(h, p) for h in hosts for p in ("provision", "coo", "restart")}
    for record in records:
        assert record.ok and record.verified, (record.host, _phase(record), record.error)
    for host in hosts:
        coo = by[(host, "coo")]
        facts = coo.extra["catalog"]
        assert facts["coo_from"] == "catalog.invalid." and facts["coo_to"] == "catalog2.invalid."
        assert coo.serial == facts["catalog_serial"] == 2  # the second catalog's
        # Each consumer logged every move ...
        assert facts["members"] == facts["served"] == 5 and facts["moved_by"] == "its log"
        assert 0 <= facts["last_s"] < 5
        # ... and still served every moved member after the first catalog dropped it.
        assert facts["still_served"] == 5 and facts["dropped"] == []
        # Both transferred every moved member again (seen here): BIND 9.18.49 deletes the
        # zone from the old catalog and adds it from the new one ("catz_delzone_taskaction:
        # zone '...' deleted", then "catz: adding zone ... from catalog 'catalog2.invalid'");
        # PowerDNS 4.7.3 logs "owner change without state reset" and then an AXFR of each.
        assert facts["retransfers"] == 5
        assert by[(host, "restart")].extra["catalog"]["served"] == 50


def test_a_coo_scenario_with_a_knot_consumer_is_refused_before_any_server_starts(
    tmp_path: Path,
) -> None:
    path = tmp_path / "scenario.toml"
    path.write_text(servers(name="catalog-coo-knot", timeout="60s") + COO)
    done = _run_cli(path, tmp_path / "results")
    assert done.returncode == 2, done.stdout + done.stderr
    said = done.stdout + done.stderr
    assert "catalog.coo" in said and "prague (knot" in said
    assert "no 'coo'" in said and "remove catalog.coo" in said
    assert not (tmp_path / "results").exists() or not any((tmp_path / "results").iterdir())
