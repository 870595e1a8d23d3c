"""The cold-start flow (trigger "cold-start"): secondaries with every zone configured and
none on disk, started from nothing, timed until each serves its last zone. Pure against
`Bench` (measure/bench.py), as the update flow is, with its settle step (measure/steps.py)."""

from __future__ import annotations

from typing import Any

from harness.measure.bench import Bench, Emit, secondary_names
from harness.measure.records import Observed, RecordContext, failure, transfer_record
from harness.measure.steps import Seconds, settle
from harness.xfr.served_times import (
    error_summary,
    served_curve,
    served_distribution,
    served_error,
)


def cold_start_repeat(
    bench: Bench, ctx: RecordContext, repeat: int, emit: Emit, extra: dict[str, Any]
) -> None:
    """Secondaries with every zone configured and none on disk, started from nothing."""
    plan = ctx.plan
    hosts = secondary_names(plan)
    serial, origins = bench.base_serial, bench.zones
    label = f"{len(origins)} zones" if len(origins) > 1 else origins[0]
    spent = bench.spent
    seconds = Seconds()
    settle(bench, seconds)
    with spent.phase("testbed") as prepare:
        bench.prepare_secondaries()
    started_at = bench.wall()
    # The wire over the cold start (the link's counters, each site's watched TCP), so
    # that the link check sets what the link did against what was set, as for updates.
    bench.begin_observation()
    try:
        with spent.phase("cold_start") as cold:
            t0 = bench.clock()
            bench.start_secondaries()
            bench.mark("transfer-start", repeat)
            served, errors = bench.wait_all_zones(hosts, origins, serial, t0 + plan.timeout)
            bench.mark("transfer-end", repeat)
    finally:
        bench.finish_observation()
    ended = bench.clock()
    for host in hosts:
        if host not in served:
            # Timed out: what the secondary logged (the cliff's failures, their first time)
            # and how many zones it served are the evidence of why; keep them.
            with spent.phase("observe"):
                log = bench.cold_start_log(host)
                polling = bench.cold_start_polling(host)
            observed = failure(serial, errors[host], started_at, kind="timeout")
            observed.server_logged = log.server_logged()
            observed.extra = {"zones": len(origins), "polling": polling} | extra
            emit(transfer_record(ctx, host=host, repeat=repeat, zone=label, observed=observed))
            continue
        times = sorted(served[host].values())
        duration = times[-1] - t0
        unserved = bench.zones_last_unserved(host)
        late = {z: served_error(at, unserved.get(z), t0) for z, at in served[host].items()}
        last = max(served[host], key=served[host].__getitem__)
        problems, records = [], 0
        with spent.phase("verify") as verify:
            checks = bench.verify_zones(host, origins, serial)
        for origin, check in checks.items():
            records += check.records or 0
            if not check.ok:
                problems.append(f"{origin}: {check.problem}")
        with spent.phase("observe") as observe:
            log = bench.cold_start_log(host)
            polling = bench.cold_start_polling(host)
            wire = bench.observation(host, t0, ended)
        wall = {
            "settle_s": seconds.settle,
            "prepare_s": prepare.seconds,
            "cold_start_s": cold.seconds,
            "verify_s": verify.seconds,
            "observe_s": observe.seconds,
        }
        observed = Observed(
            serial=serial,
            duration_s=duration,
            started_at=started_at,
            ok=not problems,
            error="; ".join(problems[:5]) or None,
            verified=not problems,
            failure=None if not problems else "verification",
            records=records,
            bytes=log.bytes,
            messages=log.messages,
            phases=zones_served_phases(times, t0) | {"served": duration},
            duration_error_s=round(late[last], 6),
            server_logged=log.server_logged(),
            extra={
                "zones": len(origins),
                "served_curve": served_curve(times, t0),
                "served_error_s": error_summary(late.values()),
                "polling": polling,
                "wall": {k: round(v, 4) for k, v in wall.items()},
                # the link over the whole cold start, for the link check
                **{k: v for k, v in wire.items() if k in ("link", "tcp")},
                "link_span_s": round(ended - t0, 6),
            }
            | extra,
        )
        emit(transfer_record(ctx, host=host, repeat=repeat, zone=label, observed=observed))
    with spent.phase("teardown"):
        bench.stop_secondaries()


def zones_served_phases(times: list[float], t0: float) -> dict[str, float]:
    """When the first zone, the median zone and the 95th-percentile zone were served,
    seconds since the start (nearest rank: each is the time a real zone was served)."""
    dist = served_distribution(times, t0)
    return {f"zones_{key}": value for key, value in dist.items() if key != "last"}
