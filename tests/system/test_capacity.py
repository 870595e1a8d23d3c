"""`xfrbench capacity` on real servers: a BIND primary with transfers-out = 2 feeding Knot
secondaries under a tight SLA. The search must end with the quota named as binding, its
refusals counted in BIND's own words; the same search with transfers-out = 20 (--then) must
end higher, or at another named limit. Every step is a real run with its own run folder,
linked from the campaign folder.

Knot secondaries retry a refused transfer only at their SOA retry timer (300 s), past the
20 s timeout: a refused secondary misses its repeat, so the SLA fails as soon as the quota
refuses one."""

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

SCENARIO = """
description = "BIND primary, Knot secondaries, a tight quota"
repeats = 3
timeout = "20s"
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
