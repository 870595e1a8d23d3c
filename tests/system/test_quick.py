"""The demo's scenario (scenarios/quick.toml, what `make demo` runs): every transfer of its
whole matrix verified, the transport table with rows for both zones, and
each record's transport and transfer kind the ones the servers were seen to use, its IXFRs
incremental (issue 18: the demo once failed half its transfers and nothing on the first
screen said so; issue 29: its tiny zone's IXFRs were whole zones)."""

from __future__ import annotations

import os
import tomllib
from pathlib import Path

import pytest

from harness import spec
from harness.core.terms import SERVER_TO_SERVER
from harness.report.data import load_report_data
from harness.results.folder import read_run
from harness.run.runner import run_scenario

pytestmark = [
    pytest.mark.root,
    pytest.mark.netns,
    pytest.mark.servers,
    pytest.mark.slow,
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root for namespaces"),
]

QUICK = Path(__file__).resolve().parents[2] / "scenarios" / "quick.toml"


def test_the_demo_scenario_verifies_every_transfer(tmp_path: Path) -> None:
    # Its whole matrix, interleaved and switched as shipped; 2 repeats of its 5 keep CI short.
    raw = tomllib.loads(QUICK.read_text()) | {"repeats": 2}
    base, cases = spec.expand(raw, QUICK)
    loaded = spec.LoadedScenario(QUICK, raw, base, spec.spec_hash(base), cases)
    run_dir = run_scenario(loaded, results_root=tmp_path)
    _, records = read_run(run_dir)
    measured = [r for r in records if r.method == SERVER_TO_SERVER]
    assert len(measured) == len(loaded.cases) * loaded.scenario.repeats
    failed = [f"{r.case} #{r.repeat}: {r.error}" for r in measured if not r.counts]
    assert not failed, failed
    for record in measured:
        seen = record.extra["transport_seen"]
        assert seen["transport"] == record.transport, record
        kind = record.extra["xfr_seen"]
        # Every IXFR travels as one, the tiny zone's too (issue 29: its change is larger
        # than the zone, which BIND's default max-ixfr-ratio sent as a whole zone).
        assert kind["xfr"] == record.xfr and kind["fallback_kind"] is None, record
    data = load_report_data(run_dir)
    zones = {group.key.split("/")[1] for group in data.transports}
    assert zones == {"preset=tiny", "preset=tld,records=10000"}, zones
    assert all(len(group.costs) == 4 for group in data.transports)
