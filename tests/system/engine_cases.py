"""The case engine's system cases, written once and asserted alike wherever servers run:
on this machine's namespaces (tests/system/test_engine_netns.py) and on a lab of hosts
reached over SSH (tests/system/test_inventory_lab.py). The scenarios are a user's TOML;
the checks read only what a run leaves in results/ (records and summary), never how the
servers were reached. The fault case is tests/system/test_fault_places.py.

A site's count is the inventory's on a lab of hosts (inventory/model.py `match_sites`);
the scenarios say the same counts for netns (near: 2, far: 1).
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

SITES = {"near": 2, "far": 1}  # secondaries per site, on both places

# A fleet over TCP, TCP+TSIG and XoT, AXFR and IXFR, the servers switched between cases
# (one group: the secondaries reconfigured from one transport to the next, each switch
# proved by a transfer seen on the wire), with TCP settings per host.
FLEET = """
repeats = 2
timeout = "60s"
transports = ["tcp", "tcp-tsig", "xot"]
xfr = ["axfr", "ixfr"]
trigger = "notify"
[zones]
preset = "tld"
records = 2000
origin = "lab."
ixfr_changes = 10
[servers.primary]
kind = "bind"
[servers.secondary]
kind = "bind"
[hosts.primary.sysctl]
"net.ipv4.tcp_wmem" = "4096 65536 8388608"
[[secondaries]]
name = "near"
count = 2
[[secondaries]]
name = "far"
[secondaries.host.sysctl]
"net.ipv4.tcp_tw_reuse" = 1
"""
FLEET_CASES = 6  # transports x kinds
FLEET_REPEATS = 2

SMALL_FLEET = """
repeats = 1
timeout = "60s"
transports = ["tcp"]
xfr = ["axfr"]
trigger = "notify"
[zones]
preset = "tld"
records = 200
origin = "lab."
[servers.primary]
kind = "bind"
[servers.secondary]
kind = "bind"
[[secondaries]]
name = "near"
count = 2
[[secondaries]]
name = "far"
"""

# The small fleet under a stream of 15 change sets, one every 200 ms.
STREAM_UPDATES = 15
STREAM = (
    SMALL_FLEET.replace('xfr = ["axfr"]', 'xfr = ["ixfr"]')
    .replace('trigger = "notify"', 'trigger = "stream"')
    .replace("records = 200\n", "records = 2000\nixfr_changes = 10\n")
    + f'[stream]\ninterval = "200ms"\nupdates = {STREAM_UPDATES}\n'
)


def read_records(run: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (run / "transfers.jsonl").read_text().splitlines()]


def _per_site(records: list[dict[str, Any]]) -> dict[str, int]:
    """How many secondaries of each site have records."""
    return dict(Counter(site for site, _ in {(r["site"], r["host"]) for r in records}))


def assert_fleet(run: Path) -> list[dict[str, Any]]:
    """FLEET's run: every case on every secondary, each copy verified, the transport and
    kind each record names seen on the wire, every switch of transport proved by a
    transfer seen as the new one, and each case's resources on every host of it."""
    records = read_records(run)
    secondaries = sum(SITES.values())
    assert len(records) == FLEET_CASES * FLEET_REPEATS * secondaries, len(records)
    assert all(r["ok"] and r["verified"] for r in records), [r["error"] for r in records]
    assert _per_site(records) == SITES
    assert {r["transport"] for r in records} == {"tcp", "tcp-tsig", "xot"}
    assert {r["xfr"] for r in records} == {"axfr", "ixfr"}
    for record in records:
        extra = record["extra"]
        assert extra["transport_seen"]["transport"] == record["transport"], extra
        seen = extra["xfr_seen"]
        assert seen["xfr"] == record["xfr"] or seen["fallback"], seen  # a fallback, said
        assert extra["wire"]["connections"] >= 1  # seen on the primary's host
    # Each switch is proved: by a transfer of its own seen as the new transport, or (a
    # change of kind alone) by an earlier proof of the same transport.
    proved = set()
    for record in records:
        schedule = record["extra"]["schedule"]
        if not schedule.get("switched"):
            continue
        proof = schedule["proof"]
        if not proof.get("earlier"):
            assert proof["seen"]["transport"] == record["transport"], schedule
            proved.add(record["transport"])
    assert len(proved) >= 2, proved  # the servers were switched between transports
    assert any(r["xfr"] == "ixfr" and r["extra"]["xfr_seen"]["xfr"] == "ixfr" for r in records)
    resources = json.loads((run / "summary.json").read_text())["resources"]
    assert set(resources) == {r["case"] for r in records}
    for case, hosts in resources.items():
        servers = set(hosts) - {"link"}
        assert len(servers) == 1 + secondaries, (case, servers)
        assert all(hosts[h]["cpu_s_per_transfer"]["total"] is not None for h in servers), case
    return records


def assert_stream(run: Path) -> list[dict[str, Any]]:
    """STREAM's run: every secondary got every serial of the stream (each followed on its
    own host), the last one's copy verified, and the summary's stream figures from SOA
    queries each secondary answered."""
    records = read_records(run)
    secondaries = sum(SITES.values())
    assert len(records) == STREAM_UPDATES * secondaries, len(records)
    last = max(r["serial"] for r in records)
    for record in records:
        assert record["ok"], (record["host"], record["serial"], record["error"])
        assert record["verified"] == (record["serial"] == last), record["serial"]
        assert record["trigger"] == "stream" and record["duration_s"] >= 0
    assert _per_site(records) == SITES
    by_host: dict[str, set[int]] = {}
    for record in records:
        by_host.setdefault(record["host"], set()).add(record["serial"])
    assert {len(serials) for serials in by_host.values()} == {STREAM_UPDATES}, by_host
    assert all(r["extra"]["stream"]["serial_method"] == "dynamic update" for r in records)
    (figures,) = json.loads((run / "summary.json").read_text())["stream"].values()
    assert all(f["soa_queries"] > 0 for f in figures["secondaries"])
    return records
