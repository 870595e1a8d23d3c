"""A fleet under the compose backend: a service per site and replica, each site's link on
the router container, every copy verified, and nothing of the project left afterwards."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness import spec
from harness.compose import deploy
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
transports = ["tcp"]
xfr = ["axfr"]
trigger = "notify"

[zones]
preset = "tld"
records = 5000
origin = "fleet.example."
seed = 1

[servers.primary]
kind = "bind"
suite = "trixie"

[servers.secondary]
kind = "knot"
suite = "trixie"

[uplink]
rate = "200mbit"

[[secondaries]]
name = "near"
count = 2
link = { delay = "2ms" }

[[secondaries]]
name = "far"
kind = "bind"
link = { delay = "40ms", loss = "0.5%" }
"""


def test_compose_fleet_of_three_on_two_sites(
    compose_images: dict[str, str], tmp_path: Path
) -> None:
    path = tmp_path / "fleet.toml"
    path.write_text(SCENARIO)
    run_dir = run_scenario(
        spec.load(path), results_root=tmp_path / "results", backend=Backend("compose")
    )
    meta, records = read_run(run_dir)
    assert meta.interrupted is False and meta.backend == "compose"
    assert len(records) == 3 * 2, [r.error for r in records]
    for record in records:
        assert record.ok and record.verified, (record.host, record.error)
    hosts = {r.host: r.site for r in records}
    assert hosts == {"near-1": "near", "near-2": "near", "far": "far"}
    assert {r.secondary_kind for r in records if r.site == "far"} == {"bind"}
    # The far site's delay shows in its path: its records are timed across 40 ms each way.
    rtt = {r.site: r.extra["path_rtt_s"] for r in records}
    assert rtt["far"] == pytest.approx(0.080, abs=0.001)
    assert rtt["near"] == pytest.approx(0.004, abs=0.001)
    # The fleet summary, from the records.
    summary = json.loads((run_dir / "summary.json").read_text())
    fleet = summary["fleet"]
    assert fleet and all(row["secondaries"] == 3 for row in fleet.values())

    case = json.loads(next(run_dir.glob("cases/**/case.json")).read_text())
    testbed = case["testbed"]
    assert testbed["topology"] == "compose"
    containers = set(testbed["compose"]["containers"])
    assert {"primary", "near-1", "near-2", "far"} <= containers, containers
    name = testbed["compose"]["project"]
    assert deploy.leftovers(name) == []
    for host in testbed["hosts"].values():
        assert not Path("/run/netns", host["netns"]).exists()
