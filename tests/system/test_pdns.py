"""PowerDNS Authoritative as primary and as secondary, end to end through `xfrbench run`,
beside BIND and Knot: AXFR and IXFR, TCP and TCP+TSIG, NOTIFY and control-command triggers,
every copy verified; IXFR from a PowerDNS primary recorded as unsupported with the reason."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from harness import spec
from harness.results.folder import read_run
from harness.run.runner import run_scenario
from harness.testbed.place import CONTROL_DIR
from tests.system.live_cases import first_copies

pytestmark = [
    pytest.mark.root,
    pytest.mark.netns,
    pytest.mark.servers,
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root for namespaces"),
]


def _run(tmp_path: Path, text: str) -> list:
    path = tmp_path / "scenario.toml"
    path.write_text(text)
    run_dir = run_scenario(spec.load(path), results_root=tmp_path / "results")
    meta, records = read_run(run_dir)
    assert meta.interrupted is False
    assert any(s.kind == "pdns" and s.version for s in meta.servers.values())
    return records


def _control_dirs_of(results: Path) -> tuple[set[str], list[Path]]:
    """The run's testbeds, and the control directories named after them that are left (a
    test beside this one may have servers of its own running meanwhile)."""
    ids = {
        json.loads(path.read_text())["testbed"]["testbed_id"]
        for path in results.glob("*/cases/**/case.json")
    }
    dirs = [p for p in CONTROL_DIR.glob("*") if p.is_dir()] if CONTROL_DIR.exists() else []
    return ids, [p for p in dirs if any(p.name.startswith(f"{i}-") for i in ids)]


def _verified(records: list) -> None:
    for record in records:
        assert record.ok and record.verified, (record.case, record.error)
        assert record.duration_s is not None and record.duration_s > 0


def test_pdns_both_roles_notify_axfr_ixfr_tcp_and_tsig(tmp_path: Path) -> None:
    records = _run(
        tmp_path,
        """
repeats = 2
timeout = "30s"
transports = ["tcp", "tcp-tsig"]
xfr = ["axfr", "ixfr"]
trigger = "notify"
[zones]
preset = "tld"
records = 800
origin = "pdns.example."
ixfr_changes = 6
[matrix]
servers = [
  { primary = { kind = "knot" }, secondary = { kind = "pdns" } },
  { primary = { kind = "pdns" }, secondary = { kind = "bind" } },
]
""",
    )
    into_pdns = [r for r in records if r.secondary_kind == "pdns"]
    from_pdns = [r for r in records if r.primary_kind == "pdns" and r.xfr == "axfr"]
    unsupported = [r for r in records if r.primary_kind == "pdns" and r.xfr == "ixfr"]
    assert len(records) == 8 + 4 + 2
    _verified(into_pdns + from_pdns)
    assert {(r.transport, r.xfr) for r in into_pdns} == {
        (t, x) for t in ("tcp", "tcp-tsig") for x in ("axfr", "ixfr")
    }
    # The secondary's own log says which kind of transfer brought the serial: IXFR really
    # was IXFR (its IXFR metadata switched on and off with the case, the server running).
    for record in into_pdns:
        logged = record.server_logged["secondary"]
        assert (logged["xfr"], logged["serial"]) == (record.xfr, record.serial), record.case
    # A PowerDNS primary takes new serials by signed dynamic update and NOTIFYs by itself;
    # BIND logs what it received from it.
    assert {r.extra["serial_method"] for r in from_pdns} == {"dynamic update"}
    assert all(r.phases["notify_sent"] > 0 for r in from_pdns)
    assert all(r.server_logged["secondary"]["serial"] == r.serial for r in from_pdns)
    assert all(r.server_logged["primary"]["xfr"] == "axfr" for r in from_pdns)
    # IXFR from a PowerDNS primary: recorded, with the reason, never run as an AXFR.
    assert len(unsupported) == 2
    for record in unsupported:
        assert record.unsupported and not record.ok and record.failure == "unsupported"
        assert "PowerDNS Authoritative 4.7" in record.error
        assert "answers one with the whole zone" in record.error
    # Each PowerDNS server's socket directory went with it.
    testbeds, left = _control_dirs_of(tmp_path / "results")
    assert testbeds and left == []


def test_pdns_secondary_retrieve_is_axfr_and_notify_proxy_refresh_is_ixfr(
    tmp_path: Path,
) -> None:
    records = _run(
        tmp_path,
        """
repeats = 2
timeout = "30s"
transports = ["tcp-tsig"]
xfr = ["axfr", "ixfr"]
trigger = "retransfer"
client_pulls = ["own"]
[zones]
preset = "tld"
records = 1000
origin = "re.example."
[matrix]
servers = [
  { primary = { kind = "bind" }, secondary = { kind = "pdns" } },
  { primary = { kind = "pdns" }, secondary = { kind = "pdns" } },
]
""",
    )
    run = [r for r in records if not r.unsupported]
    _verified(run)
    served = [r for r in run if r.method == "server-to-server"]
    assert {(r.primary_kind, r.xfr) for r in served} == {
        ("bind", "axfr"),
        ("bind", "ixfr"),
        ("pdns", "axfr"),
    }
    for record in served:
        assert "control_returned" in record.phases
        logged = record.server_logged["secondary"]
        assert (logged["xfr"], logged["serial"]) == (record.xfr, record.serial), record.case
    # The client pulls the zone from each primary across the link, TSIG-signed.
    pulls = [r for r in run if r.method == "client-pull-own"]
    assert {r.primary_kind for r in pulls} == {"bind", "pdns"}
    assert all(r.records == 1001 for r in pulls)
    assert {r.primary_kind for r in records if r.unsupported} == {"pdns"}


def test_a_pdns_primary_of_many_zones_to_a_knot_cold_start(tmp_path: Path) -> None:
    # More zones than the primary loads one by one: zone2sql in one transaction.
    records = _run(
        tmp_path,
        """
repeats = 1
timeout = "120s"
transports = ["tcp"]
xfr = ["axfr"]
trigger = "cold-start"
[zones]
preset = "hosting"
zones = 40
origin = "hosting.example."
[servers.primary]
kind = "pdns"
[servers.secondary]
kind = "knot"
""",
    )
    _verified(records)
    (record,) = records
    assert record.zone == "40 zones" and record.server_logged["secondary_transfers"] >= 40


def test_the_first_repeat_waits_its_settle_after_the_warm_up(tmp_path: Path) -> None:
    # PowerDNS drops a `pdns_control retrieve` that arrives while the zone's last transfer
    # is still finishing (after it serves the new serial): the first repeat, triggered at
    # once after the warm-up was served, then never came. Its dialect's pacing (a second
    # after it served) holds the settle, which counts from every transfer's end.
    scenario = (
        'repeats = 1\ntimeout = "30s"\ntrigger = "retransfer"\nsettle = "1s"\n'
        '[zones]\npreset = "tld"\nrecords = 300\norigin = "settle.example."\n'
        '[servers.secondary]\nkind = "pdns"\n'
    )
    with first_copies(tmp_path, scenario) as live:
        began = live.clock()
        live.between_repeats()
        assert live.clock() - began >= 0.9 * live.plan.settle
