"""An operator's own signed zone and its history on real servers: the sample in
zones/examples/own/ (NSEC3, wildcards, delegations with glue, $INCLUDE, $GENERATE) loaded
on a BIND primary and its versions published one per serial (as files: BIND refuses
updates to a secure zone's own DNSSEC records), to BIND, NSD, Knot and PowerDNS
secondaries over TCP and XoT, AXFR and IXFR; every copy verified, each IXFR a change set,
not the zone. What a version cannot do is unsupported, saying why: XoT in Knot 3.2 and
PowerDNS 4.7, IXFR of a signed zone into PowerDNS (it takes one by AXFR only)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from harness import spec
from harness.core.terms import SERVER_TO_SERVER
from harness.results.folder import read_run
from harness.run.runner import run_scenario

pytestmark = [
    pytest.mark.root,
    pytest.mark.netns,
    pytest.mark.servers,
    pytest.mark.slow,
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root for namespaces"),
]

VERSIONS = Path(__file__).resolve().parents[2] / "zones/examples/own/versions"
SCENARIO = f"""\
repeats = 2
timeout = "30s"
transports = ["tcp", "xot"]
xfr = ["axfr", "ixfr"]
[zones]
versions = "{VERSIONS}"
[servers.primary]
kind = "bind"
[servers.secondary]
kind = "bind"
[link]
delay = "5ms"
[matrix]
"servers.secondary.kind" = ["bind", "nsd", "knot", "pdns"]
"""


def test_the_signed_samples_versions_reach_every_secondary_verified(tmp_path: Path) -> None:
    path = tmp_path / "own.toml"
    path.write_text(SCENARIO)
    loaded = spec.load(path)
    assert loaded.scenario.zones.signed  # NSEC3 and RRSIGs in the files
    run_dir = run_scenario(loaded, results_root=tmp_path / "results")
    meta, records = read_run(run_dir)
    assert meta.zone is not None and meta.zone["origin"] == "example.test."
    assert meta.zone["versions"] >= 9 and "NSEC3" in meta.zone["types"]
    transfers = [r for r in records if r.method == SERVER_TO_SERVER]
    supported = [r for r in transfers if not r.unsupported]
    assert {r.secondary_kind for r in supported} == {"bind", "nsd", "knot", "pdns"}
    assert {r.transport for r in supported} == {"tcp", "xot"}
    assert all(r.ok and r.verified for r in supported), [(r.case, r.error) for r in supported]
    # PowerDNS keeps the RRSIGs and makes the NSEC3 chain again: its copy, read back, is
    # the primary's to the record (tcp/axfr, every repeat).
    assert {(r.transport, r.xfr) for r in supported if r.secondary_kind == "pdns"} == {
        ("tcp", "axfr")
    }
    # Knot 3.2 and PowerDNS 4.7 have no XoT, and PowerDNS asks no IXFR of a signed zone:
    # those cases are unsupported, saying why, and nothing else is.
    why = {(r.secondary_kind, r.transport, r.xfr): r.error for r in transfers if r.unsupported}
    assert {key for key in why if key[0] != "knot"} == {
        ("pdns", "xot", "axfr"),
        ("pdns", "xot", "ixfr"),
        ("pdns", "tcp", "ixfr"),
    }
    assert {key[1] for key in why if key[0] == "knot"} <= {"xot"}
    assert all("no XoT" in error for (_, transport, _), error in why.items() if transport == "xot")
    assert "asks no IXFR for a zone with DNSSEC records" in why[("pdns", "tcp", "ixfr")]
    whole = {r.records for r in supported if r.xfr == "axfr"}
    for record in supported:
        change = record.extra["change_set"]
        assert change["version"].endswith(".zone") and change["bytes"] > 0
        if record.xfr == "ixfr":  # the change sets and their SOAs: fewer than the zone
            assert record.records is not None and record.records < min(whole), record.case
