"""A real run records whose cores the harness and the servers ran on, and where the CPU went.

On this 2-core machine the harness must say it shared the servers' cores; on a host with 4 or
more CPUs and a cpuset controller the two sets must be disjoint.
"""

from __future__ import annotations

import json
import os
import tomllib
from pathlib import Path

import pytest

from harness import spec
from harness.observe import cgroup
from harness.observe.cpuset import MIN_CPUS, cpu_list
from harness.report.data import load_report_data
from harness.run.runner import run_scenario

pytestmark = [
    pytest.mark.root,
    pytest.mark.netns,
    pytest.mark.servers,
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root for namespaces"),
]

QUICK = Path(__file__).resolve().parents[2] / "scenarios" / "quick.toml"


def test_run_json_says_whose_cores_and_where_the_cpu_went(tmp_path: Path) -> None:
    raw = tomllib.loads(QUICK.read_text())
    raw |= {"name": "cpus", "repeats": 1, "transports": ["tcp"], "xfr": ["axfr"]}
    raw["matrix"] = {"zones": [{"preset": "tiny"}]}
    base, cases = spec.expand(raw, QUICK)
    loaded = spec.LoadedScenario(QUICK, raw, base, spec.spec_hash(base), cases)
    run_dir = run_scenario(loaded, results_root=tmp_path)
    meta = json.loads((run_dir / "run.json").read_text())
    cpus, cpu = meta["cpus"], meta["cpu"]
    online = sorted(os.sched_getaffinity(0))
    assert cpu_list(cpus["online"]) == online
    if len(online) < MIN_CPUS or cgroup.detect().cpuset_root is None:
        assert cpus["isolation"] == "shared" and cpus["harness"] is None
        assert "shared the servers' cores" in cpus["reason"]
        if len(online) < MIN_CPUS:
            assert f"{len(online)} CPUs, fewer than {MIN_CPUS}" in cpus["reason"]
    else:
        assert cpus["isolation"] == "disjoint"
        harness, servers = cpu_list(cpus["harness"]), cpu_list(cpus["servers"])
        assert harness and servers and not set(harness) & set(servers)
        assert sorted(harness + servers) == online
    # The servers' CPU from their cgroups as they stopped, the driver's own, the rest.
    assert cpu["servers_s"] is None or cpu["servers_s"] > 0
    assert cpu["driver_s"] > 0 and 0 <= cpu["sampler_s"] <= cpu["driver_s"]
    # This run's CPU, not the process's: a test session's driver ran long before it.
    wall = meta["wall"]["total_s"]
    assert cpu["driver_s"] <= wall * len(online)
    assert meta["driver"]["cpu_s"] == cpu["driver_s"]
    # driver_s is rounded to 10 ms, the share to 0.0001
    assert cpu["driver_share_of_wall"] == pytest.approx(cpu["driver_s"] / wall, abs=0.006 / wall)
    # The report's run facts say the same.
    facts = load_report_data(run_dir).run
    assert facts.cpu_placement == cpus["reason"]
    assert facts.cpu_split is not None and "driver" in facts.cpu_split
