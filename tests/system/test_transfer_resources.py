"""What each transfer costs, per transfer, on real servers (issue 28): the connections it
opened and the TIME_WAIT sockets it left on its own pair of addresses, the same for every
repeat wherever the interleaved schedule put it, with the harness's own read-back counted
apart; and a memory peak per transfer and server role."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from harness import spec
from harness.core.terms import SERVER_TO_SERVER
from harness.results.folder import open_run
from harness.results.resources import per_transfer
from harness.run.runner import run_scenario

pytestmark = [
    pytest.mark.root,
    pytest.mark.netns,
    pytest.mark.servers,
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root for namespaces"),
]

REPEATS = 3
SCENARIO = f"""
repeats = {REPEATS}
timeout = "30s"
transports = ["tcp", "tcp-tsig"]
xfr = ["axfr"]
trigger = "notify"
order = "interleaved"
[zones]
preset = "tld"
records = 500
origin = "sockets.example."
[servers.primary]
kind = "bind"
[servers.secondary]
kind = "bind"
[link]
delay = "5ms"
"""


def test_each_axfr_opens_one_connection_and_leaves_its_time_wait_on_its_own_pair(
    tmp_path: Path,
) -> None:
    path = tmp_path / "sockets.toml"
    path.write_text(SCENARIO)
    folder = open_run(run_scenario(spec.load(path), results_root=tmp_path / "results"))
    records = [r for r in folder.records if r.method == SERVER_TO_SERVER]
    assert len(records) == 2 * REPEATS
    assert all(r.counts for r in records), [r.error for r in records]

    seen = set()
    for record in records:
        sockets = record.extra["sockets"]
        primary, secondary = sockets["primary"], sockets["secondary"]
        # BIND's AXFR over TCP: one connection, from the secondary; whoever closed first
        # holds its TIME_WAIT, on this pair; nothing of it is left open.
        assert secondary["connections"] == 1 and primary["connections"] == 0, sockets
        assert primary["time_wait_left"] + secondary["time_wait_left"] == 1, sockets
        assert sockets["still_open"] == 0, sockets
        # The harness read the copy back over TCP from 127.0.0.1 in the secondary's
        # namespace (and checked the primary in its own): counted there, apart.
        harness = sockets["harness"]
        assert harness["secondary"]["connections"] >= 1 and 53 in harness["secondary"]["ports"]
        assert harness["primary"]["connections"] >= 1, sockets
        seen.add((primary["time_wait_left"], secondary["time_wait_left"]))
    assert len(seen) == 1, seen  # every repeat of every case alike

    # The namespace's count at each end mark grows with every transfer before it (and the
    # harness's read-backs): the schedule's figure, not the transfer's.
    namespace = {
        int(s["tcp"]["time_wait"])
        for s in folder.samples or []
        if s.get("event") == "transfer-end" and s.get("role") == "secondary"
    }
    assert len(namespace) > 1, namespace

    figures = per_transfer(folder.samples or [], folder.records)
    assert set(figures) == {r.case for r in records}
    for roles in figures.values():
        for role in ("primary", "secondary"):
            mine = roles[role]
            assert len(mine["memory_peak"]) == REPEATS, (role, mine)
            assert all(value > 0 for value in mine["memory_peak"])
            assert len(mine["cpu_s"]) == REPEATS
            assert len(mine["connections"]) == len(mine["time_wait_left"]) == REPEATS
        assert roles["secondary"]["connections"] == [1] * REPEATS
        sources = {s.get("source") for s in folder.samples or [] if s.get("role") == role}
        if sources == {"cgroup-v1"}:  # a resettable peak: one per transfer
            assert len(roles["secondary"]["charged_peak"]) == REPEATS
    summary = folder.summary["resources"] if folder.summary else {}
    for case in figures:
        secondary = summary[case]["secondary"]
        assert secondary["connections_per_transfer"] == 1
        assert secondary["memory_peak_per_transfer_bytes"] > 0
        assert secondary["namespace_time_wait_peak"] >= 1
