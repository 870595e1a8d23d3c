"""Change streams on real servers, small: serials on schedule, every secondary followed,
per-serial latencies, condensed transfers where the servers condensed, nothing served ahead
of the primary, every secondary verified at the final serial; and a secondary pushed to
AXFR by its primary's short journal, with the reason in the primary's own words.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from harness import spec
from harness.results.folder import read_run
from harness.results.model import TransferRecord
from harness.run.runner import run_scenario

pytestmark = [
    pytest.mark.root,
    pytest.mark.netns,
    pytest.mark.servers,
    pytest.mark.slow,
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root for namespaces"),
]

THREE_KINDS = """
name = "stream-three-kinds"
repeats = 1
trigger = "stream"
xfr = ["ixfr"]
timeout = "60s"
[zones]
preset = "tld"
records = 2000
ixfr_changes = 10
[servers.primary]
kind = "bind"
[[secondaries]]
name = "berlin"
kind = "bind"
[[secondaries]]
name = "prague"
kind = "knot"
[[secondaries]]
name = "amsterdam"
kind = "nsd"
[stream]
interval = "200ms"
updates = 30
sla = "5s"
"""

JOURNAL = """
name = "stream-journal"
repeats = 1
trigger = "stream"
xfr = ["ixfr"]
timeout = "60s"
[zones]
preset = "tld"
records = 2000
ixfr_changes = 20
[servers.primary]
kind = "knot"
options = { journal-max-depth = 2 }
[[secondaries]]
name = "near"
kind = "bind"
[[secondaries]]
name = "far"
kind = "knot"
link = { delay = "300ms" }
[stream]
interval = "200ms"
updates = 20
"""


def _run(tmp_path: Path, text: str) -> tuple[Path, list[TransferRecord]]:
    path = tmp_path / "scenario.toml"
    path.write_text(text)
    run_dir = run_scenario(spec.load(path), results_root=tmp_path / "results")
    return run_dir, read_run(run_dir)[1]


def test_a_bind_primary_streams_30_serials_to_bind_knot_and_nsd(tmp_path: Path) -> None:
    run_dir, records = _run(tmp_path, THREE_KINDS)
    assert len(records) == 30 * 3
    last = max(r.serial or 0 for r in records)
    for record in records:
        assert record.ok and record.failure is None, (record.host, record.serial, record.error)
        # Only the final serial's copy is read; the serials before it say so.
        assert record.verified == (record.serial == last) != record.unchecked, record.serial
        assert record.trigger == "stream" and record.duration_s is not None
        assert record.duration_s >= 0 and record.duration_error_s is not None
    by_host: dict[str, list[TransferRecord]] = {}
    for record in records:
        by_host.setdefault(record.host, []).append(record)
    assert set(by_host) == {"berlin", "prague", "amsterdam"}
    for host, mine in by_host.items():
        # The warm-up published serial 2; the stream 3 to 32, each once per secondary.
        assert sorted(r.serial for r in mine) == list(range(3, 33)), host
        # Every serial came with a transfer its servers logged, with its kind.
        for record in mine:
            transfer = record.server_logged["transfer"]
            assert transfer["serial"] >= record.serial, (host, record.serial, transfer)
            assert transfer.get("xfr") == "ixfr", (host, record.serial, transfer)
        made = {r.server_logged["transfer"]["serial"]: r.server_logged["transfer"] for r in mine}
        assert sum(t["carried"] for t in made.values()) == 30, host
    # Knot says its kind itself; BIND and NSD secondaries do not: their primary's log does.
    assert {r.server_logged["transfer"]["source"] for r in by_host["prague"]} == {"secondary"}
    assert {r.server_logged["transfer"]["source"] for r in by_host["berlin"]} == {"primary"}
    # NSD merges what arrives within its 1 s xfrd-reload-timeout: it served serials it
    # went straight past, and its records say which serial it served first.
    jumped = [r for r in by_host["amsterdam"] if "served_serial" in r.extra["stream"]]
    assert jumped and all(r.extra["stream"]["served_serial"] > r.serial for r in jumped)
    # Every publish was due every 200 ms from the first; the primary took each at once.
    firsts = sorted({r.serial: r.extra["stream"]["due_s"] for r in records}.items())
    assert [due for _, due in firsts] == pytest.approx([0.2 * k for k in range(30)])
    assert all(r.extra["stream"]["serial_method"] == "dynamic update" for r in records)
    # Nothing was ever served ahead of what the primary had been given.
    assert not any("had not been given" in (r.error or "") for r in records)
    # summary.json's stream section, from these records.
    (figures,) = json.loads((run_dir / "summary.json").read_text())["stream"].values()
    assert figures["serials"] == 30 and figures["sla_s"] == 5.0
    rows = {row["site"]: row for row in figures["latency"]}
    assert set(rows) == {"", "berlin", "prague", "amsterdam"}
    assert rows[""]["n"] == 90 and rows[""]["max_s"] == max(r.duration_s for r in records)
    facts = {f["host"]: f for f in figures["secondaries"]}
    assert all(f["transfers"] >= 1 and f["axfr"] == 0 for f in facts.values())
    assert facts["amsterdam"]["transfers"] < 30  # NSD condensed
    # What following each secondary cost the harness is recorded with it.
    assert all(f["soa_queries"] > 0 for f in facts.values())


def test_a_lagging_secondary_is_pushed_to_axfr_by_a_short_journal(tmp_path: Path) -> None:
    run_dir, records = _run(tmp_path, JOURNAL)
    assert len(records) == 20 * 2
    assert all(r.ok and (r.verified or r.unchecked) for r in records), [
        r.error for r in records if not r.ok
    ]
    far = [r.server_logged["transfer"] for r in records if r.host == "far"]
    axfrs = {t["serial"]: t for t in far if t["xfr"] == "axfr"}
    assert axfrs, far
    for transfer in axfrs.values():
        assert transfer["fallback_kind"] == "journal trimmed"
        assert transfer["fallback_by"] == "knot (primary)"
        assert "incomplete history, serial" in transfer["fallback"]
        assert transfer["fallback"].endswith("fallback to AXFR")
    # ...and the far secondary's own log shows the AXFR it took.
    logs = list(run_dir.glob("cases/*/far/knot.log"))
    assert logs and "AXFR, incoming" in logs[0].read_text()
