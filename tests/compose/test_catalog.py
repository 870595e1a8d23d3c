"""NSD 4.12 (Debian 13's) as a catalog consumer under the compose backend: a BIND primary
publishes a 200-member catalog; NSD adds every member through its catalog-member-pattern
and serves it; a one-member add and a removal are measured, and a restart counts what NSD
transferred again (NSD #427: members are re-transferred on start)."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness import spec
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
name = "catalog-nsd"
timeout = "120s"
repeats = 1
trigger = "catalog"
xfr = ["ixfr"]
[zones]
preset = "hosting"
origin = "hosting.example."
[servers.primary]
kind = "bind"
suite = "trixie"
# NSD asks for every member at once: at BIND's transfers-out of 10 the rest are answered
# SERVFAIL and retried after a minute (docs/catalog.md); this test is about NSD's catalog.
options = { transfers-out = 250 }
[servers.secondary]
kind = "nsd"
suite = "trixie"
[catalog]
members = 200
add = 1
remove = 1
restart_secondary = true
sample = 8
"""


def test_nsd_consumes_a_catalog_of_200_members(
    compose_images: dict[str, str], tmp_path: Path
) -> None:
    path = tmp_path / "catalog.toml"
    path.write_text(SCENARIO)
    run_dir = run_scenario(
        spec.load(path), results_root=tmp_path / "results", backend=Backend("compose")
    )
    meta, records = read_run(run_dir)
    assert meta.backend == "compose" and not meta.interrupted
    by = {str(r.extra["catalog"]["phase"]): r for r in records}
    assert set(by) == {"provision", "add", "remove", "restart"}, [r.error for r in records]
    for phase, record in by.items():
        assert record.ok and record.verified, (phase, record.error)
        assert record.secondary_kind == "nsd" and record.zone == "catalog.invalid."
    provision = by["provision"].extra["catalog"]
    assert provision["members"] == provision["served"] == 200
    assert provision["verified_sample"] == 8
    assert 0 < provision["p50_s"] <= provision["p95_s"] <= provision["last_s"]
    for phase in ("add", "remove"):
        figures = by[phase].extra["catalog"]
        assert figures["members"] == figures["served"] == 1
    restart = by["restart"].extra["catalog"]
    assert restart["served"] == 200
    assert isinstance(restart["transfers_after_restart"], int)
