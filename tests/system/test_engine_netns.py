"""The case engine's shared cases (tests/system/engine_cases.py) on this machine's network
namespaces, by the CLI as a user runs them: the same scenario text and the same checks as
on the lab of hosts (tests/system/test_inventory_lab.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.system import engine_cases as cases

pytestmark = [
    pytest.mark.root,
    pytest.mark.netns,
    pytest.mark.servers,
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root for namespaces"),
]

REPOSITORY = Path(__file__).resolve().parents[2]
XFRBENCH = [sys.executable, "-m", "harness"]


def _run(tmp_path: Path, text: str, run_id: str) -> Path:
    scenario = tmp_path / f"{run_id}.toml"
    scenario.write_text(text)
    result = subprocess.run(
        [*XFRBENCH, "run", str(scenario), "--results", str(tmp_path), "--run-id", run_id],
        cwd=REPOSITORY, capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return tmp_path / run_id


def test_a_fleet_over_every_transport_and_kind_switched_and_verified(tmp_path: Path) -> None:
    records = cases.assert_fleet(_run(tmp_path, cases.FLEET, "fleet"))
    # netns names a site's secondaries after it, one alone by the site's own name.
    assert {r["host"] for r in records} == {"near-1", "near-2", "far"}


def test_a_change_stream_followed_on_each_secondary(tmp_path: Path) -> None:
    records = cases.assert_stream(_run(tmp_path, cases.STREAM, "stream"))
    assert {r["host"] for r in records} == {"near-1", "near-2", "far"}
