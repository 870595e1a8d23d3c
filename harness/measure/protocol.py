"""The measurement protocol: what a case does, in which order, and what each figure means.

Flows are written against `Bench`, the few operations they need from a live case; the driver
(measure/driver.py) carries them out on real servers, and unit tests on a fake with a fake
clock (as dnspython's `Inbound` is driven by both its sync and async query code). What a
server-to-server duration means (docs/architecture.md, "Measuring a transfer"):

- trigger "notify": from the moment the primary's own NOTIFY to that secondary leaves its host
  (seen on the wire) until the secondary first serves the new serial. The primary's reload
  time and its NOTIFY delay are phases beside it, both counted from the reload command.
- trigger "retransfer": from the secondary's control command (its dialect's retransfer for
  AXFR, e.g. rndc retransfer; its refresh for IXFR, e.g. rndc refresh) until the secondary
  serves the new serial. The primary sends no NOTIFY in this mode.
- trigger "cold-start": from spawning a secondary with every zone configured and none on disk
  until it serves the last of them.

Ends are observed by polling SOA serials, so a duration is never negative and may be late:
by how much is its record's duration_error_s, the time from sending the last SOA query the
secondary answered without the new serial (or from the trigger, if none came after it) to
the first answer with it (xfr/served_times.py served_error); a cold start's is that of its
last zone, its extra["served_error_s"] the median and largest over all zones.

One unrecorded warm-up update precedes the measured repeats (measure/first_copies.py): a
first update and the first transfer after the first copies cost the servers once what no
later one does, which would make repeat 1 an outlier of start-up rather than of transfer.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from harness.core.terms import Method
from harness.link.bounds import with_advertised_window
from harness.measure.bench import (
    START_TIMEOUT,
    Bench,
    Control,
    Emit,
    Publication,
    PublishFailed,
    Pulled,
    Verification,
    secondary_names,
    timeout_text,
)
from harness.measure.evidence import evidence_of
from harness.measure.logged import ColdStartLog, Logged
from harness.measure.measured import Missing, measured
from harness.measure.records import Observed, RecordContext, transfer_record
from harness.measure.steps import (
    Repeat,
    Seconds,
    begin,
    check_published,
    end_observation,
    publish,
    read_copy,
    served_copy,
    settle,
)
from harness.results.model import TransferRecord
from harness.xfr import XfrTimeout

# The interface and its values live in measure/bench.py; the names stay importable here.
__all__ = [
    "START_TIMEOUT",
    "Bench",
    "ColdStartLog",
    "Control",
    "Emit",
    "Logged",
    "Publication",
    "PublishFailed",
    "Pulled",
    "Verification",
    "XfrTimeout",
    "client_pulls",
    "secondary_names",
    "timeout_text",
    "unrecorded_update",
    "update_repeat",
]


def unrecorded_update(
    bench: Bench, serial: int, what: str, hosts: list[str] | None = None
) -> tuple[Publication, dict[str, float]]:
    """Publish `serial`, trigger it as the selected case does (its NOTIFY, or a refresh)
    and wait for `hosts` (default: every secondary), measuring nothing; returns the
    publication and when each served it. PublishFailed when the primary serves something
    else."""
    plan = bench.plan
    zone = bench.first_zone
    hosts = secondary_names(plan) if hosts is None else hosts
    published = bench.publish(serial)
    if plan.trigger == "retransfer":
        for host in hosts:
            bench.control(host, "refresh", zone)
    served = bench.wait_served(hosts, zone, serial, bench.clock() + plan.timeout)
    wrong = bench.check_primary(serial)
    if wrong is not None:
        raise PublishFailed(f"publish error at {what} {serial}: {wrong}")
    return published, served


def update_repeat(
    bench: Bench,
    ctx: RecordContext,
    repeat: int,
    serial: int,
    emit: Emit,
    extra: dict[str, Any],
    missing: Mapping[str, Missing] | None = None,
) -> None:
    """One repeat of a notify or retransfer case (the bench's selected case): publish
    `serial`, trigger, wait for every measured secondary, verify, record (measure/steps.py).
    `extra` goes into every record (the repeat's place in the schedule). `missing`:
    secondaries left out of the visit's measured set (Prepared.missing), each recorded as
    failed in its words."""
    plan = ctx.plan
    missing = missing or {}
    seconds = Seconds()
    settled = settle(bench, seconds)
    at = begin(bench, ctx, repeat, serial, emit, extra, seconds)
    hosts = measured(at.hosts, missing)
    triggered = publish(at, hosts, seconds)
    with bench.spent.phase("transfer") as transfer:
        done = bench.wait_served(hosts, at.zone, serial, bench.clock() + plan.timeout)
    triggered = end_observation(at, triggered, seconds)
    assert triggered is not None
    check_published(at, seconds)
    t0, phases = triggered.t0, triggered.phases
    for host in at.hosts:
        if host in missing:
            emit(_missing_record(at, host, phases.get(host, {}), missing[host]))
            continue
        if host not in done or host not in t0:
            text = (
                timeout_text(plan.timeout, host, at.zone, serial)
                if host in t0
                else _no_notify_text(plan.timeout, host, serial)
            )
            # What it was sent (the NOTIFY's phase: a fleet's origin is the first NOTIFY to
            # any secondary) and what the servers logged: why it is missing, in their words.
            with bench.spent.phase("observe"):
                logged = bench.logged(host, at.zone, serial, at.started_at)
            said = {"phases": phases[host], "server_logged": logged.server_logged()}
            emit(at.failed(host, text, **said))
            continue
        copy = read_copy(at, host, t0[host], done[host])
        with bench.spent.phase("observe") as observe_ports:
            # From the publication on: a secondary may start before the NOTIFY leaves (NSD
            # checked the SOA on its own, once, and was done 2 ms after the NOTIFY). Until
            # now, not until it served: the watch stamps a packet when it reads it, which can
            # be after a 1 ms transfer was served.
            ports = bench.connect_ports(host, triggered.issued)
        # A secondary that kept its old transport after a switch transfers fine, and one that
        # asks IXFR in an AXFR case too: the harness's error, never a result of the case.
        evidence = evidence_of(ports, copy.logged, plan.transport, plan.xfr)
        wrong, check = evidence.wrong, copy.check
        wall = {
            "settle_s": seconds.settle,
            "publish_s": seconds.publish,
            "transfer_s": transfer.seconds,
            "verify_s": copy.verify_s,
            "check_primary_s": seconds.verify,
            **({"verify_read_s": check.read_s} if check.read_s is not None else {}),
            **({"flush_s": check.flush_s} if check.flush_s is not None else {}),
            "observe_s": seconds.observe + copy.observe_s + observe_ports.seconds,
        }
        duration = done[host] - t0[host]
        wire = copy.facts.get("wire", {})
        seen = {k: wire[f"{k}_s"] for k in ("soa_query", "connect") if f"{k}_s" in wire}
        window = copy.facts.get("tcp", {}).get("rcv_wnd_max")
        bound = None
        if window and host in ctx.rtt and host in ctx.bound:
            bound = with_advertised_window(ctx.bound[host], window, ctx.rtt[host])
        observed = served_copy(
            at,
            host,
            copy,
            t0[host],
            done[host],
            duration_s=duration,
            ok=check.ok and wrong is None,
            error=wrong or check.problem,
            failure="harness" if wrong else None if check.ok else check.failure,
            phases=phases[host] | seen | {"served": duration},
            server_logged=copy.logged.server_logged(),
            extra={
                "zone_records": check.records,
                "link_counters": bench.link_counters(),
                "serial_method": triggered.method,
                **({"change_set": triggered.change} if triggered.change else {}),
                **({"verify_reread": check.reread} if check.reread else {}),
                **evidence.to_json(),
                "wall": {k: round(v, 4) for k, v in wall.items()},
                **({"settle": settled} if settled is not None else {}),
            },
            bound=bound,
        )
        at.record(host, observed)


def _no_notify_text(timeout: float, host: str, serial: int) -> str:
    return f"timeout after {timeout:g} s: the primary sent no NOTIFY for serial {serial} to {host}"


def _missing_record(
    at: Repeat, host: str, phases: dict[str, float], gone: Missing
) -> TransferRecord:
    """The record of a secondary left out of the measured set: missing, in its server's
    words of this repeat and since its start."""
    bench = at.bench
    with bench.spent.phase("observe"):
        logged = bench.logged(host, at.zone, at.serial, at.started_at)
        since_start = bench.logged(host, at.zone, at.serial, gone.since).failures
    extra = at.extra | {"missing": gone.to_json(since_start)}
    said = {"phases": phases, "server_logged": logged.server_logged()}
    return at.failed(host, gone.error, extra=extra, **said)


def client_pulls(bench: Bench, ctx: RecordContext, repeat: int, emit: Emit) -> None:
    """Pulls from the primary by a client on the first secondary's host, across its link:
    one per method the case asks for."""
    plan = ctx.plan
    host = plan.secondaries[0].name
    for method in plan.client_pulls:
        name: Method = f"client-pull-{method}"  # type: ignore[assignment]
        settle(bench)
        bench.mark("transfer-start", repeat)
        start = bench.clock()
        got = bench.pull(method, host)
        elapsed = bench.clock() - start
        bench.mark("transfer-end", repeat)
        # The pull's own duration is the servers'; the rest (its digest) is verification.
        pulled = min(got.duration_s or 0.0, elapsed)
        bench.spent.add("client_pull", pulled)
        bench.spent.add("verify", elapsed - pulled)
        verified = got.ok and got.digest_matches
        error = got.error
        if got.ok and not verified:
            error = "the pulled zone's digest differs from the primary's"
        observed = Observed(
            serial=got.serial,
            duration_s=got.duration_s if got.ok else None,
            started_at=got.started_at,
            ok=verified,
            error=error,
            verified=verified,
            failure=None if verified else ("verification" if got.ok else "timeout"),
            records=got.records,
            bytes=got.bytes,
            messages=got.messages,
            phases=got.phases,
        )
        record = transfer_record(
            ctx, host=host, repeat=repeat, zone=bench.first_zone, observed=observed, method=name
        )
        emit(record)
