"""`xfrbench run --backend compose` end to end: real servers from Debian 13 images, a per-run
compose project per case, a lossy link, results as the netns backend writes them, and
nothing left afterwards."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from harness import spec
from harness.compose import deploy, images
from harness.compose.backend import Backend
from harness.results.folder import read_run
from harness.run.runner import run_scenario

pytestmark = [
    pytest.mark.root,
    pytest.mark.compose,
    pytest.mark.slow,
    # One dockerd and one session of images (conftest.py): the compose tests on one worker.
    pytest.mark.xdist_group("compose"),
]

SCENARIO = """
repeats = 2
timeout = "60s"
transports = {transports}
xfr = ["axfr"]
trigger = "notify"

[zones]
origin = "compose.example."
seed = 1

[link]
delay = "5ms"
loss = "0.5%"

[matrix]
zones = [{{ preset = "tiny" }}, {{ preset = "tld", records = 10000 }}]

[[matrix.servers]]
primary = {{ kind = "bind", suite = "trixie" }}
secondary = {{ kind = "knot", suite = "trixie" }}

[[matrix.servers]]
primary = {{ kind = "knot", suite = "trixie" }}
secondary = {{ kind = "bind", suite = "trixie" }}
"""


def _run(tmp_path: Path, transports: list[str]) -> tuple[Path, dict[str, Any], list[Any]]:
    path = tmp_path / "compose.toml"
    path.write_text(SCENARIO.format(transports=json.dumps(transports)))
    run_dir = run_scenario(
        spec.load(path), results_root=tmp_path / "results", backend=Backend("compose")
    )
    meta, records = read_run(run_dir)
    assert meta.interrupted is False and meta.backend == "compose"
    # each server's CPU, read from its cgroup in the container as it stopped
    assert meta.cpu is not None and (meta.cpu["servers_s"] or 0) > 0, meta.cpu
    return run_dir, meta, records


def _assert_run(run_dir: Path, meta: dict[str, Any], records: list[Any], cases: int) -> None:
    assert len(records) == cases * 2, [r.error for r in records]
    by_case: dict[str, list[Any]] = {}
    for record in records:
        assert record.ok and record.verified, (record.case, record.error)
        assert record.duration_s is not None and record.duration_s > 0
        assert record.records is None or record.records > 0
        by_case.setdefault(record.case, []).append(record)
    for case_records in by_case.values():
        visits: dict[str, list[int]] = {}
        for r in sorted(case_records, key=lambda r: r.repeat):
            visits.setdefault(r.extra["schedule"]["visit_dir"], []).append(r.serial)
        # Each repeat publishes a new serial, above the zone's first one, on its testbed
        # (a pass of the schedule may bring up a new one, which starts from the zone file).
        for serials in visits.values():
            assert serials == sorted(set(serials)) and serials[0] > 1, serials

    # The versions of the binaries in the image, not the host's (BIND 9.18, Knot 3.2).
    server_tag = images.server_tag("trixie")
    versions = {s.kind: s for s in meta.servers.values()}
    assert str(versions["bind"].version).startswith("9.20.")
    assert str(versions["knot"].version).startswith("3.4.")
    assert {s.image for s in versions.values()} == {server_tag}
    assert all(s.image_id == images.image_id(server_tag) for s in versions.values())

    roles_by_source: dict[str, set[str]] = {}
    for line in (run_dir / "samples.jsonl").read_text().splitlines():
        sample = json.loads(line)
        if sample["role"] != "link":
            roles_by_source.setdefault(sample["source"], set()).add(sample["role"])
    cgroup_roles = set().union(*(v for k, v in roles_by_source.items() if k.startswith("cgroup")))
    assert cgroup_roles == {"primary", "secondary"}, roles_by_source

    # A case.json per case and visit (the schedule's passes may bring up a testbed again).
    case_files = sorted(run_dir.glob("cases/**/case.json"))
    assert len({json.loads(path.read_text())["case"] for path in case_files}) == cases
    for case_file in case_files:
        case = json.loads(case_file.read_text())
        testbed = case["testbed"]
        assert testbed["topology"] == "compose" and testbed["backend"] in {"netem", "linkem"}
        for role in ("primary", "secondary"):
            assert case[role]["image"] == server_tag and case[role]["image_id"]
        # Nothing of the case's project, its namespace names or its registry is left.
        name = testbed["compose"]["project"]
        assert name.startswith("xfb-") and deploy.leftovers(name) == []
        for host in testbed["hosts"].values():
            assert not Path("/run/netns", host["netns"]).exists()
        assert not Path(testbed["registry"]).exists()


def test_compose_run_bind_and_knot_over_tcp_and_xot(
    compose_images: dict[str, str], tmp_path: Path
) -> None:
    """Both transports in one run (its cases switch the servers between them on each
    project, as on netns): one set of projects, not one per transport."""
    run_dir, meta, records = _run(tmp_path, ["tcp", "xot"])
    _assert_run(run_dir, meta, records, cases=8)
    assert {(r.primary_kind, r.secondary_kind, r.transport) for r in records} == {
        (primary, secondary, transport)
        for primary, secondary in (("bind", "knot"), ("knot", "bind"))
        for transport in ("tcp", "xot")
    }
    # Really over TLS where asked: the wire saw port 853 for each XoT transfer, 53 for each
    # TCP one (never a silent fallback), and each secondary logs the primary's port 853.
    for record in records:
        port = 853 if record.transport == "xot" else 53
        assert record.extra["transport_seen"]["ports"] == [port], record.extra["transport_seen"]
    xot_visits = {r.extra["schedule"]["visit_dir"] for r in records if r.transport == "xot"}
    assert xot_visits
    for visit in xot_visits:
        logs = [
            log.read_text()
            for log in (run_dir / "cases" / visit / "secondary").glob("*.log")
            if log.name in ("knot.log", "named.log")
        ]
        assert any("@853" in text or "#853" in text for text in logs), visit
