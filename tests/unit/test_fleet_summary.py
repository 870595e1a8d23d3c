"""Fleet figures from records and samples (pure): propagation from one origin per repeat,
the last site, who waited for a transfer slot, per-site rows and the primary's cost."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from harness.results.fleet import fleet_repeats, fleet_summary, primary_costs, site_rows
from harness.results.model import TransferRecord


def record(host: str, site: str, repeat: int, duration: float | None, **kw: Any) -> TransferRecord:
    phases = kw.pop("phases", {})
    extra = {"path_rtt_s": kw.pop("rtt", 0.02)} | kw.pop("extra", {})
    ok = kw.pop("ok", duration is not None)
    return TransferRecord(
        run_id="r",
        case="bind-bind/tcp/axfr",
        repeat=repeat,
        primary_kind="bind",
        secondary_kind="bind",
        host=host,
        site=site,
        transport="tcp",
        xfr="axfr",
        zone="example.",
        serial=10 + repeat,
        records=100,
        bytes=kw.pop("bytes", 80_000),
        messages=2,
        duration_s=duration,
        started_at=1.0,
        ok=ok,
        error=None if ok else "timeout after 30 s",
        verified=ok,
        trigger="notify",
        phases=phases | ({"served": duration} if duration else {}),
        extra=extra,
        bound={"model": 1e6},
    )


def test_propagation_counts_from_the_first_notify_and_names_the_last_site() -> None:
    records = [
        # Each timed from its own NOTIFY; the NOTIFYs left 0.10, 0.12 and 0.30 s after reload.
        record("near-1", "near", 1, 0.05, phases={"notify_sent": 0.10}),
        record("near-2", "near", 1, 0.06, phases={"notify_sent": 0.12}),
        record("seoul", "seoul", 1, 1.20, phases={"notify_sent": 0.30}),
        record("near-1", "near", 2, 0.05, phases={"notify_sent": 0.10}),
        record("near-2", "near", 2, None, phases={"notify_sent": 0.10}),
        record("seoul", "seoul", 2, 1.00, phases={"notify_sent": 0.10}),
    ]
    first, second = fleet_repeats(records)
    assert first.times == pytest.approx({"near-1": 0.05, "near-2": 0.08, "seoul": 1.40})
    assert (first.first_s, first.p50_s, first.last_s) == pytest.approx((0.05, 0.08, 1.40))
    # Nearest rank: of 3, p95 is the 3rd (the time all had it), p50 the 2nd; never a
    # time between two secondaries' at which no new share of the fleet had it.
    assert first.p95_s == pytest.approx(1.40)
    assert (first.last_host, first.last_site, first.served, first.secondaries) == (
        "seoul",
        "seoul",
        3,
        3,
    )
    # A secondary that never served is in the fleet but not in its times.
    assert (second.secondaries, second.served, second.last_s) == (3, 2, pytest.approx(1.0))


def test_a_late_or_second_connect_is_a_wait_for_a_slot() -> None:
    quick = {"soa_query": 0.010, "connect": 0.035}
    late = {"soa_query": 0.010, "connect": 0.900}  # 0.05 s + 3 x 20 ms would have done
    records = [
        record("a", "s", 1, 0.5, phases=quick, extra={"wire": {"connects": 1}}),
        record("b", "s", 1, 1.5, phases=late, extra={"wire": {"connects": 1}}),
        record("c", "s", 1, 2.0, phases=quick, extra={"wire": {"connects": 2}}),
        record("d", "s", 1, 2.0, phases=late, rtt=0.5),  # a long path explains it
    ]
    (repeat,) = fleet_repeats(records)
    assert repeat.waited == 2


def test_site_rows_and_loss_checks() -> None:
    check = {"forward": {"loss_check": {"verdict": "ok"}}, "reverse": {"passed": 9}}
    records = [
        record("seoul-1", "seoul", 1, 2.0, bytes=800_000, extra={"link": check}),
        record("seoul-2", "seoul", 1, 4.0, bytes=800_000, extra={"link": check}),
        record("near", "near", 1, 0.1),
    ]
    rows = {row.site: row for row in site_rows(records)}
    assert rows["seoul"].secondaries == 2 and rows["seoul"].median_s == pytest.approx(3.0)
    assert rows["seoul"].throughput_bps == pytest.approx((3.2e6 + 1.6e6) / 2)
    assert rows["seoul"].loss_checks == {"ok": 2} and rows["near"].loss_checks == {}


def test_primary_cost_between_the_repeat_marks() -> None:
    def sample(event: str, t: float, cpu: float, tx: int, est: int, repeat: int = 1) -> dict:
        return {
            "t": t, "event": event, "case": "c", "repeat": repeat, "role": "primary", "pid": 5,
            "cpu_user_s": cpu, "cpu_system_s": cpu / 2, "rss_bytes": int(1e6 * t),
            "net_tx_bytes": tx, "tcp_states": {"established": est},
        }  # fmt: skip

    samples = [
        sample("transfer-start", 1.0, 1.0, 1000, 0),
        sample("periodic", 2.0, 2.0, 5000, 16),
        sample("transfer-end", 3.0, 3.0, 9000, 2),
        sample("transfer-start", 4.0, 3.0, 9000, 0, repeat=2),
        {"t": 4.5, "role": "secondary", "case": "c", "repeat": 2},  # not the primary
    ]
    first, second = primary_costs(samples)
    assert first.cpu_s == pytest.approx(3.0) and first.tx_bytes == 8000
    assert first.peak_connections == 16 and first.peak_rss_bytes == 3_000_000
    assert second.cpu_s is None  # no end mark (interrupted): no figure rather than a guess


def test_a_run_without_fleets_has_no_fleet_section() -> None:
    plain = dataclasses.replace(record("x", "s", 1, 1.0), host="secondary", site=None)
    assert fleet_summary([plain], []) == {}
    summary = fleet_summary([record("x", "s", 1, 1.0), record("y", "s", 1, 3.0)], [])
    case = summary["bind-bind/tcp/axfr"]
    assert case["secondaries"] == 2 and case["median_last_s"] == pytest.approx(3.0)
