"""Real transfers between real servers in namespaces, end to end through `xfrbench run`."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from harness import spec
from harness.measure import processes as servers
from harness.results.folder import read_run
from harness.results.meta import RunMeta
from harness.results.model import FORMAT_VERSION
from harness.run.runner import run_scenario
from harness.xfr.rrsum_native import implementation
from tests.system.live_cases import first_copies

pytestmark = [
    pytest.mark.root,
    pytest.mark.netns,
    pytest.mark.servers,
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root for namespaces"),
]


def _run(tmp_path: Path, text: str) -> tuple[RunMeta, list]:
    path = tmp_path / "scenario.toml"
    path.write_text(text)
    run_dir = run_scenario(spec.load(path), results_root=tmp_path / "results")
    meta, records = read_run(run_dir)
    assert meta.spec_hash and meta.interrupted is False
    assert (run_dir / "summary.json").exists() and (run_dir / "summary.csv").exists()
    return meta, records


def _assert_verified(records: list, expected: int) -> None:
    assert len(records) == expected, [r.error for r in records]
    for record in records:
        assert record.ok and record.verified, (record.case, record.error)
        assert record.duration_s is not None and record.duration_s > 0
        assert record.serial > 0
        # Sizes come from the servers' own logs; NSD 4.6 and Knot log fewer of them.
        assert record.records is None or record.records > 0


def test_each_server_as_primary_and_secondary_axfr_ixfr_tsig_notify(tmp_path: Path) -> None:
    meta, records = _run(
        tmp_path,
        """
repeats = 2
timeout = "30s"
transports = ["tcp-tsig"]
xfr = ["axfr", "ixfr"]
trigger = "notify"
[zones]
preset = "tld"
records = 800
origin = "pairs.example."
ixfr_changes = 6
[matrix]
servers = [
  { primary = { kind = "bind" }, secondary = { kind = "knot" } },
  { primary = { kind = "knot" }, secondary = { kind = "nsd" } },
  { primary = { kind = "nsd" }, secondary = { kind = "bind" } },
]
""",
    )
    _assert_verified(records, 3 * 2 * 2)
    assert {(r.primary_kind, r.secondary_kind) for r in records} == {
        ("bind", "knot"),
        ("knot", "nsd"),
        ("nsd", "bind"),
    }
    # A new serial goes on each primary the cheapest way its server allows; AXFR and IXFR
    # cases share a testbed, so every serial applies the next change set there.
    methods = {(r.primary_kind, r.xfr): r.extra["serial_method"] for r in records}
    assert methods == {
        ("bind", "axfr"): "dynamic update",
        ("bind", "ixfr"): "dynamic update",
        ("knot", "axfr"): "dynamic update",
        ("knot", "ixfr"): "dynamic update",
        ("nsd", "axfr"): "reload",
        ("nsd", "ixfr"): "reload",
    }
    for record in records:
        assert record.phases["notify_sent"] > 0 and record.phases["served"] == record.duration_s
        if record.xfr == "ixfr":
            # An IXFR carries the change set, not the zone.
            assert record.records is None or record.records < 100, record
    # BIND logs its own view of the transfer; it is stored beside the measurement.
    bind_in = [r for r in records if r.secondary_kind == "bind"]
    assert all(r.server_logged["secondary"]["serial"] == r.serial for r in bind_in)


def test_xot_cells_run_where_supported_and_say_why_not_elsewhere(tmp_path: Path) -> None:
    meta, records = _run(
        tmp_path,
        """
repeats = 2
timeout = "30s"
transports = ["xot", "xot-tsig"]
xfr = ["axfr"]
trigger = "retransfer"
client_pulls = ["own", "kdig"]
[zones]
preset = "tld"
records = 600
origin = "xot.example."
[matrix]
servers = [
  { primary = { kind = "bind" }, secondary = { kind = "bind" } },
  { primary = { kind = "bind" }, secondary = { kind = "nsd" } },
  { primary = { kind = "nsd" }, secondary = { kind = "bind" } },
  { primary = { kind = "knot" }, secondary = { kind = "bind" } },
]
""",
    )
    supported = [r for r in records if r.primary_kind == "bind"]
    # 2 pairs x 2 transports x (server, own reader, kdig) x 2 repeats
    _assert_verified(supported, 2 * 2 * 3 * 2)
    assert {r.method for r in supported} == {
        "server-to-server",
        "client-pull-own",
        "client-pull-kdig",
    }
    own = [r for r in supported if r.method == "client-pull-own"]
    assert all(r.phases["tls"] > 0 for r in own)
    unsupported = [r for r in records if r.primary_kind != "bind"]
    assert len(unsupported) == 4 and all(r.unsupported and not r.ok for r in unsupported)
    reasons = {r.primary_kind: r.error for r in unsupported}
    assert "ALPN" in reasons["nsd"] and "Knot 3.2" in reasons["knot"]


def test_a_new_serial_alone_is_a_dynamic_update_on_knot(tmp_path: Path) -> None:
    meta, records = _run(
        tmp_path,
        """
repeats = 2
timeout = "30s"
xfr = ["axfr"]
[zones]
preset = "tld"
records = 500
origin = "bump.example."
[servers.primary]
kind = "knot"
""",
    )
    _assert_verified(records, 2)
    assert {r.extra["serial_method"] for r in records} == {"dynamic update"}
    assert [r.serial for r in records] == [3, 4]  # the warm-up published 2


def test_retransfer_forces_axfr_and_refresh_does_ixfr(tmp_path: Path) -> None:
    meta, records = _run(
        tmp_path,
        """
repeats = 2
timeout = "30s"
transports = ["tcp"]
xfr = ["axfr", "ixfr"]
trigger = "retransfer"
[zones]
preset = "tld"
records = 1000
origin = "re.example."
[servers.primary]
kind = "knot"
[servers.secondary]
kind = "bind"
""",
    )
    _assert_verified(records, 4)
    axfr = [r for r in records if r.xfr == "axfr"]
    ixfr = [r for r in records if r.xfr == "ixfr"]
    assert all(r.records >= 1000 for r in axfr)  # the whole zone, per BIND's own log
    assert all(r.records < 100 for r in ixfr)
    assert all("control_returned" in r.phases for r in records)


def test_cold_start_of_a_secondary_with_200_hosting_zones(tmp_path: Path) -> None:
    meta, records = _run(
        tmp_path,
        """
repeats = 1
timeout = "120s"
transports = ["tcp"]
xfr = ["axfr"]
trigger = "cold-start"
[zones]
preset = "hosting"
zones = 200
origin = "hosting.example."
[servers.primary]
kind = "knot"
[servers.secondary]
kind = "bind"
""",
    )
    _assert_verified(records, 1)
    record = records[0]
    assert record.zone == "200 zones" and record.extra["zones"] == 200
    assert record.server_logged["secondary_transfers"] >= 200


def test_verification_catches_a_corrupted_secondary_copy(tmp_path: Path) -> None:
    scenario = (
        'repeats = 1\ntimeout = "30s"\n[zones]\npreset = "tld"\nrecords = 300\n'
        'origin = "corrupt.example."\n'
    )
    with first_copies(tmp_path, scenario) as live:
        zone, serial = live.first_zone, live.base_serial
        assert live.verify("secondary", zone, serial).ok
        # Change one record of the secondary's copy on disk, keep the serial, restart.
        running = live.secondaries["secondary"]
        servers.stop(running)
        copy = running.server.setup.zones[0].file
        deadline = time.monotonic() + 10
        while not copy.exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        text = copy.read_text()
        lines = [i for i, line in enumerate(text.splitlines()) if line.split()[-2:-1] == ["NS"]]
        assert lines, "the secondary wrote no zone file"
        rows = text.splitlines()
        rows[lines[-1]] = rows[lines[-1]].rstrip().rstrip(".") + "x."
        copy.write_text("\n".join(rows) + "\n")
        servers.spawn(running)
        assert live.wait_served(["secondary"], zone, serial, live.clock() + 60)
        check = live.verify("secondary", zone, serial)  # its file, as it loaded it
        assert not check.ok and check.problem
        assert check.problem.startswith("the copy on disk differs: RRSUM expected")


def test_run_json_records_provenance(tmp_path: Path) -> None:
    meta, records = _run(
        tmp_path,
        'repeats = 1\ntimeout = "30s"\n[zones]\npreset = "tiny"\norigin = "tiny.example."\n',
    )
    _assert_verified(records, 1)
    assert meta.format_version == FORMAT_VERSION and meta.link_backend in {"netem", "linkem"}
    assert any(s.kind == "bind" and s.version for s in meta.servers.values())
    assert meta.host.kernel and meta.scenario["zones"]["preset"] == "tiny"
    # Where the run's wall time went: each side and phase measured, adding up to the total.
    wall = meta.wall
    assert wall is not None and wall["phases"]["verify"] > 0
    # A tiny zone's NOTIFY-driven copy may be served while the harness still waits for the
    # primary to serve the new serial: then its transfer time falls within "publish".
    assert wall["phases"]["publish"] + wall["phases"]["transfer"] > 0
    repeat_wall = records[0].extra["wall"]
    assert repeat_wall["publish_s"] + repeat_wall["transfer_s"] > 0
    sides = wall["servers_s"] + wall["harness_s"] + wall["settle_s"]
    assert sides == pytest.approx(wall["total_s"], abs=0.01)
    assert meta.driver and meta.driver["peak_rss_mib"] > 0
    # Which RRSUM implementation verified the copies (the compiled one after `make setup`).
    assert meta.digest == implementation() and meta.digest["implementation"] in {"rust", "python"}
