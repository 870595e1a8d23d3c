"""The system smoke test `make test-fast` runs beside the unit tests: one tiny bind -> bind
AXFR through run_scenario, the whole path (plan, zone, testbed, servers, trigger, verify,
records) on real servers in a few seconds. The rest of tests/system goes deeper."""

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
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root for namespaces"),
]

SCENARIO = """
repeats = 1
timeout = "30s"
transports = ["tcp"]
xfr = ["axfr"]
trigger = "notify"
[zones]
preset = "tiny"
origin = "smoke.example."
seed = 1
[servers.primary]
kind = "bind"
[servers.secondary]
kind = "bind"
"""


def test_one_tiny_bind_to_bind_transfer_is_measured_and_verified(tmp_path: Path) -> None:
    path = tmp_path / "smoke.toml"
    path.write_text(SCENARIO)
    run_dir = run_scenario(spec.load(path), results_root=tmp_path / "results")
    meta, records = read_run(run_dir)
    assert meta.interrupted is False
    (record,) = [r for r in records if r.method == SERVER_TO_SERVER]
    assert record.ok and record.verified and record.counts, record.error
    assert (record.primary_kind, record.secondary_kind) == ("bind", "bind")
    assert record.duration_s is not None and record.duration_s > 0
    assert record.extra["transport_seen"]["transport"] == "tcp"
