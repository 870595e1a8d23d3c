"""The per-run OpenMetrics file: well formed, same families as live, accepted by promtool."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from harness.core.errors import UserInputError
from harness.metrics.exporter import Exporter
from harness.metrics.openmetrics import (
    METRICS_OM,
    load_samples,
    openmetrics_text,
    write_openmetrics,
)
from harness.results.folder import read_run
from harness.results.meta import RunMeta
from harness.results.model import ResultFormatError
from tests.unit.test_metrics_exporter import fleet_record, link_sample, record, server_sample

FIXTURE = Path(__file__).parent.parent / "fixtures" / "runs" / "20250101T000000Z-abc123"
PROMTOOL = shutil.which("promtool") or "/usr/bin/promtool"
# name{labels} value timestamp, as this writer spells them
LINE = re.compile(r"^([a-z_]+)(\{[^\n]*\})? (\S+) (\d+\.\d{3})$")


def fixture_text() -> str:
    meta, records = read_run(FIXTURE)
    return openmetrics_text(meta, records, load_samples(FIXTURE / "samples.jsonl"))


def points(text: str) -> list[tuple[str, str, float, float]]:
    """(name, labels, value, timestamp) of every sample line; asserts each has a timestamp."""
    out = []
    for line in text.splitlines():
        if line.startswith("#"):
            continue
        match = LINE.match(line)
        assert match, f"not a timestamped sample line: {line!r}"
        name, labels, value, ts = match.groups()
        out.append((name, labels or "", float(value), float(ts)))
    return out


def test_structure_families_once_timestamps_everywhere_eof() -> None:
    text = fixture_text()
    assert text.endswith("\n# EOF\n") and text.count("# EOF") == 1
    for kind in ("TYPE", "HELP"):
        names = re.findall(rf"^# {kind} (\S+)", text, re.M)
        assert len(names) == len(set(names)), f"{kind} repeated"
    units = dict(re.findall(r"^# UNIT (\S+) (\S+)$", text, re.M))
    assert all(name.endswith("_" + unit) for name, unit in units.items())
    assert units["xfrbench_transfer_duration_seconds"] == "seconds"
    # A family's lines are contiguous: its samples never appear after another family starts.
    current = None
    finished: set[str] = set()
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            if current:
                finished.add(current)
            current = line.split()[2]
        elif not line.startswith("#"):
            assert current and line.startswith(current), line
            assert not any(line.startswith(f + "{") for f in finished), line
    # Per series, timestamps strictly increase.
    last: dict[tuple[str, str], float] = {}
    for name, labels, _, ts in points(text):
        key = (name, labels)
        assert ts > last.get(key, 0), f"{key} goes back in time"
        last[key] = ts


def test_values_and_times_come_from_records_and_samples() -> None:
    text = fixture_text()
    found = points(text)
    case = 'case="bind-bind/preset=tiny/tcp/axfr"'

    def series(name: str, *parts: str) -> list[tuple[float, float]]:
        return [
            (ts, v) for n, labels, v, ts in found if n == name and all(p in labels for p in parts)
        ]

    t0 = 1735689600.0
    # Histogram count at zero when the case starts (its first sample), then after each
    # verified transfer, at started_at + duration.
    count = series("xfrbench_transfer_duration_seconds_count", case)
    assert count == [(t0 + 1, 0), (t0 + 2.031, 1), (t0 + 5.027, 2)]
    inf = series("xfrbench_transfer_duration_seconds_bucket", case, 'le="+Inf"')
    assert [v for _, v in inf] == [v for _, v in count]
    # Results: the failed attempt at its started_at (no duration), the unsupported cell too
    # (its case has no samples and starts with its only record: no earlier zero point).
    failed = series("xfrbench_transfers_total", case, 'result="failed"')
    assert failed == [(t0 + 1, 0), (t0 + 8.0, 1)]
    xot = 'case="knot-bind/preset=tiny/xot/axfr"'
    assert series("xfrbench_transfers_total", xot, 'result="unsupported"') == [(t0 + 12.0, 1)]
    # Throughput and bound in bytes per second.
    throughput = series("xfrbench_transfer_throughput_bytes_per_second", case)
    assert throughput[-1] == (t0 + 5.027, pytest.approx(2400 / 0.027))
    assert series("xfrbench_transfer_bound_bytes_per_second", 'bound="model"')[0][1] == 10e6
    # Samples: one point per sample time, cumulative CPU as read.
    cpu = series("xfrbench_server_cpu_seconds_total", 'role="secondary"', 'mode="user"')
    assert [ts for ts, _ in cpu] == [t0 + 1, t0 + 2, t0 + 2.05, t0 + 5, t0 + 5.04, t0 + 6]
    assert cpu[-1][1] == pytest.approx(0.2)
    tw = series("xfrbench_tcp_sockets", 'role="primary"', 'state="time_wait"')
    assert [v for _, v in tw] == [0, 0, 1, 1, 2, 2]
    drops = series("xfrbench_link_packets_total", 'direction="forward"', 'verdict="dropped"')
    assert drops[-1] == (t0 + 6, 1)
    # Memory of samples written before the figures were renamed, under today's families:
    # the cgroup's rss_bytes was its anonymous memory, memory_bytes what it was charged.
    primary = 'role="primary"'
    assert series("xfrbench_server_memory_anon_bytes", primary)[0] == (t0 + 1, 8_000_000)
    assert series("xfrbench_server_memory_charged_bytes", primary)[0] == (t0 + 1, 16_000_000)
    assert series("xfrbench_server_memory_charged_peak_bytes", primary)[0] == (t0 + 1, 8_004_096)
    # run_info spans the run.
    info = series("xfrbench_run_info")
    assert info[0][0] == t0 + 1 and info[-1][0] == t0 + 12


def test_same_families_and_types_as_the_live_exposition() -> None:
    meta, records = read_run(FIXTURE)
    samples = load_samples(FIXTURE / "samples.jsonl")
    exporter = Exporter(meta.run_id, meta.scenario_name or "", meta.spec_hash or "", port=None)
    for item in records:
        exporter.observe_transfer(item)
    for sample in samples:
        exporter.observe_sample(sample)
    live = {
        family.name: family.type
        for family in text_string_to_metric_families(exporter.exposition().decode())
    }
    in_file = dict(re.findall(r"^# TYPE (\S+) (\S+)$", fixture_text(), re.M))
    assert in_file == live


def fleet_run() -> tuple[list, list[dict]]:
    """Two repeats of a primary and two secondaries at two sites, with the primary's marks,
    the sites' links and the uplink."""
    records, samples = [], []
    for repeat in (1, 2):
        t = 1_700_000_000.0 + 10 * repeat
        for host, duration in (("near-1", 0.3), ("far-1", 2.0 + repeat)):
            loss = {"configured_pct": 1.0, "measured_pct": repeat / 2, "verdict": "ok"}
            link = {f"{host} forward": {"loss_check": loss}}
            records.append(
                fleet_record(host, repeat, duration, 0.01, started_at=t, extra={"link": link})
            )
        for offset, event in ((0.0, "transfer-start"), (1.0, "periodic"), (4.0, "transfer-end")):
            where = {"t": t + offset, "event": event, "repeat": repeat}
            samples.append(
                server_sample(
                    **where,
                    role="primary",
                    server="bind",
                    host="primary",
                    cpu_user_s=repeat + offset,
                    tcp_states={"established": 2 if event == "periodic" else 0},
                    net_tx_bytes=int(1000 * (t + offset - 1_700_000_000)),
                )
            )
            for host in ("near-1", "far-1"):
                site = host.partition("-")[0]
                samples.append(server_sample(**where, host=host, site=site, cpu_user_s=offset))
                samples.append(link_sample(**where, host=host, passed=int(offset * 100)))
            samples.append(link_sample(**where, host="uplink", passed=int(offset * 200)))
    return records, samples


def test_a_fleet_run_ends_with_the_live_exporters_values() -> None:
    """The file's last point of every series is what the live exporter serves at the end."""
    records, samples = fleet_run()
    exporter = Exporter("rf", "fleet", "h", port=None)
    for host, site in (("near-1", "near"), ("far-1", "far")):  # as the runner announces them
        exporter.expect_transfers(
            records[0].case, "bind", "knot", "tcp", "axfr", host=host, site=site
        )
    for item in sorted(records, key=lambda r: r.started_at + (r.duration_s or 0)):
        exporter.observe_transfer(item)
    for sample in samples:
        exporter.observe_sample(sample)
    live = {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(exporter.exposition().decode())
        for sample in family.samples
    }
    text = openmetrics_text(
        RunMeta(run_id="rf", scenario_name="fleet", spec_hash="h"), records, samples
    )
    last: dict[tuple[str, frozenset], float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            last[(sample.name, frozenset(sample.labels.items()))] = sample.value
    assert last.keys() == live.keys()
    assert last == pytest.approx(live)
    # What the fleet families carry: the latest repeat's figures, by host and site.
    names = {name for name, _ in last}
    for family in (
        "xfrbench_fleet_propagation_seconds",
        "xfrbench_fleet_secondaries",
        "xfrbench_primary_repeat_cpu_seconds",
        "xfrbench_primary_repeat_peak_connections",
        "xfrbench_primary_repeat_transmit_bytes",
        "xfrbench_link_loss_measured_ratio",
    ):
        assert family in names, family
    stat = {
        dict(labels)["stat"]: v
        for (n, labels), v in last.items()
        if n.endswith("propagation_seconds")
    }
    assert stat["last"] == pytest.approx(4.0) and stat["first"] == pytest.approx(0.3)
    hosts = {
        dict(labels).get("host") for n, labels in last if n.startswith("xfrbench_link_packets")
    }
    assert hosts == {"near-1", "far-1", "uplink"}


def test_label_values_are_escaped_and_same_millisecond_keeps_the_later() -> None:
    case = 'odd "case" \\ with\nnewline'
    records = [record(run_id="r9", case=case)]
    samples = [
        server_sample(case=case, t=1_700_000_001.0001, cpu_user_s=1.0),
        server_sample(case=case, t=1_700_000_001.0004, cpu_user_s=2.0),
        link_sample(case=case),
    ]
    text = openmetrics_text(RunMeta(run_id="r9"), records, samples)
    assert 'case="odd \\"case\\" \\\\ with\\nnewline"' in text
    assert "\nnewline" not in text
    cpu = [line for line in text.splitlines() if 'mode="user"' in line]
    assert len(cpu) == 1 and cpu[0].endswith(" 2 1700000001.000")


def test_bad_samples_and_truncated_lines(tmp_path: Path) -> None:
    with pytest.raises(ResultFormatError, match="role"):
        openmetrics_text(RunMeta(run_id="r"), [], [server_sample(role="nobody")])
    with pytest.raises(ResultFormatError, match="time"):
        openmetrics_text(RunMeta(run_id="r"), [], [server_sample(t=None)])
    path = tmp_path / "samples.jsonl"
    good = json.dumps(link_sample())
    path.write_text(good + "\n" + good[:20])  # a writer killed mid-line
    assert load_samples(path) == [link_sample()]
    path.write_text(good[:20] + "\n" + good + "\n")
    with pytest.raises(UserInputError, match="line 1"):
        load_samples(path)
    assert load_samples(tmp_path / "absent.jsonl") == []


def test_an_empty_run_still_names_itself() -> None:
    meta = RunMeta(run_id="r0", started="2025-01-01T00:00:00+00:00")
    text = openmetrics_text(meta, [], [])
    assert 'xfrbench_run_info{run_id="r0",scenario="",spec_hash=""} 1 1735689600.000' in text


@pytest.mark.skipif(not shutil.which(PROMTOOL), reason="promtool not installed (apt prometheus)")
def test_promtool_backfills_the_file(tmp_path: Path) -> None:
    run_dir = tmp_path / FIXTURE.name
    shutil.copytree(FIXTURE, run_dir)
    path = write_openmetrics(run_dir)
    assert path == run_dir / METRICS_OM
    text = path.read_text()
    assert text == fixture_text()
    done = subprocess.run(
        [PROMTOOL, "tsdb", "create-blocks-from", "openmetrics", str(path), str(tmp_path / "tsdb")],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    # promtool's table: BLOCK ULID, MIN TIME, MAX TIME, DURATION, NUM SAMPLES, ...
    rows = [line.split() for line in done.stdout.splitlines()[1:] if line.strip()]
    assert rows, done.stdout
    found = points(text)
    assert sum(int(row[4]) for row in rows) == len(found)
    assert min(int(row[1]) for row in rows) == round(min(p[3] for p in found) * 1000)
    assert max(int(row[2]) for row in rows) == round(max(p[3] for p in found) * 1000) + 1
