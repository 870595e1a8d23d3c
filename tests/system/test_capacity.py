"""`xfrbench capacity` on real servers: a BIND primary with transfers-out = 2 feeding Knot
secondaries under a tight SLA. The search must end with the quota named as binding, its
refusals counted in BIND's own words; the same search with transfers-out = 20 (--then) must
end higher, or at another named limit. Every step is a real run with its own run folder,
linked from the campaign folder.

Knot secondaries retry a refused transfer only at their SOA retry timer (300 s), past the
10 s timeout: a refused secondary misses its repeat, so the SLA fails as soon as the quota
refuses one. A refused repeat waits out the whole timeout, three repeats at the failing
step: 10 s is twice the SLA's 5 s and more than ten times the slowest transfer measured
here (0.1-0.74 s, 20,000 records over 5 ms), where 20 s made the step a minute of waiting."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from harness.cli import main
from harness.results.campaign import read_campaign
from harness.results.folder import read_run

pytestmark = [
    pytest.mark.root,
    pytest.mark.netns,
    pytest.mark.servers,
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root for namespaces"),
]

# A step past the quota waits out the timeout for its refused secondaries (the warm-up and
# each repeat): a refused Knot asks again only at its SOA retry timer (300 s), so a longer
# wait sees nothing more. 6 s (was 10 s): past the SLA's 5 s, which a later one fails.
SCENARIO = """
description = "BIND primary, Knot secondaries, a tight quota"
repeats = 3
timeout = "6s"
transports = ["tcp"]
xfr = ["axfr"]
trigger = "notify"

[zones]
preset = "tld"
records = 20000
origin = "capacity.example."

[servers.primary]
kind = "bind"
options = { transfers-out = 2 }

[servers.secondary]
kind = "knot"

[link]
delay = "5ms"

[[secondaries]]
name = "edge"
count = 2
"""


def test_the_quota_binds_and_raising_it_moves_the_capacity(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    scenario = tmp_path / "capacity.toml"
    scenario.write_text(SCENARIO)
    results = tmp_path / "results"
    status = main([
        "capacity", str(scenario), "--vary", "secondaries.edge.count", "--from", "2",
        "--max", "8", "--sla", "p95 load time 5s",
        "--then", "servers.primary.options.transfers-out=20",
        "--results", str(results), "--campaign-id", "cap", "--json",
    ])  # fmt: skip
    out = capsys.readouterr()
    assert status == 0, out.err
    data = json.loads(out.out)
    tight, raised = data["searches"]

    # transfers-out = 2: two secondaries pass; beyond, one is refused and misses the SLA
    # (a refused Knot may still get a slot on its AXFR fallback, so 3 may pass).
    capacity, first_fail = tight["result"]["capacity"], tight["result"]["first_fail"]
    assert capacity in (2, 3) and first_fail == capacity + 1, out.err
    assert tight["binding"] is not None and tight["binding"]["candidate"] == "quota", out.err
    assert tight["binding"]["title"] == "BIND transfers-out 2"
    at_fail = tight["binding"]["at_fail"]
    assert at_fail["level"] > 0 and "refusals logged" in at_fail["text"]
    assert (
        tight["answer"].startswith(
            f"capacity: {capacity:g} secondaries within p95 load time 5 s ({first_fail:g} fails: "
        )
        and "binding: BIND transfers-out 2 (" in tight["answer"]
    )

    # Counted again here, in BIND's own words, from the first failing step's server log.
    fail_run = [s["run"] for s in tight["result"]["steps"] if s["load"] == first_fail][-1]
    logs = list((results / fail_run / "cases").rglob("named.log"))
    quota_lines = sum(
        1 for log in logs for line in log.read_text().splitlines()
        if "request denied: quota reached" in line
    )  # fmt: skip
    assert quota_lines >= at_fail["level"] > 0

    # transfers-out = 20: higher, or another limit named.
    assert raised["result"]["capacity"] is not None
    assert raised["result"]["capacity"] > capacity or (
        raised["binding"] and raised["binding"]["candidate"] != "quota"
    ), out.err
    if raised["binding"] is not None:
        assert raised["binding"]["candidate"] != "quota"

    # Every step is a run of its own, linked from the campaign.
    campaign = read_campaign(results / "cap")
    assert campaign["key"] == "secondaries.edge.count"
    links = sorted((results / "cap" / "steps").iterdir())
    steps = tight["result"]["steps"] + raised["result"]["steps"]
    assert len(links) == len(steps)
    for link in links:
        meta, records = read_run(link)
        assert meta.finished and records
    # The terminal gives the answer first, before the curve and the evidence.
    assert out.err.index(tight["answer"]) < out.err.index("curve (as written)")


# A cold start of many small zones opens a TCP connection per zone from the secondary, each
# leaving a port in TIME_WAIT for 60 s; with 150 ports in the secondary's range, zones past
# the 150th get "address not available" and wait for BIND's retry (minutes), past the 15 s
# timeout. BIND on both sides, the secondary's serial-query-rate raised from 20 a second
# (125 zones took 10.7 s of pacing, and each failing step waited out a 30 s timeout) to
# 1000: the cliff is the range, not the pacing; 125 zones took 5.3 s, 50 took 0.4 s.
COLD_START = """
description = "cold start of small zones on a secondary with 150 ephemeral ports"
repeats = 1
timeout = "15s"
transports = ["tcp"]
xfr = ["axfr"]
trigger = "cold-start"

[zones]
preset = "hosting"
zones = 50
origin = "hosting.example."

[servers.primary]
kind = "bind"

[servers.secondary]
kind = "bind"
options = { serial-query-rate = 1000 }

[hosts.secondary.sysctl]
"net.ipv4.ip_local_port_range" = "40000 40149"
"""


def test_a_cold_start_with_a_small_port_range_names_the_ports(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    scenario = tmp_path / "cold.toml"
    scenario.write_text(COLD_START)
    results = tmp_path / "results"
    status = main([
        "capacity", str(scenario), "--vary", "zones.zones", "--from", "50", "--max", "400",
        "--resolution", "25", "--results", str(results), "--campaign-id", "cold", "--json",
    ])  # fmt: skip
    out = capsys.readouterr()
    print(out.err)  # the answer, curve and evidence, for the record (-s)
    assert status == 0, out.err
    (search,) = json.loads(out.out)["searches"]
    capacity, first_fail = search["result"]["capacity"], search["result"]["first_fail"]
    # No more zones than ports can pass; 100 never comes near them.
    assert capacity is not None and 100 <= capacity <= 150, out.err
    assert first_fail is not None and capacity < first_fail <= 200, out.err
    binding = search["binding"]
    assert binding is not None and binding["candidate"] == "ports", out.err
    # How close it came: every port of the range in use, and who found none left: BIND's
    # connects past the 150th zone, or at exactly 150 the harness's read-back of the copies
    # (BIND's bound ports in TIME_WAIT leave it none).
    at_fail = binding["at_fail"]["text"]
    assert "secondary: 150 of 150 ports in use" in at_fail
    assert (
        "connects failed: address not available" in at_fail
        or "the harness's read-back of the copies found no free port" in at_fail
    )
    assert "binding: ephemeral ports (secondary: 150 of 150 ports" in search["answer"]
