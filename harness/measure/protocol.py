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

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from harness.core.terms import Method
from harness.link.bounds import with_advertised_window
from harness.measure.evidence import evidence_of
from harness.measure.logged import ColdStartLog, Logged
from harness.measure.measured import (
    Missing,
    measured,
)
from harness.measure.records import Observed, RecordContext, failure, transfer_record
from harness.measure.wall import WallClock
from harness.plan.case import CasePlan
from harness.results.model import Failure, TransferRecord
from harness.xfr import XfrTimeout
from harness.xfr.served_times import (
    served_error,
)

START_TIMEOUT = 120.0  # a server that does not serve its zones by then has failed to start
Emit = Callable[[TransferRecord], None]
Control = Literal["retransfer", "refresh"]


class PublishFailed(Exception):
    """The harness could not put the new version on the primary, or the primary serves
    something other than what the harness published: the harness's error, not a transfer's.
    The case cannot go on (its change-set chain no longer starts from what the primary
    holds). `recorded`: the repeat's records already say so."""

    def __init__(self, message: str, *, recorded: bool = False) -> None:
        super().__init__(message)
        self.recorded = recorded


@dataclass(frozen=True)
class Publication:
    """A new serial put on the primary: when it was asked for and when the primary served
    it. Its NOTIFYs are read from the wire afterwards (Bench.notifications)."""

    issued: float
    served: float
    method: str = "reload"  # how the serial was put there (Server.publish_method)
    # The change set it carried (records removed / added, bytes; an own zone's version).
    change: dict[str, Any] | None = None


@dataclass(frozen=True)
class Verification:
    ok: bool
    problem: str | None
    records: int | None  # the copy's record count; None when it could not be read
    reread: str | None = None  # the first read's problem, when the copy was read twice
    # Seconds the server took to send its copy (connect to last message; both reads when
    # it was read twice): the part of the verification that is a transfer out of the
    # secondary, not the harness's digest.
    read_s: float | None = None
    # How: "served", the copy read back by AXFR; "disk+sample", the server's own file
    # summed and what it serves checked at `sample` names (measure/disk_copy.py), after
    # `flush_s` seconds of the server writing that file.
    by: str = "served"
    sample: int | None = None
    flush_s: float | None = None

    @property
    def failure(self) -> Failure:
        """A copy the harness could not read is its own failure, not the transfer's."""
        return "harness" if self.records is None else "verification"

    def facts(self) -> dict[str, Any]:
        """How the copy was verified, for the record's extra."""
        facts: dict[str, Any] = {"verified_by": self.by}
        if self.sample is not None:
            facts["verify_sample"] = self.sample
        return facts


@dataclass(frozen=True)
class Pulled:
    """One client pull: the puller's result and whether its copy matched the primary's."""

    ok: bool
    error: str | None
    serial: int | None
    records: int
    bytes: int
    messages: int
    duration_s: float | None
    started_at: float
    phases: dict[str, float]
    digest_matches: bool


class Bench(Protocol):
    """What the flows need from a live case. Times are the bench's monotonic clock."""

    plan: CasePlan
    first_zone: str
    zones: list[str]
    base_serial: int
    spent: WallClock  # where the wall time goes (measure/wall.py), on the bench's clock

    def clock(self) -> float: ...

    def wall(self) -> float: ...

    def prepare_secondaries(self) -> None:
        """Render every secondary with every zone configured and none on disk (stopping
        any that run)."""

    def start_secondaries(self) -> None:
        """Spawn the prepared secondaries."""

    def stop_secondaries(self) -> None: ...

    def wait_served(
        self,
        hosts: list[str],
        zone: str,
        serial: int,
        deadline: float,
        straggle: float | None = None,
    ) -> dict[str, float]:
        """When each host first served `serial` of `zone`; hosts that did not by the
        deadline are missing (`straggle`: once one served, the others get this long more
        at most). Raises CaseFailed when a server exits."""

    def last_unserved(self, host: str) -> float | None:
        """When the last SOA query that `host` answered without the serial of the last
        `wait_served` was sent (None: it answered none so): where its error bar begins."""

    def wait_all_zones(
        self, hosts: list[str], zones: list[str], serial: int, deadline: float
    ) -> tuple[dict[str, dict[str, float]], dict[str, str]]:
        """Per host, when it first served each zone at `serial` (hosts that served them all),
        and why the others did not (a timeout naming the zones still pending)."""

    def zones_last_unserved(self, host: str) -> dict[str, float]:
        """`last_unserved` per zone of the last `wait_all_zones` (zones `host` answered
        without the serial; the others are missing)."""

    def publish(self, serial: int) -> Publication:
        """Put `serial` of the first zone on the primary (raises XfrTimeout, or
        PublishFailed when the primary refused it). Returns once the primary serves it,
        without waiting for its NOTIFYs: a server paces them (BIND sends 20 a second), and
        the secondaries must be polled from the first one on."""

    def check_primary(self, serial: int) -> str | None:
        """None when the primary serves what the harness published at `serial`; else what
        differs. Asked after the transfers, so that it delays no secondary's polling."""

    def notifications(self, serial: int, since: float, wait: float) -> dict[str, float]:
        """When the primary's NOTIFY of `serial` to each secondary left its host (seen on
        the wire after `since`), waiting up to `wait` seconds for those not seen yet."""

    def control(self, host: str, action: Control, zone: str) -> None: ...

    def connect_ports(self, host: str, since: float) -> list[int]:
        """The primary's ports `host` connected to since `since` (its SYNs on the primary's
        wire): 53 for TCP, 853 for XoT."""

    def verify(self, host: str, zone: str, serial: int) -> Verification: ...

    def verify_zones(self, host: str, zones: list[str], serial: int) -> dict[str, Verification]:
        """verify() for many small zones at once (a cold start)."""

    def logged(self, host: str, zone: str, serial: int, since: float) -> Logged:
        """The transfer as the servers logged it, the secondary's failure lines since
        `since` (unix time), and the primary's refusals since then (to any secondary)."""

    def cold_start_log(self, host: str) -> ColdStartLog: ...

    def mark(self, event: str, repeat: int) -> None:
        """Sample every server now: a transfer's start or end."""

    def between_repeats(self) -> dict[str, Any] | None:
        """Wait until the last transfer left nothing that could bias the next (at most the
        plan's settle), and make repeats start alike (forget cached route metrics); returns
        what was waited for (measure/settle.py), for the records."""

    def begin_observation(self) -> None:
        """Start watching the wire for one repeat's transfers (counters, TCP, packets)."""

    def finish_observation(self) -> None:
        """Every transfer of the repeat ended (or failed): stop watching."""

    def observation(self, host: str, t0: float, served: float) -> dict[str, Any]:
        """What the transfer to `host` did on the wire and left in the TCP tables
        (measure/watch.py); asked after its copy was read back, so that the harness's own
        connections are told from the servers'."""

    def cold_start_polling(self, host: str) -> dict[str, Any]:
        """How a cold start's zones were polled on `host` (rounds, slowest round)."""

    def link_counters(self) -> dict[str, Any]: ...

    def pull(self, method: str, host: str) -> Pulled: ...


def secondary_names(plan: CasePlan) -> list[str]:
    return [host.name for host in plan.secondaries]


def timeout_text(timeout: float, host: str, zone: str, serial: int) -> str:
    return f"timeout after {timeout:g} s: the {host} never served {zone} serial {serial}"


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
    `serial`, trigger, wait for every measured secondary, verify, record. `extra` goes into
    every record (the repeat's place in the schedule). `missing`: secondaries left out of
    the visit's measured set (Prepared.missing), each recorded as failed in its words."""
    plan = ctx.plan
    zone, hosts = bench.first_zone, secondary_names(plan)
    missing = missing or {}
    spent = bench.spent
    with spent.phase("settle") as settle:
        settled = bench.between_repeats()
    _account_settle(spent, settled)
    started_at = bench.wall()
    with spent.phase("observe") as watch:
        bench.mark("transfer-start", repeat)
        bench.begin_observation()
    try:
        with spent.phase("publish") as publish:
            triggered = _trigger(bench, serial, zone, measured(hosts, missing))
        t0, phases = triggered.t0, triggered.phases
    except PublishFailed as exc:
        bench.finish_observation()
        bench.mark("transfer-end", repeat)
        for host in hosts:
            emit(_failed(ctx, host, repeat, zone, serial, str(exc), started_at, extra, "publish"))
        raise PublishFailed(str(exc), recorded=True) from None
    with spent.phase("transfer") as transfer:
        done = bench.wait_served(
            measured(hosts, missing), zone, serial, bench.clock() + plan.timeout
        )
    with spent.phase("observe") as watched:
        if plan.trigger == "notify":
            triggered = _notified(bench, triggered, serial)
            t0, phases = triggered.t0, triggered.phases
        bench.finish_observation()
        bench.mark("transfer-end", repeat)  # before verification, which costs CPU of its own
    with spent.phase("verify") as checked:
        wrong = bench.check_primary(serial)
    if wrong is not None:
        text = f"publish error at serial {serial}: {wrong}"
        for host in hosts:
            emit(_failed(ctx, host, repeat, zone, serial, text, started_at, extra, "publish"))
        raise PublishFailed(text, recorded=True)
    for host in hosts:
        if host in missing:
            gone, phase = missing[host], phases.get(host, {})
            emit(
                _missing_record(bench, ctx, (host, repeat, serial), started_at, extra, phase, gone)
            )
            continue
        if host not in done or host not in t0:
            text = (
                timeout_text(plan.timeout, host, zone, serial)
                if host in t0
                else _no_notify_text(plan.timeout, host, serial)
            )
            # What it was sent (the NOTIFY's phase: a fleet's origin is the first NOTIFY to
            # any secondary) and what the servers logged: why it is missing, in their words.
            with spent.phase("observe"):
                logged = bench.logged(host, zone, serial, started_at)
            seen = {"phases": phases[host], "server_logged": logged_json(logged)}
            emit(_failed(ctx, host, repeat, zone, serial, text, started_at, extra, **seen))
            continue
        duration = done[host] - t0[host]
        late = served_error(done[host], bench.last_unserved(host), t0[host])
        with spent.phase("verify") as verify:
            check = bench.verify(host, zone, serial)
        with spent.phase("observe") as observe:
            # After the read-back, so that its connection is seen and counted as the
            # harness's, apart from the servers' (extra["sockets"]).
            facts = bench.observation(host, t0[host], done[host])
        with spent.phase("observe") as observe_logs:
            logged = bench.logged(host, zone, serial, started_at)
            # From the publication on: a secondary may start before the NOTIFY leaves (NSD
            # checked the SOA on its own, once, and was done 2 ms after the NOTIFY). Until
            # now, not until it served: the watch stamps a packet when it reads it, which can
            # be after a 1 ms transfer was served.
            ports = bench.connect_ports(host, triggered.issued)
        # A secondary that kept its old transport after a switch transfers fine, and one that
        # asks IXFR in an AXFR case too: the harness's error, never a result of the case.
        evidence = evidence_of(ports, logged, plan.transport, plan.xfr)
        wrong = evidence.wrong
        wall = {
            "settle_s": settle.seconds,
            "publish_s": publish.seconds,
            "transfer_s": transfer.seconds,
            "verify_s": verify.seconds,
            "check_primary_s": checked.seconds,
            **({"verify_read_s": check.read_s} if check.read_s is not None else {}),
            **({"flush_s": check.flush_s} if check.flush_s is not None else {}),
            "observe_s": watch.seconds + watched.seconds + observe.seconds + observe_logs.seconds,
        }
        size, messages, records = logged.sizes(check.records, plan.xfr == "axfr")
        wire = facts.get("wire", {})
        seen = {k: wire[f"{k}_s"] for k in ("soa_query", "connect") if f"{k}_s" in wire}
        window = facts.get("tcp", {}).get("rcv_wnd_max")
        bound = None
        if window and host in ctx.rtt and host in ctx.bound:
            bound = with_advertised_window(ctx.bound[host], window, ctx.rtt[host])
        observed = Observed(
            serial=serial,
            duration_s=duration,
            started_at=started_at,
            ok=check.ok and wrong is None,
            error=wrong or check.problem,
            verified=check.ok,
            failure="harness" if wrong else None if check.ok else check.failure,
            records=records,
            bytes=size,
            messages=messages,
            phases=phases[host] | seen | {"served": duration},
            server_logged=logged_json(logged),
            extra={
                "zone_records": check.records,
                "link_counters": bench.link_counters(),
                "serial_method": triggered.method,
                **({"change_set": triggered.change} if triggered.change else {}),
                **({"verify_reread": check.reread} if check.reread else {}),
                **check.facts(),
                **evidence.to_json(),
                "wall": {k: round(v, 4) for k, v in wall.items()},
                **({"settle": settled} if settled is not None else {}),
            }
            | facts
            | extra,
            bound=bound,
            duration_error_s=round(late, 6),
        )
        emit(transfer_record(ctx, host=host, repeat=repeat, zone=zone, observed=observed))


def _account_settle(spent: WallClock, settled: dict[str, Any] | None) -> None:
    """The settle's wait, split by cause (measure/wall.py): the servers' own pacing is
    theirs, a limiter the harness's reconfiguration set going is the switch's."""
    held = (settled or {}).get("held_by", {})
    spent.shift("settle", "pacing", held.get("pacing", 0.0))
    spent.shift("settle", "switch", held.get("reconfig", 0.0))


@dataclass(frozen=True)
class _Triggered:
    t0: dict[str, float]  # per host: what its duration is counted from
    phases: dict[str, dict[str, float]]  # per host
    method: str  # how the serial was published
    issued: float = 0.0  # when the new serial was asked for
    change: dict[str, Any] | None = None  # Publication.change


# The sniffer may see a NOTIFY a moment after the secondary it went to is served; a host
# that was never served is given this long for its NOTIFY to show.
NOTIFY_GRACE_S = 1.0


def _notified(bench: Bench, triggered: _Triggered, serial: int) -> _Triggered:
    """Trigger notify: each secondary's t0 is the NOTIFY the primary sent it (hosts whose
    NOTIFY never showed are left out of t0)."""
    sent = bench.notifications(serial, triggered.issued, NOTIFY_GRACE_S)
    t0 = {host: at for host, at in sent.items() if host in triggered.phases}
    phases = {
        host: phase | ({"notify_sent": t0[host] - triggered.issued} if host in t0 else {})
        for host, phase in triggered.phases.items()
    }
    return _Triggered(t0, phases, triggered.method, triggered.issued, triggered.change)


def logged_json(logged: Logged) -> dict[str, Any]:
    return {
        "secondary": logged.secondary,
        "primary": logged.primary,
        "secondary_failures": logged.failures,
        "primary_refusals": logged.refusals,
    }


def _no_notify_text(timeout: float, host: str, serial: int) -> str:
    return f"timeout after {timeout:g} s: the primary sent no NOTIFY for serial {serial} to {host}"


def _trigger(bench: Bench, serial: int, zone: str, hosts: list[str] | None = None) -> _Triggered:
    """Publish `serial` and trigger the transfers to `hosts` (the measured ones; default
    every secondary). The primary notifies every secondary: each NOTIFY is kept, the first
    is the fleet's origin (results/fleet.py), a missing secondary's too."""
    plan = bench.plan
    hosts = secondary_names(plan) if hosts is None else hosts
    try:
        published = bench.publish(serial)
    except XfrTimeout as exc:
        raise PublishFailed(str(exc)) from None
    reload = {"primary_reload": published.served - published.issued}
    if plan.trigger == "notify":  # t0 comes from the wire once the secondaries are served
        everyone = dict.fromkeys(secondary_names(plan), reload)
        return _Triggered({}, everyone, published.method, published.issued, published.change)
    action: Control = "retransfer" if plan.xfr == "axfr" else "refresh"
    start = bench.clock()
    phases = {}
    for host in hosts:
        bench.control(host, action, zone)
        phases[host] = reload | {"control_returned": bench.clock() - start}
    return _Triggered(
        dict.fromkeys(hosts, start), phases, published.method, published.issued, published.change
    )


def _missing_record(
    bench: Bench,
    ctx: RecordContext,
    which: tuple[str, int, int],
    started_at: float,
    extra: dict[str, Any],
    phases: dict[str, float],
    gone: Missing,
) -> TransferRecord:
    """The record of a secondary left out of the measured set (`which`: host, repeat,
    serial): missing, in its server's words of this repeat and since its start."""
    host, repeat, serial = which
    zone = bench.first_zone
    with bench.spent.phase("observe"):
        logged = bench.logged(host, zone, serial, started_at)
        since_start = bench.logged(host, zone, serial, gone.since).failures
    seen = {"phases": phases, "server_logged": logged_json(logged)}
    extra = extra | {"missing": gone.to_json(since_start)}
    return _failed(ctx, host, repeat, zone, serial, gone.error, started_at, extra, **seen)


def _failed(
    ctx: RecordContext,
    host: str,
    repeat: int,
    zone: str,
    serial: int,
    error: str,
    at: float,
    extra: dict[str, Any] | None = None,
    kind: Failure = "timeout",
    phases: dict[str, float] | None = None,
    server_logged: dict[str, Any] | None = None,
) -> TransferRecord:
    observed = failure(serial, error, at, kind=kind)
    observed.extra = dict(extra or {})
    observed.phases = dict(phases or {})
    observed.server_logged = dict(server_logged or {})
    return transfer_record(ctx, host=host, repeat=repeat, zone=zone, observed=observed)


def client_pulls(bench: Bench, ctx: RecordContext, repeat: int, emit: Emit) -> None:
    """Pulls from the primary by a client on the first secondary's host, across its link:
    one per method the case asks for."""
    plan = ctx.plan
    host = plan.secondaries[0].name
    for method in plan.client_pulls:
        name: Method = f"client-pull-{method}"  # type: ignore[assignment]
        with bench.spent.phase("settle"):
            bench.between_repeats()
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
