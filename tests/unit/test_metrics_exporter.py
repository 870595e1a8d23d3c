"""The live exporter: what records and samples become, and that its exposition lints clean."""

from __future__ import annotations

import shutil
import socket
import subprocess
import threading
import urllib.request
from typing import Any

import prometheus_client
import pytest
from prometheus_client.parser import text_string_to_metric_families

from harness.errors import UserInputError
from harness.metrics.exporter import FAMILIES, Exporter, MetricState
from harness.results.model import TransferRecord

CASE = "bind-knot/preset=tiny/tcp/axfr"
T_LABELS = {
    "run_id": "r1",
    "case": CASE,
    "primary": "bind",
    "secondary": "knot",
    "transport": "tcp",
    "xfr": "axfr",
    "method": "server-to-server",
}


def record(**changes: Any) -> TransferRecord:
    fields: dict[str, Any] = {
        "run_id": "r1",
        "case": CASE,
        "repeat": 0,
        "primary": "bind",
        "secondary": "knot",
        "transport": "tcp",
        "xfr": "axfr",
        "zone": "tiny.example.",
        "serial": 2,
        "records": 40,
        "bytes": 3000,
        "messages": 1,
        "duration_s": 0.2,
        "started_at": 1_700_000_000.0,
        "ok": True,
        "verified": True,
        "bound": {"model": 8e6, "receive_window": 8e6},
    }
    fields.update(changes)
    return TransferRecord(**fields)


def server_sample(**changes: Any) -> dict[str, Any]:
    sample: dict[str, Any] = {
        "t": 1_700_000_001.0,
        "event": "periodic",
        "case": CASE,
        "repeat": None,
        "role": "secondary",
        "server": "knot",
        "pid": 4321,
        "source": "cgroup-v1",
        "cpu_user_s": 1.25,
        "cpu_system_s": 0.5,
        "rss_bytes": 9_000_000,
        "peak_rss_bytes": 9_500_000,
        "memory_bytes": None,
        "tcp": {"inuse": 2, "orphan": 0, "time_wait": 7, "alloc": 3},
        "tcp_states": {"listen": 2, "time_wait": 7},
        "ephemeral_ports_in_use": 5,
        "retrans_segs": 11,
        "tcp_timeouts": 1,
        "active_opens": 9,
        "passive_opens": 0,
    }
    sample.update(changes)
    return sample


def link_sample(**changes: Any) -> dict[str, Any]:
    sample: dict[str, Any] = {
        "t": 1_700_000_001.0,
        "event": "periodic",
        "case": CASE,
        "repeat": None,
        "role": "link",
        "direction": "forward",
        "passed": 120,
        "dropped": 3,
    }
    sample.update(changes)
    return sample


def value(exposition: bytes, sample_name: str, **labels: str) -> float | None:
    """The value of one sample in a text exposition (None when absent)."""
    found = None
    for family in text_string_to_metric_families(exposition.decode()):
        for sample in family.samples:
            if sample.name == sample_name and all(
                sample.labels.get(k) == v for k, v in labels.items()
            ):
                assert found is None, f"{sample_name} {labels} matches twice"
                found = sample.value
    return found


def test_transfers_count_by_result_and_only_verified_ones_are_timed() -> None:
    exporter = Exporter("r1", "quick", "hash1", port=None)
    exporter.observe_transfer(record(duration_s=0.2, bytes=3000))
    exporter.observe_transfer(record(repeat=1, duration_s=0.04, bytes=1000))
    exporter.observe_transfer(record(repeat=2, ok=True, verified=False, error="digest differs"))
    exporter.observe_transfer(record(repeat=3, ok=False, duration_s=None, error="timeout"))
    exporter.observe_transfer(record(repeat=4, ok=False, unsupported=True, error="no XoT"))
    text = exporter.exposition()

    assert value(text, "xfrbench_transfers_total", result="ok", **T_LABELS) == 2
    assert value(text, "xfrbench_transfers_total", result="failed", **T_LABELS) == 2
    assert value(text, "xfrbench_transfers_total", result="unsupported", **T_LABELS) == 1
    assert value(text, "xfrbench_transfer_duration_seconds_count", **T_LABELS) == 2
    assert value(text, "xfrbench_transfer_duration_seconds_sum", **T_LABELS) == pytest.approx(0.24)
    bucket = "xfrbench_transfer_duration_seconds_bucket"
    assert value(text, bucket, le="0.025", **T_LABELS) == 0
    assert value(text, bucket, le="0.05", **T_LABELS) == 1
    assert value(text, bucket, le="0.25", **T_LABELS) == 2
    assert value(text, bucket, le="+Inf", **T_LABELS) == 2
    assert value(text, "xfrbench_transfer_bytes_total", **T_LABELS) == 4000
    # The last verified transfer: 1000 bytes in 40 ms.
    last = "xfrbench_transfer_last_duration_seconds"
    assert value(text, last, **T_LABELS) == pytest.approx(0.04)
    throughput = "xfrbench_transfer_throughput_bytes_per_second"
    assert value(text, throughput, **T_LABELS) == pytest.approx(25_000)
    bound = "xfrbench_transfer_bound_bytes_per_second"
    assert value(text, bound, run_id="r1", case=CASE, bound="model") == pytest.approx(1e6)
    assert value(text, "xfrbench_run_info", run_id="r1", scenario="quick", spec_hash="hash1") == 1


def test_an_announced_case_starts_at_zero_so_rate_sees_its_first_transfer() -> None:
    exporter = Exporter("r1", "quick", "h", port=None)
    exporter.expect_transfers(CASE, "bind", "knot", "tcp", "axfr", ["server-to-server"])
    text = exporter.exposition()
    assert value(text, "xfrbench_transfer_duration_seconds_count", **T_LABELS) == 0
    assert value(text, "xfrbench_transfer_duration_seconds_bucket", le="+Inf", **T_LABELS) == 0
    assert value(text, "xfrbench_transfers_total", result="ok", **T_LABELS) == 0
    assert value(text, "xfrbench_transfers_total", result="failed", **T_LABELS) == 0
    assert value(text, "xfrbench_transfer_last_duration_seconds", **T_LABELS) is None
    exporter.observe_transfer(record())
    exporter.expect_transfers(CASE, "bind", "knot", "tcp", "axfr")  # again: changes nothing
    text = exporter.exposition()
    assert value(text, "xfrbench_transfer_duration_seconds_count", **T_LABELS) == 1
    assert value(text, "xfrbench_transfers_total", result="ok", **T_LABELS) == 1


def test_server_samples_set_counters_from_cumulative_readings() -> None:
    exporter = Exporter("r1", "quick", "h", port=None)
    exporter.observe_sample(server_sample())
    exporter.observe_sample(
        server_sample(
            t=1_700_000_002.0,
            cpu_user_s=2.0,
            tcp={"inuse": 2, "orphan": 0, "time_wait": 0, "alloc": 2},
            tcp_states={"listen": 2, "established": 1},
        )
    )
    text = exporter.exposition()
    s = {"run_id": "r1", "case": CASE, "server": "knot", "role": "secondary"}
    cpu = "xfrbench_server_cpu_seconds_total"
    assert value(text, cpu, mode="user", **s) == 2.0  # the latest reading, not a sum
    assert value(text, cpu, mode="system", **s) == 0.5
    assert value(text, "xfrbench_server_memory_rss_bytes", **s) == 9_000_000
    assert value(text, "xfrbench_server_memory_peak_bytes", **s) == 9_500_000
    assert value(text, "xfrbench_server_memory_bytes", **s) is None  # null: no series
    assert value(text, "xfrbench_tcp_time_wait_sockets", **s) == 0
    # A state that emptied shows as 0, not as a gap.
    assert value(text, "xfrbench_tcp_sockets", state="time_wait", **s) == 0
    assert value(text, "xfrbench_tcp_sockets", state="established", **s) == 1
    assert value(text, "xfrbench_tcp_sockets", state="syn_sent", **s) == 0
    assert value(text, "xfrbench_ephemeral_ports_in_use", **s) == 5
    assert value(text, "xfrbench_tcp_retransmitted_segments_total", **s) == 11
    assert value(text, "xfrbench_tcp_timeouts_total", **s) == 1


def test_link_samples_and_bad_samples() -> None:
    exporter = Exporter("r1", "quick", "h", port=None)
    exporter.observe_sample(link_sample())
    exporter.observe_sample(link_sample(direction="reverse", passed=80, dropped=0))
    text = exporter.exposition()
    link = "xfrbench_link_packets_total"
    labels = {"run_id": "r1", "case": CASE}
    assert value(text, link, direction="forward", verdict="dropped", **labels) == 3
    assert value(text, link, direction="reverse", verdict="passed", **labels) == 80
    with pytest.raises(ValueError, match="role"):
        exporter.observe_sample(server_sample(role="tertiary"))
    with pytest.raises(ValueError, match="direction"):
        exporter.observe_sample(link_sample(direction="sideways"))
    with pytest.raises(ValueError, match="case"):
        exporter.observe_sample(link_sample(case=None))


def test_labels_are_bounded_no_pid_zone_or_repeat() -> None:
    state = MetricState("r1", "quick", "h")
    state.add_transfer(record(zone="z12345.example."))
    state.add_sample(server_sample(pid=99999))
    for family in FAMILIES:
        assert not {"pid", "zone", "repeat", "serial"} & set(family.labels), family.name
    values = {v for _, labels in state.values for v in labels}
    assert "99999" not in values and "z12345.example." not in values


def test_own_registry_and_served_over_http_until_exit() -> None:
    with Exporter("r-http", "quick", "h", port=0) as exporter:
        port = exporter.port
        assert port and exporter.url == f"http://127.0.0.1:{port}/metrics"
        exporter.observe_transfer(record(run_id="r-http"))
        with urllib.request.urlopen(exporter.url, timeout=5) as answer:
            body = answer.read()
        assert body == exporter.exposition()
        assert b"xfrbench_transfers_total{" in body
    # The global registry never sees the run's metrics.
    assert b"xfrbench_" not in prometheus_client.generate_latest()
    with socket.socket() as probe, pytest.raises(ConnectionRefusedError):
        probe.connect(("127.0.0.1", port))


def test_a_busy_port_is_a_user_error() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with (
            pytest.raises(UserInputError, match="prometheus-port"),
            Exporter("r1", "q", "h", port=port),
        ):
            pass


def test_scrapes_during_updates_see_consistent_counts() -> None:
    exporter = Exporter("r1", "quick", "h", port=None)
    stop = threading.Event()
    seen: list[tuple[float | None, float | None]] = []

    def scrape() -> None:
        while not stop.is_set():
            text = exporter.exposition()
            ok = value(text, "xfrbench_transfers_total", result="ok", **T_LABELS)
            count = value(text, "xfrbench_transfer_duration_seconds_count", **T_LABELS)
            seen.append((ok, count))

    thread = threading.Thread(target=scrape)
    thread.start()
    try:
        for repeat in range(300):
            exporter.observe_transfer(record(repeat=repeat))
    finally:
        stop.set()
        thread.join()
    assert seen and all(ok == count for ok, count in seen)
    assert value(exporter.exposition(), "xfrbench_transfers_total", result="ok", **T_LABELS) == 300


PROMTOOL = shutil.which("promtool") or "/usr/bin/promtool"


@pytest.mark.skipif(not shutil.which(PROMTOOL), reason="promtool not installed (apt prometheus)")
def test_promtool_check_metrics_finds_no_problem_in_the_exposition() -> None:
    exporter = Exporter("r1", "quick", "h", port=None)
    exporter.observe_transfer(record())
    exporter.observe_transfer(record(repeat=1, ok=False, duration_s=None, error="timeout"))
    exporter.observe_sample(server_sample())
    exporter.observe_sample(server_sample(role="primary", server="bind", memory_bytes=20_000_000))
    exporter.observe_sample(link_sample())
    text = exporter.exposition()
    # Every family has a series, so the linter sees every name.
    for family in FAMILIES:
        assert f"# TYPE {family.name}".encode() in text, family.name
    done = subprocess.run(
        [PROMTOOL, "check", "metrics"], input=text, capture_output=True, timeout=30, check=False
    )
    problems = (done.stdout + done.stderr).decode()
    assert done.returncode == 0 and not problems.strip(), problems
