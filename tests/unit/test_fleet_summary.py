"""Fleet figures from records and samples (pure): propagation from one origin per repeat,
the last site, the primary's refusals, per-site rows and the primary's cost."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

from harness.measure.measured import FIRST_COPY
from harness.results.fleet import fleet_repeats, fleet_summary, primary_costs, site_rows
from harness.results.model import TransferRecord
from harness.servers import count_failures

CAPTURES = Path(__file__).resolve().parents[1] / "fixtures" / "failures"


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
    assert first.converged and first.served_of == "3 of 3 served" and first.missing == []
    # A secondary that never served is in the fleet but not in its times, and the fleet did
    # not converge: no last time, no p95 (at N = 3 it is the 3rd), and it says who is missing.
    assert (second.secondaries, second.served, second.served_of) == (3, 2, "2 of 3 served")
    assert (second.last_s, second.p95_s, second.last_host, second.converged) == (
        None,
        None,
        None,
        False,
    )
    assert second.p50_s == pytest.approx(1.0)  # the 2nd of 3 did serve
    assert [m["host"] for m in second.missing] == ["near-2"]


def test_a_fleet_that_did_not_converge_says_who_is_missing_in_their_words() -> None:
    said = "2026-11-25T16:22:13.330 xfer-in: error: transfer of 'example/IN' from 10.0.0.1#53: "
    said += "failed while receiving responses: SERVFAIL"
    records = [record(f"near-{i}", "near", 1, 0.1 * i, phases={"notify_sent": 0.2}) for i in
               range(1, 15)]  # fmt: skip
    records.append(record("far-1", "far", 1, None, phases={"notify_sent": 0.2}))
    lost = record("far-2", "far", 1, None, phases={"primary_reload": 0.01})  # no NOTIFY seen
    lost.server_logged = {"secondary_failures": {"timed_out": 3, "first_failure_line": said}}
    records.append(lost)
    (repeat,) = fleet_repeats(records)
    # 14 of 16: "last" is not the 14th secondary's time, and neither is p95 (the 16th).
    assert repeat.served_of == "14 of 16 served" and not repeat.converged
    assert repeat.last_s is None and repeat.p95_s is None and repeat.last_site is None
    assert repeat.first_s == pytest.approx(0.1) and repeat.p50_s == pytest.approx(0.8)
    assert [m["host"] for m in repeat.missing] == ["far-1", "far-2"]
    far2 = repeat.why_missing()[1]
    assert far2.startswith("far-2 (far): timed out: timeout after 30 s")
    assert "failed while receiving responses: SERVFAIL" in far2


def test_the_origin_is_the_first_notify_to_any_secondary_even_one_never_served() -> None:
    records = [
        record("a", "s", 1, 0.5, phases={"notify_sent": 0.30}),
        record("b", "s", 1, None, phases={"notify_sent": 0.10}),  # first NOTIFY, never served
    ]
    (repeat,) = fleet_repeats(records)
    assert repeat.times == pytest.approx({"a": 0.70})  # 0.30 + 0.5 - 0.10
    assert repeat.first_s == pytest.approx(0.70)


def test_a_host_down_from_the_start_is_missing_in_its_words_since_its_start() -> None:
    """The gone secondaries of tests/fixtures/failures/fleet-gone.toml (issue 28), their logs
    as captured: BIND's first failure line since its start, and NSD's silence said as such
    (it logs no timed-out transfer), not an empty "its log"."""
    since = 1795856733.241141  # their start (README.md of the captures)
    records = [record("near", "near", 1, 0.02, phases={"notify_sent": 0.003})]
    for kind in ("bind", "nsd"):
        log = (CAPTURES / f"{kind}-fleet-gone.log").read_text()
        gone = record(f"gone{kind}", f"gone{kind}", 1, None, phases={"notify_sent": 0.5})
        gone.error = "missing: never got its first copy: timeout after 160 s: ..."
        words = count_failures(kind, log, since).to_json()
        gone.extra["missing"] = {"why": FIRST_COPY, "since": since, "secondary_failures": words}
        # Nothing in the repeat itself: what it said came before it.
        quiet = count_failures(kind, log, since + 170).to_json()
        gone.server_logged = {"secondary_failures": quiet}
        records.append(gone)
    (repeat,) = fleet_repeats(records)
    assert repeat.served_of == "1 of 3 served" and not repeat.converged
    bind, nsd = repeat.missing
    first = next(line for line in log_lines("bind") if "retry limit for primary" in line)
    assert bind["server_said"] == first and bind["server_silent"] is None
    assert nsd["server_said"] is None
    assert nsd["server_silent"] == (
        "no failure line since its start (nsd does not log: timed out, retry)"
    )
    assert repeat.why_missing()[1].endswith("; its log: " + nsd["server_silent"])
    assert repeat.why_missing()[0].endswith(f"; its log: {first!r}")


def log_lines(kind: str) -> list[str]:
    return (CAPTURES / f"{kind}-fleet-gone.log").read_text().splitlines()


def test_p95_of_a_large_fleet_is_a_time_when_95_percent_served() -> None:
    records = [record(f"h{i}", "s", 1, float(i)) for i in range(1, 20)]
    records.append(record("h20", "s", 1, None))
    (repeat,) = fleet_repeats(records)
    # Rank ceil(0.95 x 20) = 19: 19 of 20 served by 19 s; the fleet still did not converge.
    assert repeat.p95_s == pytest.approx(19.0) and repeat.last_s is None
    assert repeat.served_of == "19 of 20 served"


def test_a_repeat_without_a_record_of_a_secondary_is_not_converged() -> None:
    records = [record("a", "s", 1, 0.5), record("b", "s", 1, 0.6), record("a", "s", 2, 0.5)]
    _, second = fleet_repeats(records)
    assert second.served_of == "1 of 2 served" and second.last_s is None
    assert second.missing[0]["host"] == "b" and "no record" in second.missing[0]["error"]


def test_slots_refusals_from_the_primarys_log_connections_by_port_the_rest_possible() -> None:
    quick = {"soa_query": 0.010, "connect": 0.035}
    late = {"soa_query": 0.010, "connect": 0.900}  # 0.05 s + 3 x 20 ms would have done
    # Two SYNs from one port: a retransmission, one connection; two ports: two connections.
    once, twice = {"syns": 2, "connections": 1}, {"syns": 2, "connections": 2}
    records = [
        record("a", "s", 1, 0.5, phases=quick, extra={"wire": once}),
        record("b", "s", 1, 1.5, phases=late, extra={"wire": once}),
        record("c", "s", 1, 2.0, phases=quick, extra={"wire": twice}),
        record("d", "s", 1, 2.0, phases=late, rtt=0.5, extra={"wire": once}),  # a long path
    ]
    # Each record counted the primary's log from the repeat's start to its own end.
    for r, seen in zip(records, (1, 2, 2, 2), strict=True):
        r.server_logged = {"primary_refusals": {"server": "bind", "refusals": seen}}
    (repeat,) = fleet_repeats(records)
    assert repeat.refusals == 2  # the primary's count, the repeat's, not per secondary
    assert repeat.reconnected == 1  # c; a's second SYN is not a second connection
    assert repeat.possibly_waited == 1  # b: a guess, kept apart from what was counted
    summary = fleet_summary(records, [])["bind-bind/tcp/axfr"]
    assert (summary["refusals"], summary["reconnected"], summary["possibly_waited"]) == (2, 1, 1)


def test_refusals_of_a_primary_whose_wording_is_unknown_are_not_logged_never_zero() -> None:
    knot = record("a", "s", 1, 0.5)
    knot.server_logged = {"primary_refusals": {"server": "knot", "refusals": None}}
    (repeat,) = fleet_repeats([knot])
    assert repeat.refusals is None
    older = record("a", "s", 1, 0.5, extra={"wire": {"connects": 2}})  # SYNs, not connections
    (repeat,) = fleet_repeats([older])
    assert repeat.refusals is None and repeat.reconnected is None
    assert fleet_summary([older], [])["bind-bind/tcp/axfr"]["refusals"] is None


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
            "cpu_user_s": cpu, "cpu_system_s": cpu / 2, "anon_bytes": int(1e6 * t),
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
    assert case["percentiles"] == "nearest rank" and case["converged"] == "1 of 1 repeats converged"


def test_the_median_last_over_repeats_counts_a_repeat_that_did_not_converge() -> None:
    def repeat(n: int, y: float | None) -> list[TransferRecord]:
        return [record("x", "s", n, 1.0), record("y", "s", n, y)]

    two_of_three = fleet_summary(repeat(1, 2.0) + repeat(2, None) + repeat(3, 4.0), [])
    case = two_of_three["bind-bind/tcp/axfr"]
    assert case["converged"] == "2 of 3 repeats converged"
    assert case["median_last_s"] == pytest.approx(4.0)  # of 2, 4, never: not 3.0
    one_of_two = fleet_summary(repeat(1, 2.0) + repeat(2, None), [])
    assert one_of_two["bind-bind/tcp/axfr"]["median_last_s"] is None
