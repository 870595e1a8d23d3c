"""The live exporter: what records and samples become, and that its exposition lints clean."""

from __future__ import annotations

import re
import shutil
import socket
import subprocess
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

import prometheus_client
import pytest
from prometheus_client.parser import text_string_to_metric_families

from harness import spec
from harness.core.errors import UserInputError
from harness.measure.records import Observed, RecordContext, transfer_record
from harness.metrics.exporter import Exporter
from harness.metrics.families import DURATION_BUCKETS, FAMILIES
from harness.metrics.series import MetricState
from harness.plan.case import plan_case
from harness.results.model import TransferRecord

SCENARIOS = Path(__file__).resolve().parents[2] / "scenarios"

CASE = "bind-knot/preset=tiny/tcp/axfr"
T_LABELS = {
    "run_id": "r1",
    "case": CASE,
    "primary": "bind",
    "secondary": "knot",
    "host": "secondary",  # a lone secondary's host
    "site": "",
    "transport": "tcp",
    "xfr": "axfr",
    "method": "server-to-server",
}


def record(**changes: Any) -> TransferRecord:
    fields: dict[str, Any] = {
        "run_id": "r1",
        "case": CASE,
        "repeat": 0,
        "primary_kind": "bind",
        "secondary_kind": "knot",
        "host": "secondary",
        "site": None,
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
        "anon_bytes": 9_000_000,
        "charged_bytes": None,
        "charged_peak_bytes": 9_500_000,
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
    where = {"run_id": "r1", "case": CASE, "host": "secondary", "site": ""}
    assert value(text, bound, bound="model", **where) == pytest.approx(1e6)
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
    s = {
        "run_id": "r1",
        "case": CASE,
        "server": "knot",
        "role": "secondary",
        "host": "secondary",  # the sample names no host: lines from before fleets
        "site": "",
    }
    cpu = "xfrbench_server_cpu_seconds_total"
    assert value(text, cpu, mode="user", **s) == 2.0  # the latest reading, not a sum
    assert value(text, cpu, mode="system", **s) == 0.5
    assert value(text, "xfrbench_server_memory_anon_bytes", **s) == 9_000_000
    assert value(text, "xfrbench_server_memory_charged_peak_bytes", **s) == 9_500_000
    assert value(text, "xfrbench_server_memory_charged_bytes", **s) is None  # null: no series
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
    exporter.observe_sample(server_sample())
    exporter.observe_sample(link_sample())
    exporter.observe_sample(link_sample(direction="reverse", passed=80, dropped=0))
    text = exporter.exposition()
    link = "xfrbench_link_packets_total"
    labels = {"run_id": "r1", "case": CASE, "host": "secondary"}  # the lone secondary's link
    assert value(text, link, direction="forward", verdict="dropped", **labels) == 3
    assert value(text, link, direction="reverse", verdict="passed", **labels) == 80
    with pytest.raises(ValueError, match="role"):
        exporter.observe_sample(server_sample(role="tertiary"))
    with pytest.raises(ValueError, match="direction"):
        exporter.observe_sample(link_sample(direction="sideways"))
    with pytest.raises(ValueError, match="case"):
        exporter.observe_sample(link_sample(case=None))


def test_a_lone_secondarys_link_is_named_for_it_and_bad_hosts_are_refused() -> None:
    state = MetricState("r1", "quick", "h")
    link = "xfrbench_link_packets"
    # Before the secondary's first sample its link cannot be named: left out, not guessed
    # (its counters are cumulative: the next line carries them).
    assert state.add_sample(link_sample(passed=5)) == []
    state.add_sample(server_sample(host="edge"))  # a fleet's only secondary: unnamed link
    state.add_sample(link_sample())
    state.add_sample(link_sample(host="uplink", passed=7))
    assert state.values[(link, ("r1", CASE, "edge", "forward", "passed"))] == 120
    assert state.values[(link, ("r1", CASE, "uplink", "forward", "passed"))] == 7
    assert not [
        key for key in state.values if key[0] == link and key[1][2] not in ("edge", "uplink")
    ]
    for bad in ("Seoul 1", 'x"y', "-x"):
        with pytest.raises(ValueError, match="host"):
            state.add_sample(server_sample(host=bad))
        with pytest.raises(ValueError, match="host"):
            state.add_sample(link_sample(host=bad))


def test_fleet_secondaries_and_the_primary_are_series_of_their_own() -> None:
    """Several secondaries share the role: their host and site keep them apart."""
    exporter = Exporter("r1", "fleet", "h", port=None)
    exporter.observe_sample(server_sample(role="primary", server="bind", host="primary"))
    for host, site, user in (("seoul-1", "seoul", 1.0), ("seoul-2", "seoul", 2.0)):
        exporter.observe_sample(server_sample(host=host, site=site, cpu_user_s=user))
    text = exporter.exposition()
    cpu = "xfrbench_server_cpu_seconds_total"
    mine = {"run_id": "r1", "case": CASE, "mode": "user"}
    assert value(text, cpu, host="seoul-1", site="seoul", role="secondary", **mine) == 1.0
    assert value(text, cpu, host="seoul-2", site="seoul", role="secondary", **mine) == 2.0
    assert value(text, cpu, host="primary", site="", role="primary", **mine) == 1.25


def fleet_record(
    host: str, repeat: int, duration: float | None, notify: float, **changes: Any
) -> TransferRecord:
    extra = {"path_rtt_s": 0.1}
    return record(
        host=host,
        site=host.rpartition("-")[0],
        repeat=repeat,
        duration_s=duration,
        phases={"notify_sent": notify},
        extra=extra | changes.pop("extra", {}),
        **changes,
    )


def test_fleet_propagation_of_the_latest_repeat_as_records_arrive() -> None:
    state = MetricState("r1", "fleet", "h")
    for host in ("a-1", "a-2", "b-1"):  # the fleet, as the runner announces its case
        state.expect_transfers(CASE, "bind", "bind", "tcp", "axfr", "server-to-server",
                               host=host, site=host.rpartition("-")[0])  # fmt: skip
    stat = "xfrbench_fleet_propagation_seconds"
    status = "xfrbench_fleet_secondaries"

    def figures() -> dict[str, float]:
        return {
            labels[2]: float(v)  # type: ignore[arg-type]
            for (name, labels), v in state.values.items()
            if name in (stat, status)
        }

    # Fleet times (duration + how late its NOTIFY left): 0.2, 0.6 and 1.3 s.
    state.add_transfer(fleet_record("a-1", 1, 0.2, 0.0))
    # One of three recorded: no figure yet (they are the fleet's, not a-1's).
    assert figures() == {"secondaries": 3, "recorded": 1, "served": 1, "possibly_waited": 0}
    twice = {"wire": {"syns": 3, "connections": 2}}  # refused once, then connected again
    state.add_transfer(fleet_record("b-1", 1, 1.0, 0.3, extra=twice))
    assert "last" not in figures() and "p50" not in figures()
    state.add_transfer(fleet_record("a-2", 1, 0.5, 0.1))
    got = figures()
    assert got["first"] == 0.2 and got["last"] == pytest.approx(1.3)
    assert got["p50"] == pytest.approx(0.6)
    assert got["p95"] == pytest.approx(1.3)  # nearest rank of 3: the 3rd, as summary.json
    assert (got["recorded"], got["served"], got["reconnected"]) == (3, 3, 1)
    # Repeat 2 starts with a failure: no figure of repeat 1 may stand for it.
    state.add_transfer(fleet_record("a-1", 2, None, 0.0, ok=False, error="timeout"))
    assert figures() == {"secondaries": 3, "recorded": 1, "served": 0, "possibly_waited": 0}
    state.add_transfer(fleet_record("a-2", 2, 0.4, 0.05))
    state.add_transfer(fleet_record("b-1", 2, 0.6, 0.05))
    # Counted from the first NOTIFY to any secondary, a-1's that never served (0.0): its
    # times 0.45 and 0.65; 2 of 3 served, so no last and no p95: it did not converge.
    got = figures()
    assert got["first"] == pytest.approx(0.45) and got["p50"] == pytest.approx(0.65)
    assert "last" not in got and "p95" not in got
    assert (got["secondaries"], got["served"]) == (3, 2)
    # The primary's refusals: absent while not logged (older records, or a dialect whose
    # wording is unknown), never 0; its count where its log was read.
    refusals = ("xfrbench_fleet_refusals", ("r1", CASE))
    assert refusals not in state.values
    logged = {"primary_refusals": {"server": "bind", "refusals": 4}}
    state.add_transfer(fleet_record("a-1", 3, 0.2, 0.0, server_logged=logged))
    assert state.values[refusals] == 4.0
    unknown = {"primary_refusals": {"server": "knot", "refusals": None}}
    state.add_transfer(fleet_record("a-1", 4, 0.2, 0.0, server_logged=unknown))
    assert refusals not in state.values
    # A straggler from repeat 1 changes nothing; records without a host are not a fleet's.
    before = figures()
    state.add_transfer(fleet_record("b-1", 1, 9.0, 0.0))
    state.add_transfer(record(repeat=3, case="other"))
    assert figures() == before


def test_the_primarys_cost_of_the_latest_repeat_from_its_marks() -> None:
    state = MetricState("r1", "fleet", "h")

    def primary(event: str, repeat: int | None, cpu: float, established: int, tx: int) -> None:
        state.add_sample(
            server_sample(
                event=event,
                repeat=repeat,
                role="primary",
                server="bind",
                host="primary",
                cpu_user_s=cpu,
                cpu_system_s=0.5,
                tcp_states={"established": established},
                net_tx_bytes=tx,
                net_rx_bytes=tx // 10,
            )
        )

    primary("periodic", None, 1.0, 9, 100)  # before the repeat: not counted
    primary("transfer-start", 1, 1.0, 0, 1_000)
    primary("periodic", 1, 1.5, 4, 50_000)
    primary("transfer-end", 1, 1.75, 1, 81_000)
    cost = {
        name: v for (name, labels), v in state.values.items() if name.startswith("xfrbench_primary")
    }
    assert cost == {
        "xfrbench_primary_repeat_cpu_seconds": 0.75,
        "xfrbench_primary_repeat_peak_connections": 4,
        "xfrbench_primary_repeat_transmit_bytes": 80_000,
    }
    tx = ("xfrbench_network_transmit_bytes", ("r1", CASE, "bind", "primary", "primary", ""))
    assert state.values[tx] == 81_000  # the cumulative reading, as for CPU


def test_loss_checks_per_direction_of_the_secondarys_link_and_the_uplink() -> None:
    def check(configured: float, measured: float | None, verdict: str) -> dict[str, Any]:
        return {
            "passed": 1000,
            "dropped": 12,
            "loss_check": {
                "configured_pct": configured,
                "measured_pct": measured,
                "expected_drops": 10.0,
                "verdict": verdict,
                "p_value": 0.5,
                "sentence": "...",
            },
        }

    state = MetricState("r1", "fleet", "h")
    link = {
        "seoul-1 forward": check(1.0, 1.2, "ok"),
        "seoul-1 reverse": {"passed": 900, "dropped": 0},  # no loss configured: no check
        "uplink forward": check(0.5, None, "too few packets"),
    }
    state.add_transfer(fleet_record("seoul-1", 1, 2.0, 0.0, extra={"link": link}))
    # A lone secondary's directions are its own.
    state.add_transfer(record(extra={"link": {"reverse": check(2.0, 1.9, "implausible")}}))
    got = {
        (name.removeprefix("xfrbench_link_loss_"), labels[2:]): v
        for (name, labels), v in state.values.items()
        if name.startswith("xfrbench_link_loss") and (name.endswith("ratio") or v == 1)
    }
    assert got == {
        ("configured_ratio", ("seoul-1", "seoul", "forward")): 0.01,
        ("measured_ratio", ("seoul-1", "seoul", "forward")): 0.012,
        ("check", ("seoul-1", "seoul", "forward", "ok")): 1,
        ("configured_ratio", ("uplink", "", "forward")): 0.005,
        ("check", ("uplink", "", "forward", "too_few_packets")): 1,
        ("configured_ratio", ("secondary", "", "reverse")): 0.02,
        ("measured_ratio", ("secondary", "", "reverse")): 0.019,
        ("check", ("secondary", "", "reverse", "implausible")): 1,
    }
    verdicts = {labels[-1] for (name, labels) in state.values if name.endswith("loss_check")}
    assert verdicts == {"ok", "implausible", "too_few_packets", "not_tested"}  # 0 when not


def test_duration_buckets_reach_every_shipped_scenarios_timeout() -> None:
    timeouts = [
        case.scenario.timeout
        for path in sorted(SCENARIOS.glob("*.toml"))
        for case in spec.load(path).cases
    ]
    assert len(timeouts) > len(list(SCENARIOS.glob("*.toml")))  # the matrices expanded
    assert max(timeouts) <= DURATION_BUCKETS[-1]
    state = MetricState("r1", "tld", "h")
    state.add_transfer(record(duration_s=max(timeouts) - 1))
    histogram = state.values[("xfrbench_transfer_duration_seconds", tuple(T_LABELS.values()))]
    assert histogram.counts[-1] == 0  # a transfer just inside the timeout is not only in +Inf


def test_expect_case_announces_the_labels_the_records_will_carry() -> None:
    """The series a case's records change exist at zero before the first one arrives."""
    for name in ("fleet.toml", "quick.toml"):
        loaded = spec.load(SCENARIOS / name)
        plan = plan_case(loaded.cases[0])
        exporter = Exporter("r1", name, "h", port=None)
        exporter.expect_case(plan)
        announced = set(exporter._state.values)
        ctx = RecordContext("r1", plan)
        for host in plan.secondaries:
            for method in plan.methods if host == plan.secondaries[0] else plan.methods[:1]:
                observed = Observed(serial=2, duration_s=0.5, started_at=1.0, ok=False, error="x")
                item = transfer_record(
                    ctx, host=host.name, repeat=1, zone="z.", observed=observed, method=method
                )
                changed = exporter._state.add_transfer(item)
                counters = [k for k in changed if k[0] == "xfrbench_transfers"]
                assert counters and set(counters) <= announced, (name, host.name, counters)
        hosts = {labels[4] for family, labels in announced if family == "xfrbench_transfers"}
        assert hosts == ({h.name for h in plan.secondaries} if plan.is_fleet else {"secondary"})


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


def test_a_run_ends_only_once_its_last_figures_were_scraped() -> None:
    """A Prometheus scraping every 0.2 s: the run's last record, just before it ends, is in a
    scrape before the exporter closes (a stream's final serials came last, and its dashboard
    test sometimes found their panels empty); nobody scraping, it closes at once."""
    scrapes: list[bytes] = []
    stop = threading.Event()
    with Exporter("r-last", "quick", "h", port=0) as exporter:
        url = exporter.url
        assert url is not None

        def scrape() -> None:
            while not stop.wait(0.2):
                try:
                    with urllib.request.urlopen(url, timeout=5) as answer:
                        scrapes.append(answer.read())
                except OSError:  # the exporter closed
                    return

        scraper = threading.Thread(target=scrape, daemon=True)
        scraper.start()
        while len(scrapes) < 3:
            time.sleep(0.05)
        exporter.observe_transfer(record(run_id="r-last"))  # the run's last figure
    stop.set()
    scraper.join(timeout=5)
    assert re.search(rb'xfrbench_transfers_total\{[^}]*result="ok"[^}]*\} 1\.0', scrapes[-1])
    started = time.monotonic()
    with Exporter("r-alone", "quick", "h", port=0) as exporter:
        exporter.observe_transfer(record(run_id="r-alone"))
    assert time.monotonic() - started < 1.5  # its HTTP server takes 0.5 s to shut down


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
    exporter.expect_transfers(CASE, "bind", "knot", "tcp", "axfr", host="seoul-1", site="seoul")
    link = {"seoul-1 forward": {"loss_check": {"configured_pct": 1, "measured_pct": 2}}}
    logged = {"primary_refusals": {"server": "bind", "refusals": 1}}
    exporter.observe_transfer(
        fleet_record("seoul-1", 1, 1.0, 0.0, extra={"link": link}, server_logged=logged)
    )
    exporter.observe_transfer(
        fleet_record(
            "seoul-1",
            1,
            1.0,
            0.0,
            extra={"link": {"forward": {"loss_check": {"verdict": "ok"}}}},
            server_logged=logged,
        )
    )
    exporter.observe_sample(server_sample(host="seoul-1", site="seoul", net_tx_bytes=5))
    for event, repeat in (("transfer-start", 1), ("transfer-end", 1)):
        exporter.observe_sample(
            server_sample(
                role="primary",
                server="bind",
                event=event,
                repeat=repeat,
                charged_bytes=20_000_000,
                net_tx_bytes=10,
                net_rx_bytes=1,
            )
        )
    exporter.observe_sample(link_sample())
    exporter.observe_sample(stream_sample())
    exporter.observe_sample(fault_sample())
    exporter.observe_transfer(record(repeat=2, extra={"fault": FAULT}))
    exporter.observe_sample(stream_sample(role="catalog", served=5, behind=0))
    text = exporter.exposition()
    # Every family has a series, so the linter sees every name.
    for family in FAMILIES:
        assert f"# TYPE {family.name}".encode() in text, family.name
    done = subprocess.run(
        [PROMTOOL, "check", "metrics"], input=text, capture_output=True, timeout=30, check=False
    )
    problems = (done.stdout + done.stderr).decode()
    assert done.returncode == 0 and not problems.strip(), problems


def test_an_agents_exporter_serves_its_samples_but_not_the_run() -> None:
    """An inventory host's agent serves its servers' samples beside the run's exporter,
    which alone says what the run is (one xfrbench_run_info per run)."""
    agent = Exporter("r1", "quick", "h", port=None, run_info=False)
    agent.observe_sample(server_sample(host="ns1", site="near"))
    text = agent.exposition()
    assert value(text, "xfrbench_run_info", run_id="r1") is None
    cpu = value(text, "xfrbench_server_cpu_seconds_total", mode="user", host="ns1", site="near")
    assert cpu == 1.25
    assert value(Exporter("r1", "quick", "h", port=None).exposition(), "xfrbench_run_info") == 1


def stream_sample(**over: Any) -> dict[str, Any]:
    """A change stream's lag line (measure/live_stream.py)."""
    line = {"t": 2.0, "event": "note", "case": "stream-case", "repeat": 1, "role": "stream",
            "host": "seoul-1", "site": "seoul", "behind_serials": 3, "behind_s": 1.25}  # fmt: skip
    return line | over


def test_a_streams_lag_is_a_gauge_per_secondary() -> None:
    exporter = Exporter("r1", "stream", "h", port=None)
    exporter.observe_sample(stream_sample())
    exporter.observe_sample(stream_sample(host="frankfurt-1", site="frankfurt", behind_serials=0,
                                          behind_s=0.0))  # fmt: skip
    exporter.observe_sample(stream_sample(behind_serials=1, behind_s=0.2))  # the latest counts
    text = exporter.exposition().decode()
    labels = 'case="stream-case",host="seoul-1",run_id="r1",site="seoul"'
    assert f"xfrbench_stream_behind_serials{{{labels}}} 1.0" in text
    assert f"xfrbench_stream_behind_seconds{{{labels}}} 0.2" in text
    assert 'xfrbench_stream_behind_serials{case="stream-case",host="frankfurt-1"' in text
    with pytest.raises(ValueError, match="bad host"):
        exporter.observe_sample(stream_sample(host="Bad Host"))


FAULT = {"name": "link-down", "kind": "link-down", "heal_s": 2.5, "stuck": False}


def fault_sample(**over: Any) -> dict[str, Any]:
    """A fault's window noted by the fault flow (measure/live_faults.py)."""
    line = {"t": 3.0, "event": "note", "case": CASE, "repeat": 1, "role": "fault",
            "fault": "link-down", "kind": "link-down", "active": 1}  # fmt: skip
    return line | over


def test_a_faults_window_heal_time_and_stuck_secondaries_are_gauges() -> None:
    exporter = Exporter("r1", "faults", "h", port=None)
    exporter.observe_sample(fault_sample())
    labels = {"run_id": "r1", "case": CASE, "fault": "link-down"}
    assert value(exporter.exposition(), "xfrbench_fault_active", **labels) == 1
    exporter.observe_sample(fault_sample(active=0))
    assert value(exporter.exposition(), "xfrbench_fault_active", **labels) == 0
    host = {"host": "seoul-1", "site": "seoul"}
    exporter.observe_transfer(fleet_record("seoul-1", 1, 1.0, 0.0, extra={"fault": FAULT}))
    text = exporter.exposition()
    assert value(text, "xfrbench_fault_heal_seconds", **labels, **host) == 2.5
    assert value(text, "xfrbench_fault_stuck", **labels, **host) == 0
    # The next repeat: stuck, so no heal time stands for it any more.
    stuck = FAULT | {"heal_s": None, "stuck": True}
    exporter.observe_transfer(fleet_record("seoul-1", 2, 1.0, 0.0, extra={"fault": stuck}))
    text = exporter.exposition()
    assert value(text, "xfrbench_fault_stuck", **labels, **host) == 1
    assert b"xfrbench_fault_heal_seconds{" not in text
    with pytest.raises(ValueError, match="fault name"):
        exporter.observe_sample(fault_sample(fault="a b"))


def test_a_catalog_consumers_members_are_gauges_per_consumer() -> None:
    """measure/live_catalog.py's lines: served and behind while members are provisioned;
    behind alone while they are removed (served keeps its last value)."""
    exporter = Exporter("r1", "catalog", "h", port=None)
    line = {"t": 2.0, "event": "note", "case": "cat-case", "repeat": 1, "role": "catalog",
            "host": "berlin", "site": ""}  # fmt: skip
    exporter.observe_sample(line | {"served": 400, "behind": 600})
    exporter.observe_sample(line | {"served": 1000, "behind": 0})
    exporter.observe_sample(line | {"behind": 1})  # a removal under way
    text = exporter.exposition().decode()
    labels = 'case="cat-case",host="berlin",run_id="r1",site=""'
    assert f"xfrbench_catalog_members_served{{{labels}}} 1000.0" in text
    assert f"xfrbench_catalog_members_behind{{{labels}}} 1.0" in text
    with pytest.raises(ValueError, match="catalog sample with a bad host"):
        exporter.observe_sample(line | {"host": "Bad Host", "behind": 0})
