"""A site's [link] on inventory hosts: linkem on the lab's far secondary delays its
traffic with the primary (NFQUEUE in its INPUT and OUTPUT chains), the primary's TCP sees
the emulated round trip, every copy is verified, and after the run no linkem and no rule
is left on any lab host."""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.lab import Lab, lab_down, lab_up
from harness.report.data import load_report_data
from harness.report.link_checks import rtt_verdict
from tests.system.test_inventory_lab import _processes, _run_on_lab

pytestmark = [
    pytest.mark.root,
    pytest.mark.netns,
    pytest.mark.servers,
    pytest.mark.slow,
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root for namespaces"),
    pytest.mark.xdist_group("lab-link"),
]

DELAY_MS = 40
SCENARIO = f"""
repeats = 2
timeout = "60s"
transports = ["tcp"]
xfr = ["axfr"]
trigger = "notify"
[zones]
preset = "tld"
records = 2000
origin = "lab."
[servers.primary]
kind = "bind"
[servers.secondary]
kind = "bind"
[[secondaries]]
name = "near"
[[secondaries]]
name = "far"
[secondaries.link]
delay = "{DELAY_MS}ms"
"""


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    """A primary and a secondary on each of two sites, near and far (each module that
    takes this fixture builds its own)."""
    built = lab_up(2, ["near", "far"], tmp_path_factory.mktemp("lab") / "lab.yml")
    try:
        yield built
    finally:
        lab_down(built.lab_id)


def _nfqueue_rules(lab: Lab) -> list[str]:
    """NFQUEUE rules in any lab host's tables, read from outside by the test only."""
    found = []
    for host in lab.hosts:
        for tool in ("iptables-save", "ip6tables-save"):
            argv = ["ip", "netns", "exec", host.netns, tool]
            out = subprocess.run(argv, capture_output=True, text=True, check=True).stdout
            found += [f"{host.name}: {line}" for line in out.splitlines() if "NFQUEUE" in line]
    return found


def test_a_sites_delay_is_emulated_on_its_host_and_leaves_nothing(lab: Lab, tmp_path: Path) -> None:
    scenario = tmp_path / "link.toml"
    scenario.write_text(SCENARIO)
    site = {h.name: h.site for h in lab.hosts if h.role == "secondary"}
    far = next(name for name, s in site.items() if s == "far")
    run, records = _run_on_lab(lab, scenario, tmp_path / "results", "link")
    assert len(records) == 2 * 2  # repeats x secondaries
    assert all(r["ok"] and r["verified"] for r in records), [r["error"] for r in records]
    for record in records:
        # The primary's TCP saw the path: the far site's round trip is the emulated one.
        rtt = record["extra"]["path"]["rtt_ms_min"]
        if record["host"] == far:
            assert 2 * DELAY_MS <= rtt < 2 * DELAY_MS + 15, record["extra"]["path"]
        else:
            assert rtt < 10, record["extra"]["path"]
    # linkem's own counters came back with the visit's folder: it passed the transfers.
    stats = [json.loads(p.read_text()) for p in run.glob(f"cases/*/{far}-link/linkem-stats.json")]
    assert stats, sorted(str(p) for p in run.rglob("*link*"))
    directions = stats[0]["directions"]
    assert set(directions) == {f"{far} forward", f"{far} reverse"}
    assert all(d["passed"] > 100 for d in directions.values()), directions
    # Each far record carries its repeat's linkem counters, as a netns fleet's does.
    for record in records:
        link = record["extra"].get("link", {})
        if record["host"] == far:
            assert link[f"{far} forward"]["passed"] > 10, link
            assert link[f"{far} reverse"]["passed"] > 10, link
        else:
            assert link == {}
    # The report's link check has numbers: the far site's configured and measured RTT.
    checks = {c.path: c for c in load_report_data(run).links if c.cases == 1}
    assert checks["far"].rtt_s == pytest.approx(2 * DELAY_MS / 1000)
    assert checks["far"].rtt_min_s is not None
    assert checks["far"].rtt_verdict == rtt_verdict(2 * DELAY_MS / 1000, checks["far"].rtt_min_s)
    assert {d.way: d.packets > 0 for d in checks["far"].directions} == {
        "forward": True, "reverse": True,
    }  # fmt: skip
    # case.json tells which links the hosts emulated and with which rules.
    cases = [json.loads(p.read_text()) for p in run.glob("cases/*/case.json")]
    assert all(set(c["testbed"]["emulation"]["hosts"]) == {far} for c in cases)
    assert_nothing_left(lab)


def assert_nothing_left(lab: Lab) -> None:
    """No linkem (no process but sshd in any lab namespace), no file, no rule."""
    deadline = time.monotonic() + 15
    while _processes(lab) and time.monotonic() < deadline:
        time.sleep(0.5)  # an ssh session ending as its master closes
    assert _processes(lab) == []
    assert [str(p) for h in lab.hosts for p in (lab.roots / h.name).rglob("*")] == []
    assert _nfqueue_rules(lab) == []
