"""per_transfer(): one value per transfer and server role, in the order they ran, from the
samples' marks (CPU, memory) and the records' extra["sockets"] (what compare tests)."""

from __future__ import annotations

from typing import Any

from harness.results.model import TransferRecord
from harness.results.resources import per_transfer, summarize_resources
from tests.unit.test_metrics_resources import server

MIB = 1 << 20


def transfers() -> list[dict[str, Any]]:
    """A secondary's two transfers: the first's anonymous memory peaks between its marks
    (a periodic sample), the second's at its end mark; after the second, a higher sample
    that is no transfer's. The kernel's peak since the start mark is on each end mark."""
    return [
        server(0.0, "periodic", None, 1.0, 0.0, anon=10 * MIB),
        server(1.0, "transfer-start", 0, 1.0, 0.0, anon=10 * MIB),
        server(1.5, "periodic", 0, 1.2, 0.0, anon=40 * MIB),
        server(2.0, "transfer-end", 0, 1.5, 0.0, anon=12 * MIB)
        | {"transfer_charged_peak_bytes": 50 * MIB},
        server(3.0, "transfer-start", 1, 1.5, 0.0, anon=12 * MIB),
        server(4.0, "transfer-end", 1, 1.75, 0.0, anon=20 * MIB)
        | {"transfer_charged_peak_bytes": 30 * MIB},
        server(5.0, "periodic", None, 1.75, 0.0, anon=90 * MIB, tw=70),
    ]


def record(repeat: int, host: str, sockets: dict[str, Any] | None, **changes: Any):
    base: dict[str, Any] = {
        "run_id": "r", "case": "c1", "repeat": repeat, "primary_kind": "bind",
        "secondary_kind": "bind", "host": host, "site": None, "transport": "tcp",
        "xfr": "axfr", "zone": "z.", "serial": 2 + repeat, "records": 10, "bytes": 100,
        "messages": 1, "duration_s": 0.1, "started_at": 1.0, "ok": True, "verified": True,
        "extra": {"sockets": sockets} if sockets is not None else {},
    }  # fmt: skip
    return TransferRecord(**(base | changes))


def sockets(opened: int, left: int, harness: int, primary_left: int = 0) -> dict[str, Any]:
    return {
        "primary": {"connections": 0, "time_wait_left": primary_left},
        "secondary": {"connections": opened, "time_wait_left": left},
        "still_open": 0,
        "harness": {
            "primary": {"connections": 2, "time_wait_left": 2, "ports": [53]},
            "secondary": {"connections": harness, "time_wait_left": harness, "ports": [53]},
        },
    }


def test_cpu_and_memory_per_transfer_between_marks_both_included() -> None:
    figures = per_transfer(transfers())["c1"]["secondary"]
    assert figures["cpu_s"] == [0.5, 0.25]
    assert figures["memory_peak"] == [40 * MIB, 20 * MIB]  # never the 90 MiB after them
    assert figures["charged_peak"] == [50 * MIB, 30 * MIB]
    assert "time_wait" not in figures  # the namespace's count is no transfer's figure
    assert figures["connections"] == figures["time_wait_left"] == []  # no records given


def test_the_kernels_peak_is_left_out_where_it_could_not_be_reset() -> None:
    kept = "transfer_charged_peak_bytes"
    lines = [{k: v for k, v in s.items() if k != kept} for s in transfers()]
    figures = per_transfer(lines)["c1"]["secondary"]
    assert figures["charged_peak"] == [] and len(figures["memory_peak"]) == 2


def test_a_transfer_across_a_restart_has_no_value_of_any_kind() -> None:
    lines = transfers()
    lines[3] = lines[3] | {"pid": 999}  # the first transfer ended in another process
    figures = per_transfer(lines)["c1"]["secondary"]
    assert figures["cpu_s"] == [0.25]
    assert figures["memory_peak"] == [20 * MIB] and figures["charged_peak"] == [30 * MIB]


def test_socket_figures_come_from_the_records_in_run_order_harness_apart() -> None:
    records = [
        record(0, "secondary", sockets(1, 1, 1)),
        record(1, "secondary", sockets(1, 0, 3, primary_left=1)),
        record(2, "secondary", None, ok=False, error="timeout", failure="timeout"),
        record(0, "secondary", sockets(9, 9, 9), method="client-pull-own", trigger="pull"),
        record(2, "secondary", {"error": "sock_diag refused"}),
    ]
    roles = per_transfer(transfers(), records)["c1"]
    assert roles["secondary"]["connections"] == [1, 1]
    assert roles["secondary"]["time_wait_left"] == [1, 0]
    assert roles["secondary"]["harness_connections"] == [1, 3]
    assert roles["primary"]["connections"] == [0, 0]
    assert roles["primary"]["time_wait_left"] == [0, 1]
    assert roles["primary"]["harness_connections"] == [2, 2]
    assert roles["primary"]["cpu_s"] == []  # no primary lines in these samples


def test_a_fleets_secondaries_pool_under_their_role_and_the_summary_keeps_medians() -> None:
    lines = [
        line | {"host": host, "pid": pid}
        for host, pid in (("seoul-1", 1), ("seoul-2", 2))
        for line in transfers()
    ]
    lines += [
        server(1.0, "transfer-start", 0, 0.0, 0.0, role="primary", anon=5 * MIB),
        server(2.0, "transfer-end", 0, 0.1, 0.0, role="primary", anon=6 * MIB),
    ]
    records = [
        record(0, "seoul-1", sockets(1, 1, 1)),
        record(0, "seoul-2", sockets(2, 1, 1, primary_left=1)),
        record(1, "seoul-1", sockets(1, 1, 1)),
    ]
    roles = per_transfer(lines, records)["c1"]
    assert roles["secondary"]["memory_peak"] == [40 * MIB, 20 * MIB] * 2
    assert roles["secondary"]["connections"] == [1, 2, 1]
    assert roles["primary"]["time_wait_left"] == [0, 1, 0]
    assert roles["primary"]["memory_peak"] == [6 * MIB]
    summary = summarize_resources(lines, records)["c1"]
    assert summary["seoul-1"]["connections_per_transfer"] == 1
    assert summary["seoul-2"]["connections_per_transfer"] == 2
    assert summary["seoul-1"]["memory_peak_per_transfer_bytes"] == 30 * MIB  # of 40, 20
    assert summary["seoul-1"]["charged_peak_per_transfer_bytes"] == 40 * MIB  # of 50, 30
    assert summary["primary"]["time_wait_left_per_transfer"] == 0  # median of 0, 1, 0
    assert summary["primary"]["harness_connections_per_transfer"] == 2
    assert summary["seoul-1"]["namespace_time_wait_peak"] == 70
