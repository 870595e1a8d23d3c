"""The first screen on real servers, small (issue 34): a stream over a near and a lossy
site, a fault run, a fleet and a cold start. In each, the report's first section after the
banner is that run's answer and the terminal summary leads with it; for the stream and the
fault the link check gives the lossy site's measured loss, from the emulator's counters."""

from __future__ import annotations

import io
import os
from pathlib import Path

import pytest
from rich.console import Console

from harness import spec
from harness.report.data import ReportData, load_report_data
from harness.report.html import render_html
from harness.report.text import print_summary
from harness.run.runner import run_scenario
from tests.unit.test_report_screen import first_heading

pytestmark = [
    pytest.mark.root,
    pytest.mark.netns,
    pytest.mark.servers,
    pytest.mark.slow,
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root for namespaces"),
]

# Two sites: one near, one behind 10 % random loss each way (enough drops in a few hundred
# packets that a measured 0 would be a broken check, not chance: over 100 packets, P < 3e-5).
SITES = """
[[secondaries]]
name = "near"
kind = "bind"
link = { delay = "1ms" }
[[secondaries]]
name = "lossy"
kind = "knot"
link = { delay = "10ms", loss = "10%" }
"""
STREAM = (
    """
name = "screen-stream"
repeats = 1
trigger = "stream"
xfr = ["ixfr"]
timeout = "60s"
[zones]
preset = "tld"
records = 2000
ixfr_changes = 20
[servers.primary]
kind = "bind"
[stream]
interval = "300ms"
updates = 30
sla = "5s"
"""
    + SITES
)
FAULT = (
    """
name = "screen-fault"
repeats = 1
passes = 1
timeout = "20s"
transports = ["tcp"]
xfr = ["axfr"]
trigger = "notify"
[zones]
preset = "tld"
records = 5000
[servers.primary]
kind = "bind"
[[faults]]
kind = "primary-restart"
after_bytes = "4kB"
"""
    + SITES
)
FLEET = """
name = "screen-fleet"
repeats = 2
timeout = "30s"
transports = ["tcp"]
xfr = ["axfr"]
trigger = "notify"
[zones]
preset = "tld"
records = 2000
[servers.primary]
kind = "bind"
[[secondaries]]
name = "berlin"
kind = "bind"
count = 2
link = { delay = "2ms" }
[[secondaries]]
name = "tokyo"
kind = "knot"
link = { delay = "40ms" }
"""
COLD = """
name = "screen-cold"
repeats = 1
timeout = "120s"
transports = ["tcp"]
xfr = ["axfr"]
trigger = "cold-start"
[zones]
preset = "hosting"
zones = 50
origin = "hosting.example."
[servers.primary]
kind = "knot"
[servers.secondary]
kind = "bind"
[link]
delay = "5ms"
"""


def run(tmp_path: Path, text: str) -> tuple[Path, ReportData]:
    path = tmp_path / "scenario.toml"
    path.write_text(text)
    folder = run_scenario(spec.load(path), results_root=tmp_path / "results")
    return folder, load_report_data(folder)


def terminal(data: ReportData, tmp_path: Path) -> str:
    """The terminal summary, also kept beside the run (the first screen for a reader)."""
    out = io.StringIO()
    print_summary(data, Console(file=out, width=160, color_system=None))
    text = out.getvalue()
    (tmp_path / "summary.txt").write_text(text)
    return text


def after_the_run_facts(text: str) -> str:
    """The summary from the first line after the run's facts (headline, run, host,
    servers, interrupted, CPU, 'every case is', warnings)."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("interrupted"))
    facts = ("CPU", "every case", "warning", "zone ")
    rest = [line for line in lines[start + 1 :] if line]
    while rest and rest[0].startswith(facts):
        rest.pop(0)
    return "\n".join(rest)


def lossy_check(data: ReportData) -> float:
    """The link check's measured loss towards the lossy site (per cent)."""
    (check,) = [c for c in data.links if c.path == "lossy" and c.cases == 1]
    forward = next(d for d in check.directions if d.way == "forward")
    assert forward.loss == "random 10%"
    assert forward.packets > 50 and forward.dropped > 0, forward
    assert forward.measured_pct is not None
    assert forward.verdict in ("ok", "unusual"), forward.sentence
    assert check.rtt_s == pytest.approx(0.020, abs=0.002)
    return forward.measured_pct


def test_a_stream_leads_with_its_sla_and_checks_the_lossy_site(tmp_path: Path) -> None:
    folder, data = run(tmp_path, STREAM)
    assert data.screen.question == "stream"
    page = render_html(data)
    assert first_heading(page) == "stream"
    assert 'id="q-transports"' not in page
    text = terminal(data, tmp_path)
    assert after_the_run_facts(text).startswith("Change stream ")
    assert "of serials within 5 s" in after_the_run_facts(text).splitlines()[0]
    pct = lossy_check(data)
    assert 2 < pct < 25, pct
    near = next(c for c in data.links if c.path == "near")
    assert all(d.dropped == 0 for d in near.directions)
    assert "Did the link do what was asked" in text


def test_a_fault_run_leads_with_its_faults_and_checks_the_lossy_site(tmp_path: Path) -> None:
    folder, data = run(tmp_path, FAULT)
    assert data.screen.question == "faults"
    page = render_html(data)
    assert first_heading(page) == "faults"
    text = terminal(data, tmp_path)
    assert after_the_run_facts(text).startswith("Faults: how each server healed")
    pct = lossy_check(data)
    assert 2 < pct < 25, pct


def test_a_fleet_leads_with_its_convergence(tmp_path: Path) -> None:
    folder, data = run(tmp_path, FLEET)
    assert data.screen.question == "fleet"
    assert first_heading(render_html(data)) == "fleet"
    text = terminal(data, tmp_path)
    assert after_the_run_facts(text).startswith("Fleet: time from each repeat's first NOTIFY")


def test_a_cold_start_leads_with_its_time(tmp_path: Path) -> None:
    folder, data = run(tmp_path, COLD)
    assert data.screen.question == "cold-start"
    (cold,) = data.cold_starts
    assert cold.served == cold.attempts == 1 and cold.zones == 50
    assert first_heading(render_html(data)) == "cold-start"
    text = terminal(data, tmp_path)
    assert after_the_run_facts(text).startswith("Cold start: from each secondary's start")
    # the link was checked over the cold start too
    (check,) = [c for c in data.links if not c.missing]
    assert check.directions and check.directions[0].packets > 0
