"""The candidate limits read from a step's run folder: the quota's refusals in the primary's
own words, the secondaries waiting on their retry timer, CPU against the host's cores,
ephemeral ports against the port range, a link without a rate."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from harness.capacity.evidence import readings
from harness.capacity.sla import parse_sla
from harness.results.folder import RunFolder
from harness.results.meta import CaseMeta, HostInfo, RunMeta
from harness.results.model import TransferRecord


def record(host: str, repeat: int, served: bool, refusals: int, retry: int = 0) -> TransferRecord:
    return TransferRecord(
        run_id="r", case="bind-knot/tcp/axfr", repeat=repeat, primary_kind="bind",
        secondary_kind="knot", host=host, site="edge", transport="tcp", xfr="axfr",
        zone="example.", serial=10 + repeat, records=100, bytes=8_000, messages=1,
        duration_s=0.2 if served else None, started_at=1.0, ok=served,
        error=None if served else "timeout after 20 s", verified=served,
        failure=None if served else "timeout", trigger="notify",
        phases={"notify_sent": 0.0 if host == "edge-1" else 0.5}, extra={}, bound={},
        server_logged={
            "primary_refusals": {"server": "bind", "refusals": refusals},
            "secondary_failures": {"server": "knot", "retry": retry},
        },
    )  # fmt: skip


def sample(t: float, host: str, role: str, cpu: float, ports: int = 0) -> dict[str, Any]:
    return {"t": t, "event": "periodic", "host": host, "role": role, "pid": 1,
            "cpu_user_s": cpu, "cpu_system_s": 0.0, "ephemeral_ports_in_use": ports,
            "tcp": {"time_wait": ports}}  # fmt: skip


def run_folder() -> RunFolder:
    records = [
        record("edge-1", 1, True, 3),
        record("edge-2", 1, True, 3),
        record("edge-3", 1, False, 3, retry=1),
        record("edge-1", 2, True, 2),
        record("edge-2", 2, False, 2, retry=1),
        record("edge-3", 2, True, 2),
    ]
    case = CaseMeta(
        case="bind-knot/tcp/axfr",
        scenario={"servers": {"primary": {"kind": "bind", "options": {"transfers-out": 2}}},
                  "zones": {"preset": "tld"}, "uplink": {"forward": {"rate": None}}},
        testbed={"hosts": {"edge-1": {"sysctls": {"net.ipv4.ip_local_port_range": "40000 40999"}}}},
    )  # fmt: skip
    samples = [
        sample(0.0, "primary", "primary", 0.0),
        sample(1.0, "primary", "primary", 1.5),  # 1.5 cores for a second
        sample(2.0, "primary", "primary", 2.0),
        sample(0.0, "edge-1", "secondary", 0.0, ports=100),
        sample(1.0, "edge-1", "secondary", 0.3, ports=900),
    ]
    meta = RunMeta(host=HostInfo(cpu_count=2), cpu={"driver_share_of_wall": 0.2},
                   cpus={"isolation": "shared"})  # fmt: skip
    return RunFolder(Path("r"), meta, records, None, [case], samples)


def test_every_candidate_reads_what_the_run_recorded() -> None:
    found = {r.candidate: r for r in readings(run_folder(), parse_sla("p95 load time 5s"))}
    quota = found["quota"]
    assert (quota.title, quota.level, quota.closeness) == ("BIND transfers-out 2", 5, 1.0)
    assert quota.text == "5 refusals logged"  # 3 in repeat 1, 2 in repeat 2
    assert found["retry"].closeness == 1.0
    assert found["retry"].text.startswith("2 Knot secondaries logged a retry and never served")
    assert "SOA retry, 300 s" in found["retry"].text
    primary = found["primary-cpu"]
    assert primary.level == 1.5 and primary.closeness == 0.75
    assert found["servers-cpu"].level == 1.8  # 1.5 + 0.3 in the same second
    assert "shares the servers' cores" in found["harness-cpu"].text
    ports = found["ports"]
    assert ports.closeness == 0.9 and ports.text.startswith("edge-1: 900 of 1,000 ports")
    assert found["link"].closeness is None and found["link"].text == "no rate set"
    assert found["notify"].level == 0.5 and found["notify"].closeness == 0.1


def cold_start(ports: int, failed: int, error: str | None) -> RunFolder:
    """One cold start on a secondary with 150 ports: `ports` in use at the peak, `failed`
    connects its BIND logged as "address not available", the record's error."""
    done = TransferRecord(
        run_id="r", case="bind-bind/tcp/axfr", repeat=1, primary_kind="bind",
        secondary_kind="bind", host="secondary", site=None, transport="tcp", xfr="axfr",
        zone="150 zones", serial=1, records=0, bytes=1, messages=150, duration_s=11.0,
        started_at=1.0, ok=error is None, error=error, verified=error is None,
        failure=None if error is None else "verification", trigger="cold-start",
        phases={}, extra={}, bound={},
        server_logged={"secondary_failures": {"server": "bind", "address_not_available": failed}},
    )  # fmt: skip
    case = CaseMeta(
        case="bind-bind/tcp/axfr", scenario={"zones": {"preset": "hosting"}},
        testbed={"hosts": {"secondary": {"sysctls": {
            "net.ipv4.ip_local_port_range": "40000 40149"}}}},
    )  # fmt: skip
    samples = [sample(1.0, "secondary", "secondary", 0.1, ports=ports)]
    return RunFolder(Path("r"), RunMeta(host=HostInfo(cpu_count=2)), [done], None, [case], samples)


def ports_reading(run: RunFolder) -> tuple[float | None, float, str]:
    found = {r.candidate: r for r in readings(run, parse_sla("all served 30s"))}
    return found["ports"].closeness, found["ports"].level, found["ports"].text


def test_a_range_run_out_ranks_above_a_range_in_full_use() -> None:
    # Every port in use and still passing: at the limit, not past it.
    full = ports_reading(cold_start(150, 0, None))
    assert full == (1.0, 1.0, "secondary: 150 of 150 ports in use (150 TIME_WAIT)")
    # Past it: the connects BIND logged failing for want of a port.
    out = ports_reading(cold_start(150, 50, None))
    assert out[0] == 1.0 and out[1] == 51.0
    assert out[2].endswith("; 50 connects failed: address not available")
    # Or the harness's own read-back of the copies refused in the secondary's namespace.
    error = "a.: could not read the copy: cannot connect to 127.0.0.1#53: [Errno 99] "
    harness = ports_reading(cold_start(150, 0, error + "Cannot assign requested address"))
    assert harness[1] == 2.0 and harness[2].endswith("found no free port")
    # A step at the full range before one past it: the ports moved with the load.
    assert out[1] > full[1] * 1.1 and harness[1] > full[1] * 1.1
